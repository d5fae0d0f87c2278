/*
 * ptp_threads.h - the process-wide thread registry: each known thread's
 * stack bounds and per-thread CPU-time timer.
 *
 * Threads enter the registry
 *  - themselves, from the pthread_create interposer's trampoline, before the
 *    start routine runs (bounds from pthread_getattr_np; a TLS-key destructor
 *    deletes the timer and the record when the thread exits), always, even
 *    while no sampler runs, so threads created before ptprof_start have
 *    bounds;
 *  - the main thread at init (bounds from the "[stack]" line of
 *    /proc/self/maps);
 *  - any other thread when the sweep (/proc/self/task) finds it: "foreign",
 *    bounds unknown (its samples keep only the leaf PC, marked truncated).
 *
 * Each record has two halves: what the SIGPROF handler reads without a
 * lock (ptp_thread_sig, signal/ptp_thread_sig.h, with the publication rule
 * that makes that safe) and what only the registry mutex guards
 * (ptp_thread_rec below). Record i of one table goes with entry i of the
 * other.
 *
 * Engines: while a sampler is active every registered thread (except the
 * excluded consumer thread) has a sampling source that sends SIGPROF to
 * that thread at every period of its CPU time:
 *  - PTP_ENGINE_PERF: a perf_event task-clock event (ptp_perf.h), signal
 *    through F_SETOWN_EX/F_SETSIG; the record's perf_fd identifies it to the
 *    handler. A thread whose event cannot be opened for lack of fds (EMFILE,
 *    ENFILE) or beyond the descriptor budget (ptp_engine.h: a quarter of
 *    the soft RLIMIT_NOFILE) gets a timer instead (counted in
 *    perf_fallbacks);
 *  - PTP_ENGINE_TIMER: a POSIX timer on its CPU-time clock
 *    (SIGEV_THREAD_ID) with sigev_value = (magic << 32) | tid.
 * The first expiry is random in (0, period] so short threads get their
 * share; see docs/sampler.md.
 */
#ifndef PTP_THREADS_H
#define PTP_THREADS_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "ptprof.h"
#include "prof/output/ptp_window.h"
#include "prof/signal/ptp_expiry.h"
#include "prof/signal/ptp_thread_sig.h"

/* Values match PTPROF_ENGINE_* of ptprof.h. */
#define PTP_ENGINE_PERF  1
#define PTP_ENGINE_TIMER 2

/* The registry's half of a record: every field is guarded by the registry
 * mutex (the handler never reads it). */
typedef struct ptp_thread_rec {
  ptp_thread_sig *sig;        /* the handler's half (tid, bounds, perf_fd...) */
  int self_registered;        /* has the exit destructor */
  int excluded;               /* never gets a timer (the consumer thread) */
  int has_timer;              /* a POSIX timer ... */
  timer_t timer;
  int has_perf;               /* ... or a perf event (sig->perf_fd) */
  int closing_fd;             /* deactivate: unpublished, closed after the grace */
  int exec_paused;            /* disarmed by ptp_threads_exec_pause, not yet re-armed */
  uint64_t accounted;         /* perf: periods already reported unsignalled */
  uint64_t start_ticks;       /* foreign perf record: the thread's start time
                                 (/proc stat field 22), to detect tid reuse */
  int64_t cpu_cut;            /* the thread's CPU clock at the last cut (or
                                 when sampling started or the record was
                                 made): ptp_threads_cpu_cut */
  int64_t own_ns;             /* CPU of its closed own-work sections since
                                 the last cut (ptp_threads_own_end) */
  int64_t own_open;           /* CPU clock at the start of its open
                                 outermost section (or at the last cut
                                 inside it); -1: none open */
  char name[16];              /* foreign record: its comm at the last sweep,
                                 remembered when a sweep finds it gone */
  void *entry;                /* start routine */
} ptp_thread_rec;

/* Idempotent, thread-safe. Maps the tables, registers the main thread, sets
 * up the exit key and fork handlers. Returns 0 or -ENOMEM/-errno. */
int ptp_threads_init(void);

