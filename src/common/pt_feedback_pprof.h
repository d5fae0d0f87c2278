/*
 * pt_feedback_pprof.h - a small, self-contained reader of gzip'd pprof CPU
 * profiles, used by the feedback review screen (and `polytoken feedback`) to
 * show what an attachment contains: sample count, duration and the top
 * functions.
 *
 * It is deliberately independent of the profiling library and of zlib: normal
 * and release builds link neither, yet their TUI must still review a profile
 * the user is about to send. So it carries its own DEFLATE decoder (RFC 1951,
 * gzip framing RFC 1952 with CRC-32 and length check) and a protobuf wire
 * reader for the few Profile fields it needs.
 *
 * Limits: input is untrusted (a file from disk). Decompressed size is capped
 * (max_out), every varint/length is bounds-checked, and malformed input gets
 * -EINVAL (or -EFBIG over the cap), never a crash.
 *
 * Threads: reentrant; no shared state.
 */
#ifndef PT_FEEDBACK_PPROF_H
#define PT_FEEDBACK_PPROF_H

#include <stddef.h>
#include <stdint.h>

#define PT_PPROF_MAX_OUT ((size_t)256 << 20)
#define PT_PPROF_TOP_MAX 10

/* Decompresses the first gzip member of in[0..len). On success returns 0 and
 * *out (malloc'd, caller frees) of *outlen bytes. Errors: -EINVAL (not gzip,
 * corrupt stream, CRC or length mismatch), -EFBIG (more than max_out bytes;
 * 0 = PT_PPROF_MAX_OUT), -ENOMEM. */
int pt_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *outlen);

typedef struct pt_pprof_func {
  char *name;    /* malloc'd; "?" when the profile has no name for it */
  int64_t flat;  /* samples whose leaf frame is this function */
  int64_t cum;   /* samples with this function anywhere on the stack */
} pt_pprof_func;

typedef struct pt_pprof_summary {
  int64_t samples;       /* sum of the "samples" value (else the first value) */
  int64_t duration_ns;   /* duration_nanos */
  int64_t time_ns;       /* time_nanos (start of the interval) */
  int64_t period;        /* period (ns per sample for CPU profiles) */
  char sample_types[128]; /* type names, e.g. "samples,cpu" */
  size_t n_stacks;       /* Sample messages */
  size_t n_functions;
  size_t n_locations;
  size_t n_top;
  pt_pprof_func top[PT_PPROF_TOP_MAX]; /* by flat, then cum, then name */
} pt_pprof_summary;

/* Decodes a gzip'd (or, if it does not start with the gzip magic, raw)
 * pprof profile and fills *out with up to top_n (<= PT_PPROF_TOP_MAX)
 * functions. Returns 0, -EINVAL (malformed; *out is cleared), -EFBIG, or
 * -ENOMEM. Release with pt_pprof_summary_clear. */
int pt_pprof_summarize(const uint8_t *data, size_t len, size_t top_n, pt_pprof_summary *out);

/* Frees the names in s and zeroes it. */
void pt_pprof_summary_clear(pt_pprof_summary *s);

#endif
