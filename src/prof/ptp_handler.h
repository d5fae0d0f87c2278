/*
 * ptp_handler.h - the SIGPROF handler.
 *
 * The state it shares with the rest of the sampler (ptp_g_shared,
 * ptp_g_inside, the ring) is declared in ptp_producer.h; the current
 * unwind-table set is published here:
 *   ptp_g_cfi     the current unwind-table set (ptp_cfi.h); the handler may
 *                 CAS a slot's state NONE -> WANTED in it, nothing else.
 *                 Replaced under the ptp_g_inside grace protocol.
 */
#ifndef PTP_HANDLER_H
#define PTP_HANDLER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "prof/ptp_producer.h"
#include "prof/ptp_ring.h"
#include "prof/ptp_unwind.h"
#include "prof/ptp_window.h"

extern _Atomic(const ptp_cfi_set *) ptp_g_cfi;

/* The handler: install with SA_SIGINFO | SA_RESTART for SIGPROF. Records
 * only signals of the running sampler's engine: POSIX timers (si_code
 * SI_TIMER and our magic in si_value) or perf events (si_code POLL_IN or
 * POLL_HUP from F_SETSIG, and si_fd the calling thread's event); anything
 * else is ignored. Async-signal-safe; saves and restores errno. */
void ptp_handler(int sig, siginfo_t *si, void *uc);

#endif
