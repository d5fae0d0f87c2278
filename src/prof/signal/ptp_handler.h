/*
 * ptp_handler.h - the SIGPROF handler.
 *
 * What it reads, all defined in signal/ and published by the code named
 * (each rule written once, at the declaration):
 *  - ptp_g_shared, ptp_g_inside (ptp_producer.h): the running sampler's
 *    ring, counters and flags, published by runtime/ptprof.c; the grace
 *    counter every replacer waits on (runtime/ptp_grace.h);
 *  - ptp_g_thread_sigs, ptp_g_tidmap (ptp_thread_sig.h): the calling
 *    thread's stack bounds and perf event, published by the registry and
 *    the engines (runtime/ptp_threads.c, runtime/ptp_engine.c) under the
 *    publication rule written there;
 *  - ptp_g_cfi (ptp_unwind.h): the unwind tables, published by
 *    unwind/ptp_cfi.c;
 *  - ptp_g_xranges (ptp_xrange.h): the executable ranges outside objects
 *    (JIT code), published by unwind/ptp_xranges.c; the walker may set
 *    ptp_g_xranges_wanted;
 *  - ptp_t_labels (ptp_label_set.h): the calling thread's own labels,
 *    written by that thread;
 *  - ptp_t_own_work (ptp_own_work.h): whether the calling thread is inside
 *    profiler work, written by that thread;
 *  - ptp_g_sig (ptp_sigstate.h): the program's own SIGPROF disposition and
 *    our timers' magic, written by the interposers of
 *    runtime/ptp_siginterpose.c and the process set-up (ptp_process.c);
 *  - the interrupted context (ucontext) and the interrupted thread's stack,
 *    read within its bounds.
 * It calls only the functions of signal/ and async-signal-safe system
 * calls: tests/build/signal_safety_test.sh checks the objects.
 */
#ifndef PTP_HANDLER_H
#define PTP_HANDLER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "prof/signal/ptp_producer.h"
#include "prof/signal/ptp_ring.h"
#include "prof/signal/ptp_unwind.h"
#include "prof/output/ptp_window.h"

/* The handler: installed with SA_SIGINFO | SA_RESTART for SIGPROF by
 * runtime/ptp_siginterpose.c. Records only signals of the running
 * sampler's engine: POSIX timers (si_code SI_TIMER and our magic and this
 * start's generation in si_value) or perf events (si_code POLL_IN..POLL_HUP
 * from F_SETSIG, and si_fd the calling thread's event); ours of an earlier
 * start or a closed event are ignored; anything else is the program's and
 * goes to its disposition (ptp_sig_forward), after our state is left.
 * Async-signal-safe; saves and restores errno (for our part). */
void ptp_handler(int sig, siginfo_t *si, void *uc);

#endif
