/*
 * guest_sig.c - programs that do unusual but legal things with SIGPROF,
 * for guest_signals_test.sh and guest_blocked_test.sh: each prints what it
 * saw, so a profiled run can be compared byte for byte with an unprofiled
 * one.
 *
 *   guest_sig dfl MS        resets every signal to SIG_DFL (a daemon's
 *       start: signal(i, SIG_DFL) for each), burns MS ms of CPU, prints a
 *       line and exits 6.
 *   guest_sig own N         installs its own SIGPROF handler (SA_SIGINFO)
 *       and setitimer(ITIMER_PROF, 10 ms), burns CPU until its handler has
 *       counted N signals with si_code SI_KERNEL (its timer's), prints
 *       "own=N foreign=F" (F: SIGPROF signals that were not its timer's)
 *       and what sigaction reports for SIGPROF, exits 0.
 *   guest_sig blocked B U   blocks SIGPROF (sigprocmask), burns B ms of
 *       CPU in blocked_work, unblocks it, burns U ms in free_work; prints
 *       "done", exits 0.
 *   guest_sig work MS       burns MS ms of CPU, prints a line, exits 0 (a
 *       program that does nothing unusual with its signals).
 *   guest_sig sigwait MS    blocks SIGPROF, starts setitimer(ITIMER_PROF,
 *       10 ms) and takes its signals with sigwaitinfo while burning MS ms
 *       in between; prints how many it took and whether each was its
 *       timer's (SI_KERNEL), exits 0.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static volatile unsigned long sink;

__attribute__((noinline)) static void spin(double ms) {
  double end = cpu_ms() + ms;
  while (cpu_ms() < end)
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i * 2654435761u;
}

__attribute__((noinline)) static void blocked_work(double ms) { spin(ms); }
__attribute__((noinline)) static void free_work(double ms) { spin(ms); }
__attribute__((noinline)) static void dfl_work(double ms) { spin(ms); }

static int do_dfl(double ms) {
  for (int i = 1; i < NSIG; i++)
    if (i != SIGKILL && i != SIGSTOP) (void)signal(i, SIG_DFL);
  dfl_work(ms);
  printf("reset every signal to SIG_DFL, worked %.0f ms of CPU\n", ms);
  fflush(stdout);
  return 6;
}

static _Atomic int own_count, foreign_count;

static void own_handler(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)uc;
  if (si->si_code == SI_KERNEL) atomic_fetch_add(&own_count, 1);
  else atomic_fetch_add(&foreign_count, 1);
}

static int do_own(int n) {
  struct sigaction sa, back;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = own_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL) != 0) { perror("sigaction"); return 4; }
  struct itimerval it = { { 0, 10000 }, { 0, 10000 } };
  if (setitimer(ITIMER_PROF, &it, NULL) != 0) { perror("setitimer"); return 4; }
  while (atomic_load(&own_count) < n) spin(1);
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer(ITIMER_PROF, &off, NULL);
  if (sigaction(SIGPROF, NULL, &back) != 0) { perror("sigaction"); return 4; }
  printf("own=%d foreign=%d\n", n, atomic_load(&foreign_count));
  printf("sigaction(SIGPROF) reports: own handler %s, SA_SIGINFO %s, SA_RESTART %s\n",
         back.sa_sigaction == own_handler ? "yes" : "no", back.sa_flags & SA_SIGINFO ? "yes" : "no",
         back.sa_flags & SA_RESTART ? "yes" : "no");
  return 0;
}

static int do_blocked(double b, double u) {
  sigset_t prof;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  if (sigprocmask(SIG_BLOCK, &prof, NULL) != 0) { perror("sigprocmask"); return 4; }
  blocked_work(b);
  if (sigprocmask(SIG_UNBLOCK, &prof, NULL) != 0) { perror("sigprocmask"); return 4; }
  free_work(u);
  printf("done\n");
  return 0;
}

static int do_sigwait(double ms) {
  sigset_t prof;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  if (sigprocmask(SIG_BLOCK, &prof, NULL) != 0) { perror("sigprocmask"); return 4; }
  struct itimerval it = { { 0, 10000 }, { 0, 10000 } };
  if (setitimer(ITIMER_PROF, &it, NULL) != 0) { perror("setitimer"); return 4; }
  int taken = 0, foreign = 0;
  double end = cpu_ms() + ms;
  while (cpu_ms() < end) {
    free_work(15);
    siginfo_t si;
    struct timespec zero = { 0, 0 };
    while (sigtimedwait(&prof, &si, &zero) == SIGPROF) {
      taken++;
      if (si.si_code != SI_KERNEL) foreign++;
    }
  }
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer(ITIMER_PROF, &off, NULL);
  printf("took %s of its timer's signals, %d that were not its timer's\n", taken > 0 ? "some" : "none",
         foreign);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 3 && !strcmp(argv[1], "dfl")) return do_dfl(atof(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "own")) return do_own(atoi(argv[2]));
  if (argc >= 4 && !strcmp(argv[1], "blocked")) return do_blocked(atof(argv[2]), atof(argv[3]));
  if (argc >= 3 && !strcmp(argv[1], "sigwait")) return do_sigwait(atof(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "work")) {
    free_work(atof(argv[2]));
    printf("worked %s ms of CPU\n", argv[2]);
    return 0;
  }
  fprintf(stderr, "usage: guest_sig dfl MS | own N | blocked B U | sigwait MS | work MS\n");
  return 2;
}
