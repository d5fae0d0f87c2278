/*
 * bench_work - the CPU sampler benchmark's workload: a FIXED amount of work
 * (iteration counts, not CPU time, so a profiler's overhead shows as extra
 * CPU) with a known split, measured per function with the thread CPU clock.
 * Links nothing of any profiler: run it under LD_PRELOAD=libptprof.so,
 * gperftools' libprofiler or perf record.
 *
 *   bench_work threads N SCALE   N threads; each round: work_a (1 unit),
 *                                work_b (3 units), the round's length drawn
 *                                from 0.5-1.5 units (a strictly periodic
 *                                workload whose cycle divides the kernel tick
 *                                would alias with tick-based samplers)
 *   bench_work short SCALE       200 short threads (~10 ms CPU each), two at
 *                                a time, same 1 : 3 split
 *   bench_work malloc SCALE      2 threads; per round work_b and
 *                                malloc_caller (malloc/free, about half)
 *   bench_work short3 SCALE      200 x SCALE threads of ~10 ms CPU (about
 *                                one 99 Hz period), four alive at a time,
 *                                each running work_a, work_b, work_c once in
 *                                that fixed order (8 : 10 : 12 units): a
 *                                tick-based sampler loses what a thread does
 *                                last, a guessed stack would show it
 *
 * Prints one JSON object: real CPU seconds per function (work_a, work_b,
 * work_c, malloc_caller) and in total over the worker threads.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t g_sink;

static double tcpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define UNIT 250000   /* iterations: about 0.25 ms of CPU here */

__attribute__((noinline)) static void work_a(long iters) {
  uint64_t x = g_sink | 1;
  for (long i = 0; i < iters; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
}

__attribute__((noinline)) static void work_b(long iters) {
  uint64_t x = g_sink | 3;
  for (long i = 0; i < iters; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
}

__attribute__((noinline)) static void work_c(long iters) {
  uint64_t x = g_sink | 5;
  for (long i = 0; i < iters; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
}

/* Nearly all of its time is inside libc's malloc/free. */
__attribute__((noinline)) static void malloc_caller(long units) {
  void *keep[64] = { 0 };
  for (long i = 0; i < units * 7500; i++) {
    unsigned k = (unsigned)i * 2654435761u;
    free(keep[k % 64]);
    keep[k % 64] = malloc(16 + k % 2000);
  }
  for (int i = 0; i < 64; i++) free(keep[i]);
}

typedef struct acc {
  _Atomic uint64_t a_ns, b_ns, c_ns, m_ns, total_ns;
} acc;
static acc g_acc;

static void add(_Atomic uint64_t *c, double t0, double t1) {
  atomic_fetch_add(c, (uint64_t)((t1 - t0) * 1e9));
}

typedef struct job { const char *mode; long rounds; long scale; } job;

__attribute__((noinline)) static void *worker_root(void *arg) {
  const job *j = arg;
  double start = tcpu();
  if (strcmp(j->mode, "short3") == 0) {
    /* One pass, fixed order: the thread's life is these three calls. */
    double t0 = tcpu();
    work_a(8 * UNIT);
    double t1 = tcpu();
    work_b(10 * UNIT);
    double t2 = tcpu();
    work_c(12 * UNIT);
    double t3 = tcpu();
    add(&g_acc.a_ns, t0, t1);
    add(&g_acc.b_ns, t1, t2);
    add(&g_acc.c_ns, t2, t3);
    add(&g_acc.total_ns, start, t3);
    return NULL;
  }
  uint64_t rng = (uint64_t)(uintptr_t)&start;   /* differs per thread */
  for (long r = 0; r < j->rounds; r++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    long len = UNIT / 2 + (long)((rng >> 33) % UNIT);   /* 0.5 .. 1.5 units */
    double t0 = tcpu();
    if (strcmp(j->mode, "malloc") == 0) {
      work_b(4 * UNIT);
      double t1 = tcpu();
      malloc_caller(4);
      double t2 = tcpu();
      add(&g_acc.b_ns, t0, t1);
      add(&g_acc.m_ns, t1, t2);
    } else {
      work_a(len);
      double t1 = tcpu();
      work_b(3 * len);
      double t2 = tcpu();
      add(&g_acc.a_ns, t0, t1);
      add(&g_acc.b_ns, t1, t2);
    }
  }
  add(&g_acc.total_ns, start, tcpu());
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_work threads N SCALE | short SCALE | short3 SCALE | malloc SCALE\n");
    return 2;
  }
  const char *mode = argv[1];
  int nthreads;
  long scale, rounds;
  if (!strcmp(mode, "threads") && argc == 4) {
    nthreads = atoi(argv[2]);
    scale = atol(argv[3]);
    if (nthreads < 1 || nthreads > 256) return 2;
    rounds = scale * 2000 / nthreads;          /* 2000 rounds ~ 2 CPU s per SCALE */
  } else if (!strcmp(mode, "short") && argc == 3) {
    nthreads = 200;
    scale = atol(argv[2]);
    rounds = 10 * scale;                        /* ~10 ms per thread per SCALE */
  } else if (!strcmp(mode, "short3") && argc == 3) {
    scale = atol(argv[2]);
    nthreads = 200 * (int)(scale > 0 && scale < 100 ? scale : 1);
    rounds = 1;
  } else if (!strcmp(mode, "malloc") && argc == 3) {
    nthreads = 2;
    scale = atol(argv[2]);
    rounds = 500 * scale;
  } else {
    return 2;
  }
  if (scale < 1) return 2;
  job j = { mode, rounds, scale };
  if (!strcmp(mode, "short3")) {
    for (int i = 0; i < nthreads; i += 4) {
      pthread_t t[4];
      for (int k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, worker_root, &j)) return 1;
      for (int k = 0; k < 4; k++) pthread_join(t[k], NULL);
    }
  } else if (!strcmp(mode, "short")) {
    for (int i = 0; i < nthreads; i += 2) {
      pthread_t t[2];
      for (int k = 0; k < 2; k++)
        if (pthread_create(&t[k], NULL, worker_root, &j)) return 1;
      for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    }
  } else {
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    for (int i = 0; i < nthreads; i++)
      if (pthread_create(&t[i], NULL, worker_root, &j)) return 1;
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    free(t);
  }
  printf("{\"work_a\": %.6f, \"work_b\": %.6f, \"work_c\": %.6f, \"malloc_caller\": %.6f, "
         "\"total\": %.6f}\n",
         atomic_load(&g_acc.a_ns) / 1e9, atomic_load(&g_acc.b_ns) / 1e9, atomic_load(&g_acc.c_ns) / 1e9,
         atomic_load(&g_acc.m_ns) / 1e9, atomic_load(&g_acc.total_ns) / 1e9);
  return 0;
}
