/*
 * nofp_prog - a program built entirely WITHOUT frame pointers (this
 * executable with -fomit-frame-pointer, and libptt_nofp, see
 * tests/prof/meson.build), like Debian's python3.11 or cc1, for
 * sampler_nofp_exe_test.sh. It links nothing of the profiler (run it under
 * LD_PRELOAD=libptprof.so).
 *
 *   nofp_prog SECONDS   the main thread and one thread named "nofp-worker"
 *                       each burn SECONDS of CPU in
 *                       {main | nofp_worker} -> nofp_drive -> (library)
 *                       ptt_nofp_outer -> nofp_mid -> nofp_hot
 *
 * nofp_drive (here) and nofp_mid (in the library) load junk into rbp before
 * calling on, so no frame-pointer walk gets from nofp_hot to main or to the
 * thread's start: only each object's CFI does. Exit status 0, 2 on bad
 * usage, 1 on a failed system call.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*ptt_nofp_cb)(void *arg);
uint64_t ptt_nofp_outer(ptt_nofp_cb cb, void *arg, int n);

static volatile uint64_t g_sink;

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The callback, called from the library: ~50 us of arithmetic. */
__attribute__((noinline)) static void nofp_hot(void *arg) {
  (void)arg;
  uint64_t acc = g_sink | 1;
  for (int i = 0; i < 50000; i++) acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
  g_sink = acc;
}

/* Burns `seconds` of this thread's CPU through the library; rbp holds junk
 * (callee-saved: the compiler saves and restores it and says so in
 * .eh_frame) while the library runs. */
__attribute__((noinline)) static void nofp_drive(double seconds) {
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) {
    __asm__ volatile("movq %0, %%rbp" : : "r"(g_sink ^ 0xa5a5a5a5a5a5a5a5ull) : "rbp");
    g_sink += ptt_nofp_outer(nofp_hot, NULL, 20);
    __asm__ volatile("" ::: "memory");
  }
}

__attribute__((noinline)) static void *nofp_worker(void *arg) {
  nofp_drive(*(const double *)arg);
  __asm__ volatile("" ::: "memory");
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: nofp_prog SECONDS\n");
    return 2;
  }
  double seconds = atof(argv[1]);
  if (!(seconds > 0 && seconds < 60)) {
    fprintf(stderr, "nofp_prog: bad SECONDS '%s'\n", argv[1]);
    return 2;
  }
  pthread_t t;
  int rc = pthread_create(&t, NULL, nofp_worker, &seconds);
  if (rc != 0) {
    fprintf(stderr, "nofp_prog: pthread_create: %d\n", rc);
    return 1;
  }
  pthread_setname_np(t, "nofp-worker");
  nofp_drive(seconds);
  if (pthread_join(t, NULL) != 0) return 1;
  printf("%llu\n", (unsigned long long)(g_sink & 1));
  return 0;
}
