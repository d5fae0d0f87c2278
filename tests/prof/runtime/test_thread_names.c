/*
 * test_thread_names.c - the thread_name of a window's samples: the
 * graveyard of exited threads' names (runtime/ptp_graveyard.c: kept by dump
 * epoch, every exit of a window until it is written), and a sampler whose
 * window holds more exited threads than the old fixed ring of 256 kept.
 * Renamed threads and names across windows are checked whole-program by
 * tests/prof/own_work_test.sh. Helpers: sampler_fixture.h.
 */
#include "pt_test.h"
#include "ptprof.h"
#include "prof/runtime/ptp_graveyard.h"
#include "prof/runtime/ptprof_internal.h"
#include "sampler_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void put_named(uint32_t tid, const char *fmtname, unsigned i) {
  char nm[16];
  snprintf(nm, sizeof nm, fmtname, i);
  ptp_graveyard_put(tid, nm);
}

/* Kept by epoch while a sampler runs: 1000 exits of one window all found
 * (a fixed ring would hold 256), released by the dump that took the cut,
 * while exits after the cut stay for the next dump; the newest name of a
 * reused tid wins; the bound drops the oldest, counted. */
PT_TEST(prof_graveyard_epochs) {
  ptp_graveyard_keep(1);
  for (unsigned i = 0; i < 1000; i++) put_named(10000 + i, "w1-%u", i);
  uint64_t t1 = ptp_graveyard_cut();
  for (unsigned i = 0; i < 10; i++) put_named(20000 + i, "w2-%u", i);
  put_named(10003, "reused-%u", 3);          /* tid 10003 again, after the cut */
  uint32_t tids[1012];
  char names[1012][16];
  for (unsigned i = 0; i < 1000; i++) tids[i] = 10000 + i;
  tids[1000] = 20009;
  tids[1001] = 99999;                        /* never seen */
  memset(names, 0, sizeof names);
  strcpy(names[5], "alive");                 /* already named: left alone */
  ptp_graveyard_get_many(tids, 1002, names);
  char want[16];
  for (unsigned i = 0; i < 1000; i++) {
    if (i == 5) { PT_ASSERT_STR_EQ(names[i], "alive"); continue; }
    snprintf(want, sizeof want, i == 3 ? "reused-%u" : "w1-%u", i);
    PT_ASSERT_STR_EQ(names[i], want);
  }
  PT_ASSERT_STR_EQ(names[1000], "w2-9");
  PT_ASSERT_STR_EQ(names[1001], "");
  /* the dump of window 1 is done: its exits go, window 2's stay */
  ptp_graveyard_release(t1);
  char one[16];
  PT_ASSERT_INT_EQ(ptp_graveyard_get(10000, one), -ENOENT);
  PT_ASSERT_INT_EQ(ptp_graveyard_get(20000, one), 0);
  PT_ASSERT_STR_EQ(one, "w2-0");
  PT_ASSERT_INT_EQ(ptp_graveyard_get(10003, one), 0);
  PT_ASSERT_STR_EQ(one, "reused-3");
  PT_ASSERT_UINT_EQ(ptp_graveyard_dropped(), 0);
  /* at the bound the oldest goes, counted */
  for (unsigned i = 0; i < PTP_GRAVEYARD_MAX; i++) put_named(30000 + i, "b-%u", i);
  PT_ASSERT_UINT_EQ(ptp_graveyard_dropped(), 11);    /* the 11 left of window 2 */
  PT_ASSERT_INT_EQ(ptp_graveyard_get(20000, one), -ENOENT);
  PT_ASSERT_INT_EQ(ptp_graveyard_get(30000, one), 0);
  /* a stop: everything released; without a sampler only the 256 newest */
  ptp_graveyard_release(UINT64_MAX);
  ptp_graveyard_keep(0);
  PT_ASSERT_INT_EQ(ptp_graveyard_get(30000 + PTP_GRAVEYARD_MAX - 1, one), -ENOENT);
  for (unsigned i = 0; i < 300; i++) put_named(40000 + i, "n-%u", i);
  PT_ASSERT_INT_EQ(ptp_graveyard_get(40000 + 43, one), -ENOENT);
  PT_ASSERT_INT_EQ(ptp_graveyard_get(40000 + 44, one), 0);
  PT_ASSERT_STR_EQ(one, "n-44");
  PT_ASSERT_UINT_EQ(ptp_graveyard_dropped(), 11);    /* not counted while none runs */
}

/* A window in which 320 short threads, each named at its start
 * ("xn-<i>"), burn ~3 ms of CPU and exit: every one that has samples is
 * named right in the dump (with the old ring of 256 the oldest ~64 had
 * no name). Checked inside the window hook, which sees every thread. */
