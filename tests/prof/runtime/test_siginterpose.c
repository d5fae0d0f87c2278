/*
 * test_siginterpose.c - the program's SIGPROF is the program's
 * (src/prof/runtime/ptp_siginterpose.c, src/prof/signal/ptp_sigstate.c),
 * in this test binary, which links the library statically (its
 * interposers bind like the preload's):
 *   - sigaction round trip: what the program sets is what sigaction
 *     reports (flags as the kernel keeps them, SA_RESTORER included, its
 *     mask), while the real disposition stays our handler;
 *   - a program's handler gets its signals with its semantics: sa_mask
 *     blocked and SIGPROF not blocked (SA_NODEFER) during the call;
 *     SA_RESETHAND resets the disposition, and the next signal then takes
 *     SIGPROF's default action (the process is killed by SIGPROF, as
 *     without us);
 *   - the BSD/SysV family (signal, sysv_signal, sigset, sigignore,
 *     siginterrupt) behaves as libc's on the virtual disposition;
 *   - a handler installed before the first start is adopted: it keeps
 *     getting the program's signals;
 *   - a handler replaced by a raw rt_sigaction system call: sampling stops
 *     for good (every timer deleted), sigaction tells the truth again and
 *     the snapshot says why; a signalfd that reads SIGPROF stops sampling
 *     the same way.
 */
#include "pt_test.h"
#include "ptprof.h"
#include "prof/runtime/ptp_siginterpose.h"
#include "prof/runtime/ptprof_internal.h"
#include "prof/signal/ptp_handler.h"
#include "sampler_fixture.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The kernel's own record of SIGPROF's disposition (no libc in between). */
typedef struct ksa { uintptr_t handler; unsigned long flags; uintptr_t restorer; uint64_t mask; } ksa;
static uintptr_t real_handler(void) {
  ksa k;
  PT_ASSERT_INT_EQ(syscall(SYS_rt_sigaction, SIGPROF, NULL, &k, 8), 0);
  return k.handler;
}

static _Atomic int g_calls;
static _Atomic int g_usr1_blocked, g_prof_blocked;
static void h_mask(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)si, (void)uc;
  sigset_t m;
  pthread_sigmask(SIG_BLOCK, NULL, &m);
  atomic_store(&g_usr1_blocked, sigismember(&m, SIGUSR1));
  atomic_store(&g_prof_blocked, sigismember(&m, SIGPROF));
  atomic_fetch_add(&g_calls, 1);
}
static void h_plain(int sig) {
  (void)sig;
  atomic_fetch_add(&g_calls, 1);
}

static ptprof *start(const char *dir) { return ptt_start_sampler_engine(dir, 1, NULL, PTPROF_ENGINE_TIMER); }

PT_TEST_T(prof_sig_virtual_roundtrip, 30000) {
  char *dir = pt_tmpdir("sig-roundtrip");
  ptprof *p = start(dir);
  struct sigaction sa, old;
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_handler == SIG_DFL);                 /* what was there before the start */
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = h_mask;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | 0x400 /* SA_UNSUPPORTED: the kernel drops it */;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR1);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, &sa, &old), 0);
  PT_ASSERT(old.sa_handler == SIG_DFL);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_sigaction == h_mask);
  PT_ASSERT(old.sa_flags & SA_SIGINFO);
  PT_ASSERT(old.sa_flags & SA_NODEFER);
  PT_ASSERT(old.sa_flags & 0x04000000);                  /* SA_RESTORER, as the kernel reports it */
  PT_ASSERT(!(old.sa_flags & 0x400));
  PT_ASSERT(old.sa_restorer != NULL);
  PT_ASSERT(sigismember(&old.sa_mask, SIGUSR1));
  PT_ASSERT(!sigismember(&old.sa_mask, SIGUSR2));
  PT_ASSERT(real_handler() == (uintptr_t)ptp_handler);  /* ours stays installed */
  /* Its semantics at delivery: sa_mask blocked, SIGPROF not (SA_NODEFER). */
  raise(SIGPROF);
  PT_ASSERT_INT_EQ(atomic_load(&g_calls), 1);
  PT_ASSERT_INT_EQ(atomic_load(&g_usr1_blocked), 1);
  PT_ASSERT_INT_EQ(atomic_load(&g_prof_blocked), 0);
  /* Without SA_NODEFER SIGPROF is blocked during the handler. */
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, &sa, NULL), 0);
  raise(SIGPROF);
  PT_ASSERT_INT_EQ(atomic_load(&g_calls), 2);
  PT_ASSERT_INT_EQ(atomic_load(&g_usr1_blocked), 0);
  PT_ASSERT_INT_EQ(atomic_load(&g_prof_blocked), 1);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST_T(prof_sig_resethand_then_default, 30000) {
  char *dir = pt_tmpdir("sig-resethand");
  ptprof *p = start(dir);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = h_plain;
  sa.sa_flags = SA_RESETHAND;
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, &sa, NULL), 0);
  raise(SIGPROF);
  PT_ASSERT_INT_EQ(atomic_load(&g_calls), 1);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_handler == SIG_DFL);                 /* reset by the delivery */
  /* The next one takes SIGPROF's default action: the process dies of it. */
  pid_t kid = fork();
  PT_ASSERT(kid >= 0);
  if (kid == 0) {
    raise(SIGPROF);
    _exit(0);
  }
  int st = 0;
  PT_ASSERT_INT_EQ(waitpid(kid, &st, 0), kid);
  PT_ASSERT_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGPROF, "child status %#x", st);
  /* SIG_IGN: ignored, nobody dies. */
  sa.sa_handler = SIG_IGN;
  sa.sa_flags = 0;
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, &sa, NULL), 0);
  raise(SIGPROF);
  PT_ASSERT_INT_EQ(atomic_load(&g_calls), 1);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

