/*
 * ptp_sigstate.h - SIGPROF as the program sees it: while our handler is
 * installed, the program's own disposition of SIGPROF is kept here (a
 * "virtual" disposition), never installed; our handler tells its own
 * signals from anyone else's and hands exactly the others to the
 * program's disposition, with the semantics the kernel would have given
 * them (docs/sampler.md, "Signals").
 *
 * Who writes what:
 *  - the virtual disposition: the interposers of sigaction and friends
 *    (runtime/ptp_siginterpose.c), serialized among themselves and with all
 *    signals blocked in the writing thread; one delivery under
 *    SA_RESETHAND resets it (reset_gen, one atomic). Readers (the handler,
 *    sigaction's old value) take a consistent copy without a lock: two
 *    slots, the writer fills the one not current and then increments gen;
 *    a reader retries only if two writes came during its copy;
 *  - installed: runtime/ptp_siginterpose.c, under the same serialization;
 *  - timer_magic: set once per process before the first timer.
 *
 * Telling ours apart (ptp_sig_ours): a POSIX timer of ours carries
 * timer_magic in the high half of its sigev_value (random per process, top
 * bit set: no user pointer or small integer has it) and (start generation
 * << 22 | tid) in the low half; a perf event of ours reports its own
 * descriptor number in si_fd (F_SETSIG), the one published in the
 * thread's record, or the thread's previous one (a signal still pending
 * when its event was closed). Everything else (kill, raise, sigqueue,
 * setitimer's SI_KERNEL, another timer or event) is the program's.
 *
 * SIGNAL-SAFETY: every function here is async-signal-safe (atomics, plain
 * system calls through syscall(2): rt_sigprocmask, rt_sigaction, tgkill).
 */
#ifndef PTP_SIGSTATE_H
#define PTP_SIGSTATE_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "prof/signal/ptp_thread_sig.h"

/* One disposition, as sigaction(2) would report it: the handler (SIG_DFL,
 * SIG_IGN or a function: sa_handler or, with SA_SIGINFO, sa_sigaction),
 * the flags (with SA_RESTORER, as the kernel keeps them when glibc set
 * them), the mask (the kernel's 64 signals) and the restorer. */
typedef struct ptp_vsig_act {
  uintptr_t handler;
  uint64_t flags;
  uint64_t mask;
  uintptr_t restorer;
} ptp_vsig_act;

typedef struct ptp_sigstate {
  _Atomic int installed;         /* our handler is the real one; the
                                    program's disposition is the virtual one */
  _Atomic uint64_t gen;          /* writes so far; slot[gen & 1] is current */
  ptp_vsig_act slot[2];
  _Atomic uint64_t reset_gen;    /* gen + 1 when a delivery under
                                    SA_RESETHAND reset it to SIG_DFL; else 0 */
  _Atomic uint32_t timer_magic;  /* high half of our timers' sigev_value */
} ptp_sigstate;

extern ptp_sigstate ptp_g_sig;

/* Our timers' sigev_value: magic in the high half, gen_low | tid below
 * (gen_low: a start's generation << PTP_TIMER_TID_BITS, see ptp_shared). */
#define PTP_TIMER_TID_BITS 22u    /* tids < PTP_TID_LIMIT = 2^22 */
#define PTP_TIMER_TID_MASK ((1u << PTP_TIMER_TID_BITS) - 1u)

/* The current disposition (SIG_DFL after an SA_RESETHAND delivery).
 * Returns the gen it was read at. */
uint64_t ptp_vsig_get(ptp_vsig_act *out);

/* Stores a (writers are serialized by the caller, with all signals blocked
 * in its thread). */
void ptp_vsig_set(const ptp_vsig_act *a);

/* Whether si is one of our signals (current or stale) rather than the
 * program's. For a perf signal it looks up the calling thread (the one an
 * event of ours signals), so call it on the thread the signal was
 * delivered to or taken by (the handler; sigwaitinfo). Sets *rec to the
 * thread's record when known (may be NULL). */
int ptp_sig_ours(const siginfo_t *si, ptp_thread_sig **rec);

/* Hands a signal that is not ours to the program's disposition as the
 * kernel would have: SIG_IGN drops it; SIG_DFL does SIGPROF's default
 * (the process terminates with it: the real disposition is reset to
 * SIG_DFL and the signal sent again to this thread and unblocked); a
 * handler is called with SA_SIGINFO's arguments or the signal number
 * alone, with its sa_mask (and sig itself, without SA_NODEFER) blocked
 * during the call, and SA_RESETHAND resetting the disposition first. Call
 * it last in our handler, after every piece of our own state is left (the
 * program's handler may not return: siglongjmp). */
void ptp_sig_forward(int sig, siginfo_t *si, void *uc);

/* Whether the interrupted context's signal mask (uc->uc_sigmask) had
 * SIGPROF blocked: the delivery then comes from a call that replaced the
 * mask for a while (sigsuspend, pselect, ppoll, epoll_pwait, sigwait...),
 * and what it reports was due while the program kept SIGPROF blocked. */
int ptp_sig_uc_blocked(const void *uc);

#endif
