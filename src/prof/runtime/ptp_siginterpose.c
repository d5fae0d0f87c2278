/*
 * ptp_siginterpose.c - the program's signals are the program's (see
 * ptp_siginterpose.h for the model; docs/sampler.md, "Signals").
 *
 * DESIGN
 *  - Binding: the functions below are exported with default visibility
 *    (PTPROF_API), so they precede libc's in symbol lookup as pthread_create
 *    and exec do (ptp_interpose.c); libc's are looked up with
 *    dlsym(RTLD_NEXT) once, in this file's constructor. Calls inside libc
 *    (its own internal __sigaction, __sigprocmask) are not seen: every one
 *    of libc's entry points that sets SIGPROF's disposition or mask through
 *    them is interposed here too (signal, sigset, sigignore, siginterrupt,
 *    sighold, sigrelse, sigblock, sigsetmask), so each behaves as libc's
 *    would for the virtual disposition. Only SIGPROF is ever treated
 *    differently; every other signal goes straight to libc.
 *  - The virtual disposition (signal/ptp_sigstate.h) is written under
 *    sigi.lock, a spin lock taken with every signal blocked in the calling
 *    thread (so a handler on that thread cannot interrupt the holder and
 *    spin forever), held for a few stores. sigaction is async-signal-safe
 *    and so is this.
 *  - Blocked SIGPROF: the mask calls note, in the calling thread's record
 *    (signal/ptp_thread_sig.h), the thread's CPU clock when SIGPROF becomes
 *    blocked; when it is unblocked, a delivery pending since the block
 *    arrives inside the unblocking call (the record says "unblocking"), and
 *    the handler records nothing for it; then the expirations the thread's
 *    CPU made due while blocked (by the engine's schedule) are recorded
 *    under "[lost: signal blocked]" with the thread's id. A block we did
 *    not see (a raw system call, a mask inherited from a thread we do not
 *    know) is still caught by the handler: a delivery whose interrupted
 *    mask had SIGPROF blocked, or inside an unblocking call, never lands on
 *    a stack.
 *  - Stopping for good: a signalfd reading SIGPROF would read our signals
 *    (the program blocks SIGPROF for it, so our handler never sees them),
 *    and a handler replaced behind the interposers (the consumer checks at
 *    every pass) would get them: sampling stops (every thread's source
 *    disarmed), the reason is kept for the snapshot's comment, and no later
 *    start in this process samples.
 *
 * Process-wide state (runtime/ptp_process.h): `sigi`, below; the TLS
 * pointer to the calling thread's record is ptp_threads.c's. Fork: the
 * writers' lock is taken around it (pthread_atfork, registered at the
 * first install).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ptprof.h"
#include "prof/runtime/ptp_shim.h"
#include "prof/runtime/ptp_siginterpose.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/signal/ptp_expiry.h"
#include "prof/signal/ptp_handler.h"
#include "prof/signal/ptp_producer.h"
#include "prof/signal/ptp_sigstate.h"
#include "prof/signal/ptp_clock.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);
typedef int (*sigwaitinfo_fn)(const sigset_t *, siginfo_t *);
typedef int (*sigtimedwait_fn)(const sigset_t *, siginfo_t *, const struct timespec *);
typedef int (*signalfd_fn)(int, const sigset_t *, int);
typedef int (*siginterrupt_fn)(int, int);

static struct {
  atomic_flag lock;                   /* writers of the disposition */
  _Atomic(void *) sigaction, sigprocmask, pthread_sigmask, sigwaitinfo, sigtimedwait, signalfd,
      siginterrupt;
  uintptr_t restorer;                 /* libc's, as the kernel reports it */
  int intr;                           /* siginterrupt(SIGPROF, 1): signal() without SA_RESTART */
  uint64_t real_onstack;              /* SA_ONSTACK of our real installation */
  _Atomic int stopped;                /* PTP_SIG_STOP_*: sampling stopped for good */
  _Atomic int64_t stopped_at;
  _Atomic(void *) signal, sysv, sigset, sigignore;   /* more of libc's (dlsym) */
  pthread_once_t atfork_once;
  _Atomic int pid;                    /* the process the disposition is virtual in */
  sigset_t fork_saved;                /* the forking thread's mask while it holds the lock */
} sigi = { .lock = ATOMIC_FLAG_INIT, .atfork_once = PTHREAD_ONCE_INIT };

