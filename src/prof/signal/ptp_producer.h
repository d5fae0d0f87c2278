/*
 * ptp_producer.h - the producer side of the sample ring and the clocks,
 * shared by the signal handler (ptp_handler.c) and the exit accounting
 * (runtime/ptp_exitacct.c). Its own unit so that neither of those two
 * calls the other (both call down into this one).
 *
 * Defined here, of what the handler reads (the whole list, and who
 * publishes what, is ptp_handler.h's):
 *   ptp_g_shared  the running sampler's ring, drop counters and flags
 *                 (NULL while none runs: the handler then returns at once);
 *                 published by runtime/ptprof.c;
 *   ptp_g_inside  how many handlers (and other users of ptp_g_shared: exit
 *                 accountings, stats readers) are between their entry and
 *                 exit right now. Whoever replaces or frees something the
 *                 handler may read first unpublishes it, then waits until
 *                 it sees ptp_g_inside == 0 (all seq_cst): the handler
 *                 grace, runtime/ptp_grace.h.
 *
 * SIGNAL-SAFETY: every function declared here is async-signal-safe (atomics,
 * vDSO clock_gettime, a futex wake system call) and may also be called from
 * ordinary thread context.
 *
 * Descriptors: none. The consumer is woken through a futex on a word of
 * ptp_shared (shared memory of this process), never through a descriptor:
 * a program may close or reuse any descriptor number at any time (a
 * close_range(3, ~0U) at its start, a daemon closing everything), and a
 * wake-up written to a number the program now uses would land in its
 * file (docs/sampler.md, "Descriptors").
 */
#ifndef PTP_PRODUCER_H
#define PTP_PRODUCER_H

#include <stdatomic.h>
#include <stdint.h>

#include "prof/signal/ptp_ring.h"
#include "prof/output/ptp_window.h"

/* What the handler needs from a running sampler. Owned by ptprof.c; it is
 * allocated before publication and freed only after unpublication plus a
 * grace period. */
typedef struct ptp_shared {
  uint32_t magic;             /* this start's part of our timers' sigev_value:
                                 its generation << PTP_TIMER_TID_BITS (the
                                 process's timer magic is above, the tid
                                 below; ptp_sigstate.h) */
  int engine;                 /* PTP_ENGINE_* of this start (ptp_threads.h) */
  int64_t period_ns;          /* sampling period in thread CPU ns */
  _Atomic int dumping;        /* 1: count PTP_DROP_DUMPING, record nothing */
  ptp_ring ring;
  /* Drops since the last window cut, by cause, in expirations. */
  _Atomic uint64_t drops[PTP_DROP__COUNT];
  /* Perf expirations since the last window cut that had no CPU time of
   * their thread behind them (ptp_perf_expiry_backed) and were ignored:
   * not a drop, since no CPU is missing from the profile. */
  _Atomic uint64_t no_cpu;
  /* Wake-up of the consumer: it reads wake_seq, sets wake_armed and sleeps
   * in FUTEX_WAIT on wake_seq (with a timeout); the first producer that sees
   * the ring at least wake_fill full (or that needs the consumer now)
   * clears wake_armed, increments wake_seq and wakes the futex
   * (ptp_wake_now). A wake between the consumer's read and its wait makes
   * the wait return at once (the word changed). */
  _Atomic uint32_t wake_seq;
  _Atomic int wake_armed;
  uint64_t wake_fill;
} ptp_shared;

extern _Atomic(ptp_shared *) ptp_g_shared;
extern _Atomic int ptp_g_inside;

/* Monotonic and realtime clocks in ns (vDSO clock_gettime). */
int64_t ptp_now_mono(void);
int64_t ptp_now_real(void);

/* Counts weight expirations of sh as not recorded, by cause. */
void ptp_drop(ptp_shared *sh, int cause, uint32_t weight);

/* Wakes the consumer when the ring has reached its fill mark, or at once
 * when now != 0 (work that should not wait: an unwind table the walker
 * asked for). At most one wake-up per sleep of the consumer. */
void ptp_wake_maybe(ptp_shared *sh, int now);

/* Wakes the consumer unconditionally (stop, a dump that wants it, tests):
 * increments wake_seq and wakes the futex. */
void ptp_wake_now(ptp_shared *sh);

/* Pushes one record outside the walker: frames[0..n) with the given weight
 * and flags into the running sampler's ring (the exit accounting's
 * PTP_SLOT_FLUSH records, tests and benchmarks), counting a drop when it
 * cannot. Returns 0, or -EAGAIN when no sampler runs. */
int ptp_push_sample(uint32_t tid, uint32_t weight, uint16_t flags,
                    const uintptr_t *frames, uint16_t n);

#endif
