/*
 * ptp_engine.h - the sampling engines: arming and disarming one registered
 * thread's sampling source (a perf_event task-clock event, or a POSIX timer
 * on its CPU-time clock), and the settings of the running sampler they
 * follow (see ptp_threads.h "Engines" and docs/sampler.md).
 *
 * Locking: every function here is called with the registry mutex held
 * (ptp_threads.c is the only caller); the engine's settings are guarded by
 * it, its counters are atomics. What the handler reads of a thread (its
 * perf_fd, armed_cpu_ns, first_ns, delivered, perf_first) is written under
 * the publication rule of signal/ptp_thread_sig.h.
 * Not for signal handlers.
 */
#ifndef PTP_ENGINE_H
#define PTP_ENGINE_H

#include <stdint.h>

#include "prof/runtime/ptp_threads.h"

/* The settings of a started sampler: from now on ptp_engine_arm gives a
 * thread a source of this engine (PTP_ENGINE_PERF or _TIMER, known to
 * work), sending SIGPROF every period_ns of its CPU time, timers carrying
 * magic in their sigev_value. */
void ptp_engine_start(uint32_t magic, int64_t period_ns, int engine);
/* No sampler: ptp_engine_arm does nothing (sources already armed stay until
 * disarmed). */
void ptp_engine_stop(void);
int ptp_engine_active(void);
/* The running sampler's period (0 when none ever started). */
int64_t ptp_engine_period(void);

/* Gives r (a registered thread) its source when a sampler is active and r
 * is not excluded and has none; a random first expiry in (0, period] so a
 * short thread gets its share. A thread whose perf event cannot be opened
 * for lack of fds gets a timer (counted). Failures other than "the thread
 * exited" are counted (timer_errors, last_errno). */
void ptp_engine_arm(ptp_thread_rec *r);
/* Deletes r's timer and closes its event now. Only for a thread that
 * cannot be inside the handler with its event's fd: the calling thread
 * itself, a thread that is gone, or after ptp_engine_unpublish and the
 * handler grace. */
void ptp_engine_disarm(ptp_thread_rec *r);
/* Stopping every thread safely: unpublishes r's event (perf_fd -1, the fd
 * kept for ptp_engine_disarm, which closes it after the caller's grace
 * wait). */
void ptp_engine_unpublish(ptp_thread_rec *r);

/* Whether r's source may belong to a dead thread whose tid r now holds: a
 * foreign record's timer that reads as disarmed, or an event whose
 * thread's start time differs from the one at arming. */
int ptp_engine_source_stale(ptp_thread_rec *r, uint32_t tid);

/* Expirations owed by r's source: due by the thread's CPU time since
 * arming (cpu_now_ns: its CPU clock now) but neither delivered nor
 * reported before (r->accounted). 0 without a source or a clock. The CPU
 * clock is used rather than the event's own count: on this kernel (6.18)
 * a task-clock count read back after PERF_EVENT_IOC_PERIOD was seen
 * seconds off for a 10 ms thread, while the thread CPU clock is exact. */
uint64_t ptp_engine_owed(const ptp_thread_rec *r, int64_t cpu_now_ns);

/* In a fork child: r's source is not the child's (POSIX timers are not
 * inherited; the child's copy of the event fd watches the parent's thread
 * and is closed here, if the number still names it). Forgets it without
 * touching the parent's. */
void ptp_engine_forget_in_child(ptp_thread_rec *r);

/* Whether r's perf event descriptor still names r's event. When the
 * program has closed it (and perhaps reused the number), r's event is
 * unpublished and forgotten without a close (the number is not ours),
 * counted in fds_lost, and 1 is returned: the caller arms r again. 0
 * otherwise (no event, or still ours). */
int ptp_engine_check(ptp_thread_rec *r);

/* The perf engine's descriptor rule: one descriptor per thread, so perf is
 * used only while the soft RLIMIT_NOFILE leaves room. A start takes the
 * timer engine when the soft limit is below PTP_PERF_NOFILE_MIN (AUTO; the
 * snapshot says why); under perf, a thread gets an event only while the
 * events we hold stay below ptp_engine_perf_budget(soft) = a quarter of
 * the soft limit (they live at the top of the range, above ptp_fd_floor), else
 * a timer (budget_fallbacks). Returns that budget (0 below the minimum). */
#define PTP_PERF_NOFILE_MIN 256
uint64_t ptp_engine_perf_budget(uint64_t soft);

/* The CPU clock of thread tid now (ns), -1 when unreadable (it exited). */
int64_t ptp_engine_cpu_ns(uint32_t tid);

typedef struct ptp_engine_stats {
  uint64_t created, deleted, errors, fallbacks;
  uint64_t budget_fallbacks;  /* of fallbacks: the descriptor budget was used up */
  uint64_t fds_lost;          /* events whose descriptor the program closed or reused */
  int last_errno;
} ptp_engine_stats;
void ptp_engine_get_stats(ptp_engine_stats *out);

#endif
