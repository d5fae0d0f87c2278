/*
 * test_labels.c - labels on samples (src/prof/runtime/ptp_labels.c, ptp_label_set.h):
 * the public push/pop contract and its bounds, the poll seam's nesting, the
 * aggregation keyed by labels, and a task's name surviving its end (and the
 * reuse of its console slot) until its samples are written.
 */
#include "pt_test.h"
#include "ptprof.h"
#include "ptprof_console.h"
#include "prof/runtime/ptp_agg.h"
#include "prof/signal/ptp_label_set.h"
#include "prof/runtime/ptp_labels.h"
#include "prof/runtime/ptprof_internal.h"
#include "sampler_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static ptp_label_ids current(void) {
  ptp_label_ids l;
  ptp_label_set_copy(&l);
  return l;
}

PT_TEST(prof_labels_api_bounds) {
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), PTPROF_E_LABELS_EMPTY);
  PT_ASSERT_INT_EQ(ptprof_labels_push(NULL, "v"), -EINVAL);
  PT_ASSERT_INT_EQ(ptprof_labels_push("k", NULL), -EINVAL);
  PT_ASSERT_INT_EQ(ptprof_labels_push("", "v"), -EINVAL);
  PT_ASSERT_INT_EQ(ptprof_labels_push("k", ""), -EINVAL);
  PT_ASSERT_INT_EQ(ptprof_labels_push("a=b", "v"), -EINVAL);    /* breaks -tagfocus */
  PT_ASSERT_INT_EQ(ptprof_labels_push("task", "v"), -EINVAL);   /* reserved */
  PT_ASSERT_INT_EQ(ptprof_labels_push("thread_id", "v"), -EINVAL);
  PT_ASSERT_INT_EQ(ptprof_labels_push("k", "a\nb"), -EINVAL);   /* control char */
  PT_ASSERT_INT_EQ(ptprof_labels_push("k", "\xc3"), -EINVAL);   /* truncated UTF-8 */
  PT_ASSERT_INT_EQ(ptprof_labels_push("k", "\xc0\xaf"), -EINVAL); /* overlong */
  char longv[PTPROF_LABEL_LEN_MAX + 2];
  memset(longv, 'x', sizeof longv - 1);
  longv[sizeof longv - 1] = 0;
  PT_ASSERT_INT_EQ(ptprof_labels_push("k", longv), PTPROF_E_LABEL_TOO_LONG);
  PT_ASSERT_INT_EQ(ptprof_labels_push(longv, "v"), PTPROF_E_LABEL_TOO_LONG);
  longv[PTPROF_LABEL_LEN_MAX] = 0;   /* exactly the maximum is fine */
  PT_ASSERT_INT_EQ(ptprof_labels_push("k", longv), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  PT_ASSERT_UINT_EQ(current().n, 0);
  /* failures changed nothing; the stack holds PTPROF_LABELS_MAX */
  PT_ASSERT_INT_EQ(ptprof_labels_push("session", "s-1"), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_push("turn", "7"), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_push("user.id", "\xc3\xa9t\xc3\xa9"), 0);  /* UTF-8 ok */
  PT_ASSERT_INT_EQ(ptprof_labels_push("session", "s-2"), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_push("one-more", "x"), PTPROF_E_LABELS_FULL);
  ptp_label_ids l = current();
  PT_ASSERT_UINT_EQ(l.n, 4);
  PT_ASSERT(l.kv[0] == l.kv[6]);   /* "session" interned once */
  PT_ASSERT(l.kv[1] != l.kv[7]);
  for (int i = 0; i < 8; i++) PT_ASSERT(l.kv[i] != 0);
  for (int i = 0; i < 4; i++) PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), PTPROF_E_LABELS_EMPTY);
  PT_ASSERT_UINT_EQ(current().n, 0);
  /* no sampler runs: nothing stays interned once popped, but for this
   * thread's label cache (the last label it interned: "session", "s-2") */
  ptp_labels_stats st;
  ptp_labels_get_stats(&st);
  PT_ASSERT_UINT_EQ(st.strings, 2);
  PT_ASSERT_INT_EQ(ptp_labels_cache_drop(), 1);
  ptp_labels_get_stats(&st);
  PT_ASSERT_UINT_EQ(st.strings, 0);
  PT_ASSERT(strstr(ptprof_strerror(PTPROF_E_LABELS_FULL), "labels") != NULL);
}

