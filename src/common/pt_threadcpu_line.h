/*
 * pt_threadcpu_line.h - the "threads' CPU" comment of profiling snapshots,
 * read back and summed over several windows (polytoken profile merge).
 *
 * A snapshot's line (written by the sampler, docs/pprof-format.md) lists
 * each thread name's CPU over its window, by the threads' own clocks, with
 * their samples. A merged profile covers several windows; this sums their
 * lines into one for the merged span, so the reader sees each thread's CPU
 * over all of it without adding up per-window lines by hand.
 *
 * Sans-I/O: the parser reads a string it is given (a comment of an
 * untrusted file: any bytes, bounded by its length) and never reads
 * beyond it; fuzzed by tests/common/fuzz_threadcpu_line.c.
 *
 * Ownership: a pt_tcl_sum owns its entries; pt_tcl_sum_free releases
 * them. pt_tcl_format returns a line the caller frees. Threads: none of
 * its own; one sum per thread. Errors: 0 or a negative errno.
 */
#ifndef PT_THREADCPU_LINE_H
#define PT_THREADCPU_LINE_H

#include <stddef.h>
#include <stdint.h>

/* What an entry names. */
enum {
  PT_TCL_NAMED = 0,     /* a thread name (name) */
  PT_TCL_NO_NAME,       /* "(no name)": threads without a name */
  PT_TCL_OTHER_NAMES,   /* "(other names)": exits beyond the sampler's per-name slots */
  PT_TCL_UNLISTED       /* "N more names": names their window did not list */
};

typedef struct pt_tcl_entry {
  int kind;             /* PT_TCL_* */
  char name[16];        /* decoded, NUL-terminated; "" unless PT_TCL_NAMED */
  int64_t cpu_tenths;   /* CPU in tenths of a millisecond, as the lines print it */
  uint64_t samples;
} pt_tcl_entry;

typedef struct pt_tcl_sum {
  pt_tcl_entry *e;      /* one per (kind, name), in order of first appearance */
  size_t n, cap;
  int64_t own_tenths;   /* the profiler's own work on the listed threads */
  size_t lines;         /* lines added */
} pt_tcl_sum;

/* The line's prefix: a comment is a threads' CPU line when it starts so. */
#define PT_TCL_PREFIX "threads' CPU "

/* Adds one line (len bytes, no NUL needed) to s. Returns 0 (added), 1
 * (not a threads' CPU line: s unchanged), -EINVAL (it starts like one but
 * does not parse: s unchanged) or -ENOMEM (s unchanged). */
int pt_tcl_add(pt_tcl_sum *s, const char *line, size_t len);

/* The summed line for a merge of nwindows windows: "threads' CPU over the
 * N windows merged, summed from their lines, ...", the 16 names with the
 * most CPU listed (as the sampler lists them), the rest summed. NULL when
 * s is empty or without memory. Free with free(). */
char *pt_tcl_format(const pt_tcl_sum *s, size_t nwindows);

/* Releases s's entries and empties it. */
void pt_tcl_sum_free(pt_tcl_sum *s);

/* A thread name as the lines write it into out (cap bytes, NUL-terminated,
 * cut short if cap is too small): as it is when it holds none of the
 * line's delimiters (space , ; ( ) " \ or a control byte); else in double
 * quotes with '"', '\' and control bytes escaped (\x1f). The sampler's
 * encoder (src/prof/output/ptp_pprof.c) writes names the same way. Returns
 * the length written. */
size_t pt_tcl_quote(const char *name, char *out, size_t cap);

#endif
