/*
 * ptp_engine.c - arming and disarming the per-thread sampling sources (see
 * ptp_engine.h).
 *
 * Process-wide state (runtime/ptp_process.h): `eng`, the running
 * sampler's settings (guarded by the registry mutex: every caller holds
 * it) and the engines' counters (atomics, read lock-free by stats).
 * Fork: a child has no source of its own (ptp_engine_forget_in_child) and
 * no running sampler (the registry's child handler calls ptp_engine_stop).
 *
 * Calls: ptp_perf (event syscalls), ptp_procfs (a thread's start time), the
 * ring's producer (PTP_SLOT_FLUSH records of a closed event's periods);
 * neither calls back.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/cache/ptp_fd.h"
#include "prof/cache/ptp_fdmarks.h"
#include "prof/runtime/ptp_engine.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/signal/ptp_perffd.h"
#include "prof/runtime/ptp_procfs.h"
#include "prof/signal/ptp_producer.h"
#include "prof/signal/ptp_sigstate.h"
#include "prof/signal/ptp_clock.h"

static struct {
  /* registry mutex */
  int active;
  uint32_t magic;
  int64_t period;
  int engine;
  uint64_t rng;                 /* splitmix64 state, seeded at the first start */
  /* atomics */
  _Atomic uint64_t created, deleted, errors, fallbacks;
  _Atomic uint64_t budget_fallbacks;  /* of fallbacks: the descriptor budget */
  _Atomic uint64_t fds_lost;    /* events whose descriptor the program closed */
  _Atomic int64_t perf_live;    /* perf event descriptors we hold now */
  _Atomic int last_errno;
} eng;