sighandler_t sysv_signal(int sig, sighandler_t h);

/* Old interfaces programs still call (deprecated in glibc's headers): the
 * point is that they go through the interposers. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PT_TEST_T(prof_sig_bsd_sysv_family, 30000) {
  char *dir = pt_tmpdir("sig-family");
  ptprof *p = start(dir);
  struct sigaction old;
  /* signal(): BSD semantics (SA_RESTART, the signal in its own mask) */
  PT_ASSERT(signal(SIGPROF, h_plain) == SIG_DFL);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_handler == h_plain);
  PT_ASSERT(old.sa_flags & SA_RESTART);
  PT_ASSERT(sigismember(&old.sa_mask, SIGPROF));
  /* siginterrupt(1): calls interrupted from now on, signal() too */
  PT_ASSERT_INT_EQ(siginterrupt(SIGPROF, 1), 0);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(!(old.sa_flags & SA_RESTART));
  PT_ASSERT(signal(SIGPROF, h_plain) == h_plain);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(!(old.sa_flags & SA_RESTART));
  PT_ASSERT_INT_EQ(siginterrupt(SIGPROF, 0), 0);
  /* sysv_signal(): reset at delivery, not blocked in its handler */
  PT_ASSERT(sysv_signal(SIGPROF, h_plain) == h_plain);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT((old.sa_flags & (SA_RESETHAND | SA_NODEFER)) == (SA_RESETHAND | SA_NODEFER));
  /* sigset(SIG_HOLD) blocks SIGPROF and reports the disposition; sigset of
   * a handler unblocks it and reports SIG_HOLD */
  PT_ASSERT(sigset(SIGPROF, SIG_HOLD) == h_plain);
  sigset_t m;
  pthread_sigmask(SIG_BLOCK, NULL, &m);
  PT_ASSERT(sigismember(&m, SIGPROF));
  PT_ASSERT(sigset(SIGPROF, h_plain) == SIG_HOLD);
  pthread_sigmask(SIG_BLOCK, NULL, &m);
  PT_ASSERT(!sigismember(&m, SIGPROF));
  /* sigignore(): SIG_IGN */
  PT_ASSERT_INT_EQ(sigignore(SIGPROF), 0);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_handler == SIG_IGN);
  PT_ASSERT(real_handler() == (uintptr_t)ptp_handler);
  /* other signals are untouched: the kernel has what signal() set */
  PT_ASSERT(signal(SIGUSR2, h_plain) == SIG_DFL);
  ksa k;
  PT_ASSERT_INT_EQ(syscall(SYS_rt_sigaction, SIGUSR2, NULL, &k, 8), 0);
  PT_ASSERT(k.handler == (uintptr_t)h_plain);
  signal(SIGUSR2, SIG_DFL);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}
#pragma GCC diagnostic pop

/* A vfork child shares our memory but has its own signal table: what it
 * sets for SIGPROF (before an exec, say) is its own, never the parent's
 * disposition. */