static void *real_fn(_Atomic(void *) *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (!f && (f = dlsym(RTLD_NEXT, name))) atomic_store_explicit(slot, f, memory_order_release);
  return f;
}

__attribute__((constructor)) static void resolve_sig(void) {
  (void)real_fn(&sigi.sigaction, "sigaction");
  (void)real_fn(&sigi.sigprocmask, "sigprocmask");
  (void)real_fn(&sigi.pthread_sigmask, "pthread_sigmask");
  (void)real_fn(&sigi.sigwaitinfo, "sigwaitinfo");
  (void)real_fn(&sigi.sigtimedwait, "sigtimedwait");
  (void)real_fn(&sigi.signalfd, "signalfd");
  (void)real_fn(&sigi.siginterrupt, "siginterrupt");
  /* all of them now: a vfork child must not run dlsym (the loader's lock,
   * the parent's memory) */
  (void)real_fn(&sigi.signal, "signal");
  (void)real_fn(&sigi.sysv, "sysv_signal");
  (void)real_fn(&sigi.sigset, "sigset");
  (void)real_fn(&sigi.sigignore, "sigignore");
}

void ptp_siginterpose_link(void) {}

PTP_SHIM int ptp_real_sigaction(int sig, const void *act, void *oact) {
  sigaction_fn f = (sigaction_fn)real_fn(&sigi.sigaction, "sigaction");
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  return f(sig, act, oact);
}

/* The mask change itself, without any of our accounting: the raw system
 * call (libc's pthread_sigmask only adds its internal signals' filter). */
static int raw_sigmask(int how, const sigset_t *set, sigset_t *old) {
  return (int)syscall(SYS_rt_sigprocmask, how, set, old, sizeof(uint64_t));
}

/* ---- the writers' lock ---------------------------------------------- */

static void lock(sigset_t *saved) {
  sigset_t all;
  sigfillset(&all);
  (void)raw_sigmask(SIG_SETMASK, &all, saved);
  while (atomic_flag_test_and_set_explicit(&sigi.lock, memory_order_acquire)) {
  }
}

static void unlock(const sigset_t *saved) {
  atomic_flag_clear_explicit(&sigi.lock, memory_order_release);
  (void)raw_sigmask(SIG_SETMASK, saved, NULL);
}

/* ---- installation ------------------------------------------------------- */

static uint64_t first_word(const sigset_t *s) {
  uint64_t w;
  memcpy(&w, s, sizeof w);
  return w;
}

static ptp_vsig_act vact_of(const struct sigaction *a) {
  return (ptp_vsig_act){ .handler = (uintptr_t)a->sa_handler, .flags = (uint64_t)(unsigned)a->sa_flags,
                         .mask = first_word(&a->sa_mask), .restorer = (uintptr_t)a->sa_restorer };
}

/* Our handler, with the program's SA_ONSTACK (its handler runs on ours'
 * stack). Lock held. */
static int install_real(uint64_t onstack) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = ptp_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | (int)onstack;
  sigemptyset(&sa.sa_mask);
  if (ptp_real_sigaction(SIGPROF, &sa, NULL) != 0) return -errno;
  sigi.real_onstack = onstack;
  return 0;
}

/* Fork: the writers' lock must not be inherited held (the child's next
 * sigaction(SIGPROF) would spin forever): taken before fork (with every
 * signal blocked in the forking thread), released in both processes. */
static void atfork_prepare(void) { lock(&sigi.fork_saved); }
static void atfork_release(void) { unlock(&sigi.fork_saved); }
static void atfork_child(void) {
  atomic_store(&sigi.pid, (int)getpid());     /* a fork child keeps the virtual disposition */
  unlock(&sigi.fork_saved);
}
static void atfork_register(void) { (void)pthread_atfork(atfork_prepare, atfork_release, atfork_child); }

