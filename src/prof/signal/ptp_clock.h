/*
 * ptp_clock.h - a clock's reading in nanoseconds: the one conversion of a
 * struct timespec behind every time and CPU figure the library takes
 * (windows, the blind window, own-work and thread CPU, steal guards).
 *
 * SIGNAL-SAFETY: clock_gettime only (POSIX async-signal-safe), usable in
 * the handler and in every other folder.
 */
#ifndef PTP_CLOCK_H
#define PTP_CLOCK_H

#include <stdint.h>
#include <time.h>

/* clk's time in ns, or on_error when the clock cannot be read (a CPU-time
 * clock of a thread that has exited: EINVAL). Callers choose what an
 * unreadable clock means to them (-1: unknown; 0: counts nothing). */
static inline int64_t ptp_clock_ns(clockid_t clk, int64_t on_error) {
  struct timespec ts;
  if (clock_gettime(clk, &ts) != 0) return on_error;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
