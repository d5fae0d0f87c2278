/*
 * test_sampler_threads.c - what the samples say about threads' CPU: shares
 * between threads, short threads (at 99 and 999 Hz, both engines), kernel
 * tick overruns, nothing under a guessed stack. Helpers: sampler_fixture.h.
 */
#include "pt_test.h"
#include "ptprof.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/signal/ptp_handler.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/signal/ptp_unwind.h"
#include "prof/runtime/ptprof_internal.h"
#include "sampler_fixture.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- sampling ---------------------------------------------------------- */

PT_TEST_T(prof_sampler_cpu_split, 60000) {
  char *dir = pt_tmpdir("sampler-split");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler(dir, 199, &c);
  worker a = { .fn = ptt_fn_hot_a, .cpu_ns = 150000000, .name = "ptt-a" };
  worker b = { .fn = ptt_fn_hot_b, .cpu_ns = 450000000, .name = "ptt-b" };
  ptt_worker_start(&a);
  ptt_worker_start(&b);
  ptt_worker_join(&a);
  ptt_worker_join(&b);
  char path[512];
  int rc = ptprof_stop(p, 1, path, sizeof path);
  PT_ASSERT_MSG(rc == 0, "stop: %s", ptprof_strerror(rc));
  PT_ASSERT_INT_EQ(c.nw, 1);
  uint64_t na = ptt_count_tid(&c, a.tid, __start_ptt_hot_a, __stop_ptt_hot_a);
  uint64_t nb = ptt_count_tid(&c, b.tid, __start_ptt_hot_b, __stop_ptt_hot_b);
  uint64_t ta = ptt_count_tid(&c, a.tid, NULL, NULL), tb = ptt_count_tid(&c, b.tid, NULL, NULL);
  double period = 1e9 / 199;
  printf("# a: %llu samples (%llu in hot_a), real %.0f ms; b: %llu (%llu in hot_b), real %.0f ms\n",
         (unsigned long long)ta, (unsigned long long)na, a.used_ns / 1e6,
         (unsigned long long)tb, (unsigned long long)nb, b.used_ns / 1e6);
  /* Shares: each thread's samples are nearly all in its own hot function,
   * and b gets about ptt_fn_three times a's. */
  PT_ASSERT(na >= ta * 8 / 10);
  PT_ASSERT(nb >= tb * 8 / 10);
  PT_ASSERT_MSG(nb > na * 2 && nb < na * 5, "a %llu b %llu", (unsigned long long)na,
                (unsigned long long)nb);
  /* Completeness per thread: sampled CPU vs. real CPU within a wide band. */
  double ra = ta * period / a.used_ns, rb = tb * period / b.used_ns;
  PT_ASSERT_MSG(ra > 0.7 && ra < 1.3, "a sampled/real %.2f", ra);
  PT_ASSERT_MSG(rb > 0.7 && rb < 1.3, "b sampled/real %.2f", rb);
  /* Thread names come through. */
  int found = 0;
  for (int i = 0; i < c.nnames[0]; i++)
    if (c.name_tids[0][i] == a.tid && strcmp(c.names[0][i], "ptt-a") == 0) found = 1;
  PT_ASSERT(found);
  /* The window covers the run; the file exists. */
  PT_ASSERT(c.w[0].duration_ns > 0);
  PT_ASSERT_INT_EQ(c.w[0].period_ns, 1000000000 / 199);
  struct stat st;
  PT_ASSERT_MSG(stat(path, &st) == 0 && st.st_size > 0, "snapshot %s", path);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

/* 200 threads of ~10 ms CPU each, two at a time. */
typedef struct short_run {
  worker w[200];
} short_run;

PT_TEST_T(prof_sampler_short_threads, 90000) {
  char *dir = pt_tmpdir("sampler-short");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler(dir, 99, &c);
  static short_run r;
  memset(&r, 0, sizeof r);
  for (int i = 0; i < 200; i += 2) {
    for (int k = 0; k < 2; k++) {
      r.w[i + k] = (worker){ .fn = k ? ptt_fn_hot_b : ptt_fn_hot_a, .cpu_ns = 10000000 };
      ptt_worker_start(&r.w[i + k]);
    }
    ptt_worker_join(&r.w[i]);
    ptt_worker_join(&r.w[i + 1]);
  }
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  int64_t real = 0;
  uint64_t sampled = 0, lost = 0;
  for (int i = 0; i < 200; i++) {
    real += r.w[i].used_ns;
    sampled += ptt_count_tid(&c, r.w[i].tid, NULL, NULL);
    lost += ptt_count_lost_tid(&c, r.w[i].tid);
  }
  double ratio = (double)sampled * (1e9 / 99) / (double)real;
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  printf("# short threads: sampled %llu expirations for %.0f ms CPU: ratio %.2f "
         "(exit-flushed threads %llu)\n", (unsigned long long)sampled, real / 1e6, ratio,
         (unsigned long long)st.threads_flushed);
  ptt_check_bands(sampled, lost, real, 99);
  /* No timer leak: every timer of an exited thread was deleted. */
  PT_ASSERT(st.timers_created >= 200);
  PT_ASSERT_MSG(st.timers_deleted == st.timers_created, "created %llu deleted %llu",
                (unsigned long long)st.timers_created, (unsigned long long)st.timers_deleted);
  /* Records of exited threads are reused: 200 threads, two alive at a
   * time, use a handful of records (the bound of every registry scan),
   * not one each. */
  ptp_threads_stats ts;
  ptp_threads_get_stats(&ts);
  PT_ASSERT_MSG(ts.records_used >= 3 && ts.records_used <= 16, "records used %llu",
                (unsigned long long)ts.records_used);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST_T(prof_sampler_overrun_999hz, 60000) {
  char *dir = pt_tmpdir("sampler-999");
  capture c;
  ptt_cap_init(&c);
  /* si_overrun is the timer engine's: force it */
  ptprof *p = ptt_start_sampler_engine(dir, 999, &c, PTPROF_ENGINE_TIMER);
  worker a = { .fn = ptt_fn_hot_a, .cpu_ns = 400000000 };
  ptt_worker_start(&a);
  ptt_worker_join(&a);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  uint64_t n = ptt_count_tid(&c, a.tid, NULL, NULL);
  uint64_t signals = ptp_signals_recorded(p);
  double ratio = (double)n * (1e9 / 999) / (double)a.used_ns;
  printf("# 999 Hz: %llu expirations in %llu signals for %.0f ms CPU: ratio %.2f\n",
         (unsigned long long)n, (unsigned long long)signals, a.used_ns / 1e6, ratio);
  /* The kernel tick (250 Hz here) merges expirations: fewer signals than
   * expirations, and counting si_overrun keeps the total right. */
  PT_ASSERT_MSG(ratio > 0.85 && ratio < 1.15, "sampled/real %.2f", ratio);
  long hz = sysconf(_SC_CLK_TCK);
  (void)hz;
  PT_ASSERT(signals > 0);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

/* What the samples of a set of short threads say, checked against the one
 * rule: CPU never sits under a stack the thread did not have. */
typedef struct truth {
  uint64_t total, in_fns, lost, other, guessed;
  uint64_t fn[3];              /* in ptt_fn_hot_a, ptt_fn_hot_b, ptt_fn_hot_c */
} truth;

static int lost_cause_ok(const cap_sample *s) {
  return s->n == 1 && s->frames[0] < PTP_DROP__COUNT;
}

static truth judge(const capture *c, const worker *w, int nw) {
  truth t = {0};
  const char *lo[3] = { __start_ptt_hot_a, __start_ptt_hot_b, __start_ptt_hot_c };
  const char *hi[3] = { __stop_ptt_hot_a, __stop_ptt_hot_b, __stop_ptt_hot_c };
  for (size_t i = 0; i < c->n; i++) {
    const cap_sample *s = &c->s[i];
    int mine = 0;
    for (int k = 0; k < nw && !mine; k++) mine = s->tid == atomic_load(&w[k].tid);
    if (!mine) continue;
    t.total += s->count;
    if (s->flags & PTP_SAMPLE_LOST) {
      PT_ASSERT_MSG(lost_cause_ok(s), "pseudo-frame sample with %u frames, cause %llu", s->n,
                    (unsigned long long)s->frames[0]);
      t.lost += s->count;
      continue;
    }
    /* The old exit flush's guess: one truncated frame, the start routine. */
    if (s->n == 1 && s->frames[0] == (uintptr_t)ptt_worker_main) { t.guessed += s->count; continue; }
    int hit = -1;
    for (int f = 0; f < 3 && hit < 0; f++)
      for (int k = 0; k < s->n && hit < 0; k++)
        if (ptt_frame_in(s->frames, k, lo[f], hi[f])) hit = f;
    if (hit >= 0) { t.fn[hit] += s->count; t.in_fns += s->count; continue; }
    int in_three = 0;
    for (int k = 0; k < s->n; k++) in_three |= ptt_frame_in(s->frames, k, __start_ptt_three, __stop_ptt_three);
    if (in_three) t.in_fns += s->count;   /* between the calls: still its own */
    else t.other += s->count;             /* ptt_worker_main's clock reads, start-up */
  }
  return t;
}

/* 120 threads of ~10 ms CPU (about one 99 Hz period), four at a time, each
 * running ptt_fn_hot_a, ptt_fn_hot_b, ptt_fn_hot_c once in that order (the workload where the
 * old exit flush put 27 % of the CPU on a guessed stack). Every sample of
 * those threads must be under one of their real functions or under a
 * documented "[lost: ...]" pseudo-frame. */
static void short_three(int engine, int hz, const char *tag) {
  char *dir = pt_tmpdir(tag);
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler_engine(dir, hz, &c, engine);
  enum { N = 120 };
  static worker w[N];
  memset(w, 0, sizeof w);
  for (int i = 0; i < N; i += 4) {
    for (int k = 0; k < 4; k++) {
      w[i + k] = (worker){ .fn = ptt_fn_three, .cpu_ns = 10000000 };
      ptt_worker_start(&w[i + k]);
    }
    for (int k = 0; k < 4; k++) ptt_worker_join(&w[i + k]);
  }
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  PT_ASSERT_INT_EQ(st.engine, engine);
  int64_t real = 0;
  for (int i = 0; i < N; i++) real += w[i].used_ns;
  truth t = judge(&c, w, N);
  double ratio = (double)t.total * (1e9 / hz) / (double)real;
  printf("# %s %d Hz, 3 functions: %llu expirations for %.0f ms CPU (ratio %.2f): %llu in its "
         "functions (a %llu b %llu c %llu), %llu under [lost: ...], %llu elsewhere in the thread\n",
         engine == PTPROF_ENGINE_PERF ? "perf" : "timer", hz, (unsigned long long)t.total,
         real / 1e6, ratio, (unsigned long long)t.in_fns, (unsigned long long)t.fn[0],
         (unsigned long long)t.fn[1], (unsigned long long)t.fn[2], (unsigned long long)t.lost,
         (unsigned long long)t.other);
  PT_ASSERT_MSG(t.guessed == 0, "%llu expirations on the start routine alone (a guessed stack)",
                (unsigned long long)t.guessed);
  /* The rest of the thread's own code (ptt_worker_main around the call) is
   * small; anything big here would be CPU under some other stack. */
  PT_ASSERT_MSG(t.other * 100 <= t.total * 5, "%llu of %llu outside the thread's functions",
                (unsigned long long)t.other, (unsigned long long)t.total);
  /* Completeness: the CPU is all there, the unknown part labelled. */
  ptt_check_bands(t.total, t.lost, real, hz);
  PT_ASSERT(t.fn[0] > 0 && t.fn[1] > 0 && t.fn[2] > 0);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}
PT_TEST_T(prof_sampler_short3_timer, 60000) {
  short_three(PTPROF_ENGINE_TIMER, 99, "sampler-short3-timer");
}

PT_TEST_T(prof_sampler_short3_perf, 60000) {
  if (!ptt_perf_engine_works()) PT_SKIP("perf_event_open refused here (perf_event_paranoid > 2?)");
  short_three(PTPROF_ENGINE_PERF, 99, "sampler-short3-perf");
}

/* At 999 Hz a 10 ms thread still owes a few expirations at exit under the
 * timer engine (up to one tick's worth): they go under "[lost: thread
 * exit]", never to a guessed stack, so every sample is in the hot function
 * or under a pseudo-frame. (This test used to assert that the owed
 * expirations were added to the thread's most recent stack.) */
static void short_999(int engine) {
  char *dir = pt_tmpdir("sampler-short999");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler_engine(dir, 999, &c, engine);
  static worker w[60];
  memset(w, 0, sizeof w);
  for (int i = 0; i < 60; i += 2) {
    w[i] = (worker){ .fn = ptt_fn_hot_a, .cpu_ns = 10000000 };
    w[i + 1] = (worker){ .fn = ptt_fn_hot_b, .cpu_ns = 10000000 };
    ptt_worker_start(&w[i]);
    ptt_worker_start(&w[i + 1]);
    ptt_worker_join(&w[i]);
    ptt_worker_join(&w[i + 1]);
  }
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  uint64_t total = 0, hot = 0;
  int64_t real = 0;
  for (int i = 0; i < 60; i++) {
    const char *lo = i % 2 ? __start_ptt_hot_b : __start_ptt_hot_a;
    const char *hi = i % 2 ? __stop_ptt_hot_b : __stop_ptt_hot_a;
    total += ptt_count_tid(&c, w[i].tid, NULL, NULL);
    hot += ptt_count_tid(&c, w[i].tid, lo, hi);
    real += w[i].used_ns;
  }
  truth t = judge(&c, w, 60);
  double ratio = (double)total * (1e9 / 999) / (double)real;
  printf("# 999 Hz short threads (%s): %llu expirations (%llu in the hot function, %llu under "
         "[lost: ...]), ratio %.2f, threads with losses at exit %llu\n",
         engine == PTPROF_ENGINE_PERF ? "perf" : "timer", (unsigned long long)total,
         (unsigned long long)hot, (unsigned long long)t.lost, ratio,
         (unsigned long long)st.threads_flushed);
  ptt_check_bands(total, t.lost, real, 999);
  PT_ASSERT(t.guessed == 0);
  PT_ASSERT_MSG((hot + t.lost) * 100 >= total * 95, "%llu of %llu neither in the hot function nor "
                "under a pseudo-frame", (unsigned long long)(total - hot - t.lost),
                (unsigned long long)total);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST_T(prof_sampler_short_threads_999hz, 60000) { short_999(PTPROF_ENGINE_TIMER); }

PT_TEST_T(prof_sampler_short_threads_999hz_perf, 60000) {
  if (!ptt_perf_engine_works()) PT_SKIP("perf_event_open refused here");
  short_999(PTPROF_ENGINE_PERF);
}
