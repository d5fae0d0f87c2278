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
 * One path for both engines: owed = due by the thread's CPU clock since
 * arming - delivered - already reported (ptp_engine_owed), then capped by
 * cause:
 *  - "[lost: kernel mode]" (perf engine with exclude_kernel only): at most
 *    1 + the thread's whole kernel CPU time / period (getrusage
 *    RUSAGE_THREAD): no more periods can have ended in the kernel;
 *  - "[lost: thread exit]" (the rest): at most 1 + 10 ms / period, what one
 *    scheduler tick (HZ=100) or a pending signal can hide. More would be a
 *    clock or bookkeeping error, never CPU the profile may claim.
 *
 * Threads: the exiting thread itself (the registry's exit destructor),
 * registry mutex held. Not for signal handlers.
 */
#ifndef PTP_EXITACCT_H
#define PTP_EXITACCT_H

#include <stdint.h>

#include "prof/runtime/ptp_threads.h"

/* The tick whose expirations the timer engine may lose at exit (HZ=100,
 * the coarsest Linux tick). */
#define PTP_EXITACCT_TICK_NS 10000000

/* Accounts the calling thread's owed expirations (tid: its own tid, r its
 * record) and disarms its source (ptp_engine_disarm): the CPU clock is read
 * before, the delivered count after, so no expiration counts twice. */
void ptp_exitacct_exit(ptp_thread_rec *r, uint32_t tid);

/* The caps above, pure arithmetic (for tests): how much of owed goes to
 * each cause. kernel_ns < 0: the kernel share does not apply (timer engine,
 * or perf counting kernel time). */
void ptp_exitacct_split(uint64_t owed, int64_t period_ns, int64_t kernel_ns,
                        uint64_t *to_kernel, uint64_t *to_exit);

typedef struct ptp_exitacct_stats {
  uint64_t flushed;      /* threads that had expirations accounted at exit */
  uint64_t lost_at_exit; /* expirations under "[lost: thread exit]" */
} ptp_exitacct_stats;
void ptp_exitacct_get_stats(ptp_exitacct_stats *out);

#endif
