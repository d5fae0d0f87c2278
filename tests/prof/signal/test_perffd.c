/*
 * test_perffd.c - telling a late SIGPROF of the perf engine from the
 * program's (src/prof/signal/ptp_perffd.h, ptp_sigstate.c): a signal that
 * names, in si_fd, a descriptor number that carries or just carried one
 * of our events is ours even when no thread record names it any more (the
 * thread exited or its event was re-opened: sampler_stress_test.sh saw the
 * preloaded program killed by "Profiling timer expired" when such a signal
 * went to the program's SIG_DFL); a number we never used is the program's.
 */
#include "pt_test.h"
#include "prof/signal/ptp_perffd.h"
#include "prof/signal/ptp_sigstate.h"

#include <signal.h>
#include <string.h>

static int ours_fd(int fd) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = SIGPROF;
  si.si_code = POLL_IN;
  si.si_fd = fd;
  ptp_thread_sig *rec;
  return ptp_sig_ours(&si, &rec);
}

PT_TEST(prof_perffd_late_signals_are_ours) {
  /* numbers far above what the test process opens */
  const int never = 15000, open_now = 15001, released = 15002;
  PT_ASSERT_INT_EQ(ptp_perffd_ours(never), 0);
  PT_ASSERT_INT_EQ(ours_fd(never), 0);           /* the program's: handed on */
  ptp_perffd_opened(open_now);
  PT_ASSERT_INT_EQ(ptp_perffd_ours(open_now), 1);
  PT_ASSERT_INT_EQ(ours_fd(open_now), 1);
  ptp_perffd_opened(released);
  ptp_perffd_released(released);
  PT_ASSERT_INT_EQ(ptp_perffd_ours(released), 1); /* within the grace */
  PT_ASSERT_INT_EQ(ours_fd(released), 1);
  /* out of range: never ours */
  PT_ASSERT_INT_EQ(ptp_perffd_ours(-1), 0);
  PT_ASSERT_INT_EQ(ptp_perffd_ours(PTP_PERFFD_MAX), 0);
  /* a timer-shaped signal is not decided by descriptor numbers */
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_code = SI_TIMER;
  si.si_fd = open_now;
  ptp_thread_sig *rec;
  PT_ASSERT_INT_EQ(ptp_sig_ours(&si, &rec), 0);
}