#define NX 320
typedef struct names_check {
  _Atomic uint32_t tid[NX];
  int checked, right, wrong;
  char first_wrong[64];
} names_check;

static names_check g_nc;

static void names_hook(const ptp_window *w, void *ctx) {
  names_check *nc = ctx;
  for (size_t t = 0; t < w->nthreads; t++) {
    for (unsigned i = 0; i < NX; i++) {
      if (atomic_load(&nc->tid[i]) != w->threads[t].tid) continue;
      char want[16];
      snprintf(want, sizeof want, "xn-%u", i);
      nc->checked++;
      if (strcmp(w->threads[t].name, want) == 0) {
        nc->right++;
      } else if (nc->wrong++ == 0) {
        snprintf(nc->first_wrong, sizeof nc->first_wrong, "tid %u: \"%s\", not %s",
                 w->threads[t].tid, w->threads[t].name, want);
      }
    }
  }
}

static void *short_named(void *arg) {
  unsigned i = (unsigned)(uintptr_t)arg;
  char nm[16];
  snprintf(nm, sizeof nm, "xn-%u", i);
  pthread_setname_np(pthread_self(), nm);
  atomic_store(&g_nc.tid[i], (uint32_t)gettid());
  ptt_fn_hot_a(3000000);
  return NULL;
}

PT_TEST_T(prof_sampler_names_many_exited, 120000) {
  char *dir = pt_tmpdir("thread-names");
  memset(&g_nc, 0, sizeof g_nc);
  ptprof *p = ptt_start_with_hook(dir, 999, names_hook, &g_nc);
  for (unsigned i = 0; i < NX; i += 4) {     /* four alive at a time */
    pthread_t th[4];
    for (unsigned k = 0; k < 4; k++)
      PT_ASSERT_INT_EQ(pthread_create(&th[k], NULL, short_named, (void *)(uintptr_t)(i + k)), 0);
    for (unsigned k = 0; k < 4; k++) PT_ASSERT_INT_EQ(pthread_join(th[k], NULL), 0);
  }
  PT_ASSERT_INT_EQ(ptprof_dump(p, NULL, 0), 0);
  printf("# %d exited threads with samples in the window: %d named right, %d wrong\n",
         g_nc.checked, g_nc.right, g_nc.wrong);
  PT_ASSERT_MSG(g_nc.wrong == 0, "%d of %d exited threads misnamed (first: %s)", g_nc.wrong,
                g_nc.checked, g_nc.first_wrong);
  PT_ASSERT_MSG(g_nc.checked > 270, "only %d of %d short threads had samples", g_nc.checked, NX);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

/* A thread that renames itself inside one window: each sample carries the
 * name the thread had when it was taken (the handler reads it), not the
 * one it has at the dump. The thread burns ~150 ms of CPU as "phase-a",
 * then ~150 ms as "phase-b"; at 999 Hz each half expects ~150 samples
 * (binomial sd ~9), so the [100, 200] band is > 5 sd wide. Reading the
 * name at the dump would give 0 "phase-a" samples. */
typedef struct rename_check {
  _Atomic uint32_t tid;
  uint64_t a, b, other;
} rename_check;

static void rename_hook(const ptp_window *w, void *ctx) {
  rename_check *rc = ctx;
  uint32_t tid = atomic_load(&rc->tid);
  for (size_t i = 0; i < w->nsamples; i++) {
    const ptp_sample *s = &w->samples[i];
    if (s->tid != tid || (s->flags & PTP_SAMPLE_LOST)) continue;
    const char *nm = s->thread_name ? s->thread_name : "";
    if (strcmp(nm, "phase-a") == 0) rc->a += s->count;
    else if (strcmp(nm, "phase-b") == 0) rc->b += s->count;
    else rc->other += s->count;
  }
}

static rename_check g_rc;

static void *renaming(void *arg) {
  (void)arg;
  atomic_store(&g_rc.tid, (uint32_t)gettid());
  pthread_setname_np(pthread_self(), "phase-a");
  ptt_fn_hot_a(150000000);
  pthread_setname_np(pthread_self(), "phase-b");
  ptt_fn_hot_a(150000000);
  return NULL;
}

PT_TEST_T(prof_sampler_names_at_sample_time, 60000) {
  char *dir = pt_tmpdir("thread-rename");
  memset(&g_rc, 0, sizeof g_rc);
  ptprof *p = ptt_start_with_hook(dir, 999, rename_hook, &g_rc);
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, renaming, NULL), 0);
  PT_ASSERT_INT_EQ(pthread_join(th, NULL), 0);
  PT_ASSERT_INT_EQ(ptprof_dump(p, NULL, 0), 0);
  printf("# samples named phase-a %llu, phase-b %llu, other %llu\n", (unsigned long long)g_rc.a,
         (unsigned long long)g_rc.b, (unsigned long long)g_rc.other);
  PT_ASSERT_MSG(g_rc.a >= 100 && g_rc.a <= 200, "phase-a: %llu samples", (unsigned long long)g_rc.a);
  PT_ASSERT_MSG(g_rc.b >= 100 && g_rc.b <= 200, "phase-b: %llu samples", (unsigned long long)g_rc.b);
  PT_ASSERT_MSG(g_rc.other <= 2, "%llu samples under another name", (unsigned long long)g_rc.other);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

