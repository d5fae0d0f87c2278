/*
 * ptp_perffd.c - the perf engine's descriptor numbers as the handler
 * checks them (see ptp_perffd.h).
 *
 * ASYNC-SIGNAL-SAFE FILE: atomics on a static array and the producer's
 * monotonic clock (vDSO clock_gettime) only.
 */
#include "prof/signal/ptp_perffd.h"

#include <stdatomic.h>

#include "prof/signal/ptp_producer.h"

/* 0 never ours, -1 ours now, else when we let go of it (ns). */
static _Atomic int64_t perffd_state[PTP_PERFFD_MAX];

void ptp_perffd_opened(int fd) {
  if (fd >= 0 && fd < PTP_PERFFD_MAX) atomic_store(&perffd_state[fd], -1);
}

void ptp_perffd_released(int fd) {
  if (fd < 0 || fd >= PTP_PERFFD_MAX) return;
  int64_t now = ptp_now_mono();
  atomic_store(&perffd_state[fd], now > 0 ? now : 1);
}

int ptp_perffd_ours(int fd) {
  if (fd < 0 || fd >= PTP_PERFFD_MAX) return 0;
  int64_t v = atomic_load_explicit(&perffd_state[fd], memory_order_relaxed);
  if (v == 0) return 0;
  if (v < 0) return 1;
  return ptp_now_mono() - v < PTP_PERFFD_GRACE_NS;
}
