/*
 * ptp_exitacct.c - the exit accounting (see ptp_exitacct.h).
 *
 * Process-wide state (runtime/ptp_process.h): two counters (atomics).
 *
 * Calls: ptp_engine (owed, disarm), ptp_perf (exclude_kernel), the ring's
 * producer (PTP_SLOT_FLUSH records); none calls back.
 */
#include <stdatomic.h>
#include <sys/resource.h>

#include "prof/runtime/ptp_engine.h"
#include "prof/runtime/ptp_exitacct.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/signal/ptp_producer.h"

static struct {
  _Atomic uint64_t flushed, lost_at_exit;
} acct;

void ptp_exitacct_split(uint64_t owed, int64_t period_ns, int64_t kernel_ns,
                        uint64_t *to_kernel, uint64_t *to_exit) {
  *to_kernel = *to_exit = 0;
  if (period_ns <= 0 || owed == 0) return;
  if (kernel_ns >= 0) {
    uint64_t kcap = 1 + (uint64_t)(kernel_ns / period_ns);
    *to_kernel = owed < kcap ? owed : kcap;
    owed -= *to_kernel;
  }
  uint64_t tcap = 1 + (uint64_t)(PTP_EXITACCT_TICK_NS / period_ns);
  *to_exit = owed < tcap ? owed : tcap;
}

/* The calling thread's kernel CPU time since it started, -1 if unknown. */
static int64_t self_kernel_ns(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return -1;
  return (int64_t)ru.ru_stime.tv_sec * 1000000000 + (int64_t)ru.ru_stime.tv_usec * 1000;
}

static int flush(uint32_t tid, uint64_t n, uintptr_t cause) {
  if (n == 0) return 0;
  return ptp_push_sample(tid, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, PTP_SLOT_FLUSH, &cause, 1) == 0;
}

void ptp_exitacct_exit(ptp_thread_rec *r, uint32_t tid) {
  int armed = r->has_perf || r->has_timer;
  int kernel_share = r->has_perf && ptp_perf_excludes_kernel();
  int64_t now = armed ? ptp_engine_cpu_ns(tid) : -1;
  ptp_engine_disarm(r);
  if (!armed || now < 0) return;
  uint64_t owed = ptp_engine_owed(r, now);
  if (owed == 0) return;
  uint64_t to_kernel, to_exit;
  int64_t kns = -1;
  if (kernel_share && (kns = self_kernel_ns()) < 0) kns = 0;
  ptp_exitacct_split(owed, ptp_engine_period(), kernel_share ? kns : -1, &to_kernel, &to_exit);
  int any = flush(tid, to_kernel, PTP_DROP_KERNEL);
  if (flush(tid, to_exit, PTP_DROP_THREAD_EXIT)) {
    any = 1;
    atomic_fetch_add(&acct.lost_at_exit, to_exit);
  }
  if (any) atomic_fetch_add(&acct.flushed, 1);
}

void ptp_exitacct_get_stats(ptp_exitacct_stats *out) {
  out->flushed = atomic_load(&acct.flushed);
  out->lost_at_exit = atomic_load(&acct.lost_at_exit);
}
