/*
 * labels_preload.c - user labels in preload mode (labels_preload_test.sh):
 * linked against libptprof.so only for ptprof_labels_push/_pop, profiled
 * by the preloaded sampler (LD_PRELOAD + PTPROF_DIR, final snapshot at
 * exit). Burns argv[1] ms of CPU in labelled() under mode=preload, then as
 * long in unlabelled() with no label.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ptprof.h"

static volatile unsigned long g_sink;

static long cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static __attribute__((noipa)) void spin_for(long ms) {
  long t0 = cpu_ms();
  while (cpu_ms() - t0 < ms)
    for (int i = 0; i < 100000; i++) g_sink = g_sink * 6364136223846793005UL + 1;
}
static __attribute__((noipa)) void labelled(long ms) { spin_for(ms); __asm__ volatile("" ::: "memory"); }
static __attribute__((noipa)) void unlabelled(long ms) { spin_for(ms); __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv) {
  long ms = argc > 1 ? atol(argv[1]) : 500;
  int rc = ptprof_labels_push("mode", "preload");
  if (rc) {
    fprintf(stderr, "labels_preload: push: %s\n", ptprof_strerror(rc));
    return 1;
  }
  labelled(ms);
  if ((rc = ptprof_labels_pop())) return 1;
  unlabelled(ms);
  return 0;
}
