/*
 * ptp_perffd.h - which descriptor numbers carry, or carried a moment ago,
 * one of the perf engine's events, so the handler tells a SIGPROF of ours
 * from the program's even when the thread's record no longer names the
 * event: a signal an event sent just before it was closed (the thread
 * exiting, its event re-opened, the program's close_range) arrives with
 * that number in si_fd, possibly after the thread's record is gone. Such a
 * signal is ours: ignored, never handed to the program's disposition
 * (whose default action, SIG_DFL, would kill it).
 *
 * One slot per number below PTP_PERFFD_MAX: 0 never ours, -1 ours now, or
 * the CLOCK_MONOTONIC ns at which we let go of it. A number counts as ours
 * while it is, and for PTP_PERFFD_GRACE_NS after (a signal pending on a
 * thread that keeps SIGPROF blocked longer than that is handed to the
 * program: documented in docs/sampler.md, "Signals"). Written by the
 * engine (runtime/ptp_perf.c, ptp_engine.c) when it opens and lets go of
 * an event; read by the handler.
 *
 * State: one array, process-wide (runtime/ptp_process.h), zero at start,
 * atomics; a fork child keeps its copy (its engine lets go of the events).
 * SIGNAL-SAFETY: ptp_perffd_ours is async-signal-safe (atomic loads, the
 * vDSO clock); the others are atomic stores and may be called anywhere.
 */
#ifndef PTP_PERFFD_H
#define PTP_PERFFD_H

#include <stdint.h>

#define PTP_PERFFD_MAX 16384
#define PTP_PERFFD_GRACE_NS (10LL * 1000000000LL)

/* fd now carries one of our events. */
void ptp_perffd_opened(int fd);
/* We let go of fd (closed it, or found it closed by the program). */
void ptp_perffd_released(int fd);
/* 1 if fd carries one of our events, or did within the grace; else 0. */
int ptp_perffd_ours(int fd);

#endif