static uint64_t rng_next(void) {
  uint64_t z = (eng.rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t ptp_engine_cpu_ns(uint32_t tid) {
  return ptp_clock_ns(ptp_tid_cpuclock(tid), -1);
}

void ptp_engine_start(uint32_t magic, int64_t period_ns, int engine) {
  if (eng.rng == 0) {
    eng.rng = (uint64_t)ptp_clock_ns(CLOCK_MONOTONIC, 0) ^ ((uint64_t)getpid() << 32);
  }
  eng.active = 1;
  eng.magic = magic;
  eng.period = period_ns;
  eng.engine = engine;
}

void ptp_engine_stop(void) { eng.active = 0; }
int ptp_engine_active(void) { return eng.active; }
int64_t ptp_engine_period(void) { return eng.period; }

static void note_error(int e) {
  atomic_fetch_add(&eng.errors, 1);
  atomic_store(&eng.last_errno, e);
}

static ptp_perf_ident rec_ident(const ptp_thread_rec *r) {
  return (ptp_perf_ident){ r->sig->perf_dev, r->sig->perf_ino, r->sig->perf_id };
}

/* Before r's event is unpublished: a signal it already sent (pending on
 * the thread) names it in si_fd, and must still be told from the
 * program's (signal/ptp_sigstate.h), so the number is kept as the
 * previous one. */
static void remember_prev(ptp_thread_rec *r) {
  int fd = atomic_load_explicit(&r->sig->perf_fd, memory_order_relaxed);
  if (fd >= 0) atomic_store_explicit(&r->sig->perf_fd_prev, fd, memory_order_release);
}

/* Closes the event descriptor fd of r, only if the number still names that
 * event: the program may have closed it (close_range) and reused the
 * number for a file of its own, which we must never close. */
static void close_event(const ptp_thread_rec *r, int fd) {
  ptp_perf_ident id = rec_ident(r);
  ptp_fd_unmark(fd);
  ptp_perffd_released(fd);
  if (ptp_perf_is(fd, &id)) {
    close(fd);
  } else {
    atomic_fetch_add(&eng.fds_lost, 1);
  }
  atomic_fetch_sub(&eng.perf_live, 1);
  atomic_fetch_add(&eng.deleted, 1);
}

/* Closes r's perf event (see ptp_engine_disarm for when that is safe). */
static void perf_close(ptp_thread_rec *r) {
  remember_prev(r);
  int fd = atomic_exchange_explicit(&r->sig->perf_fd, -1, memory_order_acq_rel);
  if (fd >= 0) close_event(r, fd);
  r->has_perf = 0;
}

void ptp_engine_disarm(ptp_thread_rec *r) {
  if (r->closing_fd >= 0) {                 /* unpublished by ptp_engine_unpublish */
    close_event(r, r->closing_fd);
    r->closing_fd = -1;
  }
  if (r->has_perf) perf_close(r);
  if (!r->has_timer) return;
  timer_delete(r->timer);
  r->has_timer = 0;
  atomic_fetch_add(&eng.deleted, 1);
}

void ptp_engine_unpublish(ptp_thread_rec *r) {
  if (!r->has_perf) return;
  remember_prev(r);
  r->closing_fd = atomic_exchange_explicit(&r->sig->perf_fd, -1, memory_order_acq_rel);
  r->has_perf = 0;
}

uint64_t ptp_engine_owed(const ptp_thread_rec *r, int64_t cpu_now) {
  if (cpu_now < 0 || r->sig->armed_cpu_ns < 0) return 0;
  uint64_t due = ptp_expirations_due(cpu_now - r->sig->armed_cpu_ns, r->sig->first_ns, eng.period);
  uint64_t seen = atomic_load(&r->sig->delivered) + r->accounted;
  return due > seen ? due - seen : 0;
}

int ptp_engine_source_stale(ptp_thread_rec *r, uint32_t tid) {
  if (r->has_timer && !r->self_registered) {
    /* A foreign record whose thread died and whose tid was reused: the old
     * timer is bound to the dead thread and reads as disarmed. */
    struct itimerspec cur;
    return timer_gettime(r->timer, &cur) == 0 && cur.it_value.tv_sec == 0 &&
           cur.it_value.tv_nsec == 0;
  }
  /* the same for an event: another thread has the tid now */
  return r->has_perf && r->start_ticks && ptp_procfs_start_ticks(tid) != r->start_ticks;
}

void ptp_engine_forget_in_child(ptp_thread_rec *r) {
  int fd = atomic_exchange_explicit(&r->sig->perf_fd, -1, memory_order_relaxed);
  ptp_perf_ident id = rec_ident(r);
  if (fd >= 0) ptp_fd_unmark(fd);
  if (fd >= 0) ptp_perffd_released(fd);
  if (fd >= 0 && ptp_perf_is(fd, &id)) close(fd);    /* our copy only, if still ours */
  if (fd >= 0) atomic_fetch_sub(&eng.perf_live, 1);
  r->has_perf = 0;
  r->has_timer = 0;                                   /* not inherited */
}

int ptp_engine_check(ptp_thread_rec *r) {
  if (!r->has_perf) return 0;
  int fd = atomic_load_explicit(&r->sig->perf_fd, memory_order_relaxed);
  ptp_perf_ident id = rec_ident(r);
  if (fd < 0 || ptp_perf_is(fd, &id)) return 0;
  /* Not ours any more: unpublished (the handler then ignores its number),
   * never closed (the number may be the program's file now). A signal the
   * event had pending when it was closed still names it (perf_fd_prev):
   * ours, ignored. The periods the thread's CPU made due since then had
   * no event to report them: its pseudo-frame, never a stack. */
  remember_prev(r);
  atomic_store_explicit(&r->sig->perf_fd, -1, memory_order_release);
  uint32_t tid = atomic_load_explicit(&r->sig->tid, memory_order_relaxed);
  uint64_t owed = ptp_engine_owed(r, ptp_engine_cpu_ns(tid));
  if (owed) {
    uintptr_t cause = PTP_DROP_FD_CLOSED;
    r->accounted += owed;
    (void)ptp_push_sample(tid, owed > UINT32_MAX ? UINT32_MAX : (uint32_t)owed, PTP_SLOT_FLUSH,
                          &cause, 1);
  }
  ptp_fd_unmark(fd);
  ptp_perffd_released(fd);
  r->has_perf = 0;
  atomic_fetch_add(&eng.fds_lost, 1);
  atomic_fetch_sub(&eng.perf_live, 1);
  atomic_fetch_add(&eng.deleted, 1);
  return 1;
}

uint64_t ptp_engine_perf_budget(uint64_t soft) {
  if (soft < PTP_PERF_NOFILE_MIN) return 0;
  return soft / 4;
}

#define PERF_MIN_FIRST_NS 200000

/* Perf engine: opens r's event with a random first period. Returns 0,
 * -EMFILE/-ENFILE (caller falls back to a timer), -EDQUOT (the descriptor
 * budget is used up: a timer too) or another -errno (already counted
 * unless the thread just exited). */
static int arm_perf(ptp_thread_rec *r, uint32_t tid) {
  /* One descriptor per thread: only while ours stay under a quarter of the
   * soft RLIMIT_NOFILE (ptp_engine.h), so a program near its limit keeps
   * the descriptors it counts on. */
  if ((uint64_t)atomic_load(&eng.perf_live) >= ptp_engine_perf_budget(ptp_fd_soft_limit()))
    return -EDQUOT;
  int64_t first = 1 + (int64_t)(rng_next() % (uint64_t)eng.period);
  /* Not below PERF_MIN_FIRST_NS: a first period of a few us makes the
   * event's hrtimer interrupt the thread about as often as the interrupt
   * costs (a VM), so it keeps firing in kernel mode, where exclude_kernel
   * suppresses the signal that would set the regular period: seen as one
   * thread burning seconds of kernel time (~1 run in 12 of 200 short
   * threads). The price: a thread's first sample is never due before
   * 200 us of its CPU (2 % of a 99 Hz period). */
  int64_t min_first = eng.period < PERF_MIN_FIRST_NS ? eng.period : PERF_MIN_FIRST_NS;
  if (first < min_first) first = min_first;
  int64_t cpu0 = ptp_engine_cpu_ns(tid);
  int fd;
  ptp_perf_ident id;
  int rc = ptp_perf_open(tid, first, &fd, &id);
  if (rc == -EMFILE || rc == -ENFILE) return rc;
  if (rc) {
    if (rc != -ESRCH) note_error(-rc);
    return rc;
  }
  atomic_fetch_add(&eng.perf_live, 1);
  /* Publication rule 4 (signal/ptp_thread_sig.h): all of this before
   * perf_fd. */
  r->sig->perf_dev = id.dev;
  r->sig->perf_ino = id.ino;
  r->sig->perf_id = id.id;
  r->sig->armed_cpu_ns = cpu0;
  r->sig->first_ns = first;
  atomic_store_explicit(&r->sig->delivered, 0, memory_order_relaxed);
  r->accounted = 0;
  if (!r->self_registered && tid != (uint32_t)getpid()) r->start_ticks = ptp_procfs_start_ticks(tid);
  atomic_store_explicit(&r->sig->perf_first, 1, memory_order_relaxed);
  atomic_store_explicit(&r->sig->perf_fd, fd, memory_order_release);
  r->has_perf = 1;
  atomic_fetch_add(&eng.created, 1);
  /* Enabled only now that the handler knows the fd (see ptp_perf.h). */
  if ((rc = ptp_perf_enable(fd)) != 0) {
    /* never enabled, so no signal of it can be in a handler: close now */
    if (rc != -ESRCH) note_error(-rc);
    perf_close(r);
    return rc;
  }
  return 0;
}

void ptp_engine_arm(ptp_thread_rec *r) {
  if (!eng.active || r->excluded || r->has_timer || r->has_perf) return;
  uint32_t tid = atomic_load_explicit(&r->sig->tid, memory_order_relaxed);
  if (eng.engine == PTP_ENGINE_PERF) {
    int rc = arm_perf(r, tid);
    if (rc != -EMFILE && rc != -ENFILE && rc != -EDQUOT) return;
    atomic_fetch_add(&eng.fallbacks, 1);     /* out of fds or budget: a timer instead */
    if (rc == -EDQUOT) atomic_fetch_add(&eng.budget_fallbacks, 1);
  }
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev._sigev_un._tid = (pid_t)tid;
  /* ours: the process's timer magic above, this start's generation and the
   * tid below (signal/ptp_sigstate.h tells ours from the program's by it) */
  uint64_t hi = atomic_load_explicit(&ptp_g_sig.timer_magic, memory_order_relaxed);
  sev.sigev_value.sival_ptr = (void *)(uintptr_t)((hi << 32) | eng.magic | (tid & PTP_TIMER_TID_MASK));
  timer_t t;
  if (timer_create(ptp_tid_cpuclock(tid), &sev, &t) != 0) {
    /* EINVAL: the thread exited since it was listed (sweep race), not a
     * failure to sample a live thread. */
    if (errno != EINVAL && errno != ESRCH) note_error(errno);
    return;
  }
  /* Random first expiry in (0, period]: a thread that lives shorter than a
   * period still gets a sample with probability lifetime / period. */
  int64_t first = 1 + (int64_t)(rng_next() % (uint64_t)eng.period);
  struct itimerspec its = {
    .it_value = { first / 1000000000, first % 1000000000 },
    .it_interval = { eng.period / 1000000000, eng.period % 1000000000 },
  };
  r->sig->armed_cpu_ns = ptp_engine_cpu_ns(tid);
  r->sig->first_ns = first;
  atomic_store_explicit(&r->sig->delivered, 0, memory_order_relaxed);
  r->accounted = 0;
  if (timer_settime(t, 0, &its, NULL) != 0) {
    int e = errno;
    timer_delete(t);
    if (e != ESRCH && e != EINVAL) note_error(e);  /* ESRCH: the thread just exited */
    return;
  }
  r->timer = t;
  r->has_timer = 1;
  atomic_fetch_add(&eng.created, 1);
}

void ptp_engine_get_stats(ptp_engine_stats *out) {
  out->created = atomic_load(&eng.created);
  out->deleted = atomic_load(&eng.deleted);
  out->errors = atomic_load(&eng.errors);
  out->fallbacks = atomic_load(&eng.fallbacks);
  out->budget_fallbacks = atomic_load(&eng.budget_fallbacks);
  out->fds_lost = atomic_load(&eng.fds_lost);
  out->last_errno = atomic_load(&eng.last_errno);
}
