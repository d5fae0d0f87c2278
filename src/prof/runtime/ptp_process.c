/*
 * ptp_process.c - the one-time set-up of the sampler's process-wide state
 * (see ptp_process.h for the whole list).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "prof/runtime/ptp_process.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/signal/ptp_producer.h"

static struct {
  pthread_once_t once;
  int rc;
} proc_init = { .once = PTHREAD_ONCE_INIT };

/* The parent's sampler must never be written from a forked child. */
static void atfork_child(void) { atomic_store(&ptp_g_shared, NULL); }

static void do_init(void) {
  proc_init.rc = ptp_threads_init();
  if (proc_init.rc == 0) (void)pthread_atfork(NULL, NULL, atfork_child);
}

int ptp_process_init(void) {
  pthread_once(&proc_init.once, do_init);
  return proc_init.rc;
}