/* The calling thread's record (the handler's half), or NULL when the
 * thread registered itself before with no record (initial-exec TLS: one
 * load, async-signal-safe; set by the thread's own registration, cleared
 * at its exit; threads found only by the sweep have none). */
ptp_thread_sig *ptp_threads_self_sig(void);

/* The calling thread's stack bounds from pthread_getattr_np: *lo, *hi, or
 * 0, 0 when unknown. Not signal-safe (allocates). */
void ptp_threads_self_stack(uintptr_t *lo, uintptr_t *hi);

/* Called on a new thread before its start routine (the trampoline).
 * Registers it and, when a sampler is active, arms its timer. */
void ptp_threads_on_thread_start(void *entry);

/* The calling thread never gets a timer (the sampler's consumer thread). */
void ptp_threads_exclude_self(void);
/* Drops the calling thread's record (and timer) now: for a thread without
 * the exit destructor (the consumer thread) that is about to exit. */
void ptp_threads_forget_self(void);

/* Exec support (the exec wrappers of ptp_interpose.c). A SIGPROF that is
 * pending on a thread when it execs survives the exec and, the handler
 * being reset to SIG_DFL there, kills the new program; the perf engine's
 * event even keeps counting the exec's own kernel time until the
 * close-on-exec step. So before calling the real exec the wrapper blocks
 * SIGPROF, calls ptp_threads_exec_pause (disarms the calling thread's event
 * or timer, nothing else), discards whatever SIGPROF is pending and
 * restores the mask; if the exec fails it calls ptp_threads_exec_resume,
 * which arms the thread again if a sampler is still active. Other threads
 * keep sampling: their signals are directed to them, and exec kills them.
 * Threads: the calling thread's own record only, under the registry mutex;
 * no-ops for an unregistered thread (a vfork child, which shares the
 * parent's memory, finds no record of its own tid and touches nothing). */
void ptp_threads_exec_pause(void);
void ptp_threads_exec_resume(void);

/* Starts sampling with engine (PTP_ENGINE_PERF or _TIMER, already known to
 * work: ptprof_start probes): remembers magic/period, then arms every
 * registered and every /proc/self/task thread. Returns 0, -EBUSY (already
 * active), -EINVAL or -errno. */
int ptp_threads_activate(uint32_t magic, int64_t period_ns, int engine);
/* Stops: deletes every timer and closes every event (after no handler is
 * inside any more, so none uses a closed fd). Safe to call when not
 * active. */
void ptp_threads_deactivate(void);
/* The /proc/self/task sweep: registers and arms threads not known yet,
 * forgets threads that are gone (deleting their timers), and re-opens the
 * event of a thread whose descriptor the program closed (ptp_engine_check).
 * Returns 0 or -errno. Called by the consumer thread (see ptprof.c for
 * when). */
int ptp_threads_sweep(void);

/* Checks every thread's perf event descriptor (ptp_engine_check): one the
 * program closed is forgotten without a close and the thread gets a new
 * event. Returns how many were re-opened. The consumer calls it when a
 * close-family interposer saw one of ours closed (cache/ptp_fd.h); the
 * sweep does the same check for each thread it lists. */
size_t ptp_threads_check_fds(void);

/* Every live thread that keeps SIGPROF blocked now (as the mask
 * interposers saw): the expirations its CPU made due since the block began
 * (or since the last call) go under [lost: signal blocked] (PTP_SLOT_FLUSH
 * records), so a thread that never unblocks still shows its CPU. Called at
 * each dump, before ptp_threads_collect_unsignalled. */
void ptp_threads_account_blocked(void);

/* Perf engine: for every live thread with an event, the periods its CPU
 * time completed that were never signalled (periods ending in kernel mode
 * under exclude_kernel, see ptp_perf.h), since the last call. Fills up to
 * cap (tid, count, cause) entries and returns how many; the caller records
 * them under their cause's pseudo-frame. Any thread but the handler. */
typedef struct ptp_unsignalled { uint32_t tid; int cause; uint64_t count; } ptp_unsignalled;
size_t ptp_threads_collect_unsignalled(ptp_unsignalled *out, size_t cap);