int ptp_sig_install(void) {
  pthread_once(&sigi.atfork_once, atfork_register);
  sigset_t saved;
  lock(&saved);
  int rc = 0;
  if (atomic_load(&sigi.stopped)) {
    rc = -EBUSY;
  } else if (!atomic_load(&ptp_g_sig.installed)) {
    struct sigaction old, mine;
    if (ptp_real_sigaction(SIGPROF, NULL, &old) != 0) {
      rc = -errno;
    } else {
      /* What was there (SIG_DFL, or the program's handler installed before
       * the first start) becomes the program's virtual disposition. */
      ptp_vsig_act v = vact_of(&old);
      ptp_vsig_set(&v);
      atomic_store(&ptp_g_sig.reset_gen, 0);
      rc = install_real((uint64_t)(old.sa_flags & SA_ONSTACK));
      /* libc's restorer, as the kernel now reports it for ours: what a
       * program's sigaction would have installed too */
      if (rc == 0 && ptp_real_sigaction(SIGPROF, NULL, &mine) == 0)
        sigi.restorer = (uintptr_t)mine.sa_restorer;
      if (rc == 0) {
        atomic_store(&sigi.pid, (int)getpid());
        atomic_store(&ptp_g_sig.installed, 1);
      }
    }
  }
  unlock(&saved);
  return rc;
}

int ptp_sig_is_installed(void) { return atomic_load(&ptp_g_sig.installed); }

const char *ptp_sig_stop_text(int reason) {
  switch (reason) {
  case PTP_SIG_STOP_REPLACED:
    return "SIGPROF's handler was replaced without sigaction (a raw rt_sigaction system call?): "
           "the program's handler would get the sampler's signals";
  case PTP_SIG_STOP_SIGNALFD:
    return "the program reads SIGPROF through a signalfd, which would read the sampler's signals";
  default:
    return "";
  }
}

int ptp_sig_stop_reason(int64_t *when_ns) {
  if (when_ns) *when_ns = atomic_load(&sigi.stopped_at);
  return atomic_load(&sigi.stopped);
}

/* Sampling stops for good: every source disarmed (the engine then arms no
 * new thread), the reason kept. */
static void stop_for_good(int reason) {
  int none = 0;
  if (!atomic_compare_exchange_strong(&sigi.stopped, &none, reason)) return;
  atomic_store(&sigi.stopped_at, ptp_now_real());
  ptp_threads_deactivate();
}

int ptp_sig_check_replaced(void) {
  if (!atomic_load(&ptp_g_sig.installed)) return 0;
  struct sigaction cur;
  if (ptp_real_sigaction(SIGPROF, NULL, &cur) != 0) return 0;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == ptp_handler) return 0;
  /* The real disposition is the program's now: stop pretending. */
  sigset_t saved;
  lock(&saved);
  atomic_store(&ptp_g_sig.installed, 0);
  unlock(&saved);
  stop_for_good(PTP_SIG_STOP_REPLACED);
  return 1;
}

int ptp_sig_exec_prepare(void) {
  if (!atomic_load(&ptp_g_sig.installed)) return 0;
  ptp_vsig_act v;
  (void)ptp_vsig_get(&v);
  if (v.handler != (uintptr_t)SIG_IGN) return 0;   /* a handler resets to SIG_DFL at exec */
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  return ptp_real_sigaction(SIGPROF, &ign, NULL) == 0;
}

void ptp_sig_exec_failed(int prepared) {
  if (!prepared) return;
  sigset_t saved;
  lock(&saved);
  (void)install_real(sigi.real_onstack);
  unlock(&saved);
}

/* ---- the disposition --------------------------------------------------- */

/* The flags the kernel keeps (it drops unknown ones since Linux 5.11;
 * SA_UNSUPPORTED probing relies on it), with libc's SA_RESTORER. */
