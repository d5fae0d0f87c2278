/*
 * ptp_grace.h - the handler grace: how code outside the SIGPROF handler
 * replaces or frees something the handler may be reading.
 *
 * The protocol: unpublish first (store NULL or the replacement in the
 * published pointer, or -1 in a perf_fd), then wait until ptp_g_inside
 * (signal/ptp_producer.h: handlers, and other users of the sampler's
 * shared state, between their entry and exit) is seen at zero, then free
 * or close. A handler that entered after the unpublication cannot see the
 * old object; one that entered before keeps ptp_g_inside above zero until
 * it leaves. All accesses are seq_cst.
 *
 * Users: runtime/ptprof.c (the shared state at stop, the dump's cut),
 * runtime/ptp_threads.c (perf event fds at deactivate), unwind/ptp_cfi.c
 * (retired table sets, polled with ptp_grace_quiet rather than waited for).
 *
 * Threads: any thread except the handler itself (a handler waiting for
 * handlers would wait for itself). Not async-signal-safe (sched_yield,
 * nanosleep).
 */
#ifndef PTP_GRACE_H
#define PTP_GRACE_H

/* Waits until no handler is inside: yields 100 times, then naps 100 us at
 * a time. With limit_ms > 0 gives up after about that long and returns
 * -ETIMEDOUT; returns 0 once ptp_g_inside was seen at zero. */
int ptp_grace_wait(int limit_ms);

/* Nonzero when no handler is inside right now (a grace period is over for
 * everything unpublished before the call). */
int ptp_grace_quiet(void);

#endif
