/*
 * nofp_dlopen - dlopen's libraries built without frame pointers and burns
 * CPU in each one at once, like python importing an extension module and
 * calling it, for sampler_nofp_dlopen_test.sh. Built with
 * -fomit-frame-pointer (see tests/prof/meson.build); it links nothing of
 * the profiler (run it under LD_PRELOAD=libptprof.so).
 *
 *   nofp_dlopen LIBDIR N SECONDS
 *       for k in 0..N-1: dlopen("LIBDIR/libptt_nofp_dl<k>.so") (a path, so
 *       the load does not depend on the caller), then burn SECONDS of this
 *       thread's CPU right away in
 *       main -> dl_drive -> (library k) ptt_nofp_outer -> nofp_mid -> dl_hot
 *   nofp_dlopen - N SECONDS
 *       the same, but dlopen("libptt_nofp_dl<k>.so") by name: only this
 *       program's DT_RUNPATH (the build directory) finds them, which glibc
 *       consults only when this program is dlopen's caller (an interposer
 *       that calls dlopen itself breaks it).
 *
 * dl_drive and nofp_mid load junk into rbp before calling on, so only each
 * object's CFI gets a walk from dl_hot to main. The libraries stay loaded
 * (the final dump symbolizes their frames). Exit status 0, 2 on bad usage,
 * 1 when a library does not load.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*ptt_nofp_cb)(void *arg);
typedef uint64_t (*outer_fn)(ptt_nofp_cb cb, void *arg, int n);

static volatile uint64_t g_sink;

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The callback, called from the library: ~50 us of arithmetic. */
__attribute__((noinline)) static void dl_hot(void *arg) {
  (void)arg;
  uint64_t acc = g_sink | 1;
  for (int i = 0; i < 50000; i++) acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
  g_sink = acc;
}

__attribute__((noinline)) static void dl_drive(outer_fn outer, double seconds) {
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) {
    __asm__ volatile("movq %0, %%rbp" : : "r"(g_sink ^ 0xa5a5a5a5a5a5a5a5ull) : "rbp");
    g_sink += outer(dl_hot, NULL, 20);
    __asm__ volatile("" ::: "memory");
  }
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: nofp_dlopen LIBDIR N SECONDS\n");
    return 2;
  }
  int n = atoi(argv[2]);
  double seconds = atof(argv[3]);
  if (n < 1 || n > 16 || !(seconds > 0 && seconds < 60)) {
    fprintf(stderr, "nofp_dlopen: bad N '%s' or SECONDS '%s'\n", argv[2], argv[3]);
    return 2;
  }
  for (int k = 0; k < n; k++) {
    char path[PATH_MAX];
    if (argv[1][0] == '-' && !argv[1][1]) snprintf(path, sizeof path, "libptt_nofp_dl%d.so", k);
    else snprintf(path, sizeof path, "%s/libptt_nofp_dl%d.so", argv[1], k);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    outer_fn outer = h ? (outer_fn)dlsym(h, "ptt_nofp_outer") : NULL;
    if (!outer) {
      fprintf(stderr, "nofp_dlopen: %s: %s\n", path, dlerror());
      return 1;
    }
    dl_drive(outer, seconds);
  }
  printf("%llu\n", (unsigned long long)(g_sink & 1));
  return 0;
}
