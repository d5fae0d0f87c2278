/*
 * ptp_xranges.h - builds and publishes the executable ranges outside
 * loaded objects (JIT code; code a runtime remapped) that the walker steps
 * through with frame pointers (signal/ptp_xrange.h).
 *
 * Source: /proc/self/maps (opened O_RDONLY | O_NONBLOCK | O_CLOEXEC, at
 * most PTP_XRANGES_MAPS_MAX bytes read) and dl_iterate_phdr (the loaded
 * objects' executable segments, which the unwind tables cover). A mapping
 * is kept when it is executable, no loaded object's segment, and either
 *  - anonymous: no file ("" or "[anon:NAME]", or "[heap]"), a memfd
 *    ("/memfd:NAME", e.g. a JIT's double mapping) or a deleted file; or
 *  - an alias: another mapping of a loaded object's own file (same device
 *    and inode) whose bytes lie in that object's executable mapping (V8
 *    copies its embedded builtins next to its code); orig says where.
 * Anything else (another file's code: a library being loaded right now, a
 * foreign mapping; [stack], [vsyscall]) is left out: its frames stay
 * truncated.
 *
 * When: never eagerly (a program without JIT code pays nothing). The walker
 * raises ptp_g_xranges_wanted at the first PC in no object and no range;
 * the consumer then calls ptp_xranges_poll at each pass, which re-reads
 * the ranges at most every PTP_XRANGES_MIN_NS, and, while re-reads find
 * nothing new (a PC in memory that stays unknown), backs off to at most one
 * every PTP_XRANGES_MAX_NS.
 *
 * Publication: a new set is stored in ptp_g_xranges only when it differs
 * from the current one; the old one is retired and freed once the handler
 * grace is seen quiet (runtime/ptp_grace.h), as ptp_cfi.c does with its
 * table sets.
 *
 * Threads: every function takes the module's mutex (fork handlers
 * registered at first use) except ptp_xranges_from_maps, which is pure.
 * None may be called from a signal handler.
 */
#ifndef PTP_XRANGES_H
#define PTP_XRANGES_H

#include <stddef.h>
#include <stdint.h>

#include "prof/signal/ptp_xrange.h"

#define PTP_XRANGES_MAPS_MAX ((size_t)8 << 20)   /* bytes of /proc/self/maps read */
#define PTP_XRANGES_MAX 65536u                   /* ranges in one set */
#define PTP_XRANGES_MIN_NS 100000000LL           /* 100 ms between re-reads */
#define PTP_XRANGES_MAX_NS 5000000000LL          /* backoff limit: 5 s */

/* A loaded object's executable segment [lo, hi), page-rounded. */
typedef struct ptp_xranges_obj {
  uintptr_t lo, hi;
} ptp_xranges_obj;

/* Pure core (no I/O): the ranges of the maps text (len bytes, the format of
 * /proc/PID/maps; a last line without newline is ignored, a line that does
 * not parse is skipped) given the loaded objects' segments objs (any
 * order). *out is malloc'ed (caller frees; NULL when *n == 0), sorted,
 * non-overlapping, adjacent ranges of one kind merged, at most
 * PTP_XRANGES_MAX. Returns 0 or -ENOMEM. */
int ptp_xranges_from_maps(const char *maps, size_t len, const ptp_xranges_obj *objs,
                          size_t nobjs, ptp_xrange **out, size_t *n);

/* Reads the ranges now and publishes them if they changed. Returns 1 when a
 * new set was published, 0 when nothing changed, or a negative errno (the
 * current set stays). */
int ptp_xranges_refresh(void);

/* The consumer's call at every pass (now: CLOCK_MONOTONIC ns): when the
 * walker asked, and the rate allows, ptp_xranges_refresh; frees retired
 * sets whose grace is over. Cheap otherwise (two atomic loads). Returns as
 * ptp_xranges_refresh, or 0 when nothing was done. */
int ptp_xranges_poll(int64_t now);

/* A copy of the current set's ranges (the symbolizer names frames in them
 * as of the walks). *out malloc'ed, NULL when *n == 0. Returns 0 or
 * -ENOMEM. */
int ptp_xranges_copy(ptp_xrange **out, size_t *n);

typedef struct ptp_xranges_info {
  size_t nranges, naliases;           /* current set (aliases among them) */
  unsigned long long refreshes;       /* re-reads so far */
  unsigned long long published;       /* of those, sets that changed */
  unsigned long long capped;          /* re-reads that hit a cap */
  unsigned long long cpu_ns;          /* thread CPU time of all re-reads */
  int last_error;                     /* of the last re-read, 0 = fine */
} ptp_xranges_info;
void ptp_xranges_get_info(ptp_xranges_info *out);

#endif
