/*
 * bench/daemon/switch_event.h - the perf events the switch benchmarks put
 * on a thread (switch_cost.c, switch_pingpong.c): the sampler's own event
 * as src/prof/runtime/ptp_perf.c opens it, and two that isolate parts of
 * its cost at a context switch. Header-only, like paired.h.
 */
#ifndef BENCH_SWITCH_EVENT_H
#define BENCH_SWITCH_EVENT_H

#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef enum {
  SWEV_SAMPLING,   /* task-clock, 99 Hz period: its hrtimer runs while the thread runs */
  SWEV_COUNTING,   /* task-clock without a period: no hrtimer */
  SWEV_DUMMY       /* a dummy event: the task's perf context only */
} swev_kind;

/* Opens the event on the calling thread (no signal: no O_ASYNC), counting
 * kernel time where allowed and falling back to user mode only as the
 * sampler does. Its fd, or -1 (the message, prefixed by who, printed). */
static inline int swev_open(swev_kind kind, const char *who) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = kind == SWEV_DUMMY ? PERF_COUNT_SW_DUMMY : PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = kind == SWEV_SAMPLING ? 10101010 : 0;
  a.exclude_hv = 1;
  a.wakeup_events = 1;
  long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0 && (errno == EACCES || errno == EPERM)) {
    a.exclude_kernel = 1;   /* perf_event_paranoid 2, as the sampler falls back */
    fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  }
  if (fd < 0) fprintf(stderr, "%s: perf_event_open: %s\n", who, strerror(errno));
  return (int)fd;
}

/* Blocks SIGPROF in the calling thread (and the threads it creates): the
 * benchmarks measure switches, not samples, and a timer's expirations
 * must stay pending instead of killing the process. */
static inline void swev_block_sigprof(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  sigprocmask(SIG_BLOCK, &set, NULL);
}

#endif
