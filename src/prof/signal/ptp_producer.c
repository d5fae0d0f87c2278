/*
 * ptp_producer.c - ring producer and clocks (see ptp_producer.h).
 *
 * ASYNC-SIGNAL-SAFE FILE: every function here may run inside the SIGPROF
 * handler and calls only atomics, clock_gettime (vDSO, async-signal-safe per
 * POSIX) and the futex(2) system call (FUTEX_WAKE_PRIVATE, through
 * syscall(2): no lock, no allocation). No malloc, no locks, no stdio, no
 * descriptor.
 * It calls nothing else of the sampler (ptp_ring.h is inline).
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof/signal/ptp_producer.h"
#include "prof/signal/ptp_clock.h"

_Atomic(ptp_shared *) ptp_g_shared;
_Atomic int ptp_g_inside;

int64_t ptp_now_mono(void) { return ptp_clock_ns(CLOCK_MONOTONIC, 0); }

int64_t ptp_now_real(void) { return ptp_clock_ns(CLOCK_REALTIME, 0); }

void ptp_drop(ptp_shared *sh, int cause, uint32_t weight) {
  atomic_fetch_add_explicit(&sh->drops[cause], weight, memory_order_relaxed);
}

void ptp_wake_maybe(ptp_shared *sh, int now) {
  if (!now && ptp_ring_fill(&sh->ring) < sh->wake_fill) return;
  if (!atomic_load_explicit(&sh->wake_armed, memory_order_relaxed)) return;
  if (atomic_exchange_explicit(&sh->wake_armed, 0, memory_order_acq_rel)) ptp_wake_now(sh);
}

void ptp_wake_now(ptp_shared *sh) {
  atomic_fetch_add_explicit(&sh->wake_seq, 1, memory_order_release);
  /* Private futex: the word is this process's memory. errno is the
   * caller's to keep (the handler saves and restores it). */
  (void)syscall(SYS_futex, &sh->wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int ptp_push_sample(uint32_t tid, uint32_t weight, uint16_t flags,
                    const uintptr_t *frames, uint16_t n) {
  int rc = 0;
  atomic_fetch_add(&ptp_g_inside, 1);
  ptp_shared *sh = atomic_load(&ptp_g_shared);
  if (!sh) { rc = -EAGAIN; goto out; }
  if (n == 0) { ptp_drop(sh, PTP_DROP_NO_STACK, weight); goto out; }
  if (atomic_load_explicit(&sh->dumping, memory_order_acquire)) {
    ptp_drop(sh, PTP_DROP_DUMPING, weight);
    goto out;
  }
  uint64_t pos;
  ptp_slot *slot = ptp_ring_claim(&sh->ring, &pos);
  if (!slot) { ptp_drop(sh, PTP_DROP_RING_FULL, weight); goto out; }
  if (n > PTP_MAX_FRAMES) { n = PTP_MAX_FRAMES; flags |= PTP_SAMPLE_TRUNCATED | PTP_SAMPLE_DEPTH_CAP; }
  for (uint16_t i = 0; i < n; i++) slot->frames[i] = frames[i];
  slot->tid = tid;
  slot->weight = weight;
  slot->ts = ptp_now_mono();
  slot->nframes = n;
  slot->flags = flags;
  slot->labels = (ptp_label_ids){0};   /* not taken in a poll: no labels */
  slot->name[0] = 0;                   /* name not read: the dump's is used */
  ptp_ring_publish(&sh->ring, slot, pos);
  ptp_wake_maybe(sh, 0);
out:
  atomic_fetch_sub(&ptp_g_inside, 1);
  return rc;
}