/* arg NULL: exits with the label pushed; else pushes and pops it, so the
 * exiting thread holds it in its label cache only. */
static void *push_and_exit(void *arg) {
  if (ptprof_labels_push("worker", arg ? "w-2" : "w-1") != 0) return (void *)1;
  if (arg && ptprof_labels_pop() != 0) return (void *)1;
  return NULL;
}

PT_TEST(prof_labels_thread_exit) {
  for (int popped = 0; popped < 2; popped++) {
    pthread_t t;
    PT_ASSERT_INT_EQ(pthread_create(&t, NULL, push_and_exit, popped ? (void *)1 : NULL), 0);
    void *r;
    PT_ASSERT_INT_EQ(pthread_join(t, &r), 0);
    PT_ASSERT(r == NULL);
    ptp_labels_stats st;
    ptp_labels_get_stats(&st);
    /* the exit popped the label and gave the cache's references back */
    PT_ASSERT_MSG(st.strings == 0, "%zu strings left after a thread exit (popped %d)", st.strings,
                  popped);
  }
}

/* The per-thread cache (ptp_labels.c): a repeated push reuses the ids; it
 * compares contents, never pointers; a borrowed entry keeps its strings
 * while another label is pushed over it and popped. */
PT_TEST(prof_labels_cache) {
  PT_ASSERT_INT_EQ(ptp_labels_cache_drop(), 1);
  char val[16] = "c-1";
  PT_ASSERT_INT_EQ(ptprof_labels_push("ckey", val), 0);
  ptp_label_ids a = current();
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_push("ckey", val), 0);   /* a hit */
  ptp_label_ids b = current();
  PT_ASSERT_UINT_EQ(b.n, 1);
  PT_ASSERT(a.kv[0] == b.kv[0] && a.kv[1] == b.kv[1]);
  /* nested: another value over the borrowed entry, popped again */
  PT_ASSERT_INT_EQ(ptprof_labels_push("ckey", "c-other"), 0);
  ptp_label_ids c = current();
  PT_ASSERT_UINT_EQ(c.n, 2);
  PT_ASSERT(c.kv[2] == a.kv[0] && c.kv[3] != a.kv[1]);
  PT_ASSERT_INT_EQ(ptp_labels_cache_drop(), 0);   /* entry 0 borrows it: kept */
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  ptp_labels_stats st;
  ptp_labels_get_stats(&st);
  PT_ASSERT_UINT_EQ(st.strings, 2);   /* "c-other" freed (no sampler); "ckey", "c-1" held */
  PT_ASSERT_INT_EQ(ptprof_labels_push("ckey", val), 0);   /* still the cache's "c-1" */
  PT_ASSERT(current().kv[1] == a.kv[1]);
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  /* the same buffer, changed in place: a new value, not the cached id */
  snprintf(val, sizeof val, "c-2");
  PT_ASSERT_INT_EQ(ptprof_labels_push("ckey", val), 0);
  ptp_label_ids d = current();
  PT_ASSERT(d.kv[0] == a.kv[0] && d.kv[1] != a.kv[1]);
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  PT_ASSERT_INT_EQ(ptp_labels_cache_drop(), 1);
  ptp_labels_get_stats(&st);
  PT_ASSERT_UINT_EQ(st.strings, 0);
}

PT_TEST(prof_labels_poll_nesting) {
  PT_ASSERT(current().task == 0);
  ptp_label_set_poll_begin(11);
  ptp_label_set_poll_begin(22);
  PT_ASSERT(current().task == 22);
  ptp_label_set_poll_end();
  PT_ASSERT(current().task == 11);   /* the outer task is back */
  ptp_label_set_poll_end();
  PT_ASSERT(current().task == 0);
  ptp_label_set_poll_end();          /* unbalanced: ignored */
  PT_ASSERT(current().task == 0);
  /* deeper than remembered: shown as unknown, never as a wrong task */
  for (uint64_t i = 1; i <= PTP_POLL_NEST_MAX + 2; i++) ptp_label_set_poll_begin(i);
  PT_ASSERT(current().task == PTP_POLL_NEST_MAX + 2);
  ptp_label_set_poll_end();
  PT_ASSERT(current().task == PTP_TASK_TOO_DEEP);
  ptp_label_set_poll_end();
  ptp_label_set_poll_end();
  PT_ASSERT(current().task == PTP_POLL_NEST_MAX - 1);
  for (uint32_t i = 0; i < PTP_POLL_NEST_MAX - 1; i++) ptp_label_set_poll_end();
  PT_ASSERT(current().task == 0);
}