#define KNOWN_FLAGS                                                                          \
  (SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER |          \
   SA_RESETHAND | 0x04000000 /* SA_RESTORER */ | 0x00000800 /* SA_EXPOSE_TAGBITS */)

/* sigaction for SIGPROF while virtual: the old value is the program's
 * disposition, the new one replaces it; ours stays installed. */
static PTP_SHIM int virtual_sigaction(const struct sigaction *act, struct sigaction *oact) {
  sigset_t saved;
  lock(&saved);
  ptp_vsig_act cur;
  (void)ptp_vsig_get(&cur);
  int rc = 0;
  if (act) {
    ptp_vsig_act v = vact_of(act);
    v.flags = (v.flags | 0x04000000u) & (uint64_t)(unsigned)KNOWN_FLAGS;
    v.restorer = sigi.restorer;
    v.mask &= ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
    ptp_vsig_set(&v);
    if ((v.flags & SA_ONSTACK) != sigi.real_onstack) rc = install_real(v.flags & SA_ONSTACK);
  }
  unlock(&saved);
  if (oact) {
    memset(oact, 0, sizeof *oact);
    oact->sa_handler = (void (*)(int))cur.handler;
    oact->sa_flags = (int)cur.flags;
    memcpy(&oact->sa_mask, &cur.mask, sizeof cur.mask);
    oact->sa_restorer = (void (*)(void))cur.restorer;
  }
  if (rc) {
    errno = -rc;
    return -1;
  }
  return 0;
}

/* libc exports these without declaring them in a header (or only under
 * feature macros): declared here for the definitions below. */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *oact);
sighandler_t bsd_signal(int sig, sighandler_t h);
sighandler_t __sysv_signal(int sig, sighandler_t h);

/* A vfork child (or a raw clone sharing our memory) has a signal table of
 * its own but our memory: what it sets is its own business, for the
 * kernel, never the parent's virtual disposition. */
static int virtual_now(int sig) {
  return sig == SIGPROF && atomic_load(&ptp_g_sig.installed) && atomic_load(&sigi.pid) == (int)getpid();
}

PTPROF_API PTP_SHIM int sigaction(int sig, const struct sigaction *act, struct sigaction *oact) {
  if (virtual_now(sig)) return virtual_sigaction(act, oact);
  return ptp_real_sigaction(sig, act, oact);
}

PTPROF_API PTP_SHIM int __sigaction(int sig, const struct sigaction *act, struct sigaction *oact) {
  return sigaction(sig, act, oact);
}

/* The signal()-family's install through sigaction (ours, when the signal
 * is virtual): h with flags, the signal itself blocked in its handler if
 * block_self. Returns the previous handler, or SIG_ERR (errno set). */
