/*
 * ptp_dump.c - the sampler's dump cycle (ptprof.c's header comment, "Dump
 * cycle", says what a dump does and why the blind window is reported
 * after it), the drain of the ring into the window, and the handle's log
 * lines. Split from ptprof.c, which calls in here; nothing here calls
 * ptprof.c (runtime/ptprof_struct.h).
 *
 * Threads: the consumer thread or an API caller, with api_mu held for a
 * whole dump; agg_mu as each step says. Never in a signal handler.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptprof.h"
#include "prof/cache/ptp_fd.h"
#include "prof/runtime/ptp_agg.h"
#include "prof/runtime/ptp_engine.h"
#include "prof/runtime/ptp_grace.h"
#include "prof/runtime/ptp_graveyard.h"
#include "prof/runtime/ptp_labels.h"
#include "prof/runtime/ptp_own_text.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/runtime/ptp_shim.h"
#include "prof/runtime/ptp_siginterpose.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/runtime/ptprof_struct.h"
#include "prof/signal/ptp_own_work.h"
#include "prof/signal/ptp_sigstate.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/output/ptp_pprof.h"
#include "prof/output/ptp_snapstore.h"
#include "prof/output/ptp_strbuf.h"
#include "prof/symbols/ptp_symbolize.h"
#include "prof/ptp_alloc.h"
#include "prof/signal/ptp_clock.h"

void ptp_logf(ptprof *p, int level, const char *fmt, ...) {
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

/* Moves every published slot into the aggregation; returns how many slots
 * it took. agg_mu held. */
