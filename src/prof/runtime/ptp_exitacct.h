/*
 * ptp_exitacct.h - the exit accounting: expirations a thread's CPU time
 * made due but that were never delivered when it exits.
 *
 * Why some are owed: under the timer engine the kernel checks CPU-time
 * timers only at its tick, so one that fell due since the last tick is
 * lost when the thread exits first (about a quarter of a 10 ms thread's
 * samples at 99 Hz); under the perf engine the event fires at the exact CPU
 * time, so little is owed (a signal still pending at exit), except, under
 * exclude_kernel, periods that ended in kernel mode. Nobody knows which
 * stacks had them: they are recorded under the thread's pseudo-frames
 * (PTP_SLOT_FLUSH records, see ptprof.c), never under a guessed stack.
 *
 * Threads: the exiting thread itself (the registry's exit destructor),
 * registry mutex held. Not for signal handlers.
 */
#ifndef PTP_EXITACCT_H
#define PTP_EXITACCT_H

#include <stdint.h>

#include "prof/runtime/ptp_threads.h"

/* Accounts the calling thread's owed expirations (tid: its own tid, r its
 * record) and disarms its source (ptp_engine_disarm). */
void ptp_exitacct_exit(ptp_thread_rec *r, uint32_t tid);

typedef struct ptp_exitacct_stats {
  uint64_t flushed;      /* threads that had expirations accounted at exit */
  uint64_t lost_at_exit; /* expirations under "[lost: thread exit]" */
} ptp_exitacct_stats;
void ptp_exitacct_get_stats(ptp_exitacct_stats *out);

#endif
