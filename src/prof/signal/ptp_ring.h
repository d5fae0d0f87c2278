/*
 * ptp_ring.h - the pre-allocated ring between the SIGPROF handler (many
 * producers) and the sampler's consumer (one consumer at a time).
 *
 * SIGNAL-SAFETY: ptp_ring_claim/ptp_ring_publish are async-signal-safe
 * (atomics on pre-allocated memory, no locks, no allocation). They are also
 * used from ordinary thread context (the exit accounting of a thread); nesting is
 * harmless because a claimed slot belongs to its claimer alone.
 *
 * Algorithm: a bounded multi-producer queue with one sequence number per
 * slot (D. Vyukov's bounded MPMC queue, used single-consumer). Slot i holds
 * seq == pos when free for the producer of position pos, pos + 1 once
 * published, and pos + cap again once the consumer released it. The slot
 * stores seq - i (ptp_ring_seq_get/put), so all-zero memory is the initial
 * state: the slots come from calloc untouched (a 1.1 MiB ring is not
 * faulted in at start; each page is, by the kernel, at its first sample,
 * which is async-signal-safe: no user-space lock is involved). A producer
 * that finds its slot not yet released reports "full" instead of waiting: the
 * handler then counts a PTP_DROP_RING_FULL drop. Producers never block; a
 * producer preempted between claim and publish only delays the consumer,
 * which stops at the first unpublished slot and retries later.
 *
 * Consumer side (ptp_ring_peek/ptp_ring_release) must be serialized by the
 * caller (the sampler's agg_mu).
 */
#ifndef PTP_RING_H
#define PTP_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "prof/output/ptp_window.h"

/* Deepest stack kept per sample; deeper ones get PTP_SAMPLE_DEPTH_CAP. */
#define PTP_MAX_FRAMES 64

/* Slot-only flag (never reaches a ptp_window): the slot is a thread's exit
 * accounting (expirations due by its CPU time but not delivered before it
 * exited); frames[0] is unused. The consumer records the weight under the
 * thread's "[lost: thread exit]" pseudo-frame (PTP_SAMPLE_LOST) and counts
 * it as a PTP_DROP_THREAD_EXIT drop: nobody knows which stack had them. */
#define PTP_SLOT_FLUSH 0x8000u

typedef struct ptp_slot {
  _Atomic uint64_t seq;
  uint32_t tid;
  uint32_t weight;          /* 1 + si_overrun (expirations) */
  int64_t ts;               /* CLOCK_MONOTONIC ns when taken */
  uint16_t nframes;         /* >= 1 */
  uint16_t flags;           /* PTP_SAMPLE_* */
  uint32_t pad_;
  ptp_label_ids labels;     /* the thread's task and user labels when taken */
  char name[16];            /* the thread's name when taken (PR_GET_NAME:
                               at most 15 bytes and a NUL; "" if unknown) */
  uintptr_t frames[PTP_MAX_FRAMES];
} ptp_slot;

typedef struct ptp_ring {
  uint64_t cap;             /* power of two */
  uint64_t mask;
  _Alignas(64) _Atomic uint64_t head;  /* next position producers claim */
  _Alignas(64) _Atomic uint64_t tail; /* next position the consumer reads (written by
                                          the consumer only; atomic for ptp_ring_fill) */
  ptp_slot *slots;          /* cap slots, zero-filled (seq[i] starts as i) */
} ptp_ring;

/* A slot's sequence number (stored biased by the slot's index). */
static inline uint64_t ptp_ring_seq_get(const ptp_ring *r, ptp_slot *s) {
  return atomic_load_explicit(&s->seq, memory_order_acquire) + (uint64_t)(s - r->slots);
}

static inline void ptp_ring_seq_put(const ptp_ring *r, ptp_slot *s, uint64_t seq) {
  atomic_store_explicit(&s->seq, seq - (uint64_t)(s - r->slots), memory_order_release);
}

/* Claims a slot for writing, or returns NULL when the ring is full.
 * *pos_out receives the position to pass to ptp_ring_publish. */
static inline ptp_slot *ptp_ring_claim(ptp_ring *r, uint64_t *pos_out) {
  uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
  for (;;) {
    ptp_slot *s = &r->slots[pos & r->mask];
    uint64_t seq = ptp_ring_seq_get(r, s);
    int64_t diff = (int64_t)(seq - pos);
    if (diff == 0) {
      if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1,
                                                memory_order_relaxed, memory_order_relaxed)) {
        *pos_out = pos;
        return s;
      }
      /* pos was reloaded by the failed CAS */
    } else if (diff < 0) {
      return NULL;           /* the consumer has not released this slot yet */
    } else {
      pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    }
  }
}

/* Makes a claimed slot visible to the consumer. */
static inline void ptp_ring_publish(ptp_ring *r, ptp_slot *s, uint64_t pos) {
  ptp_ring_seq_put(r, s, pos + 1);
}

/* Consumer: the next published slot, or NULL (empty, or the next slot is
 * claimed but not yet published). */
static inline ptp_slot *ptp_ring_peek(ptp_ring *r) {
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  ptp_slot *s = &r->slots[t & r->mask];
  return ptp_ring_seq_get(r, s) == t + 1 ? s : NULL;
}

/* Consumer: gives the slot returned by ptp_ring_peek back to producers. */
static inline void ptp_ring_release(ptp_ring *r, ptp_slot *s) {
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  ptp_ring_seq_put(r, s, t + r->cap);
  atomic_store_explicit(&r->tail, t + 1, memory_order_relaxed);
}

/* Approximate number of claimed-but-not-consumed slots (for the wake-up
 * threshold; racy by design). */
static inline uint64_t ptp_ring_fill(ptp_ring *r) {
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  return h - t;
}

#endif