PT_TEST(prof_labels_agg_key) {
  ptp_agg *a;
  PT_ASSERT_INT_EQ(ptp_agg_new(&a), 0);
  uintptr_t f[3] = {0x1000, 0x2000, 0x3000};
  ptp_label_ids x = {.task = 5}, y = {.task = 6}, z = {.task = 5, .n = 1, .kv = {1, 2}};
  ptp_label_ids z2 = z;
  z2.kv[4] = 99;   /* beyond n: not part of the key */
  PT_ASSERT_INT_EQ(ptp_agg_add(a, 1, 0, NULL, f, 3, 1), 0);
  PT_ASSERT_INT_EQ(ptp_agg_add(a, 1, 0, &x, f, 3, 2), 0);
  PT_ASSERT_INT_EQ(ptp_agg_add(a, 1, 0, &y, f, 3, 3), 0);
  PT_ASSERT_INT_EQ(ptp_agg_add(a, 1, 0, &z, f, 3, 4), 0);
  PT_ASSERT_INT_EQ(ptp_agg_add(a, 1, 0, &z2, f, 3, 5), 0);
  PT_ASSERT_INT_EQ(ptp_agg_add(a, 1, 0, &x, f, 3, 6), 0);
  PT_ASSERT_UINT_EQ(ptp_agg_size(a), 4);
  ptp_sample *s;
  size_t n;
  PT_ASSERT_INT_EQ(ptp_agg_samples(a, &s, &n), 0);
  uint64_t by[4] = {0};
  for (size_t i = 0; i < n; i++) {
    if (s[i].ids.task == 0) by[0] += s[i].count;
    else if (s[i].ids.task == 6) by[2] += s[i].count;
    else if (s[i].ids.n == 0) by[1] += s[i].count;
    else by[3] += s[i].count;
  }
  PT_ASSERT_UINT_EQ(by[0], 1);
  PT_ASSERT_UINT_EQ(by[1], 8);
  PT_ASSERT_UINT_EQ(by[2], 3);
  PT_ASSERT_UINT_EQ(by[3], 9);
  free(s);
  ptp_agg_del(a);
}

/* ---- with a running sampler --------------------------------------------- */

typedef struct lcap {
  pthread_mutex_t mu;
  uint64_t in_task, no_label, other_task, total, with_user;
  char kind[64], loc[128];
  int64_t num;
} lcap;

static void lhook(const ptp_window *w, void *ctx) {
  lcap *c = ctx;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < w->nsamples; i++) {
    const ptp_sample *s = &w->samples[i];
    if (s->flags & PTP_SAMPLE_LOST) continue;
    c->total += s->count;
    const char *kind = NULL;
    for (size_t j = 0; j < s->nlabels; j++) {
      const ptp_label *l = &s->labels[j];
      if (strcmp(l->key, "task_kind") == 0) kind = l->str;
      if (strcmp(l->key, "task_loc") == 0) snprintf(c->loc, sizeof c->loc, "%s", l->str);
      if (strcmp(l->key, "task") == 0) c->num = l->num;
      if (strcmp(l->key, "phase") == 0 && strcmp(l->str, "burn") == 0) c->with_user += s->count;
    }
    if (!kind) c->no_label += s->count;
    else if (strcmp(kind, "labels.ended") == 0) {
      c->in_task += s->count;
      snprintf(c->kind, sizeof c->kind, "%s", kind);
    } else {
      c->other_task += s->count;
    }
  }
  pthread_mutex_unlock(&c->mu);
}

static volatile uint64_t g_sink;
static void burn_ms(int ms) {
  struct timespec a, b;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  for (;;) {
    for (int i = 0; i < 20000; i++) g_sink = g_sink * 6364136223846793005ULL + 1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    if ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 >= ms) return;
  }
}

