/*
 * ptp_process.c - the one-time set-up of the sampler's process-wide state
 * (see ptp_process.h for the whole list).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "prof/runtime/ptp_process.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/signal/ptp_producer.h"
#include "prof/signal/ptp_sigstate.h"
#include "prof/signal/ptp_clock.h"

static struct {
  pthread_once_t once;
  int rc;
} proc_init = { .once = PTHREAD_ONCE_INIT };

/* The parent's sampler must never be written from a forked child. */
static void atfork_child(void) { atomic_store(&ptp_g_shared, NULL); }

/* The process's timer magic (signal/ptp_sigstate.h): random, top bit set
 * (no user-space pointer or small integer a program puts in its own
 * timers' sigev_value has it), the same for every start in this process. */
static void init_timer_magic(void) {
  uint64_t x = (uint64_t)ptp_clock_ns(CLOCK_MONOTONIC, 0) ^ ((uint64_t)getpid() << 32) ^
               (uint64_t)(uintptr_t)&x;
  x = (x ^ (x >> 31)) * 0x9e3779b97f4a7c15ULL;
  x ^= x >> 29;
  atomic_store(&ptp_g_sig.timer_magic, (uint32_t)(x >> 32) | 0x80000000u);
}

static void do_init(void) {
  init_timer_magic();
  proc_init.rc = ptp_threads_init();
  if (proc_init.rc == 0) (void)pthread_atfork(NULL, NULL, atfork_child);
}

int ptp_process_init(void) {
  pthread_once(&proc_init.once, do_init);
  return proc_init.rc;
}
