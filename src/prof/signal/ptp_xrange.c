/*
 * ptp_xrange.c - the published executable ranges outside loaded objects
 * (see ptp_xrange.h).
 *
 * ASYNC-SIGNAL-SAFE FILE: the handler reads the set and sets the flag;
 * ptp_xrange_find is a binary search over immutable memory. No libc call.
 */
#include "prof/signal/ptp_xrange.h"

_Atomic(const ptp_xrange_set *) ptp_g_xranges;
_Atomic int ptp_g_xranges_wanted;

const ptp_xrange *ptp_xrange_find(const ptp_xrange_set *xr, uintptr_t pc) {
  if (!xr) return NULL;
  size_t lo = 0, hi = xr->n;
  /* last range with lo <= pc */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (xr->r[mid].lo <= pc) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const ptp_xrange *x = &xr->r[lo - 1];
  return pc < x->hi ? x : NULL;
}