/* Each thread's CPU since the previous cut, for the snapshot's line of
 * threads' CPU (ptp_window.thread_cpu). At a cut, under the registry
 * mutex: every live thread's CPU clock is read and the part since its
 * previous reading (the previous cut, the sampler's start, or the
 * thread's creation) goes to live[0..cap) as (tid, ns), the reading kept
 * for the next cut; the threads that exited since the previous cut were
 * summed by name at their exit (their CPU clock read by themselves in the
 * exit destructor) and are moved to *exited. The consumer (excluded) is
 * not counted: its CPU is the profiler's own, told apart. Not counted
 * either: a thread the sweep found (foreign) that exited between two
 * sweeps, whose clock can no longer be read (its CPU since the previous
 * cut is unknown). The CPU of the profiler's own work on a thread (its
 * own-work sections, timed by its clock; the part of a section open at the
 * cut up to the cut) is kept out of its figure and summed in
 * exited->own_ns. Returns the number of live threads, which may exceed
 * cap (all are cut; those beyond cap are not listed). Any thread but the
 * handler; never allocates. */
typedef struct ptp_cpu_live { uint32_t tid; int64_t cpu_ns; } ptp_cpu_live;
#define PTP_EXITED_NAMES 32u
typedef struct ptp_cpu_exited {
  ptp_thread_cpu by_name[PTP_EXITED_NAMES];   /* samples 0 */
  size_t n;
  ptp_thread_cpu others;      /* exits beyond PTP_EXITED_NAMES names, name "" */
  int64_t own_ns;             /* the profiler's own work (own-work sections,
                                 ptp_threads_own_begin) on every thread cut,
                                 live and exited: kept out of cpu_ns above */
} ptp_cpu_exited;
size_t ptp_threads_cpu_cut(ptp_cpu_live *live, size_t cap, ptp_cpu_exited *exited);

/* Process-wide counters (for ptprof_stats). */
typedef struct ptp_threads_stats {
  uint64_t timers_created, timers_deleted, timer_errors, flushed, registered;
  uint64_t perf_fallbacks;    /* threads that got a timer under the perf engine */
  uint64_t perf_budget_fallbacks; /* ... of them because of the descriptor budget */
  uint64_t fds_lost;          /* perf event descriptors the program closed or
                                 reused (found by the sweep or at a close;
                                 the thread's event is opened again) */
  uint64_t lost_at_exit;      /* expirations accounted as lost at thread exit */
  uint64_t live;              /* records in use now */
  uint64_t records_used;      /* records ever used (the scans' bound): freed
                                 records are reused first, so this stays at
                                 the most threads alive at once */
  int last_errno;             /* errno of the last timer error */
} ptp_threads_stats;
void ptp_threads_get_stats(ptp_threads_stats *out);

/* A section of the profiler's own work on the calling thread: begin sets
 * the thread's own-work mark (signal/ptp_own_work.h; nestable), end clears
 * it. The outermost section, under the perf engine with exclude_kernel,
 * also notes the thread's CPU clock and own-work hits: at its end the
 * periods of the section that ended in the kernel (due by the CPU clock,
 * never signalled) are counted as the profiler's own (PTP_DROP_OWN_WORK)
 * and marked accounted, so no dump and no exit accounting reports them as
 * the program's "[lost: kernel mode]". Any thread but the handler; takes
 * the registry mutex at the end of a timed section. */
typedef ptprof_own_section ptp_own_section;   /* include/ptprof.h: public, for hosts */
void ptp_threads_own_begin(ptp_own_section *s);
void ptp_threads_own_end(ptp_own_section *s);

/* Thread names of threads[0..n) (their tids set), for a dump: a live
 * thread's /proc/self/task/<tid>/comm now, else the name remembered when
 * it exited (ptp_graveyard.h; all of a window's exits in one sorted pass),
 * else "". */
void ptp_threads_names(ptp_thread *threads, size_t n);

/* CPU-time clock of a thread by tid (what pthread_getcpuclockid returns). */
static inline clockid_t ptp_tid_cpuclock(uint32_t tid) {
  return (clockid_t)(((unsigned)~tid << 3) | 6u);  /* MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) */
}

#endif
