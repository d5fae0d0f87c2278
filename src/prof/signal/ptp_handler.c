/*
 * ptp_handler.c - the SIGPROF handler.
 *
 * ASYNC-SIGNAL-SAFE FILE: every function in this file may run inside a
 * signal handler and calls only: atomics, gettid(2), fstat(2) and ioctl(2)
 * on our own perf event (after checking the number still names it) and
 * clock_gettime(2) of the thread's CPU clock (plain system calls), the
 * producer (ptp_producer.c: vDSO clock_gettime, a futex wake), ptp_sigstate
 * (ptp_sigstate.c: telling our signals apart, handing the program's on),
 * ptp_unwind (ptp_unwind.c, equally restricted) and atomic loads of the
 * thread's own initial-exec TLS label block (ptp_label_set.h) and own-work
 * mark (ptp_own_work.h). No malloc, no locks, no stdio, no
 * dl_iterate_phdr/dladdr, no /proc, no libc or libgcc unwinder. errno is
 * saved and restored.
 *
 * Per signal: tell ours from the program's (ptp_sigstate.h); for ours, find
 * the running sampler (ptp_g_shared), check the signal is one of its
 * engine's (a delivery that reports blocked time records no stack, see
 * blocked_delivery), count it as the profiler's own when the thread is
 * inside profiler work (ptp_own_work.h: no sample), claim a ring slot, walk
 * the interrupted stack into it,
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
 * cause. A signal that is not ours goes to the program's disposition
 * (ptp_sig_forward) last, once our grace counter and errno are restored.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include "prof/signal/ptp_expiry.h"
#include "prof/signal/ptp_handler.h"
#include "prof/signal/ptp_label_set.h"
#include "prof/signal/ptp_own_work.h"
#include "prof/signal/ptp_sigstate.h"
#include "prof/signal/ptp_thread_sig.h"
#include "prof/signal/ptp_clock.h"

/* Whether fd, the number rec's event was published under, still names that
 * event: the program may have closed it and opened a file of its own under
 * the same number, which must never get our ioctl. fstat first (only the
 * perf events' anonymous inode gets a perf ioctl), then the event's kernel
 * id. Two system calls, only before the one ioctl per event. */
static int perf_fd_ours(const ptp_thread_sig *rec, int fd) {
  struct stat st;
  uint64_t id;
  return fstat(fd, &st) == 0 && (uint64_t)st.st_dev == rec->perf_dev &&
         (uint64_t)st.st_ino == rec->perf_ino && ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 &&
         id == rec->perf_id;
}

/* The event's first (random) period is over: the regular one from now
 * on, if fd still names the event (the consumer may be closing it: see
 * perf_fd_ours; tests/tsan.supp names this function for that reason). */
static void perf_set_regular_period(const ptp_thread_sig *rec, int fd, uint64_t period) {
  if (perf_fd_ours(rec, fd)) (void)ioctl(fd, PERF_EVENT_IOC_PERIOD, &period);
}

/* Which thread this signal of ours samples, or 0 when it records nothing:
 * a stale signal (a timer of an earlier start, a closed event, no sampler
 * running), or a perf expiration with no CPU of the thread behind it
 * (counted in sh->no_cpu; see ptp_perf_expiry_backed). Called only for
 * our signals (ptp_sig_ours). */
static uint32_t signal_tid(ptp_shared *sh, const siginfo_t *si, uint32_t *weight,
                           ptp_thread_sig *rec) {
  if (!sh) return 0;
  /* Both kinds are accepted whatever the engine: under the perf engine a
   * thread whose event could not be opened (EMFILE) falls back to a timer. */
  if (si->si_code == SI_TIMER) {
    uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    if (((uint32_t)v & ~PTP_TIMER_TID_MASK) != sh->magic) return 0;   /* an earlier start's */
    *weight = 1u + (si->si_overrun > 0 ? (uint32_t)si->si_overrun : 0u);
    return (uint32_t)v & PTP_TIMER_TID_MASK;
  }
  uint32_t tid = (uint32_t)gettid();
  /* Only this thread's own event, still published: a signal its previous
   * (closed) event left pending is ignored. */
  int fd = rec ? atomic_load_explicit(&rec->perf_fd, memory_order_acquire) : -1;
  if (fd < 0 || fd != si->si_fd) return 0;
  if (atomic_exchange_explicit(&rec->perf_first, 0, memory_order_relaxed))
    perf_set_regular_period(rec, fd, (uint64_t)sh->period_ns);
  /* This thread's own CPU clock (clock_gettime is async-signal-safe; for a
   * CPU-time clock it is a system call, once per sample). armed_cpu_ns and
   * first_ns were written before perf_fd was published (acquire above:
   * ptp_thread_sig.h, rule 4). */
  int64_t now = ptp_clock_ns(CLOCK_THREAD_CPUTIME_ID, -1);
  if (!ptp_perf_expiry_backed(rec->armed_cpu_ns, rec->first_ns, sh->period_ns,
                              atomic_load_explicit(&rec->delivered, memory_order_relaxed), now)) {
    atomic_fetch_add_explicit(&sh->no_cpu, 1, memory_order_relaxed);
    return 0;
  }
  *weight = 1;
  return tid;
}

