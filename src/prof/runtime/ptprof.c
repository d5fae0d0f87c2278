/*
 * ptprof.c - the public sampler API (include/ptprof.h): lifecycle, the
 * consumer thread, windows and the dump cycle.
 *
 * Threads and locks:
 *  - api_mu ("the dump lock") serializes start, stop, dump, set_dir and the
 *    periodic dump; it is held for a whole dump (encode + write).
 *  - agg_mu guards the aggregation table, the ring's consumer side and the
 *    window start times. Order: api_mu, then agg_mu.
 *  - The consumer thread wakes on work only: a producer finding the ring a
 *    quarter full or the walker asking for an unwind table wakes its futex
 *    (ptp_shared.wake_seq: no descriptor, see ptp_producer.h); a periodic
 *    dump that is due ends its wait's timeout; and
 *    while samples come in it also passes every 100 ms (so a table asked
 *    for or a dlopen'ed library is followed as before). A process that uses
 *    no CPU produces no samples, so its consumer sleeps (no wake-up at all
 *    without periodic dumps). At every pass it drains the ring into the
 *    aggregation and refreshes the unwind tables (dlopen/dlclose, lazy
 *    tables); it sweeps /proc/self/task at start (activate), at most once a
 *    second while samples come in, and before each periodic dump. It only
 *    ever TRIES api_mu (a stop holding api_mu joins it).
 *  - The signal handler takes no lock. Of this file's state it reads only
 *    ptp_shared (published in ptp_g_shared at start, unpublished and freed
 *    after the handler grace at stop); besides, it reads the thread
 *    entries, the unwind tables and the thread's label block, each
 *    published by its own module (the full list: signal/ptp_handler.h).
 *
 * Dump cycle (ptprof_dump, periodic, final): set sh->dumping (the handler
 * now counts PTP_DROP_DUMPING), note the cut time, wait until no handler is
 * inside, drain the ring, swap the aggregation for an empty one, take the
 * drop counters, encode and write (the blind period), then start the next
 * window (new start times, blind_ns = now - cut), clear sh->dumping, wait
 * for the handlers inside, and take the blind period's PTP_DROP_DUMPING
 * count for the NEXT snapshot (p->blind_drops): the blind window is
 * reported after it, never as samples. A sample drained while a dump runs,
 * or still in the ring from before the new window's start, is counted the
 * same way, never added to a window.
 *
 * The profiler's own work: every API entry point, the consumer thread and
 * the whole dump (its debug-file copies after sampling resumed included)
 * run with the calling thread's own-work mark set (signal/ptp_own_work.h),
 * so the handler counts their expirations as PTP_DROP_OWN_WORK instead of
 * sampling them. The consumer thread is never sampled at all; its CPU
 * clock is read at each cut. Each snapshot reports both, for the period
 * from the previous cut to its own (this window and the blind window
 * before it), in a comment (output/ptp_pprof.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ptprof.h"
#include "prof/cache/ptp_fd.h"
#include "prof/cache/ptp_fdmarks.h"
#include "prof/runtime/ptp_agg.h"
#include "prof/runtime/ptp_engine.h"
#include "prof/runtime/ptp_grace.h"
#include "prof/runtime/ptp_graveyard.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/unwind/ptp_xranges.h"
#include "prof/signal/ptp_handler.h"
#include "prof/signal/ptp_own_work.h"
#include "prof/signal/ptp_sigstate.h"
#include "prof/runtime/ptp_interpose.h"
#include "prof/runtime/ptp_libc.h"
#include "prof/runtime/ptp_siginterpose.h"
#include "prof/runtime/ptp_fdwatch.h"
#include "prof/runtime/ptp_labels.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/runtime/ptp_process.h"
#include "prof/output/ptp_pprof.h"
#include "prof/output/ptp_snapstore.h"
#include "prof/output/ptp_strbuf.h"
#include "prof/symbols/ptp_symbolize.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/runtime/ptprof_internal.h"
#include "prof/ptp_alloc.h"

#define RING_SLOTS 2048u
#define POLL_MS 100
#define SWEEP_NS 1000000000LL

struct ptprof {
  /* configuration (immutable after new, except dir under api_mu) */
  int hz;
  int64_t period_ns;
  int keep;
  int64_t interval_ns;
  char *dir;
  char *prefix;
  char family[PTP_SNAPSTORE_PREFIX_MAX + 1];   /* "" or opt->family_prefix */
  int keep_total;
  ptprof_log_fn log;
  void *log_user_data;
  pid_t pid;                   /* creating process: a forked child is refused */
  int engine_opt;              /* PTPROF_ENGINE_* asked for */
  _Atomic int engine;          /* chosen at the last start (PTP_ENGINE_*) */
  int engine_why;              /* AUTO fell back to the timer: the probe's -errno */
  uint64_t engine_nofile;      /* AUTO took the timer for RLIMIT_NOFILE: the soft limit */

  pthread_mutex_t api_mu;
  int running;
  ptp_shared *sh;
  pthread_t consumer;
  sem_t consumer_ready;
  _Atomic int consumer_stop;
  ptp_symbolizer *sym;
  ptp_snapstore *store;
  int err_latched;             /* an error was logged; cleared by a good dump */
  uint64_t flushed_at_cut;     /* threads with exit losses, at the last cut */

  pthread_mutex_t agg_mu;
  ptp_agg *agg, *agg_spare;
  int64_t win_start_mono, win_start_real, blind_ns;
  int in_dump;                 /* between a dump's cut and its resume */
  uint64_t blind_drops;        /* expirations dropped in the blind window
                                  before the current window (agg_mu) */

  /* The consumer thread's CPU clock (it is never sampled): read at each cut
   * while it runs, and its last value stored by the thread as it ends
   * (a stop joins it before the final dump). */
  clockid_t consumer_clk;
  int consumer_clk_ok;
  _Atomic int consumer_ended;
  _Atomic int64_t consumer_cpu_end;
  int64_t consumer_cpu_at_cut; /* its CPU at the previous cut (api_mu) */

  ptp_window_hook_fn hook;     /* tests: sees each window before encoding */
  void *hook_ctx;
  ptp_resume_hook_fn resume_hook;   /* tests: runs after sampling resumed */
  void *resume_hook_ctx;

  _Atomic uint64_t st_samples, st_signals, st_truncated, st_dumps, st_dump_errors;
  _Atomic uint64_t st_drops[PTP_DROP__COUNT];
  _Atomic uint64_t st_no_cpu;  /* perf expirations ignored: no CPU behind them */
  _Atomic int64_t st_own_cpu;  /* the consumer's CPU up to the last cut */
  _Atomic int64_t st_last_window, st_last_blind;
};