/* The threads' CPU of a window (ptp_window.thread_cpu, the snapshot's
 * "threads' CPU" line): each name's CPU by its threads' clocks (a live
 * thread read at the cut, exited ones at their exit, two threads of one
 * name summed), its samples counted by tid, most CPU first; the
 * profiler's own work on the dumping thread (30 ms burned in the window
 * hook, after the cut: the next window's) kept out of that thread's
 * figure and counted in thread_own_ns; with the sampler's own thread the
 * figures add up to the process's CPU clock. */
typedef struct tcpu_cap {
  int nw;
  ptp_thread_cpu t[2][16];
  size_t n[2];
  int64_t own[2], own_thread[2], process[2];
  uint64_t live_samples[2];       /* samples of tc-live's tid */
  _Atomic uint32_t live_tid;
  int64_t burn_ns;
} tcpu_cap;

static tcpu_cap g_tc;

static void tcpu_hook(const ptp_window *w, void *ctx) {
  tcpu_cap *c = ctx;
  if (c->nw < 2) {
    int i = c->nw;
    c->n[i] = w->nthread_cpu < 16 ? w->nthread_cpu : 16;
    memcpy(c->t[i], w->thread_cpu, c->n[i] * sizeof *w->thread_cpu);
    c->own[i] = w->thread_own_ns;
    c->own_thread[i] = w->own_thread_cpu_ns;
    c->process[i] = w->process_cpu_ns;
    for (size_t k = 0; k < w->nsamples; k++)
      if (w->samples[k].tid == atomic_load(&c->live_tid)) c->live_samples[i] += w->samples[k].count;
  }
  c->nw++;
  if (c->burn_ns) ptt_fn_hot_c(c->burn_ns);    /* the profiler's work, as a symbolization */
}

static const ptp_thread_cpu *tcpu_find(int wi, const char *name) {
  for (size_t i = 0; i < g_tc.n[wi]; i++)
    if (strcmp(g_tc.t[wi][i].name, name) == 0) return &g_tc.t[wi][i];
  return NULL;
}

static int g_tc_pipe[2];
static _Atomic int64_t g_tc_live_used;

static void *tc_live(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "tc-live");
  atomic_store(&g_tc.live_tid, (uint32_t)gettid());
  int64_t t0 = ptt_thread_cpu_ns();
  ptt_fn_hot_a(40000000);
  atomic_store(&g_tc_live_used, ptt_thread_cpu_ns() - t0);
  char b;
  (void)!read(g_tc_pipe[0], &b, 1);          /* alive, idle, until both dumps are done */
  return NULL;
}

#define PT_ASSERT_CPU(e, used, what)                                                        \
  PT_ASSERT_MSG((e) && (e)->cpu_ns >= (used) && (e)->cpu_ns <= (used) + 3000000,            \
                "%s: %lld ns by the line, %lld used", what, (e) ? (long long)(e)->cpu_ns : -1LL, \
                (long long)(used))