size_t ptp_drain_locked(ptprof *p) {
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
      } else if (ptp_own_text_in(s->frames, s->nframes)) {
        /* Taken at an edge of the profiler's work (an entry point before
         * its own-work mark, a return after it): the profiler's own, as
         * the handler counts a sample under the mark (ptp_own_text.h). */
        atomic_fetch_add(&sh->drops[PTP_DROP_OWN_WORK], s->weight);
      } else if (ptp_agg_add_named(p->agg, s->tid, s->name, s->flags, &s->labels, s->frames,
                                   ptp_shim_strip(s->frames, s->nframes), s->weight) < 0) {
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

/* The consumer thread's CPU time (its clock read from any thread). */
int64_t ptp_consumer_cpu_ns(ptprof *p) {
  if (atomic_load(&p->consumer_ended)) return atomic_load(&p->consumer_cpu_end);
  if (!p->consumer_clk_ok) return p->consumer_cpu_at_cut;
  return ptp_clock_ns(p->consumer_clk, p->consumer_cpu_at_cut);
}

int64_t ptp_process_cpu_ns(void) {
  return ptp_clock_ns(CLOCK_PROCESS_CPUTIME_ID, -1);
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
  ptp_cpu_live *live;             /* threads' CPU since the previous cut */
  size_t nlive;                   /* listed in live (0: no thread CPU line) */
  ptp_cpu_exited exited;
  ptp_thread_cpu *tcpu;           /* w.thread_cpu */
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
  ptp_drain_locked(p);
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
  int64_t ccpu = ptp_consumer_cpu_ns(p);
  d->w.own_thread_cpu_ns = ccpu > p->consumer_cpu_at_cut ? ccpu - p->consumer_cpu_at_cut : 0;
  p->consumer_cpu_at_cut = ccpu;
  atomic_fetch_add(&p->st_own_cpu, d->w.own_thread_cpu_ns);
  /* Each thread's CPU over the same span. Every thread is cut even without
   * memory for the list (then the snapshot has no line of threads' CPU,
   * and the next one still covers only its own span); threads started
   * since the count below beyond its margin are cut but not listed. */
  ptp_threads_stats ts;
  ptp_threads_get_stats(&ts);
  size_t lcap = (size_t)ts.live + 64;
  d->live = ptp_malloc(lcap * sizeof *d->live);
  size_t nl = ptp_threads_cpu_cut(d->live, d->live ? lcap : 0, &d->exited);
  d->nlive = !d->live ? 0 : nl < lcap ? nl : lcap;
  d->w.thread_own_ns = d->exited.own_ns;
  /* The process's CPU over the same span as the own-work count (the blind
   * window and this window), for the coverage comment. */
  int64_t pcpu = ptp_process_cpu_ns();
  d->w.process_cpu_ns = pcpu >= 0 && p->process_cpu_at_cut >= 0 && pcpu > p->process_cpu_at_cut
                            ? pcpu - p->process_cpu_at_cut : 0;
  p->process_cpu_at_cut = pcpu;

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

static int cmp_tcpu_name(const void *a, const void *b) {
  return strncmp(((const ptp_thread_cpu *)a)->name, ((const ptp_thread_cpu *)b)->name, 16);
}

static int cmp_tcpu_cpu(const void *a, const void *b) {
  const ptp_thread_cpu *x = a, *y = b;
  if (x->cpu_ns != y->cpu_ns) return x->cpu_ns > y->cpu_ns ? -1 : 1;
  return strncmp(x->name, y->name, 16);
}

static int cmp_thread_tid(const void *a, const void *b) {
  uint32_t x = ((const ptp_thread *)a)->tid, y = ((const ptp_thread *)b)->tid;
  return x < y ? -1 : x > y;
}

/* The entry of tid in v[0..n), sorted by tid; NULL if none (or tid 0). */
static const ptp_thread *find_tid(const ptp_thread *v, size_t n, uint32_t tid) {
  ptp_thread key = { .tid = tid };
  return v && n && tid ? bsearch(&key, v, n, sizeof *v, cmp_thread_tid) : NULL;
}

/* Step 4b, the threads' CPU by name (ptp_window.thread_cpu): the live
 * threads' CPU taken at the cut, named as the window names their tids
 * (those without samples read now, a thread gone since by its name at
 * exit), and the exited threads' summed by name at their exits;
 * then each name's samples: those of its threads, by tid (the window's
 * name of the tid, read the same way), also when the sample's thread_name
 * label differs (a thread that renamed itself: the label's name is noted
 * in sampled_as, so the reader knows what to filter by). Best effort:
 * without memory, no line. */
static void dump_thread_cpu(dump *d) {
  if (!d->nlive && !d->exited.n && !d->exited.others.nthreads) return;
  size_t cap = d->nlive + d->exited.n + 1;
  ptp_thread *names = d->nlive ? ptp_calloc(d->nlive, sizeof *names) : NULL;
  ptp_thread_cpu *t = ptp_calloc(cap, sizeof *t);
  ptp_thread *bytid = d->w.nthreads ? ptp_malloc(d->w.nthreads * sizeof *bytid) : NULL;
  if (!t || (d->nlive && !names) || (d->w.nthreads && !bytid)) {
    free(names);
    free(t);
    free(bytid);
    return;
  }
  /* the window's names by tid (dump_resolve read them), sorted */
  if (d->w.nthreads) {
    memcpy(bytid, d->w.threads, d->w.nthreads * sizeof *bytid);
    qsort(bytid, d->w.nthreads, sizeof *bytid, cmp_thread_tid);
  }
  /* A live thread with samples takes the window's name of its tid (read
   * once, so its entry and its samples agree); the others are read now. */
  size_t nres = 0;
  for (size_t i = 0; i < d->nlive; i++) {
    const ptp_thread *th = find_tid(bytid, d->w.nthreads, d->live[i].tid);
    t[i] = (ptp_thread_cpu){ .nthreads = 1, .cpu_ns = d->live[i].cpu_ns };
    if (th && th->name[0]) memcpy(t[i].name, th->name, 16);
    else names[nres++].tid = d->live[i].tid;
  }
  if (nres) {
    ptp_threads_names(names, nres);
    qsort(names, nres, sizeof *names, cmp_thread_tid);
    for (size_t i = 0; i < d->nlive; i++) {
      const ptp_thread *th = t[i].name[0] ? NULL : find_tid(names, nres, d->live[i].tid);
      if (th) memcpy(t[i].name, th->name, 16);
    }
  }
  size_t n = d->nlive;
  for (size_t i = 0; i < d->exited.n; i++) t[n++] = d->exited.by_name[i];
  if (d->exited.others.nthreads) {
    t[n] = d->exited.others;
    t[n].others = 1;
    snprintf(t[n++].name, 16, "(other names)");   /* exits beyond PTP_EXITED_NAMES names */
  }
  free(names);
  /* one entry per name */
  qsort(t, n, sizeof *t, cmp_tcpu_name);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m && strncmp(t[m - 1].name, t[i].name, 16) == 0) {
      t[m - 1].nthreads += t[i].nthreads;
      t[m - 1].cpu_ns += t[i].cpu_ns;
      t[m - 1].others |= t[i].others;
    } else {
      t[m++] = t[i];
    }
  }
  /* samples by name */
  for (size_t i = 0; i < d->w.nsamples; i++) {
    const ptp_sample *sm = &d->w.samples[i];
    const ptp_thread *th = find_tid(bytid, d->w.nthreads, sm->tid);
    const char *label = sm->thread_name && sm->thread_name[0] ? sm->thread_name : NULL;
    const char *nm = th && th->name[0] ? th->name : label;
    if (!nm) continue;
    ptp_thread_cpu k;
    memset(&k, 0, sizeof k);
    snprintf(k.name, sizeof k.name, "%s", nm);
    ptp_thread_cpu *e = bsearch(&k, t, m, sizeof *t, cmp_tcpu_name);
    if (!e) continue;
    e->samples += sm->count;
    if (!label || strncmp(label, e->name, 15) == 0) continue;
    int j = 0;
    while (j < 2 && e->sampled_as[j][0] && strncmp(e->sampled_as[j], label, 15) != 0) j++;
    if (j == 2) e->sampled_as_more = 1;
    else if (!e->sampled_as[j][0]) snprintf(e->sampled_as[j], 16, "%.15s", label);
  }
  free(bytid);
  qsort(t, m, sizeof *t, cmp_tcpu_cpu);
  d->tcpu = t;
  d->w.thread_cpu = t;
  d->w.nthread_cpu = m;
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
  free(d->live);
  free(d->tcpu);
  ptp_agg_reset(d->full);
}

