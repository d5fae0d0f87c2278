/*
 * ptp_handler.c - the SIGPROF handler.
 *
 * ASYNC-SIGNAL-SAFE FILE: every function in this file may run inside a
 * signal handler and calls only: atomics, clock_gettime (vDSO, listed as
 * async-signal-safe by POSIX), write(2) on a non-blocking pipe, and
 * ptp_unwind (ptp_unwind.c, equally restricted). No malloc, no locks, no
 * stdio, no dl_iterate_phdr/dladdr, no /proc, no libc or libgcc unwinder.
 * errno is saved and restored.
 *
 * Per signal: find the running sampler (ptp_g_shared), check the signal is
 * one of its timers', claim a ring slot, walk the interrupted stack into it,
 * publish it, and wake the consumer if the ring is filling up or the walk
 * asked for a new unwind table (ptp_unwind.h). Weight =
 * 1 + si_overrun (expirations the kernel merged into this signal: the
 * CPU-time timer is only checked at the scheduler tick). Every expiration
 * that is not recorded is counted in ptp_shared.drops by cause.
 */
#include <errno.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "prof/ptp_handler.h"
#include "prof/ptp_threads.h"

_Atomic(ptp_shared *) ptp_g_shared;
_Atomic(const ptp_cfi_set *) ptp_g_cfi;
_Atomic int ptp_g_inside;

int64_t ptp_now_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ptp_now_real(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void drop(ptp_shared *sh, int cause, uint32_t weight) {
  atomic_fetch_add_explicit(&sh->drops[cause], weight, memory_order_relaxed);
}

/* Wakes the consumer when the ring is filling up, or at once (now != 0)
 * when this sample asked for an unwind table: the consumer builds it at its
 * next pass, and the sooner that is, the fewer samples stay truncated. */
static void maybe_wake(ptp_shared *sh, int now) {
  if (!now && ptp_ring_fill(&sh->ring) < sh->wake_fill) return;
  if (!atomic_load_explicit(&sh->wake_armed, memory_order_relaxed)) return;
  if (atomic_exchange_explicit(&sh->wake_armed, 0, memory_order_acq_rel)) {
    char c = 1;
    ssize_t rc = write(sh->wake_fd, &c, 1);  /* EAGAIN: a wake-up is pending anyway */
    (void)rc;
  }
}

void ptp_handler(int sig, siginfo_t *si, void *ucv) {
  (void)sig;
  int saved_errno = errno;
  atomic_fetch_add(&ptp_g_inside, 1);
  ptp_shared *sh = atomic_load(&ptp_g_shared);
  if (!sh || !si || si->si_code != SI_TIMER) goto out;
  uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
  if ((uint32_t)(v >> 32) != sh->magic) goto out;   /* a stale or foreign timer */
  uint32_t tid = (uint32_t)v;
  uint32_t weight = 1u + (si->si_overrun > 0 ? (uint32_t)si->si_overrun : 0u);

  ptp_thread_rec *rec = ptp_threads_lookup(tid);
  if (rec) {
    atomic_fetch_add_explicit(&rec->delivered, weight, memory_order_relaxed);
    /* SIGPROF is blocked while its handler runs (no SA_NODEFER), so this only
     * triggers if someone re-raised it with a different mask. */
    if (atomic_exchange_explicit(&rec->busy, 1, memory_order_acquire)) {
      drop(sh, PTP_DROP_REENTRANT, weight);
      goto out;
    }
  }
  if (atomic_load_explicit(&sh->dumping, memory_order_acquire)) {
    drop(sh, PTP_DROP_DUMPING, weight);
    goto out_rec;
  }
  uint64_t pos;
  ptp_slot *slot = ptp_ring_claim(&sh->ring, &pos);
  if (!slot) {
    drop(sh, PTP_DROP_RING_FULL, weight);
    goto out_rec;
  }
  const ucontext_t *uc = ucv;
  ptp_regs regs = {
    .pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
    .sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
    .fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP],
  };
  uint16_t flags = 0;
  int asked = 0;
  const ptp_cfi_set *cfi = atomic_load(&ptp_g_cfi);
  int n = ptp_unwind_ex(&regs, rec ? rec->stack_lo : 0, rec ? rec->stack_hi : 0,
                        cfi, slot->frames, PTP_MAX_FRAMES, &flags, &asked);
  slot->tid = tid;
  slot->weight = weight;
  slot->ts = ptp_now_mono();
  slot->nframes = (uint16_t)n;
  slot->flags = flags;
  /* A slot with no frame is published empty (it was claimed) and skipped by
   * the consumer; the expirations count as "no stack". */
  if (n == 0) drop(sh, PTP_DROP_NO_STACK, weight);
  ptp_ring_publish(slot, pos);
  maybe_wake(sh, asked);
out_rec:
  if (rec) atomic_store_explicit(&rec->busy, 0, memory_order_release);
out:
  atomic_fetch_sub(&ptp_g_inside, 1);
  errno = saved_errno;
}

int ptp_push_sample(uint32_t tid, uint32_t weight, uint16_t flags,
                    const uintptr_t *frames, uint16_t n) {
  int rc = 0;
  atomic_fetch_add(&ptp_g_inside, 1);
  ptp_shared *sh = atomic_load(&ptp_g_shared);
  if (!sh) { rc = -EAGAIN; goto out; }
  if (n == 0) { drop(sh, PTP_DROP_NO_STACK, weight); goto out; }
  if (atomic_load_explicit(&sh->dumping, memory_order_acquire)) {
    drop(sh, PTP_DROP_DUMPING, weight);
    goto out;
  }
  uint64_t pos;
  ptp_slot *slot = ptp_ring_claim(&sh->ring, &pos);
  if (!slot) { drop(sh, PTP_DROP_RING_FULL, weight); goto out; }
  if (n > PTP_MAX_FRAMES) { n = PTP_MAX_FRAMES; flags |= PTP_SAMPLE_TRUNCATED | PTP_SAMPLE_DEPTH_CAP; }
  for (uint16_t i = 0; i < n; i++) slot->frames[i] = frames[i];
  slot->tid = tid;
  slot->weight = weight;
  slot->ts = ptp_now_mono();
  slot->nframes = n;
  slot->flags = flags;
  ptp_ring_publish(slot, pos);
  maybe_wake(sh, 0);
out:
  atomic_fetch_sub(&ptp_g_inside, 1);
  return rc;
}
