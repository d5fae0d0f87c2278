/*
 * ptp_siginterpose.h - the program's signals are the program's: the
 * interposers of the calls that read or change SIGPROF's disposition and
 * mask (ptp_siginterpose.c), and the installation of our handler.
 *
 * Model (docs/sampler.md, "Signals"): once our handler is installed it
 * stays the real one; what the program sets for SIGPROF (sigaction,
 * signal, bsd_signal, ssignal, sysv_signal, sigset, sigignore,
 * siginterrupt) is kept as a virtual disposition (signal/ptp_sigstate.h)
 * that sigaction reports back and to which our handler hands every
 * SIGPROF that is not ours. The mask calls (sigprocmask, pthread_sigmask,
 * sigblock, sigsetmask, sighold, sigrelse) pass through unchanged, and
 * note when a thread blocks and unblocks SIGPROF, so that the CPU it used
 * meanwhile goes under "[lost: signal blocked]" rather than under the
 * unblocking code's stack. sigwait, sigwaitinfo and sigtimedwait never
 * return one of our signals. What we cannot do without changing the
 * program stops sampling for good, said in the next snapshot: a signalfd
 * that reads SIGPROF (it would read ours), and our handler replaced behind
 * the interposers' back (a raw rt_sigaction system call, a static libc).
 *
 * Threads: any. The interposers are async-signal-safe where their libc
 * functions are (sigaction, sigprocmask, pthread_sigmask, signal...):
 * writers of the disposition serialize on a spin lock held with every
 * signal blocked in the calling thread; the rest is atomics.
 */
#ifndef PTP_SIGINTERPOSE_H
#define PTP_SIGINTERPOSE_H

#include <stdint.h>

/* Installs our SIGPROF handler (once per process; it stays), adopting the
 * disposition found there as the program's virtual one (a handler the
 * program set before the first start keeps getting its signals).
 * Returns 0, -EBUSY (sampling was stopped for good in this process, see
 * ptp_sig_stop_reason) or sigaction's -errno. Any thread. */
int ptp_sig_install(void);

/* Whether our handler is still the real one. When it is not (replaced by
 * a raw rt_sigaction, or by a libc the interposers do not see), the
 * interposers stop pretending (the program's disposition is the real one
 * now), sampling stops for good and 1 is returned once; else 0. The
 * consumer calls it at every pass. */
int ptp_sig_check_replaced(void);

/* Why sampling was stopped for good in this process (PTP_SIG_STOP_*; 0:
 * it was not) and when (CLOCK_REALTIME ns). */
#define PTP_SIG_STOP_REPLACED 1   /* our handler was replaced behind our back */
#define PTP_SIG_STOP_SIGNALFD 2   /* the program reads SIGPROF through a signalfd */
int ptp_sig_stop_reason(int64_t *when_ns);
/* The reason as a phrase ("" for 0). */
const char *ptp_sig_stop_text(int reason);

/* Exec (ptp_interpose.c): SIG_IGN is inherited across exec, a handler is
 * not; with the program's disposition SIG_IGN the real one must be
 * SIG_IGN when the exec happens. Returns 1 if it was set (the caller calls
 * ptp_sig_exec_failed if the exec returns), else 0. For a thread whose
 * SIGPROF source is disarmed already. */
int ptp_sig_exec_prepare(void);
void ptp_sig_exec_failed(int prepared);

/* Whether our handler is installed (the interposers keep the virtual
 * disposition). */
int ptp_sig_is_installed(void);

/* The real sigaction (libc's), for our own use. */
int ptp_real_sigaction(int sig, const void *act, void *oact);

/* Makes sure a static link pulls this file in (ptprof.c calls it). */
void ptp_siginterpose_link(void);

#endif
