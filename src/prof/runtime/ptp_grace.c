/*
 * ptp_grace.c - the handler grace (see ptp_grace.h).
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "prof/runtime/ptp_grace.h"
#include "prof/signal/ptp_producer.h"

int ptp_grace_wait(int limit_ms) {
  int64_t end = ptp_now_mono() + (int64_t)limit_ms * 1000000;
  for (int i = 0; atomic_load(&ptp_g_inside) != 0; i++) {
    if (limit_ms > 0 && ptp_now_mono() > end) return -ETIMEDOUT;
    if (i < 100) sched_yield();
    else nanosleep(&(struct timespec){ 0, 100000 }, NULL);
  }
  return 0;
}

int ptp_grace_quiet(void) { return atomic_load(&ptp_g_inside) == 0; }
