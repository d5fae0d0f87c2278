/*
 * pt_pprof_summary.h - what a CPU profile holds, in a few numbers: sample
 * count, duration, period, sample types and the top functions by flat and
 * cumulative samples. Used by the feedback review text (tui_review.c: the
 * TUI's review screen and `polytoken feedback show`) to show what an
 * attachment contains before it is sent.
 *
 * Built on pt_gunzip (zlib, capped) and pt_pprof_read (the whole Profile,
 * references checked); sans-I/O.
 * Threads: reentrant. Allocation through pt_alloc.h.
 */
#ifndef PT_PPROF_SUMMARY_H
#define PT_PPROF_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "common/pt_pprof_read.h"

#define PT_PPROF_TOP_MAX 10

typedef struct pt_pprof_func {
  char *name;    /* malloc'd; "?" when the function has no name; control
                    characters replaced by '?' (it goes to a terminal) */
  int64_t flat;  /* samples whose leaf frame is this function */
  int64_t cum;   /* samples with this function anywhere on the stack
                    (inlined frames included), once per sample */
} pt_pprof_func;

typedef struct pt_pprof_summary {
  int64_t samples;       /* sum of the "samples" value (else the first value) */
  int64_t duration_ns;   /* duration_nanos */
  int64_t time_ns;       /* time_nanos (start of the interval) */
  int64_t period;        /* period (ns per sample for CPU profiles) */
  char sample_types[128]; /* type names, e.g. "samples,cpu" (truncated to fit) */
  size_t n_stacks;       /* Sample messages */
  size_t n_functions;
  size_t n_locations;
  size_t n_top;
  pt_pprof_func top[PT_PPROF_TOP_MAX]; /* by flat, then cum, then id */
} pt_pprof_summary;

/* Summarises a gzip'd (or, without the gzip magic, raw) pprof profile with
 * up to top_n (<= PT_PPROF_TOP_MAX) functions of non-zero flat or cum.
 * Returns 0, -EINVAL (not a valid profile, or a sum of counts that
 * overflows), -EFBIG (over the caps of pt_gunzip or pt_pprof_read) or
 * -ENOMEM; *out is cleared on error. Release with pt_pprof_summary_clear. */
int pt_pprof_summarize(const uint8_t *data, size_t len, size_t top_n, pt_pprof_summary *out);

/* The same over a profile already read (p BORROWED). */
int pt_pprof_summarize_profile(const pt_pprof *p, size_t top_n, pt_pprof_summary *out);

/* Frees the names in s and zeroes it. */
void pt_pprof_summary_clear(pt_pprof_summary *s);

#endif
