/*
 * ptp_handler.h - the SIGPROF handler.
 *
 * The state it shares with the rest of the sampler (ptp_g_shared,
 * ptp_g_inside, the ring) is declared in ptp_producer.h; the current
 * unwind-table set it reads (ptp_g_cfi) in ptp_cfi.h, which owns it.
 */
#ifndef PTP_HANDLER_H
#define PTP_HANDLER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "prof/unwind/ptp_cfi.h"
#include "prof/signal/ptp_producer.h"
#include "prof/signal/ptp_ring.h"
#include "prof/signal/ptp_unwind.h"
#include "prof/output/ptp_window.h"

/* The handler: install with SA_SIGINFO | SA_RESTART for SIGPROF. Records
 * only signals of the running sampler's engine: POSIX timers (si_code
 * SI_TIMER and our magic in si_value) or perf events (si_code POLL_IN or
 * POLL_HUP from F_SETSIG, and si_fd the calling thread's event); anything
 * else is ignored. Async-signal-safe; saves and restores errno. */
void ptp_handler(int sig, siginfo_t *si, void *uc);

#endif
