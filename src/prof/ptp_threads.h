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
 * Lookup from the signal handler (ptp_threads_lookup) is lock-free: a tid
 * indexes a sparse array (one uint32 per possible tid, mmap'ed with
 * MAP_NORESERVE) giving the record's slot. Writers hold the registry mutex;
 * a record's bounds are written before its tid is published (release), and
 * its tid is cleared before the record is reused. A live thread's record is
 * only removed by that thread itself (its exit destructor), so a handler,
 * which always runs on the thread it looks up, never sees it change.
 *
 * Timers: while a sampler is active every registered thread (except the
 * excluded consumer thread) has a timer on its CPU-time clock sending
 * SIGPROF to that thread (SIGEV_THREAD_ID) with sigev_value =
 * (magic << 32) | tid. The first expiry is random in (0, period] so short
 * threads get their share; see docs/sampler.md.
 */
#ifndef PTP_THREADS_H
#define PTP_THREADS_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define PTP_TID_LIMIT   4194304u  /* Linux PID_MAX_LIMIT on 64-bit */
#define PTP_MAX_THREADS 8192u     /* live registered threads at once */

typedef struct ptp_thread_rec {
  _Atomic uint32_t tid;       /* 0 = free slot */
  _Atomic int busy;           /* handler inside for this thread (reentrancy) */
  uintptr_t stack_lo, stack_hi; /* 0,0 = unknown */
  _Atomic uint64_t delivered; /* expirations handled since the timer was armed */
  /* Below: registry mutex only. */
  int self_registered;        /* has the exit destructor */
  int excluded;               /* never gets a timer (the consumer thread) */
  int has_timer;
  timer_t timer;
  int64_t armed_cpu_ns;       /* thread CPU time when the timer was armed */
  int64_t first_ns;           /* first expiry after arming */
  void *entry;                /* start routine (exit flush attribution) */
} ptp_thread_rec;

extern ptp_thread_rec *ptp_g_recs;        /* PTP_MAX_THREADS records */
extern _Atomic uint32_t *_Atomic ptp_g_tidmap; /* tid -> record index + 1 */

/* Async-signal-safe: the record of tid or NULL. */
static inline ptp_thread_rec *ptp_threads_lookup(uint32_t tid) {
  _Atomic uint32_t *map = atomic_load_explicit(&ptp_g_tidmap, memory_order_acquire);
  if (!map || tid >= PTP_TID_LIMIT) return NULL;
  uint32_t i = atomic_load_explicit(&map[tid], memory_order_acquire);
  if (i == 0 || i > PTP_MAX_THREADS) return NULL;
  ptp_thread_rec *r = &ptp_g_recs[i - 1];
  if (atomic_load_explicit(&r->tid, memory_order_acquire) != tid) return NULL;
  return r;
}

/* Idempotent, thread-safe. Maps the tables, registers the main thread, sets
 * up the exit key and fork handlers. Returns 0 or -ENOMEM/-errno. */
int ptp_threads_init(void);

/* Called on a new thread before its start routine (the trampoline).
 * Registers it and, when a sampler is active, arms its timer. */
void ptp_threads_on_thread_start(void *entry);

/* The calling thread never gets a timer (the sampler's consumer thread). */
void ptp_threads_exclude_self(void);
/* Drops the calling thread's record (and timer) now: for a thread without
 * the exit destructor (the consumer thread) that is about to exit. */
void ptp_threads_forget_self(void);

/* Starts sampling: remembers magic/period, then arms a timer for every
 * registered and every /proc/self/task thread. Returns 0, -EBUSY (already
 * active) or -errno. */
int ptp_threads_activate(uint32_t magic, int64_t period_ns);
/* Stops: deletes every timer. Safe to call when not active. */
void ptp_threads_deactivate(void);
/* The /proc/self/task sweep: registers and arms threads not known yet,
 * forgets threads that are gone (deleting their timers). Returns 0 or
 * -errno. Called by the consumer thread about once a second. */
int ptp_threads_sweep(void);

/* Process-wide counters (for ptprof_stats). */
typedef struct ptp_threads_stats {
  uint64_t timers_created, timers_deleted, timer_errors, flushed, registered;
  uint64_t live;              /* records in use now */
  int last_errno;             /* errno of the last timer error */
} ptp_threads_stats;
void ptp_threads_get_stats(ptp_threads_stats *out);

/* Thread name of tid: /proc/self/task/<tid>/comm, else the name remembered
 * when the thread exited, else "". name has 16 bytes. */
void ptp_threads_name(uint32_t tid, char name[16]);

/* CPU-time clock of a thread by tid (what pthread_getcpuclockid returns). */
static inline clockid_t ptp_tid_cpuclock(uint32_t tid) {
  return (clockid_t)(((unsigned)~tid << 3) | 6u);  /* MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) */
}

#endif
