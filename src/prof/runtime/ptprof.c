/*
 * ptprof.c - the public sampler API (include/ptprof.h): lifecycle, the
 * consumer thread and windows. The dump cycle described below is
 * ptp_dump.c's; the handle's fields are in ptprof_struct.h; the public
 * names of errors are ptp_errors.c's.
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
#include "prof/runtime/ptp_own_text.h"
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

#include "prof/runtime/ptprof_struct.h"
#include "prof/signal/ptp_clock.h"


/* This file's process-wide state (runtime/ptp_process.h): the started
 * sampler of this process, if any (one at a time: the signal handler and
 * the thread registry are process-wide; in a forked child it is the
 * parent's and ignored by pid). The handler's installation is
 * ptp_siginterpose.c's. */
static struct {
  _Atomic(ptprof *) running;
  _Atomic uint32_t starts;      /* starts so far: each start's generation differs */
} proc;

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
  p->skip_empty = opt->skip_empty != 0;
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

static void consumer_sweep(ptprof *p, uint64_t *timer_errors_seen) {
  ptp_threads_sweep();
  ptp_threads_stats ts;
  ptp_threads_get_stats(&ts);
  if (ts.timer_errors > *timer_errors_seen) {
    if (*timer_errors_seen == 0)
      ptp_logf(p, PTPROF_LOG_WARN, "ptprof: could not arm a CPU timer or event for a thread (%llu so "
            "far, last: %s); that thread is not sampled", (unsigned long long)ts.timer_errors,
            strerror(ts.last_errno));
    *timer_errors_seen = ts.timer_errors;
  }
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

/* When the next periodic dump is due: an interval after the window's
 * start, or after a skipped one (skip_empty: nothing sampled, the window
 * went on); INT64_MAX without periodic dumps. agg_mu held (win_start_mono). */
static int64_t periodic_due_locked(const ptprof *p) {
  if (!p->interval_ns) return INT64_MAX;
  int64_t due = p->win_start_mono + p->interval_ns;
  return due < p->periodic_next_mono ? p->periodic_next_mono : due;
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
      int64_t due = periodic_due_locked(p);
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
    busy = ptp_drain_locked(p) > 0;
    int64_t due = periodic_due_locked(p);
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
      ptp_logf(p, PTPROF_LOG_WARN, "ptprof: sampling stopped: %s",
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
        int rc = p->running ? ptp_dump_run(p, NULL, 0, p->skip_empty) : 0;
        pthread_mutex_unlock(&p->api_mu);
        backoff = rc == -EDESTADDRREQ ? 2 : 0;
        /* nothing sampled: no file, the window goes on; next try one
         * interval from now */
        p->periodic_next_mono = rc == 1 ? ptp_now_mono() + p->interval_ns : 0;
      }
    }
  }
  ptp_threads_forget_self();
  /* cannot fail for the own thread */
  atomic_store(&p->consumer_cpu_end, ptp_clock_ns(CLOCK_THREAD_CPUTIME_ID, 0));
  atomic_store(&p->consumer_ended, 1);
  ptp_own_work_leave();
  return NULL;
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

/* The public entry points that do the profiler's work open its own-work
 * section (signal/ptp_own_work.h) before anything else, the fork check's
 * getpid(2) included (it came first once, and CI once showed one sample
 * under dump_api); what still runs before the mark is PTP_OWN_TEXT
 * (ptp_own_text.h). Returns 0 with the section open, or PTPROF_E_FORKED
 * with it closed (a forked child's copy: the fork handlers left nothing
 * to account there). */
PTP_OWN_TEXT static int api_begin(const ptprof *p, ptp_own_section *own) {
  ptp_threads_own_begin(own);
  if (p->pid == getpid()) return 0;
  ptp_threads_own_end(own);
  return PTPROF_E_FORKED;
}

PTP_OWN_TEXT int ptprof_start(ptprof *p) {
  if (!p) return -EINVAL;
  ptp_own_section own;      /* the sweep after arming runs sampled: the profiler's */
  int rc = api_begin(p, &own);
  if (rc) return rc;
  pthread_mutex_lock(&p->api_mu);
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
  p->process_cpu_at_cut = ptp_process_cpu_ns();
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

PTP_OWN_TEXT void ptprof_own_begin(ptprof_own_section *s) {
  if (s) ptp_threads_own_begin(s);
}

PTP_OWN_TEXT void ptprof_own_end(ptprof_own_section *s) {
  if (s) ptp_threads_own_end(s);
}

/* ptprof_dump and ptprof_dump_if_sampled (skip_empty). */
PTP_OWN_TEXT static int dump_api(ptprof *p, char *path_out, size_t cap, int skip_empty) {
  if (!p) return -EINVAL;
  if (path_out && cap) path_out[0] = 0;
  ptp_own_section own;       /* waiting for api_mu too: a periodic dump may hold it */
  int rc = api_begin(p, &own);
  if (rc) return rc;
  pthread_mutex_lock(&p->api_mu);
  rc = p->running ? ptp_dump_run(p, path_out, cap, skip_empty) : -ENOTCONN;
  pthread_mutex_unlock(&p->api_mu);
  ptp_threads_own_end(&own);
  return rc;
}

PTP_OWN_TEXT int ptprof_dump(ptprof *p, char *path_out, size_t cap) { return dump_api(p, path_out, cap, 0); }

PTP_OWN_TEXT int ptprof_dump_if_sampled(ptprof *p, char *path_out, size_t cap) {
  return dump_api(p, path_out, cap, 1);
}

PTP_OWN_TEXT int ptprof_set_dir(ptprof *p, const char *dir) {
  if (!p || !dir || !*dir) return -EINVAL;
  ptp_own_section own;
  int rc = api_begin(p, &own);
  if (rc) return rc;
  pthread_mutex_lock(&p->api_mu);
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
  if (final_dump) rc = ptp_dump_run(p, path_out, cap, 0);
  /* the consumer's CPU since the last cut, for the stats (it has ended) */
  int64_t ccpu = ptp_consumer_cpu_ns(p);
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

PTP_OWN_TEXT int ptprof_stop(ptprof *p, int final_dump, char *path_out, size_t cap) {
  if (!p) return -EINVAL;
  if (path_out && cap) path_out[0] = 0;
  ptp_own_section own;
  int rc = api_begin(p, &own);
  if (rc) return rc;
  pthread_mutex_lock(&p->api_mu);
  rc = p->running ? stop_locked(p, final_dump, path_out, cap) : -ENOTCONN;
  pthread_mutex_unlock(&p->api_mu);
  ptp_threads_own_end(&own);
  return rc;
}

PTP_OWN_TEXT void ptprof_del(ptprof *p) {
  if (!p) return;
  ptp_own_section own;      /* a running sampler's stop: the profiler's work */
  if (api_begin(p, &own) != 0) {
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
  ptp_threads_own_end(&own);
}

PTP_OWN_TEXT void ptprof_get_stats(const ptprof *p, ptprof_stats *out) {
  memset(out, 0, sizeof *out);  /* (a sample in it: the caller is PTP_OWN_TEXT) */
  if (!p) return;
  ptp_own_section own;          /* a status poll's work is the profiler's too */
  ptp_threads_own_begin(&own);
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
  ptp_threads_own_end(&own);
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
