/*
 * split_work - the real-program bench's known-split workloads
 * (bench/real/real.py): a fixed amount of work whose split over three
 * functions it measures itself with the thread CPU clock, so a profiler's
 * split error can be computed against the truth.
 *
 *   split_work short SCALE   60 * SCALE threads of about one 99 Hz period
 *                            of CPU each (~10 ms), four alive at a time
 *                            (a new one starts when one ends); each runs
 *                            step_a (1 part), step_b (2 parts), step_c
 *                            (3 parts), in that order, once
 *   split_work many SCALE    16 threads on however many cores there are;
 *                            each runs rounds of step_a, step_b, step_c
 *                            (1 : 2 : 3), the round length drawn from
 *                            0.5-1.5 ms so that it does not alias with the
 *                            kernel tick; ~0.65 CPU s per SCALE in total
 *
 * Prints one JSON object: real CPU seconds per step and in total over the
 * worker threads. Built with frame pointers (bench/real/run.sh): these
 * workloads measure how the sampler's timers attribute CPU, not unwinding.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNIT 250000L   /* iterations: about 0.3 ms of CPU on the bench VM */

static volatile uint64_t g_sink;
static _Atomic uint64_t g_ns[3], g_total_ns;
static sem_t g_slots;  /* "short": free slots among the four live threads */

static uint64_t tcpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Three identical loops under three names; noinline keeps them leaves. */
#define STEP(name, seed)                                                      \
  __attribute__((noinline)) static void name(long iters) {                   \
    uint64_t x = g_sink | (seed);                                            \
    for (long i = 0; i < iters; i++)                                         \
      x = x * 6364136223846793005ull + 1442695040888963407ull;               \
    g_sink = x;                                                              \
  }
STEP(step_a, 1)
STEP(step_b, 3)
STEP(step_c, 5)

/* Runs the three steps with lengths len, 2 len, 3 len; adds their CPU. */
static void round3(long len) {
  uint64_t t0 = tcpu_ns();
  step_a(len);
  uint64_t t1 = tcpu_ns();
  step_b(2 * len);
  uint64_t t2 = tcpu_ns();
  step_c(3 * len);
  uint64_t t3 = tcpu_ns();
  atomic_fetch_add(&g_ns[0], t1 - t0);
  atomic_fetch_add(&g_ns[1], t2 - t1);
  atomic_fetch_add(&g_ns[2], t3 - t2);
}

__attribute__((noinline)) static void *short_root(void *arg) {
  (void)arg;
  uint64_t start = tcpu_ns();
  round3(UNIT * 21 / 4);   /* 6 x 5.25 units: about 10 ms of CPU in all */
  atomic_fetch_add(&g_total_ns, tcpu_ns() - start);
  sem_post(&g_slots);
  return NULL;
}

static long g_rounds;

__attribute__((noinline)) static void *many_root(void *arg) {
  uint64_t start = tcpu_ns();
  uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  for (long r = 0; r < g_rounds; r++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    long len = UNIT / 2 + (long)((rng >> 33) % UNIT);  /* 0.5 .. 1.5 units */
    round3(len / 6);
  }
  atomic_fetch_add(&g_total_ns, tcpu_ns() - start);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3 || atol(argv[2]) < 1) goto usage;
  long scale = atol(argv[2]);
  pthread_attr_t attr;
  if (pthread_attr_init(&attr)) return 1;
  if (!strcmp(argv[1], "short")) {
    long n = 60 * scale;
    if (sem_init(&g_slots, 0, 4)) return 1;
    /* Detached threads; the semaphore keeps four alive at a time and the
     * final four waits make sure all have finished before printing. */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (long i = 0; i < n; i++) {
      pthread_t t;
      while (sem_wait(&g_slots)) {}
      if (pthread_create(&t, &attr, short_root, NULL)) return 1;
    }
    for (int i = 0; i < 4; i++)
      while (sem_wait(&g_slots)) {}
  } else if (!strcmp(argv[1], "many")) {
    pthread_t t[16];
    g_rounds = scale * 2000 / 16;   /* 2000 rounds of ~0.3 ms: ~0.65 CPU s */
    for (uintptr_t i = 0; i < 16; i++)
      if (pthread_create(&t[i], &attr, many_root, (void *)(i + 1))) return 1;
    for (int i = 0; i < 16; i++) pthread_join(t[i], NULL);
  } else {
    goto usage;
  }
  pthread_attr_destroy(&attr);
  printf("{\"step_a\": %.6f, \"step_b\": %.6f, \"step_c\": %.6f, \"total\": %.6f}\n",
         atomic_load(&g_ns[0]) / 1e9, atomic_load(&g_ns[1]) / 1e9,
         atomic_load(&g_ns[2]) / 1e9, atomic_load(&g_total_ns) / 1e9);
  return 0;
usage:
  fprintf(stderr, "usage: split_work short|many SCALE\n");
  return 2;
}