PT_TEST_T(prof_sampler_thread_cpu_line, 60000) {
  char *dir = pt_tmpdir("thread-cpu");
  memset(&g_tc, 0, sizeof g_tc);
  g_tc.burn_ns = 30000000;
  PT_ASSERT_INT_EQ(pipe(g_tc_pipe), 0);
  ptprof *p = ptt_start_with_hook(dir, 99, tcpu_hook, &g_tc);
  pthread_t live;
  PT_ASSERT_INT_EQ(pthread_create(&live, NULL, tc_live, NULL), 0);
  worker ex = { .fn = ptt_fn_hot_b, .cpu_ns = 20000000, .name = "tc-exit" };
  worker tw[2] = { { .fn = ptt_fn_hot_b, .cpu_ns = 5000000, .name = "tc-twin" },
                   { .fn = ptt_fn_hot_b, .cpu_ns = 5000000, .name = "tc-twin" } };
  ptt_worker_start(&ex);
  ptt_worker_start(&tw[0]);
  ptt_worker_start(&tw[1]);
  ptt_worker_join(&ex);
  ptt_worker_join(&tw[0]);
  ptt_worker_join(&tw[1]);
  while (!atomic_load(&g_tc_live_used)) usleep(1000);      /* tc-live has burned its CPU */
  PT_ASSERT_INT_EQ(ptprof_dump(p, NULL, 0), 0);
  PT_ASSERT_INT_EQ(ptprof_dump(p, NULL, 0), 0);
  PT_ASSERT_INT_EQ(write(g_tc_pipe[1], "x", 1), 1);
  PT_ASSERT_INT_EQ(pthread_join(live, NULL), 0);
  ptprof_del(p);
  close(g_tc_pipe[0]);
  close(g_tc_pipe[1]);
  PT_ASSERT_INT_EQ(g_tc.nw, 2);

  int64_t sum = 0;
  for (size_t i = 0; i < g_tc.n[0]; i++) {
    const ptp_thread_cpu *t = &g_tc.t[0][i];
    printf("# window 1: %-15s %7.2f ms, %u threads, %llu samples\n", t->name, t->cpu_ns / 1e6,
           t->nthreads, (unsigned long long)t->samples);
    sum += t->cpu_ns;
    if (i) PT_ASSERT_MSG(t->cpu_ns <= g_tc.t[0][i - 1].cpu_ns, "not sorted by CPU");
  }
  /* the worker's own measure is its start routine's CPU; the thread's
   * clock adds its start and exit (microseconds) */
  const ptp_thread_cpu *lv = tcpu_find(0, "tc-live"), *ex1 = tcpu_find(0, "tc-exit"),
                       *twin = tcpu_find(0, "tc-twin");
  PT_ASSERT_CPU(lv, g_tc_live_used, "tc-live (alive at the cut)");
  PT_ASSERT_CPU(ex1, ex.used_ns, "tc-exit (exited)");
  PT_ASSERT_CPU(twin, tw[0].used_ns + tw[1].used_ns, "tc-twin (two exited)");
  PT_ASSERT_UINT_EQ(lv->nthreads, 1);
  PT_ASSERT_UINT_EQ(twin->nthreads, 2);
  PT_ASSERT_UINT_EQ(lv->samples, g_tc.live_samples[0]);
  PT_ASSERT_MSG(lv->samples >= 1, "tc-live: 40 ms of CPU at 99 Hz and no sample");
  /* every thread's CPU, the profiler's own on them and its own thread's:
   * the process's clock (read first at the cut; a thread not followed, as
   * the library's I/O helper, only adds to it) */
  int64_t acct = sum + g_tc.own[0] + g_tc.own_thread[0];
  printf("# window 1: threads %.2f + own %.2f + sampler thread %.2f = %.2f ms, process %.2f ms\n",
         sum / 1e6, g_tc.own[0] / 1e6, g_tc.own_thread[0] / 1e6, acct / 1e6, g_tc.process[0] / 1e6);
  PT_ASSERT_MSG(acct >= g_tc.process[0] - 5000000 && acct <= g_tc.process[0] + 1000000,
                "threads %lld ns against the process's %lld", (long long)acct,
                (long long)g_tc.process[0]);
  /* window 2: the hook's 30 ms on the dumping thread (this one) after the
   * first cut are the profiler's, not the thread's */
  char me[16] = "";
  pthread_getname_np(pthread_self(), me, sizeof me);
  const ptp_thread_cpu *m2 = tcpu_find(1, me);
  printf("# window 2: own work on threads %.2f ms, this thread %.2f ms\n", g_tc.own[1] / 1e6,
         m2 ? m2->cpu_ns / 1e6 : -1.0);
  PT_ASSERT_MSG(g_tc.own[1] >= 30000000, "own work %lld ns, the hook burned 30 ms", (long long)g_tc.own[1]);
  PT_ASSERT_MSG(m2 && m2->cpu_ns < 10000000, "the dumping thread's own work in its figure");
  const ptp_thread_cpu *lv2 = tcpu_find(1, "tc-live");
  PT_ASSERT_MSG(lv2 && lv2->cpu_ns < 1000000, "tc-live, idle in window 2: %lld ns",
                lv2 ? (long long)lv2->cpu_ns : -1LL);
  PT_ASSERT_MSG(!tcpu_find(1, "tc-exit"), "an exit of window 1 counted again");
  pt_rm_rf(dir);
  free(dir);
}