static PTP_SHIM sighandler_t install_simple(int sig, sighandler_t h, int flags, int block_self) {
  if (h == SIG_ERR || sig < 1 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction act, oact;
  memset(&act, 0, sizeof act);
  act.sa_handler = h;
  sigemptyset(&act.sa_mask);
  if (block_self) sigaddset(&act.sa_mask, sig);
  act.sa_flags = flags;
  if (sigaction(sig, &act, &oact) < 0) return SIG_ERR;
  return oact.sa_handler;
}

/* signal(), bsd_signal(), ssignal(): BSD semantics, as libc's: the signal
 * itself blocked in its handler, SA_RESTART unless siginterrupt said
 * otherwise. */
static PTP_SHIM sighandler_t bsd_signal_impl(int sig, sighandler_t h) {
  return install_simple(sig, h, sig == SIGPROF && sigi.intr ? 0 : SA_RESTART, 1);
}

typedef sighandler_t (*signal_fn)(int, sighandler_t);

PTPROF_API PTP_SHIM sighandler_t signal(int sig, sighandler_t h) {
  if (!virtual_now(sig)) {
    signal_fn f = (signal_fn)real_fn(&sigi.signal, "signal");
    if (f) return f(sig, h);
  }
  return bsd_signal_impl(sig, h);
}
PTPROF_API PTP_SHIM sighandler_t bsd_signal(int sig, sighandler_t h) { return signal(sig, h); }
PTPROF_API PTP_SHIM sighandler_t ssignal(int sig, sighandler_t h) { return signal(sig, h); }

/* sysv_signal(): reset to SIG_DFL at delivery, not blocked in its handler,
 * calls interrupted (libc's flags). */
PTPROF_API PTP_SHIM sighandler_t sysv_signal(int sig, sighandler_t h) {
  if (!virtual_now(sig)) {
    signal_fn f = (signal_fn)real_fn(&sigi.sysv, "sysv_signal");
    if (f) return f(sig, h);
  }
  return install_simple(sig, h, SA_RESETHAND | SA_NODEFER, 0);
}
PTPROF_API PTP_SHIM sighandler_t __sysv_signal(int sig, sighandler_t h) { return sysv_signal(sig, h); }

PTPROF_API PTP_SHIM int siginterrupt(int sig, int interrupt) {
  if (!virtual_now(sig)) {
    siginterrupt_fn f = (siginterrupt_fn)real_fn(&sigi.siginterrupt, "siginterrupt");
    if (f) return f(sig, interrupt);
    errno = ENOSYS;
    return -1;
  }
  struct sigaction act;
  if (sigaction(sig, NULL, &act) < 0) return -1;
  sigi.intr = interrupt != 0;
  if (interrupt) act.sa_flags &= ~SA_RESTART;
  else act.sa_flags |= SA_RESTART;
  return sigaction(sig, &act, NULL) < 0 ? -1 : 0;
}

PTPROF_API PTP_SHIM int sigignore(int sig) {
  if (!virtual_now(sig)) {
    int (*f)(int) = (int (*)(int))real_fn(&sigi.sigignore, "sigignore");
    if (f) return f(sig);
  }
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = SIG_IGN;
  sigemptyset(&act.sa_mask);
  return sigaction(sig, &act, NULL);
}

PTPROF_API PTP_SHIM sighandler_t sigset(int sig, sighandler_t disp) {
  if (!virtual_now(sig)) {
    signal_fn f = (signal_fn)real_fn(&sigi.sigset, "sigset");
    if (f) return f(sig, disp);
  }
  sigset_t set, oset;
  sigemptyset(&set);
  sigaddset(&set, sig);
  struct sigaction act, oact;
  if (disp == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &set, &oset) < 0) return SIG_ERR;
    if (sigismember(&oset, sig)) return SIG_HOLD;
    if (sigaction(sig, NULL, &oact) < 0) return SIG_ERR;
    return oact.sa_handler;
  }
  memset(&act, 0, sizeof act);
  act.sa_handler = disp;
  sigemptyset(&act.sa_mask);
  if (sigaction(sig, &act, &oact) < 0) return SIG_ERR;
  if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0) return SIG_ERR;
  return sigismember(&oset, sig) ? SIG_HOLD : oact.sa_handler;
}

/* ---- the mask: blocked time ------------------------------------------- */

static int64_t thread_cpu_ns(void) {
  return ptp_clock_ns(CLOCK_THREAD_CPUTIME_ID, -1);
}

static ptp_thread_sig *self_rec(void) {
  ptp_thread_sig *r = ptp_threads_self_sig();
  return r ? r : ptp_thread_sig_lookup((uint32_t)gettid());
}

/* SIGPROF becomes blocked in the calling thread: its block starts now
 * (unless one is running already). */
static void note_block(ptp_thread_sig *r) {
  int64_t none = -1;
  atomic_compare_exchange_strong(&r->block_cpu_ns, &none, thread_cpu_ns());
}

/* After SIGPROF was unblocked: the expirations the thread's CPU made due
 * since the block began go under [lost: signal blocked], by the schedule
 * of its source (armed_cpu_ns, first_ns, the period); what the handler
 * took meanwhile (blocked_got: it recorded nothing) is part of them.
 * Async-signal-safe (atomics, the clock, the ring's producer). */