PT_TEST_T(prof_labels_task_ended_before_dump, 60000) {
  char *dir = pt_tmpdir("labels-ended");
  lcap c;
  memset(&c, 0, sizeof c);
  pthread_mutex_init(&c.mu, NULL);
  ptprof *p = ptt_start_with_hook(dir, 499, lhook, &c);

  uint64_t id = ptcon_task_spawn("labels.ended", "task", "../../tests/prof/test_labels.c", 4242,
                                 NULL, 0);
  PT_ASSERT(id != 0);
  ptcon_task_poll_begin(id);
  PT_ASSERT_INT_EQ(ptprof_labels_push("phase", "burn"), 0);
  burn_ms(300);
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  PT_ASSERT_INT_EQ(ptp_labels_cache_drop(), 1);   /* only the window holds them now */
  ptcon_task_poll_end(id);
  ptcon_task_end(id);
  /* The freed console slot is reused at once (a LIFO free list) by a task
   * with another name: the ended task's samples must keep their own. */
  uint64_t id2 = ptcon_task_spawn("labels.reuser", "task", __FILE__, __LINE__, NULL, 0);
  PT_ASSERT(id2 != 0 && id2 != id);
  burn_ms(150);   /* outside any poll: no task label */
  ptcon_task_end(id2);
  ptp_labels_stats st;
  ptp_labels_get_stats(&st);
  PT_ASSERT(st.ended_waiting >= 1);
  PT_ASSERT(st.strings >= 2);   /* "phase", "burn": popped, kept until written */

  char path[512];
  int rc = ptprof_dump(p, path, sizeof path);
  PT_ASSERT_MSG(rc == 0, "dump: %s", ptprof_strerror(rc));
  pthread_mutex_lock(&c.mu);
  /* 300 ms at 499 Hz is ~150 samples: the task must have most of them */
  PT_ASSERT_MSG(c.in_task >= 60, "samples in the ended task: %llu of %llu",
                (unsigned long long)c.in_task, (unsigned long long)c.total);
  PT_ASSERT_MSG(c.no_label >= 20, "samples outside polls: %llu", (unsigned long long)c.no_label);
  PT_ASSERT_MSG(c.other_task == 0, "samples under another task: %llu",
                (unsigned long long)c.other_task);
  PT_ASSERT(c.with_user > 0 && c.with_user <= c.in_task);
  PT_ASSERT_STR_EQ(c.loc, "tests/prof/test_labels.c:4242");
  PT_ASSERT(c.num > 0);
  pthread_mutex_unlock(&c.mu);
  /* written: the copies and strings are gone */
  ptp_labels_get_stats(&st);
  PT_ASSERT_UINT_EQ(st.ended_waiting, 0);
  PT_ASSERT_UINT_EQ(st.strings, 0);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST_T(prof_labels_table_full, 60000) {
  char *dir = pt_tmpdir("labels-full");
  ptprof *p = ptt_start_with_hook(dir, 0, NULL, NULL);
  /* While a sampler runs, popped strings stay until the next snapshot: a
   * stream of distinct values fills the table, and the dump empties it. */
  char v[32];
  int i, last = 0;
  for (i = 0; i < PTPROF_LABEL_STRINGS_MAX + 10; i++) {
    snprintf(v, sizeof v, "v%d", i);
    last = ptprof_labels_push("k", v);
    if (last) break;
    PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  }
  PT_ASSERT_INT_EQ(last, PTPROF_E_LABEL_TABLE);
  PT_ASSERT_INT_EQ(i, PTPROF_LABEL_STRINGS_MAX - 1);   /* "k" and 4095 values */
  PT_ASSERT_UINT_EQ(current().n, 0);                   /* the failure pushed nothing */
  PT_ASSERT_INT_EQ(ptprof_dump(p, NULL, 0), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_push("k", "after-dump"), 0);
  PT_ASSERT_INT_EQ(ptprof_labels_pop(), 0);
  PT_ASSERT_INT_EQ(ptp_labels_cache_drop(), 1);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  ptp_labels_stats st;
  ptp_labels_get_stats(&st);
  PT_ASSERT_UINT_EQ(st.strings, 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}
