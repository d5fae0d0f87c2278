/*
 * ptp_exitacct.c - the exit accounting (see ptp_exitacct.h).
 *
 * Process-wide state (runtime/ptp_process.h): two counters (atomics).
 *
 * Calls: ptp_engine (owed, disarm), ptp_perf (exclude_kernel), the ring's
 * producer (PTP_SLOT_FLUSH records); none calls back.
 */
#include <stdatomic.h>

#include "prof/runtime/ptp_engine.h"
#include "prof/runtime/ptp_exitacct.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/signal/ptp_producer.h"

static struct {
  _Atomic uint64_t flushed, lost_at_exit;
} acct;

void ptp_exitacct_exit(ptp_thread_rec *r, uint32_t tid) {
  int64_t el = -1;
  if (r->has_perf) {
    uint64_t owed = ptp_engine_owed(r, ptp_engine_cpu_ns(tid));
    uintptr_t cause = ptp_perf_excludes_kernel() ? PTP_DROP_KERNEL : PTP_DROP_THREAD_EXIT;
    if (owed && ptp_push_sample(tid, (uint32_t)owed, PTP_SLOT_FLUSH, &cause, 1) == 0) {
      atomic_fetch_add(&acct.flushed, 1);
      if (cause == PTP_DROP_THREAD_EXIT) atomic_fetch_add(&acct.lost_at_exit, owed);
    }
  } else if (r->has_timer) {
    int64_t now = ptp_engine_cpu_ns(tid);
    if (now >= 0 && r->sig->armed_cpu_ns >= 0) el = now - r->sig->armed_cpu_ns;
  }
  ptp_engine_disarm(r);
  int64_t period = ptp_engine_period();
  if (el >= 0 && period > 0) {
    uint64_t expected = ptp_expirations_due(el, r->sig->first_ns, period);
    uint64_t got = atomic_load(&r->sig->delivered);
    /* At most what one tick (10 ms at HZ=100) can hide. */
    uint64_t cap = 1 + (uint64_t)(10000000 / period);
    if (expected > got) {
      uint64_t owed = expected - got;
      if (owed > cap) owed = cap;
      uintptr_t cause = PTP_DROP_THREAD_EXIT;
      if (ptp_push_sample(tid, (uint32_t)owed, PTP_SLOT_FLUSH, &cause, 1) == 0) {
        atomic_fetch_add(&acct.flushed, 1);
        atomic_fetch_add(&acct.lost_at_exit, owed);
      }
    }
  }
}

void ptp_exitacct_get_stats(ptp_exitacct_stats *out) {
  out->flushed = atomic_load(&acct.flushed);
  out->lost_at_exit = atomic_load(&acct.lost_at_exit);
}