static void account_unblock(ptp_thread_sig *r) {
  int64_t b = atomic_exchange(&r->block_cpu_ns, -1);
  uint64_t got = atomic_exchange(&r->blocked_got, 0);
  if (b < 0) return;
  atomic_fetch_add(&ptp_g_inside, 1);
  ptp_shared *sh = atomic_load(&ptp_g_shared);
  int64_t now = thread_cpu_ns();
  uint32_t tid = atomic_load_explicit(&r->tid, memory_order_relaxed);
  if (sh) {
    uint64_t n = ptp_expirations_between(r->armed_cpu_ns, r->first_ns, sh->period_ns, b, now);
    if (n > got) atomic_fetch_add(&r->delivered, n - got);   /* owed no more */
    if (n) {
      uintptr_t cause = PTP_DROP_BLOCKED;
      (void)ptp_push_sample(tid, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, PTP_SLOT_FLUSH, &cause, 1);
    }
  }
  atomic_fetch_sub(&ptp_g_inside, 1);
}

/* The mask change of pthread_sigmask/sigprocmask (real: libc's), with the
 * blocked-time notes around it when SIGPROF's state may change. */
static PTP_SHIM int mask_call(sigmask_fn real, int how, const sigset_t *set, sigset_t *old) {
  if (!set || !atomic_load_explicit(&ptp_g_sig.installed, memory_order_relaxed))
    return real(how, set, old);
  int has = sigismember(set, SIGPROF) == 1;
  int blocks = (how == SIG_BLOCK || how == SIG_SETMASK) && has;
  int unblocks = (how == SIG_UNBLOCK && has) || (how == SIG_SETMASK && !has);
  ptp_thread_sig *r = blocks || unblocks ? self_rec() : NULL;
  if (!r) return real(how, set, old);
  if (blocks) {
    note_block(r);
    return real(how, set, old);
  }
  /* A SIGPROF pending since the block is delivered inside this call: the
   * handler sees "unblocking" and records nothing for it. */
  atomic_store(&r->unblocking, 1);
  int rc = real(how, set, old);
  int e = errno;
  atomic_store(&r->unblocking, 0);
  account_unblock(r);
  errno = e;
  return rc;
}

PTPROF_API PTP_SHIM int pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  sigmask_fn f = (sigmask_fn)real_fn(&sigi.pthread_sigmask, "pthread_sigmask");
  if (!f) return ENOSYS;
  return mask_call(f, how, set, old);
}

PTPROF_API PTP_SHIM int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  sigmask_fn f = (sigmask_fn)real_fn(&sigi.sigprocmask, "sigprocmask");
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  return mask_call(f, how, set, old);
}

static PTP_SHIM int sig_one(int how, int sig) {
  sigset_t s;
  sigemptyset(&s);
  if (sigaddset(&s, sig) < 0) return -1;
  return sigprocmask(how, &s, NULL);
}

PTPROF_API PTP_SHIM int sighold(int sig) { return sig_one(SIG_BLOCK, sig); }
PTPROF_API PTP_SHIM int sigrelse(int sig) { return sig_one(SIG_UNBLOCK, sig); }

/* The BSD int masks (signals 1..32). */
static PTP_SHIM int int_mask_call(int how, int mask) {
  sigset_t s, old;
  sigemptyset(&s);
  for (int i = 1; i <= 32; i++)
    if (mask & (int)(1u << (i - 1))) sigaddset(&s, i);
  if (sigprocmask(how, &s, &old) < 0) return -1;
  return (int)(uint32_t)first_word(&old);
}
PTPROF_API PTP_SHIM int sigblock(int mask) { return int_mask_call(SIG_BLOCK, mask); }
PTPROF_API PTP_SHIM int sigsetmask(int mask) { return int_mask_call(SIG_SETMASK, mask); }

/* ---- synchronous waits ------------------------------------------------- */

/* A signal of ours taken by a sigwait-like call (SIGPROF was blocked):
 * counted as delivered, its CPU under [lost: signal blocked], never handed
 * to the program. */
