/*
 * ptp_sigstate.c - SIGPROF as the program sees it (see ptp_sigstate.h).
 *
 * ASYNC-SIGNAL-SAFE FILE: every function here may run inside the SIGPROF
 * handler and calls only atomics, gettid(2), getpid(2) and syscall(2) for
 * rt_sigprocmask, rt_sigaction and tgkill (plain system calls: no lock, no
 * allocation), and the program's own handler (last, see ptp_sig_forward).
 * No malloc, no locks, no stdio.
 */
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "prof/signal/ptp_sigstate.h"
#include "prof/signal/ptp_perffd.h"

ptp_sigstate ptp_g_sig;

/* The kernel's sigaction and sigset (64 signals on x86-64). */
typedef struct ksigaction {
  uintptr_t handler;
  unsigned long flags;
  uintptr_t restorer;
  uint64_t mask;
} ksigaction;

static uint64_t sigbit(int sig) { return 1ull << (unsigned)(sig - 1); }

uint64_t ptp_vsig_get(ptp_vsig_act *out) {
  for (;;) {
    uint64_t g = atomic_load_explicit(&ptp_g_sig.gen, memory_order_acquire);
    *out = ptp_g_sig.slot[g & 1];
    atomic_thread_fence(memory_order_acquire);
    /* the slot read is rewritten only by the second write after g */
    if (atomic_load_explicit(&ptp_g_sig.gen, memory_order_relaxed) - g < 2) {
      if (atomic_load_explicit(&ptp_g_sig.reset_gen, memory_order_relaxed) == g + 1)
        *out = (ptp_vsig_act){ .handler = (uintptr_t)SIG_DFL, .flags = out->flags & ~(uint64_t)SA_RESETHAND,
                               .mask = out->mask, .restorer = out->restorer };
      return g;
    }
  }
}

void ptp_vsig_set(const ptp_vsig_act *a) {
  uint64_t g = atomic_load_explicit(&ptp_g_sig.gen, memory_order_relaxed);
  ptp_g_sig.slot[(g + 1) & 1] = *a;
  atomic_store_explicit(&ptp_g_sig.gen, g + 1, memory_order_release);
}

int ptp_sig_ours(const siginfo_t *si, ptp_thread_sig **rec) {
  *rec = NULL;
  if (si->si_code == SI_TIMER) {
    uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    uint32_t magic = atomic_load_explicit(&ptp_g_sig.timer_magic, memory_order_relaxed);
    if (magic == 0 || (uint32_t)(v >> 32) != magic) return 0;
    *rec = ptp_thread_sig_lookup((uint32_t)v & PTP_TIMER_TID_MASK);
    return 1;
  }
  if (si->si_code < POLL_IN || si->si_code > POLL_HUP || si->si_fd < 0) return 0;
  ptp_thread_sig *r = ptp_thread_sig_lookup((uint32_t)gettid());
  *rec = r;
  if (r && (si->si_fd == atomic_load_explicit(&r->perf_fd, memory_order_acquire) ||
            si->si_fd == atomic_load_explicit(&r->perf_fd_prev, memory_order_relaxed)))
    return 1;
  /* An event of ours that the thread's record no longer names (closed on
   * the thread's exit, re-opened, closed by the program) may still have a
   * signal pending: ours, ignored by the caller (signal_tid finds no
   * published event with that number). */
  return ptp_perffd_ours(si->si_fd);
}

int ptp_sig_uc_blocked(const void *ucv) {
  const ucontext_t *uc = ucv;
  /* glibc's sigset_t: the kernel's mask in its first word */
  return uc && (uc->uc_sigmask.__val[0] & sigbit(SIGPROF)) != 0;
}

/* SIGPROF's default action, as the kernel would take it: terminate the
 * process. The real disposition goes back to SIG_DFL, the signal is sent
 * to this thread again and unblocked: the kernel kills the process with
 * it (exit status "killed by SIGPROF", as without us). */
static void default_action(int sig) {
  ksigaction k = { (uintptr_t)SIG_DFL, 0, 0, 0 };
  (void)syscall(SYS_rt_sigaction, sig, &k, NULL, sizeof(uint64_t));
  (void)syscall(SYS_tgkill, getpid(), gettid(), sig);
  uint64_t m = sigbit(sig);
  (void)syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &m, NULL, sizeof m);
}

void ptp_sig_forward(int sig, siginfo_t *si, void *uc) {
  ptp_vsig_act a;
  uint64_t g = ptp_vsig_get(&a);
  if (a.handler == (uintptr_t)SIG_IGN) return;
  if (a.handler == (uintptr_t)SIG_DFL) {
    default_action(sig);
    return;
  }
  /* SA_RESETHAND: the disposition is SIG_DFL from this delivery on. One
   * atomic store: it applies to the disposition of gen g only (readers
   * compare it with their gen + 1), so a write by the program meanwhile
   * (a later gen) wins. */
  if (a.flags & SA_RESETHAND) atomic_store(&ptp_g_sig.reset_gen, g + 1);
  /* The mask the kernel would have set for the program's handler: the
   * interrupted one (ours adds SIGPROF: no SA_NODEFER) plus its sa_mask,
   * and SIGPROF itself unless SA_NODEFER. The kernel restores the
   * interrupted mask when our handler returns (uc_sigmask). */
  uint64_t add = a.mask & ~sigbit(SIGKILL) & ~sigbit(SIGSTOP);
  if (add) (void)syscall(SYS_rt_sigprocmask, SIG_BLOCK, &add, NULL, sizeof add);
  if (a.flags & SA_NODEFER) {
    uint64_t m = sigbit(sig);
    (void)syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &m, NULL, sizeof m);
  }
  if (a.flags & SA_SIGINFO)
    ((void (*)(int, siginfo_t *, void *))a.handler)(sig, si, uc);
  else
    ((void (*)(int))a.handler)(sig);
}
