/*
 * bench/daemon/switch_pingpong.c - what a perf event costs at a context
 * switch, split into its two parts (run by bench/daemon/switch.sh; results
 * in docs/performance.md, "Where the profiling daemon's excess goes").
 *
 * switch_cost.c measures the daemon's own pattern (sleep, wake, a little
 * work) by thread CPU time; this VM's noise there is about as large as the
 * difference between event kinds. This program measures switches alone,
 * by the clock on the wall: two threads pinned to the caller's CPU pass a
 * byte back and forth over two pipes ROUNDS times, so every round trip is
 * two context switches, each taking one event-carrying thread off the CPU
 * and putting the other on. Each thread opens, on itself:
 *   none   nothing
 *   perf   a task-clock sampling event, 99 Hz, as src/prof/runtime/ptp_perf.c
 *          opens it (its hrtimer is stopped at every switch-out and started
 *          at every switch-in)
 *   count  the same event without a period: counting only, no hrtimer
 *   dummy  a software dummy event: the perf context and nothing to switch
 * The four run in a shuffled order in each of PAIRS rounds; the figure is
 * the mean per-round difference to "none" in us per round trip, with a 95 %
 * Student-t interval. No signal handler: SIGPROF is blocked (the sampling
 * event only ends its period, it raises no signal: no O_ASYNC).
 *
 * Usage: switch_pingpong [PAIRS [ROUNDS]]   (defaults 20 20000); run it
 * under `taskset -c N` (switch.sh does) so both threads share one CPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "paired.h"
#include "switch_event.h"

enum { M_NONE, M_PERF, M_COUNT, M_DUMMY, M_N };
static const char *const mode_name[M_N] = { "none", "perf", "count", "dummy" };

typedef struct run_ctx {
  int mode, rounds;
  int to_peer[2], to_main[2];
  int err;
} run_ctx;

/* Opens the mode's event on the calling thread: its fd, 0 for none, -1 on
 * error (printed). */
static int open_event(int mode) {
  if (mode == M_NONE) return 0;
  return swev_open(mode == M_PERF ? SWEV_SAMPLING : mode == M_COUNT ? SWEV_COUNTING : SWEV_DUMMY,
                   "switch_pingpong");
}

static void *peer(void *arg) {
  run_ctx *c = arg;
  int fd = open_event(c->mode);
  if (fd < 0) {
    c->err = 1;
    close(c->to_main[1]);
    return NULL;
  }
  char b;
  for (int i = 0; i < c->rounds; i++)
    if (read(c->to_peer[0], &b, 1) != 1 || write(c->to_main[1], &b, 1) != 1) break;
  if (fd > 0) close(fd);
  return NULL;
}

/* One run: wall-clock us per round trip, or a negative value on error. */
static double run(int mode, int rounds) {
  run_ctx c = { mode, rounds, { -1, -1 }, { -1, -1 }, 0 };
  if (pipe(c.to_peer) || pipe(c.to_main)) return -1;
  int fd = open_event(mode);
  if (fd < 0) return -1;
  pthread_t t;
  if (pthread_create(&t, NULL, peer, &c)) return -1;
  char b = 'x';
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int i = 0;
  for (; i < rounds; i++)
    if (write(c.to_peer[1], &b, 1) != 1 || read(c.to_main[0], &b, 1) != 1) break;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  close(c.to_peer[1]);
  pthread_join(t, NULL);
  if (fd > 0) close(fd);
  close(c.to_peer[0]);
  close(c.to_main[0]);
  close(c.to_main[1]);
  if (c.err || i < rounds) return -1;
  return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / rounds;
}

/* paired_rounds' callback: ctx is the round-trip count. */
static double run_mode(int mode, void *ctx) { return run(mode, *(const int *)ctx); }

int main(int argc, char **argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 20;
  int rounds = argc > 2 ? atoi(argv[2]) : 20000;
  if (pairs < 2 || rounds < 1) {
    fprintf(stderr, "usage: switch_pingpong [PAIRS>=2 [ROUNDS]]\n");
    return 2;
  }
  swev_block_sigprof();
  double *v = paired_rounds(pairs, M_N, run_mode, &rounds);
  if (!v) return 1;
  printf("switch_pingpong: %d rounds of %d round trips (two threads, one CPU, pipes)\n", pairs,
         rounds);
  paired_report(mode_name, M_N, v, pairs, "us per round trip", "us per round trip");
  free(v);
  return 0;
}