/* A delivery of ours that reports CPU spent while the thread kept SIGPROF
 * blocked: the stack now is not the one that used it. With the block seen
 * by the mask interposers (block_cpu_ns set) it is counted by the CPU
 * clock at the unblock (runtime/ptp_siginterpose.c); this weight is noted
 * so as not to count it twice. Otherwise (a block we did not see) its
 * weight goes under [lost: signal blocked] as it is. */
static void blocked_delivery(ptp_thread_sig *rec, uint32_t tid, uint32_t weight) {
  if (atomic_load_explicit(&rec->block_cpu_ns, memory_order_relaxed) >= 0) {
    atomic_fetch_add_explicit(&rec->blocked_got, weight, memory_order_relaxed);
    return;
  }
  uintptr_t cause = PTP_DROP_BLOCKED;
  (void)ptp_push_sample(tid, weight, PTP_SLOT_FLUSH, &cause, 1);
}

/* Our own work on one of our signals: accounting and the sample. */
static void take(ptp_shared *sh, siginfo_t *si, void *ucv, ptp_thread_sig *rec) {
  uint32_t weight = 1;
  uint32_t tid = signal_tid(sh, si, &weight, rec);
  if (!tid) return;
  if (rec) {
    atomic_fetch_add_explicit(&rec->delivered, weight, memory_order_relaxed);
    /* The interrupted code had SIGPROF blocked (we came in through a
     * sigsuspend-like call that swapped the mask), or the thread is
     * unblocking it right now: this reports CPU of the blocked time. */
    if (ptp_sig_uc_blocked(ucv) || atomic_load_explicit(&rec->unblocking, memory_order_relaxed)) {
      blocked_delivery(rec, tid, weight);
      return;
    }
    /* SIGPROF is blocked while its handler runs (no SA_NODEFER), so this only
     * triggers if someone re-raised it with a different mask. */
    if (atomic_exchange_explicit(&rec->busy, 1, memory_order_acquire)) {
      ptp_drop(sh, PTP_DROP_REENTRANT, weight);
      return;
    }
  }
  /* The thread runs the profiler's own code (a dump, a table build): that
   * CPU is the profiler's, counted, never a sample of the program. */
  if (ptp_own_work_active()) {
    ptp_own_work_hit(weight);
    ptp_drop(sh, PTP_DROP_OWN_WORK, weight);
    goto out_rec;
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
  /* The thread's name now, not when the snapshot is written: a thread that
   * names itself after its work (a pool thread running one kind of job)
   * is named as it was while it used this CPU. A bare system call; on
   * failure the dump falls back to the name it reads then. */
  if (syscall(SYS_prctl, PR_GET_NAME, (unsigned long)slot->name, 0UL, 0UL, 0UL) != 0)
    slot->name[0] = 0;
  slot->name[15] = 0;
  /* A slot with no frame is published empty (it was claimed) and skipped by
   * the consumer; the expirations count as "no stack". */
  if (n == 0) ptp_drop(sh, PTP_DROP_NO_STACK, weight);
  ptp_ring_publish(&sh->ring, slot, pos);
  ptp_wake_maybe(sh, asked);
out_rec:
  if (rec) atomic_store_explicit(&rec->busy, 0, memory_order_release);
}

void ptp_handler(int sig, siginfo_t *si, void *ucv) {
  if (!si) return;
  int saved_errno = errno;
  atomic_fetch_add(&ptp_g_inside, 1);
  ptp_thread_sig *rec;
  int ours = ptp_sig_ours(si, &rec);
  if (ours) take(atomic_load(&ptp_g_shared), si, ucv, rec);
  atomic_fetch_sub(&ptp_g_inside, 1);
  errno = saved_errno;
  /* Not ours: the program's, handed to its own disposition exactly as the
   * kernel would have, after every piece of our state is left (its
   * handler may siglongjmp and never come back). */
  if (!ours) ptp_sig_forward(sig, si, ucv);
}