/* Step 6, the outcome: counted; the first failure after a success is
 * logged with its cause (and the return to success after it). */
static void dump_latch(ptprof *p, const dump *d, int rc) {
  if (rc == 0) {
    atomic_fetch_add(&p->st_dumps, 1);
    if (p->err_latched)
      ptp_logf(p, PTPROF_LOG_INFO, "ptprof: snapshots are written again (%s)", ptp_snapstore_dir(p->store));
    p->err_latched = 0;
  } else {
    atomic_fetch_add(&p->st_dump_errors, 1);
    if (!p->err_latched)
      ptp_logf(p, PTPROF_LOG_ERROR, "ptprof: snapshot not written to %s: %s (%d); the window is lost, "
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

/* Whether the window holds nothing a snapshot would show: no aggregated
 * entry (samples and pseudo-frames; the ring drained first), no drop of
 * the blind window before it, no sampled drop counted since the last cut.
 * Owed periods of the perf engine and the profiler's own work are not
 * looked at: they stay owed or counted, for the next snapshot written. */
static int window_empty(ptprof *p) {
  pthread_mutex_lock(&p->agg_mu);
  ptp_drain_locked(p);
  int empty = ptp_agg_size(p->agg) == 0 && p->blind_drops == 0;
  pthread_mutex_unlock(&p->agg_mu);
  for (int i = 0; empty && i < PTP_DROP__COUNT; i++)
    if (ptp_drop_is_sampled(i) && atomic_load(&p->sh->drops[i]) != 0) empty = 0;
  return empty;
}

/* The dump cycle (see the top of the file): the steps above in order; the
 * first error ends the work on this window (it is lost), every later step
 * that keeps the sampler consistent still runs; with skip_empty an empty
 * window returns 1 before the cut. api_mu held; p->running. */
int ptp_dump_run(ptprof *p, char *path_out, size_t cap, int skip_empty) {
  if (path_out && cap) path_out[0] = 0;
  if (!p->store) return -EDESTADDRREQ;             /* the window keeps running */
  ptp_own_section own;                             /* all of it, copies included */
  ptp_threads_own_begin(&own);
  /* Threads that keep SIGPROF blocked: their CPU so far, under its
   * pseudo-frame, into the ring before the cut (or the emptiness check)
   * drains it. */
  ptp_threads_account_blocked();
  if (skip_empty && window_empty(p)) {
    ptp_threads_own_end(&own);
    return 1;
  }
  dump d;
  memset(&d, 0, sizeof d);
  dump_cut(p, &d);
  int rc = dump_drops(p, &d);
  int crc = dump_comments(p, &d);                  /* also keeps flushed_at_cut current */
  if (rc == 0) rc = crc;
  if (rc == 0) rc = dump_resolve(&d);
  if (rc == 0) dump_thread_cpu(&d);
  if (rc == 0) rc = dump_write(p, &d, path_out, cap);
  dump_free(&d);
  dump_latch(p, &d, rc);
  dump_resume(p, &d);
  /* snapshot on disk, sampling resumed: the debug-file copies it asked for
   * (still the profiler's work: the mark is set) */
  if (rc == 0) (void)ptp_symbolizer_make_debug_copies(p->sym);
  /* and the objects opened for this dump whose cache is now whole: closed,
   * their memory given back (a cold fill of libc's debug info holds ~45 MB
   * that no later lookup needs) */
  (void)ptp_symbolizer_release_filled(p->sym);
  /* and, past its bound, what the symbolizer keeps for later snapshots
   * (every address a long run ever sampled, the cache blocks they read) */
  (void)ptp_symbolizer_trim(p->sym);
  if (p->resume_hook) p->resume_hook(p->resume_hook_ctx);
  ptp_threads_own_end(&own);
  return rc;
}