/* This file's process-wide state (runtime/ptp_process.h): the started
 * sampler of this process, if any (one at a time: the signal handler and
 * the thread registry are process-wide; in a forked child it is the
 * parent's and ignored by pid). The handler's installation is
 * ptp_siginterpose.c's. */
static struct {
  _Atomic(ptprof *) running;
  _Atomic uint32_t starts;      /* starts so far: each start's generation differs */
} proc;

static void logf_(ptprof *p, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void logf_(ptprof *p, int level, const char *fmt, ...) {
  if (!p->log) return;
  /* The whole line (a directory path may be long); only without memory
   * for it, the first 511 bytes, marked as cut with "...". */
  va_list ap;
  va_start(ap, fmt);
  char one[512];
  int n = vsnprintf(one, sizeof one, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n >= sizeof one) {
    char *line = ptp_malloc((size_t)n + 1);
    if (line) {
      va_start(ap, fmt);
      vsnprintf(line, (size_t)n + 1, fmt, ap);
      va_end(ap);
      p->log(level, line, p->log_user_data);
      free(line);
      return;
    }
    memcpy(one + sizeof one - 4, "...", 4);
  }
  p->log(level, one, p->log_user_data);
}

_Static_assert(PTP_DROP_RING_FULL == PTPROF_DROP_RING_FULL && PTP_DROP_DUMPING == PTPROF_DROP_DUMPING &&
               PTP_DROP_NO_STACK == PTPROF_DROP_NO_STACK && PTP_DROP_REENTRANT == PTPROF_DROP_REENTRANT &&
               PTP_DROP_THREAD_EXIT == PTPROF_DROP_THREAD_EXIT && PTP_DROP_KERNEL == PTPROF_DROP_KERNEL &&
               PTP_DROP_UNDELIVERED == PTPROF_DROP_UNDELIVERED &&
               PTP_DROP_NO_MEMORY == PTPROF_DROP_NO_MEMORY && PTP_DROP_OWN_WORK == PTPROF_DROP_OWN_WORK &&
               PTP_DROP_BLOCKED == PTPROF_DROP_BLOCKED && PTP_DROP_FD_CLOSED == PTPROF_DROP_FD_CLOSED &&
               PTP_DROP__COUNT == PTPROF_DROP_CAUSES,
               "the public drop causes are the sampler's");
_Static_assert(PTPROF_DROP_CAUSES <= PTPROF_DROPS_MAX, "ptprof_stats.drops holds every cause");
_Static_assert(PTP_SIG_STOP_REPLACED == PTPROF_STOPPED_HANDLER_REPLACED &&
               PTP_SIG_STOP_SIGNALFD == PTPROF_STOPPED_SIGNALFD,
               "the public stop reasons are the interposers'");

const char *ptprof_drop_name(int cause) { return ptp_drop_name(cause); }

const char *ptprof_strerror(int err) {
  switch (err) {
  case 0: return "success";
  case PTPROF_E_FORKED: return "this sampler belongs to the parent process (called in a forked child)";
  case PTPROF_E_LABELS_FULL: return "this thread already has the most labels pushed (PTPROF_LABELS_MAX)";
  case PTPROF_E_LABELS_EMPTY: return "no label pushed on this thread";
  case PTPROF_E_LABEL_TOO_LONG: return "label key or value longer than PTPROF_LABEL_LEN_MAX";
  case PTPROF_E_LABEL_TABLE: return "too many distinct label strings (PTPROF_LABEL_STRINGS_MAX)";
  case -EINVAL: return "invalid argument";
  case -ENOMEM: return "out of memory";
  case -EBUSY: return "another sampler is running in this process, or sampling was stopped for good "
                      "in it (SIGPROF's handler replaced, or read through a signalfd)";
  case -EALREADY: return "sampler already started";
  case -ENOTCONN: return "sampler not started";
  case -EDESTADDRREQ: return "no snapshot directory set";
  case -ENOSPC: return "no space left on the device";
  case -EDQUOT: return "disk quota exceeded";
  case -EROFS: return "snapshot directory is on a read-only file system";
  case -ENOENT: return "snapshot directory does not exist (removed?)";
  case -ENOTDIR: return "snapshot directory path is not a directory";
  case -EACCES: return "permission denied on the snapshot directory";
  case -EPERM: return "operation not permitted";
  case -EIO: return "I/O error";
  case -E2BIG: return "profile too large";
  case -EMFILE: return "too many open files";
  case -EAGAIN: return "resource temporarily unavailable";
  case -ENAMETOOLONG: return "path too long";
  default: return err < 0 ? "system error" : "unknown error";
  }
}

/* All-zero is the defaults (ptprof.h); ptprof_new resolves each 0. */
void ptprof_options_init(ptprof_options *opt) { memset(opt, 0, sizeof *opt); }

int ptprof_engine_from_name(const char *name) {
  if (!name) return -EINVAL;
  if (!strcmp(name, "auto")) return PTPROF_ENGINE_AUTO;
  if (!strcmp(name, "perf")) return PTPROF_ENGINE_PERF;
  if (!strcmp(name, "timer")) return PTPROF_ENGINE_TIMER;
  return -EINVAL;
}

static int valid_prefix(const char *s) {
  size_t n = strlen(s);
  return n >= 1 && n <= PTP_SNAPSTORE_PREFIX_MAX && !strchr(s, '/') && s[0] != '.';
}

int ptprof_new(ptprof **out, const ptprof_options *opt) {
  if (!out) return -EINVAL;
  ptprof_options def;
  ptprof_options_init(&def);
  if (!opt) opt = &def;
  int hz = opt->hz ? opt->hz : 99;
  int keep = opt->keep ? opt->keep : 8;
  const char *prefix = opt->prefix ? opt->prefix : "profile-";
  if (hz < 1 || hz > 10000 || keep < 1 || opt->interval_ms < 0 || !valid_prefix(prefix) ||
      (opt->dir && !*opt->dir) || opt->engine < PTPROF_ENGINE_AUTO ||
      opt->engine > PTPROF_ENGINE_TIMER ||
      (opt->family_prefix && (!valid_prefix(opt->family_prefix) || opt->keep_total < 1 ||
                              strncmp(prefix, opt->family_prefix, strlen(opt->family_prefix)))))
    return -EINVAL;
  ptp_interpose_link();
  ptp_siginterpose_link();
  ptp_fdwatch_link();
  int rc = ptp_process_init();
  if (rc) return rc;
  ptprof *p = ptp_calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  p->hz = hz;
  p->period_ns = 1000000000LL / hz;
  p->keep = keep;
  if (opt->family_prefix) snprintf(p->family, sizeof p->family, "%s", opt->family_prefix);
  p->keep_total = opt->keep_total;
  p->interval_ns = opt->interval_ms * 1000000LL;
  p->log = opt->log;
  p->log_user_data = opt->log_user_data;
  p->pid = getpid();
  p->engine_opt = opt->engine;
  rc = -ENOMEM;
  p->prefix = ptp_strdup(prefix);
  if (!p->prefix) goto fail_p;
  if (opt->dir && !(p->dir = ptp_strdup(opt->dir))) goto fail_prefix;
  if ((rc = ptp_agg_new(&p->agg)) < 0) goto fail_dir;
  if ((rc = ptp_agg_new(&p->agg_spare)) < 0) goto fail_agg;
  if (p->dir && (rc = ptp_snapstore_new(&p->store, p->dir, p->prefix, p->keep)) < 0) goto fail_spare;
  if (p->store && p->family[0]) ptp_snapstore_set_family(p->store, p->family, p->keep_total);
  if (sem_init(&p->consumer_ready, 0, 0) != 0) { rc = -errno; goto fail_store; }
  pthread_mutex_init(&p->api_mu, NULL);
  pthread_mutex_init(&p->agg_mu, NULL);
  *out = p;
  return 0;

fail_store:
  ptp_snapstore_del(p->store);
fail_spare:
  ptp_agg_del(p->agg_spare);
fail_agg:
  ptp_agg_del(p->agg);
fail_dir:
  free(p->dir);
fail_prefix:
  free(p->prefix);
fail_p:
  free(p);
  return rc;
}

/* ---- consumer side ----------------------------------------------------- */

/* Moves every published slot into the aggregation; returns how many slots
 * it took. agg_mu held. */
static size_t drain_locked(ptprof *p) {
  ptp_shared *sh = p->sh;
  ptp_slot *s;
  size_t n = 0;
  while ((s = ptp_ring_peek(&sh->ring))) {
    n++;
    if (s->nframes > 0) {
      if (!(s->flags & PTP_SLOT_FLUSH) && (p->in_dump || s->ts < p->win_start_mono)) {
        /* Taken before this window began or drained while a dump runs (a
         * handler that outlived the dump's grace wait): part of the blind
         * period, reported with the next snapshot, never a sample. */
        p->blind_drops += s->weight;
        atomic_fetch_add(&p->st_drops[PTP_DROP_DUMPING], s->weight);
      } else if (s->flags & PTP_SLOT_FLUSH) {
        /* A thread's exit accounting: CPU it had, stack unknown. Under its
         * own "[lost: thread exit]" pseudo-frame, and counted as a drop. */
        uintptr_t cause = s->frames[0] < PTP_DROP__COUNT ? s->frames[0] : PTP_DROP_THREAD_EXIT;
        if (ptp_agg_add(p->agg, s->tid, PTP_SAMPLE_LOST, NULL, &cause, 1, s->weight) < 0)
          atomic_fetch_add(&sh->drops[PTP_DROP_NO_MEMORY], s->weight);
        else
          atomic_fetch_add(&sh->drops[cause], s->weight);
      } else if (ptp_agg_add_named(p->agg, s->tid, s->name, s->flags, &s->labels, s->frames, s->nframes,
                             s->weight) < 0) {
        /* Out of memory for a new stack: taken, but not recorded. Its own
         * cause: the ring was not full. */
        atomic_fetch_add(&sh->drops[PTP_DROP_NO_MEMORY], s->weight);
      } else {
        atomic_fetch_add_explicit(&p->st_samples, s->weight, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->st_signals, 1, memory_order_relaxed);
        if (s->flags & PTP_SAMPLE_TRUNCATED)
          atomic_fetch_add_explicit(&p->st_truncated, s->weight, memory_order_relaxed);
      }
    }
    ptp_ring_release(&sh->ring, s);
  }
  return n;
}

static int do_dump(ptprof *p, char *path_out, size_t cap);

static void consumer_sweep(ptprof *p, uint64_t *timer_errors_seen) {
  ptp_threads_sweep();
  ptp_threads_stats ts;
  ptp_threads_get_stats(&ts);
  if (ts.timer_errors > *timer_errors_seen) {
    if (*timer_errors_seen == 0)
      logf_(p, PTPROF_LOG_WARN, "ptprof: could not arm a CPU timer or event for a thread (%llu so "
            "far, last: %s); that thread is not sampled", (unsigned long long)ts.timer_errors,
            strerror(ts.last_errno));
    *timer_errors_seen = ts.timer_errors;
  }
}

/* The consumer thread's CPU time (its clock read from any thread). */
static int64_t consumer_cpu_ns(ptprof *p) {
  if (atomic_load(&p->consumer_ended)) return atomic_load(&p->consumer_cpu_end);
  struct timespec ts;
  if (!p->consumer_clk_ok || clock_gettime(p->consumer_clk, &ts) != 0) return p->consumer_cpu_at_cut;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleeps until a producer or a stop wakes the futex, or timeout_ms passes
 * (-1: no timeout). The word is read before wake_armed is set, so a wake
 * that comes in between changes it and the wait returns at once. EINTR
 * and spurious returns only cost a pass. */
static void consumer_wait(ptp_shared *sh, int64_t timeout_ms) {
  uint32_t seq = atomic_load_explicit(&sh->wake_seq, memory_order_acquire);
  atomic_store(&sh->wake_armed, 1);
  struct timespec ts = { (time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000L };
  (void)syscall(SYS_futex, &sh->wake_seq, FUTEX_WAIT_PRIVATE, seq, timeout_ms >= 0 ? &ts : NULL,
                NULL, 0);
}

static void *consumer_main(void *arg) {
  ptprof *p = arg;
  /* Everything this thread does is the profiler's (it has no sampling
   * source either: excluded below; its CPU is reported from its clock). */
  ptp_own_work_enter();
  (void)pthread_setname_np(pthread_self(), "ptprof-consumer");
  ptp_threads_exclude_self();
  sem_post(&p->consumer_ready);
  int64_t next_sweep = ptp_now_mono() + SWEEP_NS;
  uint64_t timer_errors_seen = 0;
  /* 1: a periodic dump is due but a manual one holds api_mu (retry in 5 ms);
   * 2: it is due but there is no directory yet (retry at the poll rate). */
  int backoff = 0;
  /* The last pass found samples: the process is running, pass again in
   * POLL_MS. Otherwise sleep until a producer, a due dump or stop wakes us:
   * an idle process costs no wake-up (samples only come from CPU use, and
   * whatever comes is held by the ring, which wakes us at its fill mark
   * long before it is full). */
  int busy = 1;
  /* When one of our descriptors was closed by the program: the time its
   * thread's event is opened again (0: none pending). Not at once: a
   * program that just closed everything (close_range) opens its own files
   * next and counts on getting the lowest numbers; any descriptor we open
   * takes the lowest free one for a moment. */
  int64_t reopen_at = 0;
  while (!atomic_load(&p->consumer_stop)) {
    int64_t now = ptp_now_mono();
    int64_t timeout = busy ? POLL_MS : -1;
    if (reopen_at) {
      int64_t t = (reopen_at - now) / 1000000 + 1;
      if (t < 0) t = 0;
      if (timeout < 0 || t < timeout) timeout = t;
    }
    if (p->interval_ns) {
      pthread_mutex_lock(&p->agg_mu);
      int64_t due = p->win_start_mono + p->interval_ns;
      pthread_mutex_unlock(&p->agg_mu);
      int64_t t = (due - now) / 1000000 + ((due - now) % 1000000 > 0);   /* round up */
      if (t < 0) t = 0;
      if (timeout < 0 || t < timeout) timeout = t;
    }
    if (backoff == 1 && timeout >= 0 && timeout < 5) timeout = 5;
    if (backoff == 2 && timeout >= 0 && timeout < POLL_MS) timeout = POLL_MS;
    if (timeout > INT32_MAX) timeout = INT32_MAX;
    consumer_wait(p->sh, timeout);
    /* The program closed one of our descriptors (a close-family call
     * noticed it and woke us): nothing now (no descriptor of ours while the
     * program reopens its own), the check POLL_MS later forgets it without
     * touching the number and opens the event again. */
    if (ptp_fd_take_lost() && !reopen_at) {
      reopen_at = ptp_now_mono() + (int64_t)POLL_MS * 1000000;
      continue;
    }
    if (reopen_at && ptp_now_mono() >= reopen_at) {
      reopen_at = 0;
      ptp_threads_check_fds();
    }
    pthread_mutex_lock(&p->agg_mu);
    busy = drain_locked(p) > 0;
    int64_t due = p->interval_ns ? p->win_start_mono + p->interval_ns : INT64_MAX;
    pthread_mutex_unlock(&p->agg_mu);
    /* At every pass: follow dlopen/dlclose, and build the tables the walker
     * asked for since the last pass, so only the samples of about one pass
     * through a new library are truncated. Cheap when there is nothing to
     * do (one dl_iterate_phdr step, a scan of the slots). */
    ptp_cfi_refresh();
    ptp_cfi_save_pending();   /* new tables to the persistent cache (I/O here, not at start) */
    /* Our handler replaced behind the interposers (a raw rt_sigaction):
     * the program's handler would get our signals; sampling stops for
     * good, said in the next snapshot. One system call per pass. */
    if (ptp_sig_check_replaced())
      logf_(p, PTPROF_LOG_WARN, "ptprof: sampling stopped: %s",
            ptp_sig_stop_text(PTP_SIG_STOP_REPLACED));
    now = ptp_now_mono();
    ptp_xranges_poll(now);    /* JIT code the walker met outside the known ranges (rate-bounded) */
    int dump_due = now >= due && !atomic_load(&p->consumer_stop);
    /* Threads made without pthread_create (raw clone, libc helpers) are only
     * found by listing /proc/self/task: at most once a second while the
     * process runs, and before a periodic dump (so the next window has
     * them); never while it sleeps. */
    if ((busy && now >= next_sweep) || (dump_due && backoff == 0)) {
      consumer_sweep(p, &timer_errors_seen);
      next_sweep = now + SWEEP_NS;
    }
    if (dump_due) {
      /* Only try: ptprof_stop holds api_mu while it joins this thread. */
      backoff = 1;
      if (pthread_mutex_trylock(&p->api_mu) == 0) {
        int rc = p->running ? do_dump(p, NULL, 0) : 0;
        pthread_mutex_unlock(&p->api_mu);
        backoff = rc == -EDESTADDRREQ ? 2 : 0;
      }
    }
  }
  ptp_threads_forget_self();
  struct timespec ts = {0, 0};
  (void)clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);   /* cannot fail for the own thread */
  atomic_store(&p->consumer_cpu_end, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
  atomic_store(&p->consumer_ended, 1);
  ptp_own_work_leave();
  return NULL;
}

/* ---- dump ------------------------------------------------------------- */

/* One dump's state, from the cut to the write; each step below fills its
 * part, dump_free releases what they made. */
typedef struct dump {
  ptp_agg *full;                  /* the closed window's aggregation */
  int64_t cut_mono;
  uint64_t label_epoch;           /* label names kept until encoded */
  uint64_t grave_token;           /* exited threads' names kept until named */
  uint64_t no_cpu;                /* perf expirations ignored in this window */
  ptp_window w;
  char *comments[2];              /* the sampler's own comment lines (owned) */
  const char *comment_ptrs[2];
  ptp_sample *samples;
  uint32_t *tids;
  ptp_thread *threads;
  ptp_labels_res *lres;
  uint8_t *buf;                   /* the encoded snapshot */
  size_t len;
} dump;

/* Step 1, the cut: the handler now counts PTP_DROP_DUMPING; wait until no
 * handler is inside (50 ms at most: a late sample is counted as the blind
 * period's, see drain_locked), drain the ring into the window and swap in
 * the empty spare; take the blind window before this one (counted at the
 * previous resume and by the drains since) and the profiler's own work
 * since the previous cut (own-work expirations, the consumer's CPU).
 * Cannot fail. */
static void dump_cut(ptprof *p, dump *d) {
  ptp_shared *sh = p->sh;
  atomic_store(&sh->dumping, 1);
  d->cut_mono = ptp_now_mono();
  d->label_epoch = ptp_labels_cut();
  d->grave_token = ptp_graveyard_cut();
  ptp_grace_wait(50);

  pthread_mutex_lock(&p->agg_mu);
  drain_locked(p);
  d->full = p->agg;
  p->agg = p->agg_spare;
  p->agg_spare = d->full;
  int64_t start_real = p->win_start_real, start_mono = p->win_start_mono, blind = p->blind_ns;
  d->w.drops[PTP_DROP_DUMPING] = p->blind_drops;
  p->blind_drops = 0;
  p->in_dump = 1;
  pthread_mutex_unlock(&p->agg_mu);

  d->w.drops[PTP_DROP_OWN_WORK] = atomic_exchange(&sh->drops[PTP_DROP_OWN_WORK], 0);
  atomic_fetch_add(&p->st_drops[PTP_DROP_OWN_WORK], d->w.drops[PTP_DROP_OWN_WORK]);
  int64_t ccpu = consumer_cpu_ns(p);
  d->w.own_thread_cpu_ns = ccpu > p->consumer_cpu_at_cut ? ccpu - p->consumer_cpu_at_cut : 0;
  p->consumer_cpu_at_cut = ccpu;
  atomic_fetch_add(&p->st_own_cpu, d->w.own_thread_cpu_ns);

  d->w.start_ns = start_real;
  d->w.duration_ns = d->cut_mono - start_mono;
  d->w.period_ns = p->period_ns;
  d->w.hz = p->hz;
  d->w.blind_ns = blind;
}

/* Step 2, drop accounting: the perf engine's unsignalled periods of live
 * threads (CPU we know of, stack unknown), then every other cause's counter
 * of the window into w.drops and the cumulative stats (the blind window's
 * and the own work's were taken at the cut), and the CPU of each drop that
 * is the program's under its cause's pseudo-frame (thread-exit and
 * unsignalled losses already are, per thread). Returns 0 or -ENOMEM (the
 * counters are taken anyway: the window is lost, its drops are still
 * counted; periods that found no room in the aggregation count as
 * PTP_DROP_NO_MEMORY). */
static int dump_drops(ptprof *p, dump *d) {
  ptp_shared *sh = p->sh;
  int rc = 0;
  if (atomic_load(&p->engine) == PTP_ENGINE_PERF) {
    enum { UCAP = 1024 };
    ptp_unsignalled *u = ptp_malloc(UCAP * sizeof *u);
    /* Without memory for the list the periods stay owed (not marked
     * accounted) and are counted at the next dump: nothing is lost. */
    size_t nu = u ? ptp_threads_collect_unsignalled(u, UCAP) : 0;
    for (size_t k = 0; k < nu; k++) {
      uintptr_t cause = (uintptr_t)u[k].cause;
      int r = rc ? rc : ptp_agg_add(d->full, u[k].tid, PTP_SAMPLE_LOST, NULL, &cause, 1, u[k].count);
      atomic_fetch_add(&sh->drops[r ? PTP_DROP_NO_MEMORY : u[k].cause], u[k].count);
      if (r) rc = r;
    }
    free(u);
  }
  for (int i = 0; i < PTP_DROP__COUNT; i++) {
    if (!ptp_drop_is_sampled(i)) continue;   /* taken at the cut, never samples */
    d->w.drops[i] = atomic_exchange(&sh->drops[i], 0);
    atomic_fetch_add(&p->st_drops[i], d->w.drops[i]);
    uintptr_t cause = (uintptr_t)i;
    /* causes recorded per thread (PTP_SLOT_FLUSH records) already are */
    if (i != PTP_DROP_THREAD_EXIT && i != PTP_DROP_KERNEL && i != PTP_DROP_UNDELIVERED &&
        i != PTP_DROP_BLOCKED && i != PTP_DROP_FD_CLOSED && d->w.drops[i] && rc == 0)
      rc = ptp_agg_add(d->full, 0, PTP_SAMPLE_LOST, NULL, &cause, 1, d->w.drops[i]);
  }
  d->no_cpu = atomic_exchange(&sh->no_cpu, 0);
  atomic_fetch_add(&p->st_no_cpu, d->no_cpu);
  return rc;
}

/* Step 3, the sampler's comment lines: the engine (and why, when AUTO fell
 * back), exit losses, ignored expirations; the unwind tables' state. Built
 * whole (ptp_strbuf: no line is cut short). Returns 0 or -ENOMEM. */
static int dump_comments(ptprof *p, dump *d) {
  ptp_threads_stats ts;
  ptp_threads_get_stats(&ts);
  int engine = atomic_load(&p->engine);
  ptp_strbuf b = {0};
  ptp_strbuf_printf(&b, "sampler engine: %s, %d Hz",
                    engine != PTP_ENGINE_PERF ? "POSIX CPU-time timer per thread"
                    : ptp_perf_excludes_kernel() ? "perf_event task-clock per thread (user mode "
                                                   "only: perf_event_paranoid > 1)"
                                                 : "perf_event task-clock per thread",
                    p->hz);
  if (p->engine_why)
    ptp_strbuf_printf(&b, " (perf_event unavailable: %s)", strerror(-p->engine_why));
  if (p->engine_nofile)
    ptp_strbuf_printf(&b, " (perf_event not used: it takes one descriptor per thread, and the "
                      "soft RLIMIT_NOFILE %llu is below %d)",
                      (unsigned long long)p->engine_nofile, PTP_PERF_NOFILE_MIN);
  if (engine == PTP_ENGINE_PERF && ts.perf_fallbacks)
    ptp_strbuf_printf(&b, " (%llu threads on CPU-time timers: %llu beyond the descriptor budget "
                      "of %llu, a quarter of the soft RLIMIT_NOFILE; %llu out of descriptors)",
                      (unsigned long long)ts.perf_fallbacks,
                      (unsigned long long)ts.perf_budget_fallbacks,
                      (unsigned long long)ptp_engine_perf_budget(ptp_fd_soft_limit()),
                      (unsigned long long)(ts.perf_fallbacks - ts.perf_budget_fallbacks));
  int64_t stop_ns;
  int stop = ptp_sig_stop_reason(&stop_ns);
  if (stop)
    ptp_strbuf_printf(&b, "; sampling stopped for good %.3f s before this snapshot's end: %s",
                      (double)(ptp_now_real() - stop_ns) / 1e9, ptp_sig_stop_text(stop));
  if (ts.fds_lost)
    ptp_strbuf_printf(&b, "; the program closed %llu of the sampler's perf event descriptors so "
                      "far (those threads' events were opened again; no descriptor of the "
                      "program was used or closed)", (unsigned long long)ts.fds_lost);
  ptp_strbuf_printf(&b, "; %llu exiting threads had expirations due but not delivered (under "
                    "[lost: thread exit] or [lost: kernel mode])",
                    (unsigned long long)(ts.flushed - p->flushed_at_cut));
  /* Expirations of the event's clock that the thread's CPU clock did not
   * back (a VM's steal time): said, since a reader comparing the profile
   * with the event's own count would otherwise find them missing. */
  if (engine == PTP_ENGINE_PERF)
    ptp_strbuf_printf(&b, "; %llu expirations ignored with no thread CPU behind them (the "
                      "event's clock ran while the thread's CPU clock did not: steal time)",
                      (unsigned long long)d->no_cpu);
  p->flushed_at_cut = ts.flushed;
  int rc;
  if (!(d->comments[0] = ptp_strbuf_take(&b, &rc))) return rc;
  /* How the unwind tables stand: a library whose table was refused by the
   * memory cap keeps its samples truncated, and this line says so. */
  ptp_cfi_info ci;
  ptp_cfi_get_info(&ci);
  ptp_strbuf_printf(&b,
                    "unwind tables: %zu objects walked with CFI, %zu tables built for non-system "
                    "objects (%zu KiB of %zu KiB cap, %.1f ms CPU for all tables, %llu read from "
                    "the table cache), %zu pending, %zu failed (%llu refused by the cap); without "
                    "CFI: %zu walked with frame pointers, %zu not walked",
                    ci.nlibs, ci.lazy_ready, ci.lazy_bytes >> 10, ci.lazy_cap >> 10,
                    (double)ci.build_ns / 1e6, ci.cache_hits, ci.lazy_wanted, ci.lazy_failed,
                    ci.lazy_refused, ci.nfp, ci.nnocfi);
  if (!(d->comments[1] = ptp_strbuf_take(&b, &rc))) return rc;
  d->comment_ptrs[0] = d->comments[0];
  d->comment_ptrs[1] = d->comments[1];
  d->w.comments = d->comment_ptrs;
  d->w.ncomments = 2;
  return 0;
}

/* Step 4, what the window's samples say beyond their stacks: the distinct
 * entries, their labels' names, the threads' names. Returns 0 or
 * -ENOMEM. */
static int dump_resolve(dump *d) {
  size_t nsamples = 0, ntids = 0;
  int rc = ptp_agg_samples(d->full, &d->samples, &nsamples);
  if (rc == 0) rc = ptp_labels_resolve(d->samples, nsamples, &d->lres);
  if (rc == 0) rc = ptp_agg_tids(d->full, &d->tids, &ntids);
  if (rc == 0 && ntids && !(d->threads = ptp_calloc(ntids, sizeof *d->threads))) rc = -ENOMEM;
  if (rc) return rc;
  /* names now: a live thread's current one, an exited thread's at its exit */
  for (size_t i = 0; i < ntids; i++) d->threads[i].tid = d->tids[i];
  ptp_threads_names(d->threads, ntids);
  d->w.samples = d->samples;
  d->w.nsamples = nsamples;
  d->w.threads = d->threads;
  d->w.nthreads = ntids;
  return 0;
}

/* Step 5, encoding and writing: the symbolizer follows dlopen/dlclose (it
 * is made at the first dump), the window is encoded and written whole by
 * the snapshot store (nothing partial is ever visible). Returns 0 or the
 * symbolizer's, encoder's or store's error. */
static int dump_write(ptprof *p, dump *d, char *path_out, size_t cap) {
  if (p->hook) p->hook(&d->w, p->hook_ctx);
  int rc = !p->sym ? ptp_symbolizer_new(&p->sym) : ptp_symbolizer_refresh(p->sym);
  if (rc == 0) rc = ptp_pprof_encode(&d->w, p->sym, &d->buf, &d->len);
  if (rc == 0) rc = ptp_snapstore_write(p->store, d->buf, d->len, path_out, cap);
  return rc;
}

static void dump_free(dump *d) {
  free(d->buf);
  ptp_labels_res_free(d->lres);
  ptp_labels_release(d->label_epoch);
  ptp_graveyard_release(d->grave_token);
  free(d->samples);
  free(d->threads);
  free(d->tids);
  free(d->comments[0]);
  free(d->comments[1]);
  ptp_agg_reset(d->full);
}

/* Step 6, the outcome: counted; the first failure after a success is
 * logged with its cause (and the return to success after it). */
static void dump_latch(ptprof *p, const dump *d, int rc) {
  if (rc == 0) {
    atomic_fetch_add(&p->st_dumps, 1);
    if (p->err_latched)
      logf_(p, PTPROF_LOG_INFO, "ptprof: snapshots are written again (%s)", ptp_snapstore_dir(p->store));
    p->err_latched = 0;
  } else {
    atomic_fetch_add(&p->st_dump_errors, 1);
    if (!p->err_latched)
      logf_(p, PTPROF_LOG_ERROR, "ptprof: snapshot not written to %s: %s (%d); the window is lost, "
            "older snapshots stay, sampling continues", ptp_snapstore_dir(p->store),
            ptprof_strerror(rc), rc);
    p->err_latched = 1;
  }
  atomic_store(&p->st_last_window, d->w.duration_ns);
}

/* Step 7: the next window starts when sampling resumes. The expirations
 * the handler dropped meanwhile are the blind window before it: taken once
 * no handler that saw `dumping` set is still inside (50 ms at most; one
 * later still is counted with the next blind window), and reported by the
 * next snapshot. */
static void dump_resume(ptprof *p, const dump *d) {
  pthread_mutex_lock(&p->agg_mu);
  p->win_start_mono = ptp_now_mono();
  p->win_start_real = ptp_now_real();
  p->blind_ns = p->win_start_mono - d->cut_mono;
  p->in_dump = 0;
  atomic_store(&p->st_last_blind, p->blind_ns);
  pthread_mutex_unlock(&p->agg_mu);
  atomic_store(&p->sh->dumping, 0);
  ptp_grace_wait(50);
  uint64_t blind = atomic_exchange(&p->sh->drops[PTP_DROP_DUMPING], 0);
  atomic_fetch_add(&p->st_drops[PTP_DROP_DUMPING], blind);
  pthread_mutex_lock(&p->agg_mu);
  p->blind_drops += blind;
  pthread_mutex_unlock(&p->agg_mu);
}

/* The dump cycle (see the top of the file): the steps above in order; the
 * first error ends the work on this window (it is lost), every later step
 * that keeps the sampler consistent still runs. api_mu held; p->running. */
static int do_dump(ptprof *p, char *path_out, size_t cap) {
  if (path_out && cap) path_out[0] = 0;
  if (!p->store) return -EDESTADDRREQ;             /* the window keeps running */
  ptp_own_section own;                             /* all of it, copies included */
  ptp_threads_own_begin(&own);
  dump d;
  memset(&d, 0, sizeof d);
  /* Threads that keep SIGPROF blocked: their CPU so far, under its
   * pseudo-frame, into the ring before the cut drains it. */
  ptp_threads_account_blocked();
  dump_cut(p, &d);
  int rc = dump_drops(p, &d);
  int crc = dump_comments(p, &d);                  /* also keeps flushed_at_cut current */
  if (rc == 0) rc = crc;
  if (rc == 0) rc = dump_resolve(&d);
  if (rc == 0) rc = dump_write(p, &d, path_out, cap);
  dump_free(&d);
  dump_latch(p, &d, rc);
  dump_resume(p, &d);
  /* snapshot on disk, sampling resumed: the debug-file copies it asked for
   * (still the profiler's work: the mark is set) */
  if (rc == 0) (void)ptp_symbolizer_make_debug_copies(p->sym);
  if (p->resume_hook) p->resume_hook(p->resume_hook_ctx);
  ptp_threads_own_end(&own);
  return rc;
}

/* ---- lifecycle -------------------------------------------------------- */

static void free_shared(ptp_shared *sh) {
  if (!sh) return;
  free(sh->ring.slots);
  free(sh);
}

static int new_shared(ptp_shared **out) {
  ptp_shared *sh = ptp_calloc(1, sizeof *sh);
  if (!sh) return -ENOMEM;
  /* zero-filled is the ring's initial state (ptp_ring.h): left untouched */
  sh->ring.slots = ptp_calloc(RING_SLOTS, sizeof *sh->ring.slots);
  if (!sh->ring.slots) {
    free(sh);
    return -ENOMEM;
  }
  sh->ring.cap = RING_SLOTS;
  sh->ring.mask = RING_SLOTS - 1;
  sh->wake_fill = RING_SLOTS / 4;
  /* this start's generation, between the process's timer magic and the
   * tid in our timers' value: a late signal of an earlier start's timer is
   * still ours (never the program's) but recorded by no window */
  sh->magic = (atomic_fetch_add(&proc.starts, 1) & ((1u << (32 - PTP_TIMER_TID_BITS)) - 1u))
              << PTP_TIMER_TID_BITS;
  *out = sh;
  return 0;
}

int ptprof_start(ptprof *p) {
  if (!p) return -EINVAL;
  if (p->pid != getpid()) return PTPROF_E_FORKED;
  ptp_own_section own;      /* the sweep after arming runs sampled: the profiler's */
  ptp_threads_own_begin(&own);
  pthread_mutex_lock(&p->api_mu);
  int rc;
  if (p->running) { rc = -EALREADY; goto out; }
  /* A sampler "running" that a parent process started is only a copy in a
   * forked child (no timers, no thread): it does not count. */
  ptprof *expected = atomic_load(&proc.running);
  if ((expected && expected->pid == getpid()) ||
      !atomic_compare_exchange_strong(&proc.running, &expected, p)) {
    rc = -EBUSY;
    goto out;
  }
  if ((rc = ptp_cfi_refresh()) < 0) goto fail_global;
  ptp_graveyard_keep(1);   /* every exited thread's name until its window is written */
  /* The engine, chosen once per start (see ptprof.h): perf when asked for
   * (its error is ours) or when AUTO's probe event opens, else timers. */
  int engine = PTP_ENGINE_TIMER;
  p->engine_why = 0;
  p->engine_nofile = 0;
  uint64_t soft = ptp_fd_soft_limit();
  if (p->engine_opt == PTPROF_ENGINE_AUTO && ptp_engine_perf_budget(soft) == 0) {
    /* One descriptor per thread would take what a program at this limit
     * counts on: timers (no descriptor at all), said in the snapshot. */
    p->engine_nofile = soft ? soft : 1;
  } else if (p->engine_opt != PTPROF_ENGINE_TIMER) {
    int prc = ptp_perf_probe();
    if (prc == 0) engine = PTP_ENGINE_PERF;
    else if (p->engine_opt == PTPROF_ENGINE_PERF) { rc = prc; goto fail_global; }
    else p->engine_why = prc;
  }
  atomic_store(&p->engine, engine);
  if ((rc = ptp_sig_install()) < 0) goto fail_global;
  if ((rc = new_shared(&p->sh)) < 0) goto fail_global;
  p->sh->engine = engine;
  p->sh->period_ns = p->period_ns;
  if (!p->sym && (rc = ptp_symbolizer_new(&p->sym)) < 0) goto fail_shared;
  ptp_agg_reset(p->agg);
  ptp_agg_reset(p->agg_spare);
  atomic_store(&p->consumer_stop, 0);
  atomic_store(&p->consumer_ended, 0);
  p->consumer_cpu_at_cut = 0;
  /* The consumer runs with every signal blocked (it inherits the mask it
   * is created with): a signal sent to the process (the program's
   * setitimer, kill, SIGCHLD, SIGINT) must go to one of the program's
   * threads, as without us, never to ours, and never run the program's
   * handler on our thread. */
  uint64_t all = ~0ull, old_mask = 0;
  (void)syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old_mask, sizeof all);
  int prc = ptp_real_pthread_create(&p->consumer, NULL, consumer_main, p);
  (void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old_mask, NULL, sizeof old_mask);
  if (prc != 0) { rc = -prc; goto fail_shared; }
  p->consumer_clk_ok = pthread_getcpuclockid(p->consumer, &p->consumer_clk) == 0;
  while (sem_wait(&p->consumer_ready) != 0 && errno == EINTR) {}
  ptp_threads_stats ts;
  ptp_threads_get_stats(&ts);
  p->flushed_at_cut = ts.flushed;
  pthread_mutex_lock(&p->agg_mu);
  p->win_start_mono = ptp_now_mono();
  p->win_start_real = ptp_now_real();
  p->blind_ns = 0;
  p->blind_drops = 0;
  p->in_dump = 0;
  pthread_mutex_unlock(&p->agg_mu);
  atomic_store(&ptp_g_shared, p->sh);
  if ((rc = ptp_threads_activate(p->sh->magic, p->period_ns, engine)) < 0) goto fail_consumer;
  p->running = 1;
  rc = 0;
  goto out;

fail_consumer:
  ptp_threads_deactivate();
  atomic_store(&ptp_g_shared, NULL);
  atomic_store(&p->consumer_stop, 1);
  ptp_wake_now(p->sh);
  pthread_join(p->consumer, NULL);
  ptp_grace_wait(0);
fail_shared:
  free_shared(p->sh);
  p->sh = NULL;
fail_global:
  ptp_graveyard_keep(0);
  atomic_store(&proc.running, NULL);
out:
  pthread_mutex_unlock(&p->api_mu);
  ptp_threads_own_end(&own);
  return rc;
}

int ptprof_dump(ptprof *p, char *path_out, size_t cap) {
  if (!p) return -EINVAL;
  if (path_out && cap) path_out[0] = 0;
  if (p->pid != getpid()) return PTPROF_E_FORKED;
  ptp_own_section own;       /* waiting for api_mu too: a periodic dump may hold it */
  ptp_threads_own_begin(&own);
  pthread_mutex_lock(&p->api_mu);
  int rc = p->running ? do_dump(p, path_out, cap) : -ENOTCONN;
  pthread_mutex_unlock(&p->api_mu);
  ptp_threads_own_end(&own);
  return rc;
}

int ptprof_set_dir(ptprof *p, const char *dir) {
  if (!p || !dir || !*dir) return -EINVAL;
  if (p->pid != getpid()) return PTPROF_E_FORKED;
  ptp_own_section own;
  ptp_threads_own_begin(&own);
  pthread_mutex_lock(&p->api_mu);
  int rc;
  char *copy = ptp_strdup(dir);
  if (!copy) {
    rc = -ENOMEM;
  } else if (p->store) {
    rc = ptp_snapstore_set_dir(p->store, dir);
  } else {
    rc = ptp_snapstore_new(&p->store, dir, p->prefix, p->keep);
    if (rc == 0 && p->family[0]) ptp_snapstore_set_family(p->store, p->family, p->keep_total);
  }
  if (rc == 0) {
    free(p->dir);
    p->dir = copy;
  } else {
    free(copy);
  }
  pthread_mutex_unlock(&p->api_mu);
  ptp_threads_own_end(&own);
  return rc;
}

/* Stops everything; api_mu held, p->running. */
static int stop_locked(ptprof *p, int final_dump, char *path_out, size_t cap) {
  atomic_store(&p->consumer_stop, 1);
  ptp_wake_now(p->sh);
  pthread_join(p->consumer, NULL);
  /* CPU of threads that still keep SIGPROF blocked, while their sources
   * still say what is due (the final dump's cut drains it) */
  if (final_dump) ptp_threads_account_blocked();
  ptp_threads_deactivate();
  ptp_cfi_save_pending();
  int rc = 0;
  if (final_dump) rc = do_dump(p, path_out, cap);
  /* the consumer's CPU since the last cut, for the stats (it has ended) */
  int64_t ccpu = consumer_cpu_ns(p);
  if (ccpu > p->consumer_cpu_at_cut) atomic_fetch_add(&p->st_own_cpu, ccpu - p->consumer_cpu_at_cut);
  p->consumer_cpu_at_cut = ccpu;
  atomic_store(&ptp_g_shared, NULL);
  ptp_grace_wait(0);
  ptp_labels_release(UINT64_MAX);   /* no sample left to name */
  ptp_graveyard_release(UINT64_MAX);
  ptp_graveyard_keep(0);
  for (int i = 0; i < PTP_DROP__COUNT; i++)
    atomic_fetch_add(&p->st_drops[i], atomic_load(&p->sh->drops[i]));
  atomic_fetch_add(&p->st_no_cpu, atomic_load(&p->sh->no_cpu));
  free_shared(p->sh);
  p->sh = NULL;
  p->running = 0;
  atomic_store(&proc.running, NULL);
  return rc;
}

int ptprof_stop(ptprof *p, int final_dump, char *path_out, size_t cap) {
  if (!p) return -EINVAL;
  if (path_out && cap) path_out[0] = 0;
  if (p->pid != getpid()) return PTPROF_E_FORKED;
  ptp_own_section own;
  ptp_threads_own_begin(&own);
  pthread_mutex_lock(&p->api_mu);
  int rc = p->running ? stop_locked(p, final_dump, path_out, cap) : -ENOTCONN;
  pthread_mutex_unlock(&p->api_mu);
  ptp_threads_own_end(&own);
  return rc;
}

void ptprof_del(ptprof *p) {
  if (!p) return;
  if (p->pid != getpid()) {
    /* A forked child's copy: no consumer thread, no timers and no handler
     * state of ours exist here (the fork handlers cleared them). Free plain
     * memory only; the dump side's state (libdw, open directories) may have
     * been copied mid-operation and is left alone. */
    if (p->sh) free_shared(p->sh);
    ptp_agg_del(p->agg);
    ptp_agg_del(p->agg_spare);
    free(p->dir);
    free(p->prefix);
    free(p);
    return;
  }
  pthread_mutex_lock(&p->api_mu);
  if (p->running) stop_locked(p, 0, NULL, 0);
  pthread_mutex_unlock(&p->api_mu);
  ptp_symbolizer_del(p->sym);
  ptp_snapstore_del(p->store);
  ptp_agg_del(p->agg);
  ptp_agg_del(p->agg_spare);
  sem_destroy(&p->consumer_ready);
  pthread_mutex_destroy(&p->api_mu);
  pthread_mutex_destroy(&p->agg_mu);
  free(p->dir);
  free(p->prefix);
  free(p);
}

void ptprof_get_stats(const ptprof *p, ptprof_stats *out) {
  memset(out, 0, sizeof *out);
  if (!p) return;
  ptprof *q = (ptprof *)p;   /* atomics only */
  out->samples = atomic_load(&q->st_samples);
  out->truncated = atomic_load(&q->st_truncated);
  /* Plus what the current window has counted so far; the shared state is
   * read under the handler grace protocol so a concurrent stop cannot free
   * it under us. */
  atomic_fetch_add(&ptp_g_inside, 1);
  ptp_shared *sh = q->pid == getpid() ? atomic_load(&ptp_g_shared) : NULL;
  int mine = sh && atomic_load(&proc.running) == q;
  for (int i = 0; i < PTP_DROP__COUNT; i++) {
    out->drops[i] = atomic_load(&q->st_drops[i]);
    if (mine) out->drops[i] += atomic_load(&sh->drops[i]);
  }
  out->expirations_no_cpu = atomic_load(&q->st_no_cpu) + (mine ? atomic_load(&sh->no_cpu) : 0);
  out->own_thread_cpu_ns = atomic_load(&q->st_own_cpu);
  atomic_fetch_sub(&ptp_g_inside, 1);
  out->dumps = atomic_load(&q->st_dumps);
  out->dump_errors = atomic_load(&q->st_dump_errors);
  ptp_threads_stats ts;
  ptp_threads_get_stats(&ts);
  out->timers_created = ts.timers_created;
  out->timers_deleted = ts.timers_deleted;
  out->timer_errors = ts.timer_errors;
  out->threads_flushed = ts.flushed;
  out->lost_thread_exit = ts.lost_at_exit;
  out->engine = atomic_load(&q->engine);
  out->fds_lost = ts.fds_lost;
  out->stopped = ptp_sig_stop_reason(NULL);
  out->last_window_ns = atomic_load(&q->st_last_window);
  out->last_blind_ns = atomic_load(&q->st_last_blind);
}

void ptp_set_window_hook(ptprof *p, ptp_window_hook_fn fn, void *ctx) {
  pthread_mutex_lock(&p->api_mu);
  p->hook = fn;
  p->hook_ctx = ctx;
  pthread_mutex_unlock(&p->api_mu);
}

void ptp_set_resume_hook(ptprof *p, ptp_resume_hook_fn fn, void *ctx) {
  pthread_mutex_lock(&p->api_mu);
  p->resume_hook = fn;
  p->resume_hook_ctx = ctx;
  pthread_mutex_unlock(&p->api_mu);
}

uint64_t ptp_signals_recorded(const ptprof *p) {
  return atomic_load(&((ptprof *)p)->st_signals);
}
