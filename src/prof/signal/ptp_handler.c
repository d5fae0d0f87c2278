/*
 * ptp_handler.c - the SIGPROF handler.
 *
 * ASYNC-SIGNAL-SAFE FILE: every function in this file may run inside a
 * signal handler and calls only: atomics, gettid(2), ioctl(2) on our own
 * perf event and clock_gettime(2) of the thread's CPU clock (plain system
 * calls), the producer (ptp_producer.c: vDSO
 * clock_gettime, write(2) on a non-blocking pipe), ptp_unwind
 * (ptp_unwind.c, equally restricted) and atomic loads of the thread's own
 * initial-exec TLS label block (ptp_label_set.h). No malloc, no locks, no stdio, no
 * dl_iterate_phdr/dladdr, no /proc, no libc or libgcc unwinder. errno is
 * saved and restored.
 *
 * Per signal: find the running sampler (ptp_g_shared), check the signal is
 * one of its engine's, claim a ring slot, walk the interrupted stack into it,
 * copy the thread's labels (the polled console task and the user labels, as
 * ids) into it, publish it, and wake the consumer if the ring is filling up or the walk
 * asked for a new unwind table (ptp_unwind.h).
 *  - Timer engine: weight = 1 + si_overrun (expirations the kernel merged
 *    into this signal: the CPU-time timer is only checked at the tick); the
 *    tid is the low half of si_value.
 *  - Perf engine: weight 1 (the event's hrtimer fires at each period of
 *    the thread's CPU time, one signal each); the signal was sent to the
 *    thread that owns the event (F_OWNER_TID), so the tid is our own. The
 *    first period of each event is random (see runtime/ptp_engine.c); at its first
 *    signal the handler sets the regular period (PERF_EVENT_IOC_PERIOD).
 *    An expiration with no CPU time of the thread behind it (the event's
 *    clock ran on while the host took the virtual CPU: steal time) records
 *    nothing and is counted in ptp_shared.no_cpu (ptp_perf_expiry_backed).
 * Every expiration that is not recorded is counted in ptp_shared.drops by
 * cause.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <time.h>
#include <sys/ioctl.h>
#include <ucontext.h>
#include <unistd.h>

#include "prof/signal/ptp_expiry.h"
#include "prof/signal/ptp_handler.h"
#include "prof/signal/ptp_label_set.h"
#include "prof/signal/ptp_thread_sig.h"

/* Which thread this signal samples, or 0 when it records nothing: not
 * ours, or a perf expiration with no CPU of the thread behind it (counted
 * in sh->no_cpu; see ptp_perf_expiry_backed). */
static uint32_t signal_tid(ptp_shared *sh, const siginfo_t *si, uint32_t *weight,
                           ptp_thread_sig **rec_out) {
  *rec_out = NULL;
  /* Both kinds are accepted whatever the engine: under the perf engine a
   * thread whose event could not be opened (EMFILE) falls back to a timer. */
  if (si->si_code == SI_TIMER) {
    uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    if ((uint32_t)(v >> 32) != sh->magic) return 0;   /* a stale or foreign timer */
    *weight = 1u + (si->si_overrun > 0 ? (uint32_t)si->si_overrun : 0u);
    *rec_out = ptp_thread_sig_lookup((uint32_t)v);
    return (uint32_t)v;
  }
  if (si->si_code != POLL_IN && si->si_code != POLL_HUP) return 0;
  uint32_t tid = (uint32_t)gettid();
  ptp_thread_sig *rec = ptp_thread_sig_lookup(tid);
  /* Only this thread's own event: a signal of a closed event (its fd
   * already reset to -1) or anyone else's F_SETSIG is ignored. */
  int fd = rec ? atomic_load_explicit(&rec->perf_fd, memory_order_acquire) : -1;
  if (fd < 0 || fd != si->si_fd) return 0;
  if (atomic_exchange_explicit(&rec->perf_first, 0, memory_order_relaxed)) {
    uint64_t period = (uint64_t)sh->period_ns;
    (void)ioctl(fd, PERF_EVENT_IOC_PERIOD, &period);
  }
  /* This thread's own CPU clock (clock_gettime is async-signal-safe; for a
   * CPU-time clock it is a system call, once per sample). armed_cpu_ns and
   * first_ns were written before perf_fd was published (acquire above:
   * ptp_thread_sig.h, rule 4). */
  struct timespec ts;
  int64_t now = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0
                    ? (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec : -1;
  if (!ptp_perf_expiry_backed(rec->armed_cpu_ns, rec->first_ns, sh->period_ns,
                              atomic_load_explicit(&rec->delivered, memory_order_relaxed), now)) {
    atomic_fetch_add_explicit(&sh->no_cpu, 1, memory_order_relaxed);
    return 0;
  }
  *weight = 1;
  *rec_out = rec;
  return tid;
}

void ptp_handler(int sig, siginfo_t *si, void *ucv) {
  (void)sig;
  int saved_errno = errno;
  atomic_fetch_add(&ptp_g_inside, 1);
  ptp_shared *sh = atomic_load(&ptp_g_shared);
  if (!sh || !si) goto out;
  uint32_t weight = 1;
  ptp_thread_sig *rec;
  uint32_t tid = signal_tid(sh, si, &weight, &rec);
  if (!tid) goto out;

  if (rec) {
    atomic_fetch_add_explicit(&rec->delivered, weight, memory_order_relaxed);
    /* SIGPROF is blocked while its handler runs (no SA_NODEFER), so this only
     * triggers if someone re-raised it with a different mask. */
    if (atomic_exchange_explicit(&rec->busy, 1, memory_order_acquire)) {
      ptp_drop(sh, PTP_DROP_REENTRANT, weight);
      goto out;
    }
  }
  if (atomic_load_explicit(&sh->dumping, memory_order_acquire)) {
    ptp_drop(sh, PTP_DROP_DUMPING, weight);
    goto out_rec;
  }
  uint64_t pos;
  ptp_slot *slot = ptp_ring_claim(&sh->ring, &pos);
  if (!slot) {
    ptp_drop(sh, PTP_DROP_RING_FULL, weight);
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
  const ptp_xrange_set *xr = atomic_load(&ptp_g_xranges);
  int n = ptp_unwind_ex(&regs, rec ? rec->stack_lo : 0, rec ? rec->stack_hi : 0,
                        cfi, xr, slot->frames, PTP_MAX_FRAMES, &flags, &asked);
  slot->tid = tid;
  slot->weight = weight;
  slot->ts = ptp_now_mono();
  slot->nframes = (uint16_t)n;
  slot->flags = flags;
  /* The handler runs on the sampled thread (both engines signal the thread
   * whose CPU time expired), so its TLS labels are that thread's. */
  ptp_label_set_copy(&slot->labels);
  /* A slot with no frame is published empty (it was claimed) and skipped by
   * the consumer; the expirations count as "no stack". */
  if (n == 0) ptp_drop(sh, PTP_DROP_NO_STACK, weight);
  ptp_ring_publish(&sh->ring, slot, pos);
  ptp_wake_maybe(sh, asked);
out_rec:
  if (rec) atomic_store_explicit(&rec->busy, 0, memory_order_release);
out:
  atomic_fetch_sub(&ptp_g_inside, 1);
  errno = saved_errno;
}
