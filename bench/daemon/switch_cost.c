/*
 * bench/daemon/switch_cost.c - what one sampled thread pays per sleep/wake
 * cycle for each CPU-sampling engine, without any Polytoken code (run by
 * bench/daemon/switch.sh; results in docs/performance.md, "Daemon overhead",
 * "Where the profiling daemon's excess goes").
 *
 * The daemon's loop thread sleeps in epoll_wait and wakes ~1150 times in a
 * 20-turn session, doing little work each time. This program does the same
 * on one thread: CYCLES times, epoll_wait with a SLEEP_MS timeout (1 ms by
 * default; nothing ready, so it sleeps and the CPU may go idle; the
 * daemon's loop sleeps 15-40 ms between tokens), then ~WORK_US of CPU. It
 * reports the thread's CPU time per cycle (CLOCK_THREAD_CPUTIME_ID, the
 * kernel's own accounting) with:
 *   none   no sampler
 *   perf   a perf_event task-clock sampling event on the thread, configured
 *          as src/prof/runtime/ptp_perf.c does (99 Hz period, exclude_hv, kernel
 *          time counted when allowed); the kernel switches its context at
 *          every sleep and wake
 *   timer  a POSIX CPU-time timer on the thread (the timer engine: checked
 *          at the tick, nothing done at a switch)
 *   count  the same task-clock event without a period: counting only, so
 *          no hrtimer is stopped and started at a switch (not an engine:
 *          it raises no signal; it splits perf's cost in two)
 *   dummy  a software dummy event: the task's perf context and nothing
 *          else to switch
 * The five run in a shuffled order in each of PAIRS rounds; the figure is
 * the mean per-round difference to "none" with a 95 % Student-t interval
 * (this VM's run-to-run noise is several us per cycle, so one run says
 * nothing). No signal handler is installed: SIGPROF is blocked, so the
 * figure is the switch cost alone, not the cost of taking samples.
 *
 * Usage: switch_cost [PAIRS [CYCLES [WORK_US [SLEEP_MS]]]]
 *        (defaults 20 2000 20 1)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "paired.h"
#include "switch_event.h"

enum { M_NONE, M_PERF, M_TIMER, M_COUNT, M_DUMMY, M_N };
static const char *const mode_name[M_N] = { "none", "perf", "timer", "count", "dummy" };

static double thread_cpu_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Arms the engine on the calling thread; returns a handle to disarm, or -1
 * when the kernel refuses (the message says why). */
static long arm(int mode, timer_t *tm) {
  if (mode == M_PERF || mode == M_COUNT || mode == M_DUMMY)
    return swev_open(mode == M_PERF ? SWEV_SAMPLING : mode == M_COUNT ? SWEV_COUNTING : SWEV_DUMMY,
                     "switch_cost");
  if (mode == M_TIMER) {
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = gettid();
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, tm) != 0) {
      fprintf(stderr, "switch_cost: timer_create: %s\n", strerror(errno));
      return -1;
    }
    struct itimerspec its = { { 0, 10101010 }, { 0, 10101010 } };
    timer_settime(*tm, 0, &its, NULL);
  }
  return 0;
}

static void disarm(int mode, long h, timer_t tm) {
  if (mode == M_PERF || mode == M_COUNT || mode == M_DUMMY) close((int)h);
  if (mode == M_TIMER) timer_delete(tm);
}

/* One run: CPU us per cycle, or a negative value on error. */
static double run(int mode, int ep, int cycles, double work_us, int sleep_ms) {
  timer_t tm = 0;
  long h = arm(mode, &tm);
  if (h < 0) return -1;
  struct epoll_event ev;
  double c0 = thread_cpu_us();
  for (int i = 0; i < cycles; i++) {
    (void)epoll_wait(ep, &ev, 1, sleep_ms);
    double s = thread_cpu_us();
    while (thread_cpu_us() - s < work_us) {
    }
  }
  double c1 = thread_cpu_us();
  disarm(mode, h, tm);
  /* Take any SIGPROF the timer raised (blocked, so it is only pending). */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  struct timespec zero = { 0, 0 };
  while (sigtimedwait(&set, NULL, &zero) > 0) {
  }
  return (c1 - c0) / cycles;
}

/* paired_rounds' callback and its arguments. */
typedef struct run_args {
  int ep, cycles;
  double work_us;
  int sleep_ms;
} run_args;
static double run_mode(int mode, void *ctx) {
  const run_args *a = ctx;
  return run(mode, a->ep, a->cycles, a->work_us, a->sleep_ms);
}

int main(int argc, char **argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 20;
  int cycles = argc > 2 ? atoi(argv[2]) : 2000;
  double work = argc > 3 ? atof(argv[3]) : 20;
  int sleep_ms = argc > 4 ? atoi(argv[4]) : 1;
  if (pairs < 2 || cycles < 1 || work < 0) {
    fprintf(stderr, "usage: switch_cost [PAIRS>=2 [CYCLES [WORK_US]]]\n");
    return 2;
  }
  swev_block_sigprof();
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) {
    perror("epoll_create1");
    return 1;
  }
  run_args a = { ep, cycles, work, sleep_ms };
  double *v = paired_rounds(pairs, M_N, run_mode, &a);
  if (!v) return 1;
  printf("switch_cost: %d rounds of %d cycles (epoll_wait %d ms, then %.0f us of CPU)\n", pairs,
         cycles, sleep_ms, work);
  paired_report(mode_name, M_N, v, pairs, "us CPU per cycle", "us per cycle");
  free(v);
  close(ep);
  return 0;
}