static void took_ours(const siginfo_t *si, ptp_thread_sig *r) {
  if (!r) return;
  uint32_t w = si->si_code == SI_TIMER ? 1u + (si->si_overrun > 0 ? (uint32_t)si->si_overrun : 0u) : 1u;
  atomic_fetch_add(&r->delivered, w);
  if (atomic_load(&r->block_cpu_ns) >= 0) {
    atomic_fetch_add(&r->blocked_got, w);
    return;
  }
  uintptr_t cause = PTP_DROP_BLOCKED;
  (void)ptp_push_sample(atomic_load_explicit(&r->tid, memory_order_relaxed), w, PTP_SLOT_FLUSH,
                        &cause, 1);
}

static int64_t mono_ns(void) { return ptp_clock_ns(CLOCK_MONOTONIC, 0); }

/* sigtimedwait (timeout NULL: sigwaitinfo) that never returns one of our
 * signals: it takes them, accounts them and waits on (the rest of the
 * timeout). */
static PTP_SHIM int wait_filtered(const sigset_t *set, siginfo_t *info, const struct timespec *timeout) {
  sigtimedwait_fn f = (sigtimedwait_fn)real_fn(&sigi.sigtimedwait, "sigtimedwait");
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  if (!atomic_load(&ptp_g_sig.installed) || sigismember(set, SIGPROF) != 1) return f(set, info, timeout);
  int64_t end = timeout ? mono_ns() + (int64_t)timeout->tv_sec * 1000000000 + timeout->tv_nsec : 0;
  for (;;) {
    siginfo_t si;
    struct timespec left, *lp = NULL;
    if (timeout) {
      int64_t d = end - mono_ns();
      if (d < 0) d = 0;
      left = (struct timespec){ (time_t)(d / 1000000000), (long)(d % 1000000000) };
      lp = &left;
    }
    int r = f(set, &si, lp);
    ptp_thread_sig *rec;
    if (r == SIGPROF && ptp_sig_ours(&si, &rec)) {
      took_ours(&si, rec);
      continue;
    }
    if (r > 0 && info) *info = si;
    return r;
  }
}

PTPROF_API PTP_SHIM int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *timeout) {
  return wait_filtered(set, info, timeout);
}

PTPROF_API PTP_SHIM int sigwaitinfo(const sigset_t *set, siginfo_t *info) {
  return wait_filtered(set, info, NULL);
}

PTPROF_API PTP_SHIM int sigwait(const sigset_t *set, int *sig) {
  for (;;) {
    int r = wait_filtered(set, NULL, NULL);
    if (r > 0) {
      *sig = r;
      return 0;
    }
    if (errno != EINTR) return errno;   /* sigwait does not fail with EINTR */
  }
}

PTPROF_API PTP_SHIM int signalfd(int fd, const sigset_t *mask, int flags) {
  signalfd_fn f = (signalfd_fn)real_fn(&sigi.signalfd, "signalfd");
  if (!f) {
    errno = ENOSYS;
    return -1;
  }
  /* It would read our signals as the program's: sampling stops first, and
   * what this thread has pending of ours is taken (a signal of the
   * program's found there is put back, as it was). */
  const sigset_t *volatile m = mask;   /* declared nonnull by libc; a NULL is EFAULT there */
  if (m && sigismember(m, SIGPROF) == 1 && atomic_load(&ptp_g_sig.installed)) {
    stop_for_good(PTP_SIG_STOP_SIGNALFD);
    sigtimedwait_fn w = (sigtimedwait_fn)real_fn(&sigi.sigtimedwait, "sigtimedwait");
    sigset_t prof;
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    const struct timespec zero = { 0, 0 };
    siginfo_t si;
    int e = errno;
    while (w && w(&prof, &si, &zero) == SIGPROF) {
      ptp_thread_sig *rec;
      if (ptp_sig_ours(&si, &rec)) {
        took_ours(&si, rec);
        continue;
      }
      (void)syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGPROF, &si);
      break;
    }
    errno = e;
  }
  return f(fd, mask, flags);
}
