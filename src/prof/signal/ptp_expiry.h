/*
 * ptp_expiry.h - how many expirations of a thread's timer or perf event
 * its CPU time makes due: the one count behind the handler's steal guard
 * (ptp_perf_expiry_backed), the perf engine's unsignalled periods and the
 * exit accounting (runtime/).
 *
 * SIGNAL-SAFETY: pure arithmetic.
 */
#ifndef PTP_EXPIRY_H
#define PTP_EXPIRY_H

#include <stdint.h>

/* How many expirations are due after elapsed_ns of the thread's CPU time
 * since arming: the first after first_ns, then one every period_ns. 0
 * before the first, or for a negative elapsed time or a period <= 0. */
static inline uint64_t ptp_expirations_due(int64_t elapsed_ns, int64_t first_ns,
                                           int64_t period_ns) {
  if (period_ns <= 0 || elapsed_ns < 0 || elapsed_ns < first_ns) return 0;
  return 1 + (uint64_t)((elapsed_ns - first_ns) / period_ns);
}

/* How many expirations fall due while the thread's CPU clock goes from
 * from_ns to to_ns (the source armed at armed_ns with first_ns, then every
 * period_ns): the "[lost: signal blocked]" count of a block over that
 * interval. 0 when the clocks are unknown (negative) or go backwards. */
static inline uint64_t ptp_expirations_between(int64_t armed_ns, int64_t first_ns,
                                               int64_t period_ns, int64_t from_ns,
                                               int64_t to_ns) {
  if (armed_ns < 0 || from_ns < 0 || to_ns < from_ns) return 0;
  return ptp_expirations_due(to_ns - armed_ns, first_ns, period_ns) -
         ptp_expirations_due(from_ns - armed_ns, first_ns, period_ns);
}

/* Whether the next expiration of a thread's perf event (its delivered + 1-th
 * since it was armed) has the thread's CPU time behind it. The event's
 * clock is not the thread's CPU clock: task-clock advances with the
 * kernel's local clock and its hrtimer with CLOCK_MONOTONIC while the
 * thread is scheduled, so time the host takes from a virtual CPU (steal
 * time, which the scheduler keeps out of the thread's CPU clock under
 * CONFIG_PARAVIRT_TIME_ACCOUNTING) fires expirations that no CPU of the
 * thread paid for. Such an expiration is not a sample: counted, it would
 * put CPU under the stack that the thread never used.
 *
 * armed_cpu_ns: the thread's CPU clock when its event was armed; first_ns:
 * its first period; period_ns: the regular period; cpu_now_ns: the
 * thread's CPU clock now. The delivered + 1-th expiration is due at
 * armed + first + delivered * period of thread CPU; it counts as backed
 * when the clock is within half a period of that (the event starts
 * counting a little after armed_cpu_ns was read and restarts its period
 * when the handler sets the regular one, so real expirations come late,
 * never early, by microseconds). Unknown clocks (negative) count as
 * backed: never drop a sample for want of a clock. */
static inline int ptp_perf_expiry_backed(int64_t armed_cpu_ns, int64_t first_ns,
                                         int64_t period_ns, uint64_t delivered,
                                         int64_t cpu_now_ns) {
  if (armed_cpu_ns < 0 || cpu_now_ns < 0 || period_ns <= 0 || first_ns < 0) return 1;
  if (delivered > (uint64_t)(INT64_MAX / 4 / period_ns)) return 1;   /* no real thread's count */
  /* due at armed + first + delivered * period, i.e. more than delivered
   * expirations due half a period later than now */
  return ptp_expirations_due(cpu_now_ns - armed_cpu_ns + period_ns / 2, first_ns, period_ns) >
         delivered;
}

#endif
