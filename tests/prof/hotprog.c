/*
 * hotprog - a test workload with a known CPU profile, for the sampler's
 * integration tests (tests/prof/pprof_hotprog_test.sh). Built -O2 -g with
 * frame pointers; it links nothing of the profiler: run it under
 * LD_PRELOAD=libptprof.so (PTPROF_DIR=...) to profile it.
 *
 *   hotprog [SECONDS]     (CPU seconds of work, default 2)
 *
 * Per round of work, by design:
 *   hot_spin       ~60 %  a plain arithmetic loop (the top flat entry)
 *   inline_host    ~25 %  its time is in inlined_work, always inlined into it
 *   alloc_heavy    ~15 %  malloc/free in a loop: nearly all of it inside libc
 * The main thread is named "hotprog-main" (the thread_name label).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t g_sink;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void hot_spin(uint64_t n) {
  uint64_t x = g_sink | 1;
  for (uint64_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    x ^= x >> 29;
  }
  g_sink = x;
}

static inline __attribute__((always_inline)) uint64_t inlined_work(uint64_t n) {
  uint64_t a = g_sink + 7, b = 3;
  for (uint64_t i = 0; i < n; i++) {
    a = (a ^ (a << 7)) + b;
    b = (b * 31) ^ (a >> 11);
  }
  return a ^ b;
}

__attribute__((noinline)) static void inline_host(uint64_t n) {
  g_sink = inlined_work(n);
}

__attribute__((noinline)) static void alloc_heavy(int rounds) {
  void *blocks[64];
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < 64; i++) blocks[i] = malloc((size_t)(16 + ((i * 97 + r) % 61) * 64));
    /* free in a different order than allocated: the allocator does real work */
    for (int i = 0; i < 64; i += 2) free(blocks[i]);
    for (int i = 1; i < 64; i += 2) free(blocks[i]);
  }
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 2.0;
  if (!(secs > 0 && secs < 3600)) {
    fprintf(stderr, "usage: hotprog [SECONDS]\n");
    return 2;
  }
  pthread_setname_np(pthread_self(), "hotprog-main");
  /* Calibrate each part (double the work until one call takes >= 5 ms,
   * after a warm-up), then size the rounds to ~6/2.5/1.5 ms: 60/25/15 %. */
  alloc_heavy(64);
  uint64_t spin_n = 1024, inl_n = 1024;
  uint64_t alloc_n = 1;
  double spin_t, inl_t, alloc_t, t0;
  for (;; spin_n *= 2) {
    t0 = cpu_now();
    hot_spin(spin_n);
    if ((spin_t = cpu_now() - t0) >= 0.005) break;
  }
  for (;; inl_n *= 2) {
    t0 = cpu_now();
    inline_host(inl_n);
    if ((inl_t = cpu_now() - t0) >= 0.005) break;
  }
  for (;; alloc_n *= 2) {
    t0 = cpu_now();
    alloc_heavy((int)alloc_n);
    if ((alloc_t = cpu_now() - t0) >= 0.005) break;
  }
  uint64_t spin_round = (uint64_t)((double)spin_n * 0.006 / spin_t) + 1;
  uint64_t inl_round = (uint64_t)((double)inl_n * 0.0025 / inl_t) + 1;
  int alloc_round = (int)((double)alloc_n * 0.0015 / alloc_t) + 1;
  double start = cpu_now();
  while (cpu_now() - start < secs) {
    hot_spin(spin_round);
    inline_host(inl_round);
    alloc_heavy(alloc_round);
  }
  return (int)(g_sink & 0);
}