PT_TEST_T(prof_sig_vfork_child_own_table, 30000) {
  char *dir = pt_tmpdir("sig-vfork");
  ptprof *p = start(dir);
  PT_ASSERT(signal(SIGPROF, h_plain) == SIG_DFL);
  pid_t kid = vfork();
  PT_ASSERT(kid >= 0);
  if (kid == 0) {
    signal(SIGPROF, SIG_IGN);
    _exit(0);
  }
  int st = 0;
  PT_ASSERT_INT_EQ(waitpid(kid, &st, 0), kid);
  PT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  struct sigaction old;
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_handler == h_plain);
  PT_ASSERT(real_handler() == (uintptr_t)ptp_handler);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

/* A handler the program installed before the first start is adopted: it
 * keeps its signals, and sigaction reports it. */
PT_TEST_T(prof_sig_adopts_earlier_handler, 30000) {
  PT_ASSERT(!ptp_sig_is_installed());    /* a fresh test process */
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = h_plain;
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, &sa, NULL), 0);
  char *dir = pt_tmpdir("sig-adopt");
  ptprof *p = start(dir);
  PT_ASSERT(real_handler() == (uintptr_t)ptp_handler);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_handler == h_plain);
  raise(SIGPROF);
  PT_ASSERT_INT_EQ(atomic_load(&g_calls), 1);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

static _Atomic int g_spin_stop;
static void *spin_main(void *arg) {
  (void)arg;
  while (!atomic_load(&g_spin_stop)) ptt_fn_hot_a(5000000);
  return NULL;
}

/* stopped for good: no timer left, the reason in the snapshot's comment */
static void check_stopped(ptprof *p, capture *c, int reason, const char *phrase) {
  int64_t when = 0;
  PT_ASSERT_INT_EQ(ptp_sig_stop_reason(&when), reason);
  PT_ASSERT(when > 0);
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  PT_ASSERT_INT_EQ(st.stopped, reason);
  PT_ASSERT_MSG(st.timers_created == st.timers_deleted, "%llu timers created, %llu deleted",
                (unsigned long long)st.timers_created, (unsigned long long)st.timers_deleted);
  PT_ASSERT_INT_EQ(ptprof_dump(p, NULL, 0), 0);
  int seen = 0;
  for (int i = 0; i < c->ncomments; i++) seen |= strstr(c->comments[i], phrase) != NULL;
  PT_ASSERT_MSG(seen, "no comment says '%s'", phrase);
}

PT_TEST_T(prof_sig_raw_replacement_stops_sampling, 30000) {
  char *dir = pt_tmpdir("sig-raw");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler_engine(dir, 99, &c, PTPROF_ENGINE_TIMER);
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, spin_main, NULL), 0);
  /* SIG_IGN through the raw system call: no interposer sees it */
  ksa k = { (uintptr_t)SIG_IGN, 0, 0, 0 };
  PT_ASSERT_INT_EQ(syscall(SYS_rt_sigaction, SIGPROF, &k, NULL, 8), 0);
  /* the consumer's next pass notices (it passes every 100 ms while samples
   * come; the spinning thread's last ones do) */
  for (int i = 0; i < 2000 && !ptp_sig_stop_reason(NULL); i++) nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
  check_stopped(p, &c, PTP_SIG_STOP_REPLACED, "sampling stopped for good");
  /* sigaction tells the truth again: the real disposition is the program's */
  struct sigaction old;
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_handler == SIG_IGN);
  atomic_store(&g_spin_stop, 1);
  pthread_join(th, NULL);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  PT_ASSERT_INT_EQ(ptprof_start(p), -EBUSY);            /* for good: no later start samples */
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST_T(prof_sig_signalfd_stops_sampling, 30000) {
  char *dir = pt_tmpdir("sig-signalfd");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler_engine(dir, 99, &c, PTPROF_ENGINE_TIMER);
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &m, NULL);
  int fd = signalfd(-1, &m, SFD_CLOEXEC | SFD_NONBLOCK);
  PT_ASSERT(fd >= 0);
  check_stopped(p, &c, PTP_SIG_STOP_SIGNALFD, "reads SIGPROF through a signalfd");
  /* the program's own SIGPROF reaches its signalfd, none of ours */
  ptt_fn_hot_a(50000000);
  raise(SIGPROF);
  struct signalfd_siginfo si;
  PT_ASSERT_INT_EQ(read(fd, &si, sizeof si), (ssize_t)sizeof si);
  PT_ASSERT_INT_EQ(si.ssi_code, SI_TKILL);
  PT_ASSERT(read(fd, &si, sizeof si) < 0 && errno == EAGAIN);
  close(fd);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  PT_ASSERT_INT_EQ(ptprof_start(p), -EBUSY);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}
