/*
 * ptp_handler.h - the SIGPROF handler and the state it shares with the rest
 * of the sampler.
 *
 * Everything the handler reads is reached through three process-wide atomic
 * globals, all defined in ptp_handler.c:
 *   ptp_g_shared  the running sampler's ring, drop counters and flags
 *                 (NULL while none runs: the handler then returns at once);
 *   ptp_g_cfi     the current unwind-table set (ptp_cfi.h); the handler may
 *                 CAS a slot's state NONE -> WANTED in it, nothing else;
 *   ptp_g_inside  how many handlers (and exit flushes) are between their
 *                 entry and exit right now. Whoever replaces or frees
 *                 something the handler may read first unpublishes it, then
 *                 waits until it sees ptp_g_inside == 0 (all seq_cst).
 */
#ifndef PTP_HANDLER_H
#define PTP_HANDLER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "prof/ptp_ring.h"
#include "prof/ptp_unwind.h"
#include "prof/ptp_window.h"

/* What the handler needs from a running sampler. Owned by ptprof.c; it is
 * allocated before publication and freed only after unpublication plus a
 * grace period. */
typedef struct ptp_shared {
  uint32_t magic;             /* high half of our timers' sigev_value */
  _Atomic int dumping;        /* 1: count PTP_DROP_DUMPING, record nothing */
  ptp_ring ring;
  /* Drops since the last window cut, by cause, in expirations. */
  _Atomic uint64_t drops[PTP_DROP__COUNT];
  /* Wake-up of the consumer: it sets wake_armed before sleeping; the first
   * producer that sees the ring at least wake_fill full clears it and writes
   * one byte to wake_fd (non-blocking pipe; a full pipe is fine). */
  int wake_fd;
  _Atomic int wake_armed;
  uint64_t wake_fill;
} ptp_shared;

extern _Atomic(ptp_shared *) ptp_g_shared;
extern _Atomic(const ptp_cfi_set *) ptp_g_cfi;
extern _Atomic int ptp_g_inside;

/* The handler: install with SA_SIGINFO | SA_RESTART for SIGPROF. Records
 * only signals from our timers (si_code SI_TIMER and our magic in
 * si_value); anything else is ignored. */
void ptp_handler(int sig, siginfo_t *si, void *uc);

/* Takes one sample of the calling thread outside a signal (used by the exit
 * flush and by tests): pushes frames[0..n) with the given weight and flags
 * into the running sampler's ring, counting a drop when it cannot.
 * Async-signal-safe too. Returns 0, or -EAGAIN when nothing runs. */
int ptp_push_sample(uint32_t tid, uint32_t weight, uint16_t flags,
                    const uintptr_t *frames, uint16_t n);

/* Monotonic and realtime clocks in ns (signal-safe: vDSO clock_gettime). */
int64_t ptp_now_mono(void);
int64_t ptp_now_real(void);

#endif
