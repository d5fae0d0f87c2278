/*
 * ptp_perf.h - the perf_event engine's system calls: one software
 * "task-clock" event per thread that sends SIGPROF to that thread at every
 * sample period of its CPU time (see docs/sampler.md, "Engines").
 *
 * Why task-clock: it is driven by an hrtimer that runs while the thread
 * runs and fires at the exact CPU time a period ends (no scheduler-tick
 * granularity, unlike POSIX CPU-time timers), and a process may open it on
 * its own threads up to perf_event_paranoid 2 (with exclude_kernel when the
 * setting is above 1 and the process lacks CAP_PERFMON: then periods that
 * end in kernel mode are not sampled; without it they are, at the user
 * stack that entered the kernel). Debian's default 3 forbids
 * perf_event_open to unprivileged users: the sampler then uses the timer
 * engine.
 *
 * Threads: any thread except the signal handler (the handler only calls
 * ioctl(PERF_EVENT_IOC_PERIOD) itself, see ptp_handler.c). Errors are
 * negative errno values.
 */
#ifndef PTP_PERF_H
#define PTP_PERF_H

#include <stdint.h>

#include "prof/runtime/ptp_threads.h"

/* Whether perf events can be used here: opens and closes one event on the
 * calling thread. Returns 0 or -errno (-EACCES/-EPERM: perf_event_paranoid
 * or a seccomp/container policy; -ENOSYS; -ENOENT: no such event). */
int ptp_perf_probe(void);

/* Opens a task-clock event on thread tid (of this process), still
 * disabled, whose first sample comes after first_ns of its CPU time and
 * which will send SIGPROF to that thread at each overflow (F_SETOWN_EX
 * F_OWNER_TID, F_SETSIG, O_ASYNC). The fd is close-on-exec. Returns 0 and
 * *fd_out, or -errno (-ESRCH: the thread exited; -EMFILE: no fd left). */
int ptp_perf_open(uint32_t tid, int64_t first_ns, int *fd_out);

/* Enables an event from ptp_perf_open. Publish the fd to the handler first:
 * a signal it does not recognise does not set the regular period, and with
 * a short first period the thread would be flooded. Returns 0 or -errno. */
int ptp_perf_enable(int fd);

/* Whether events are opened with exclude_kernel (decided by the first
 * probe or open: set only when the kernel refuses events that count kernel
 * time): then a period that ends in kernel mode sends no signal. */
int ptp_perf_excludes_kernel(void);

/* Whether the next expiration of a thread's event (its delivered + 1-th
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
 * backed: never drop a sample for want of a clock.
 *
 * SIGNAL-SAFETY: pure arithmetic, called by the SIGPROF handler. */
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
