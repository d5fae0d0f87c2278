/*
 * ptp_xrange.h - the executable ranges outside loaded objects (JIT code,
 * code remapped by a runtime) that the stack walker may step through with
 * frame pointers, as published to the SIGPROF handler.
 *
 * A set lists every executable mapping of /proc/self/maps that is no
 * loaded object's segment (dl_iterate_phdr) and is either anonymous (no
 * file, "[anon:...]", a memfd, a deleted file) or a second mapping of a
 * loaded object's own file elsewhere (V8 copies its embedded builtins next
 * to its JIT code). Built by the consumer (unwind/ptp_xranges.c), sorted
 * by lo, non-overlapping, immutable once published; replaced whole with one
 * atomic store and freed only after the handler grace (runtime/ptp_grace.h),
 * as the unwind-table sets are.
 *
 * Threads: ptp_g_xranges and ptp_g_xranges_wanted are read (and the flag
 * set) by the handler; only unwind/ptp_xranges.c stores a set or clears the
 * flag. ptp_xrange_find is async-signal-safe.
 */
#ifndef PTP_XRANGE_H
#define PTP_XRANGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ptp_xrange.flags */
#define PTP_XR_READABLE 0x1u  /* mapped readable: the walker may read the code
                                 at an interrupted PC in it (prologue check) */
#define PTP_XR_ALIAS    0x2u  /* another mapping of a loaded object's file:
                                 orig/off say which bytes */

/* One range [lo, hi). For an alias, orig is where the same file bytes lie
 * in the loaded object (the symbolizer names addr as orig + (addr - lo)) and
 * off their file offset; both 0 otherwise. */
typedef struct ptp_xrange {
  uintptr_t lo, hi;
  uintptr_t orig;
  uint64_t off;
  uint32_t flags;
} ptp_xrange;

typedef struct ptp_xrange_set {
  const ptp_xrange *r;       /* sorted by lo, non-overlapping */
  size_t n;
} ptp_xrange_set;

/* The current set (NULL until the first refresh). Defined in ptp_xrange.c,
 * stored only by unwind/ptp_xranges.c (release), read by the handler. */
extern _Atomic(const ptp_xrange_set *) ptp_g_xranges;

/* Set to 1 by the walker when it meets a PC in no loaded object and no
 * range of the current set (new JIT code, a library loaded since the
 * tables were built); the consumer clears it when it re-reads the ranges
 * (unwind/ptp_xranges.c, at a bounded rate). The walker that makes the
 * 0 -> 1 transition wakes the consumer. */
extern _Atomic int ptp_g_xranges_wanted;

/* The range of xr holding pc, or NULL (xr may be NULL). Binary search;
 * async-signal-safe. */
const ptp_xrange *ptp_xrange_find(const ptp_xrange_set *xr, uintptr_t pc);

#endif
