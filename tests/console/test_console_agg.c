/* Unit tests of the instrumentation + aggregator: stats, Update encoding
 * (decoded back here), retention, dropped events, no ghost tasks, splitting
 * of a large state. Each test runs in its own forked process, so the
 * process-wide slot table starts empty. */
#include "pt_test.h"

#include <sched.h>

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console/ptcon_agg.h"

/* ---- a minimal protobuf reader for checking our output ---- */

typedef struct pbr {
  const uint8_t *p;
  size_t n, off;
} pbr;

static uint64_t rd_var(pbr *r) {
  uint64_t v = 0;
  for (unsigned s = 0; s < 64; s += 7) {
    PT_ASSERT(r->off < r->n);
    uint8_t c = r->p[r->off++];
    v |= (uint64_t)(c & 0x7f) << s;
    if (!(c & 0x80)) return v;
  }
  PT_ASSERT_MSG(0, "varint too long");
  return 0;
}

/* Next field: returns field number (0 at end); *sub gets a length-delimited
 * body, *val a varint. */
static uint32_t next_field(pbr *r, pbr *sub, uint64_t *val) {
  if (r->off >= r->n) return 0;
  uint64_t key = rd_var(r);
  switch (key & 7) {
  case 0: *val = rd_var(r); break;
  case 2: {
    uint64_t len = rd_var(r);
    PT_ASSERT(len <= r->n - r->off);
    sub->p = r->p + r->off;
    sub->n = (size_t)len;
    sub->off = 0;
    r->off += (size_t)len;
    break;
  }
  default: PT_ASSERT_MSG(0, "unexpected wire type %u", (unsigned)(key & 7));
  }
  return (uint32_t)(key >> 3);
}

static pbr sub_of(const pbr *msg, uint32_t field) {
  pbr r = *msg, s = {0}, none = {0};
  uint64_t v;
  uint32_t f;
  r.off = 0;
  while ((f = next_field(&r, &s, &v)))
    if (f == field) return s;
  return none;
}

static uint64_t var_of(const pbr *msg, uint32_t field) {
  pbr r = *msg, s;
  uint64_t v, got = 0;
  uint32_t f;
  r.off = 0;
  while ((f = next_field(&r, &s, &v)))
    if (f == field) got = v;
  return got;
}

static int has_field(const pbr *msg, uint32_t field) {
  pbr r = *msg, s;
  uint64_t v;
  uint32_t f;
  r.off = 0;
  while ((f = next_field(&r, &s, &v)))
    if (f == field) return 1;
  return 0;
}

static uint64_t dur_ns(const pbr *d) { return var_of(d, 1) * 1000000000u + var_of(d, 2); }

/* Collected Updates. */
typedef struct upd {
  uint8_t *msg[64];
  size_t len[64];
  int n;
} upd;

static int collect_emit(void *ud, uint8_t *msg, size_t len) {
  upd *u = ud;
  PT_ASSERT(u->n < 64);
  u->msg[u->n] = msg;
  u->len[u->n++] = len;
  return 0;
}

static void upd_free(upd *u) {
  for (int i = 0; i < u->n; i++) free(u->msg[i]);
  u->n = 0;
}

/* Stats (tasks.Stats) of task id across all Updates in u; NULL-body if none. */
static pbr stats_for(upd *u, uint64_t id) {
  pbr none = {0};
  for (int i = 0; i < u->n; i++) {
    pbr m = {u->msg[i], u->len[i], 0}, tu = sub_of(&m, 2), s;
    uint64_t v;
    uint32_t f;
    while ((f = next_field(&tu, &s, &v))) {
      if (f != 3) continue;
      if (var_of(&s, 1) == id) return sub_of(&s, 2);
    }
  }
  return none;
}

static int count_new_tasks(upd *u, int i) {
  pbr m = {u->msg[i], u->len[i], 0}, tu = sub_of(&m, 2), s;
  uint64_t v;
  uint32_t f;
  int n = 0;
  while ((f = next_field(&tu, &s, &v)))
    if (f == 1) n++;
  return n;
}

/* Events on the test's own clock, so durations are exact: the test writes
 * them, as the producer it is, into its own thread's ring (registered by
 * its first real instrumentation call; the only ring of this process, so
 * it is the list's one entry), with the ticks it chooses. With the tick
 * source forced to CLOCK_MONOTONIC (ptcon_clock_force(0), before anything
 * is spawned), ticks are nanoseconds on the aggregator's clock. The
 * aggregator under test is the real one; only the moments are made up. */
static ptcon_ring *this_thread_ring(void) {
  ptcon_instrument_stats is;
  ptcon_instrument_get_stats(&is);
  PT_ASSERT_UINT_EQ(is.threads, 1);
  ptcon_ring *r = atomic_load_explicit(&ptcon_rings, memory_order_acquire);
  PT_ASSERT(r != NULL && r->next == NULL);
  return r;
}

static void synth_push(ptcon_ring *r, unsigned type, uint64_t id, uint64_t ns) {
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  PT_ASSERT(tail - atomic_load_explicit(&r->head, memory_order_acquire) < PTCON_RING_CAP);
  r->ev[tail & (PTCON_RING_CAP - 1)] =
      (ptcon_event){(uint64_t)type << 60 | (id & PTCON_EV_ID_MASK), ns};
  atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
}

#define MS 1000000u
#define US 1000u

PT_TEST(console_agg_stats_and_update) {
  PT_ASSERT_INT_EQ(ptcon_clock_force(0), 0);   /* ticks = CLOCK_MONOTONIC ns (this_thread_ring) */
  ptcon_field f[1] = {{.name = "peer", .type = PTCON_FIELD_STR, .v.str = "x"}};
  uint64_t early = ptcon_task_spawn("early", NULL, "a.c", 10, f, 1);  /* before any consumer */
  PT_ASSERT(early != 0);
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  ptcon_agg *b2;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&b2, 60000, 0), -EBUSY);   /* one consumer */
  /* Counts through the real instrumentation calls. */
  uint64_t t = ptcon_task_spawn("worker", "local", "b.c", 20, NULL, 0);
  for (int i = 0; i < 4; i++) {
    ptcon_task_wake(t);
    ptcon_task_poll_begin(t);
    if (i == 0) ptcon_task_wake(t);   /* self-wake */
    ptcon_task_poll_end(t);
  }
  ptcon_task_waker_clone(t);
  ptcon_task_waker_clone(t);
  ptcon_task_waker_drop(t);
  /* Durations on made-up moments: 4 wakes, each polled 100/200/300/400 us
   * later for 1/2/3/4 ms. */
  uint64_t timed = ptcon_task_spawn("timed", "task", "b.c", 30, NULL, 0);
  ptcon_ring *ring = this_thread_ring();
  uint64_t base = ptcon_mono_ns() + MS;   /* after the spawn's created time */
  for (uint64_t i = 0; i < 4; i++) {
    uint64_t w = base + i * 10 * MS, b = w + (i + 1) * 100 * US;
    synth_push(ring, PTCON_EV_WAKE, timed, w);
    synth_push(ring, PTCON_EV_POLL_BEGIN, timed, b);
    synth_push(ring, PTCON_EV_POLL_END, timed, b + (i + 1) * MS);
  }
  uint64_t now = base + 1000 * MS;
  ptcon_agg_collect(a, now);
  ptcon_rec *r = ptcon_agg_find(a, t);
  PT_ASSERT(r != NULL);
  PT_ASSERT_UINT_EQ(r->polls, 4);
  PT_ASSERT_UINT_EQ(r->wakes, 5);
  PT_ASSERT_UINT_EQ(r->self_wakes, 1);
  PT_ASSERT_UINT_EQ(r->waker_clones, 2);
  PT_ASSERT_UINT_EQ(r->waker_drops, 1);
  PT_ASSERT(r->poll_hist && r->poll_hist->total == 4);
  ptcon_rec *rt = ptcon_agg_find(a, timed);
  PT_ASSERT(rt != NULL);
  PT_ASSERT_UINT_EQ(rt->polls, 4);
  PT_ASSERT_UINT_EQ(rt->wakes, 4);
  PT_ASSERT_UINT_EQ(rt->busy_ns, 10 * MS);                  /* 1 + 2 + 3 + 4 ms */
  PT_ASSERT_UINT_EQ(rt->sched_ns, 1000 * US);               /* 100 + 200 + 300 + 400 us */
  PT_ASSERT_UINT_EQ(rt->first_poll, base + 100 * US);
  PT_ASSERT_UINT_EQ(rt->last_poll_ended, base + 30 * MS + 400 * US + 4 * MS);
  PT_ASSERT(rt->poll_hist && rt->poll_hist->total == 4);
  PT_ASSERT_UINT_EQ(rt->poll_hist->max, 4 * MS);
  PT_ASSERT(rt->sched_hist && rt->sched_hist->total == 4);
  PT_ASSERT_UINT_EQ(rt->sched_hist->max, 400 * US);
  PT_ASSERT(ptcon_agg_find(a, early) != NULL);   /* discovered by the slot scan */
  PT_ASSERT_STR_EQ(ptcon_agg_find(a, early)->name, "early");

  upd u = {0};
  PT_ASSERT_INT_EQ(ptcon_agg_encode_updates(a, 1, 0, 7, 1 << 20, collect_emit, &u), 0);
  PT_ASSERT_INT_EQ(u.n, 1);
  pbr m = {u.msg[0], u.len[0], 0};
  PT_ASSERT(has_field(&m, 1));                 /* now */
  PT_ASSERT(has_field(&m, 5));                 /* metadata */
  pbr tu = sub_of(&m, 2);
  PT_ASSERT_UINT_EQ(var_of(&tu, 4), 7);        /* dropped_events */
  PT_ASSERT_INT_EQ(count_new_tasks(&u, 0), 3);
  pbr tst = stats_for(&u, timed);
  pbr tps = sub_of(&tst, 7);
  PT_ASSERT_UINT_EQ(var_of(&tps, 1), 4);       /* polls */
  pbr tbusy = sub_of(&tps, 6);
  PT_ASSERT_UINT_EQ(dur_ns(&tbusy), 10 * MS);  /* busy_time, exact */
  pbr st = stats_for(&u, t);
  PT_ASSERT(st.p != NULL);
  PT_ASSERT(has_field(&st, 1));                /* created_at */
  PT_ASSERT(!has_field(&st, 2));               /* not dropped */
  PT_ASSERT_UINT_EQ(var_of(&st, 3), 5);
  PT_ASSERT_UINT_EQ(var_of(&st, 4), 2);
  PT_ASSERT_UINT_EQ(var_of(&st, 5), 1);
  PT_ASSERT_UINT_EQ(var_of(&st, 8), 1);
  pbr ps = sub_of(&st, 7);
  PT_ASSERT_UINT_EQ(var_of(&ps, 1), 4);
  PT_ASSERT(has_field(&ps, 6));                /* busy_time */
  /* the never-polled task still has poll_stats and created_at */
  pbr st2 = stats_for(&u, early);
  PT_ASSERT(has_field(&st2, 1));
  PT_ASSERT(has_field(&st2, 7));
  upd_free(&u);

  /* Delta after seal: nothing changed -> one Update with now, no tasks. */
  uint64_t sealed = ptcon_agg_seal(a);
  ptcon_agg_collect(a, now += MS);
  PT_ASSERT_INT_EQ(ptcon_agg_encode_updates(a, 0, sealed, 0, 1 << 20, collect_emit, &u), 0);
  PT_ASSERT_INT_EQ(u.n, 1);
  m = (pbr){u.msg[0], u.len[0], 0};
  PT_ASSERT(has_field(&m, 1));
  PT_ASSERT(!has_field(&m, 5));
  PT_ASSERT_INT_EQ(count_new_tasks(&u, 0), 0);
  PT_ASSERT(stats_for(&u, t).p == NULL);
  upd_free(&u);
  /* A change -> stats only, no new task. */
  ptcon_task_poll_begin(t);
  ptcon_task_poll_end(t);
  ptcon_agg_collect(a, now += MS);
  PT_ASSERT_INT_EQ(ptcon_agg_encode_updates(a, 0, sealed, 0, 1 << 20, collect_emit, &u), 0);
  PT_ASSERT_INT_EQ(count_new_tasks(&u, 0), 0);
  st = stats_for(&u, t);
  ps = sub_of(&st, 7);
  PT_ASSERT_UINT_EQ(var_of(&ps, 1), 5);
  upd_free(&u);

  /* TaskDetails: histograms present, decodable header. */
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  PT_ASSERT_INT_EQ(ptcon_agg_encode_details(a, timed, &b), 0);
  pbr d = {b.data, b.len, 0};
  pbr id = sub_of(&d, 1);
  PT_ASSERT_UINT_EQ(var_of(&id, 1), timed);
  pbr h = sub_of(&d, 4), raw = sub_of(&h, 1);
  PT_ASSERT(raw.n > 40);
  PT_ASSERT_MEM_EQ(raw.p, "\x1c\x84\x93\x13", 4);
  PT_ASSERT_UINT_EQ(var_of(&h, 2), 4 * MS);     /* max_value: the longest poll */
  pbr sh = sub_of(&d, 5), sraw = sub_of(&sh, 1);
  PT_ASSERT(sraw.n >= 41);
  ptp_pb_buf_reset(&b);
  PT_ASSERT_INT_EQ(ptcon_agg_encode_details(a, 12345, &b), -ENOENT);
  ptp_pb_buf_free(&b);
  ptcon_agg_del(a);
}

PT_TEST(console_agg_retention_and_completion) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 150, 0), 0);
  uint64_t t = ptcon_task_spawn("short", "task", "c.c", 1, NULL, 0);
  uint64_t keep = ptcon_task_spawn("keep", "task", "c.c", 2, NULL, 0);
  ptcon_task_poll_begin(t);
  ptcon_task_poll_end(t);
  ptcon_task_end(t);
  uint64_t now = ptcon_mono_ns();
  ptcon_agg_collect(a, now);
  ptcon_rec *r = ptcon_agg_find(a, t);
  PT_ASSERT(r != NULL);
  PT_ASSERT(r->dropped != 0);
  PT_ASSERT(r->dropped >= r->created);
  upd u = {0};
  PT_ASSERT_INT_EQ(ptcon_agg_encode_updates(a, 1, 0, 0, 1 << 20, collect_emit, &u), 0);
  pbr st = stats_for(&u, t);
  PT_ASSERT(has_field(&st, 2));                /* dropped_at */
  upd_free(&u);
  ptcon_instrument_stats is;
  ptcon_instrument_get_stats(&is);
  PT_ASSERT_UINT_EQ(is.live_tasks, 1);         /* its slot was reaped */
  /* Time is the caller's: just before the retention ends the task stays,
   * at its end it goes (no sleeping). */
  ptcon_agg_collect(a, r->dropped + 149000000u);
  PT_ASSERT(ptcon_agg_find(a, t) != NULL);
  ptcon_agg_collect(a, r->dropped + 150000000u);
  PT_ASSERT(ptcon_agg_find(a, t) == NULL);     /* aged out */
  PT_ASSERT(ptcon_agg_find(a, keep) != NULL);  /* live tasks stay */
  PT_ASSERT_UINT_EQ(a->removed, 1);
  /* A new task reuses the slot with a new id; the old id stays unknown. */
  uint64_t t2 = ptcon_task_spawn("again", "task", "c.c", 3, NULL, 0);
  PT_ASSERT(t2 != t);
  PT_ASSERT_UINT_EQ(t2 & PTCON_SLOT_MASK, t & PTCON_SLOT_MASK);
  ptcon_task_poll_begin(t);   /* stale id: ignored */
  ptcon_task_poll_end(t);
  ptcon_agg_collect(a, ptcon_mono_ns());
  PT_ASSERT(ptcon_agg_find(a, t) == NULL);
  PT_ASSERT_UINT_EQ(ptcon_agg_find(a, t2)->polls, 0);
  ptcon_agg_del(a);
}

PT_TEST(console_agg_retained_cap) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 10), 0);
  for (int i = 0; i < 25; i++) ptcon_task_end(ptcon_task_spawn("c", "task", "d.c", 1, NULL, 0));
  ptcon_agg_collect(a, ptcon_mono_ns());
  PT_ASSERT_UINT_EQ(a->ndone, 10);
  PT_ASSERT_UINT_EQ(a->nrecs, 10);
  ptcon_agg_del(a);
}

PT_TEST(console_agg_dropped_events_and_no_ghost) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t t = ptcon_task_spawn("flood", "task", "e.c", 1, NULL, 0);
  /* Fill this thread's ring without draining: 2 events per poll. */
  uint32_t polls = PTCON_RING_CAP / 2 + 500;
  for (uint32_t i = 0; i < polls; i++) {
    ptcon_task_poll_begin(t);
    ptcon_task_poll_end(t);
  }
  ptcon_instrument_stats is;
  ptcon_instrument_get_stats(&is);
  PT_ASSERT_UINT_EQ(is.dropped_events, 1000);
  /* The end is recorded in the slot; its END event (a hint for prompt
   * reaping) is dropped too, and the task must still end. */
  ptcon_task_end(t);
  ptcon_agg_collect(a, ptcon_mono_ns());
  PT_ASSERT_UINT_EQ(a->dropped_total, 1001);
  ptcon_rec *r = ptcon_agg_find(a, t);
  PT_ASSERT(r != NULL);
  PT_ASSERT(r->dropped != 0);                  /* completed: no ghost */
  PT_ASSERT_UINT_EQ(r->polls, PTCON_RING_CAP / 2);
  upd u = {0};
  PT_ASSERT_INT_EQ(ptcon_agg_encode_updates(a, 1, 0, a->dropped_total, 1 << 20, collect_emit, &u), 0);
  pbr m = {u.msg[0], u.len[0], 0}, tu = sub_of(&m, 2);
  PT_ASSERT_UINT_EQ(var_of(&tu, 4), 1001);
  upd_free(&u);
  ptcon_agg_del(a);
}

PT_TEST(console_agg_split_large_state) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  enum { N = 3000 };
  static uint64_t ids[N];
  for (int i = 0; i < N; i++) {
    char name[64];
    snprintf(name, sizeof name, "task-%05d-with-a-rather-long-name-to-fill-bytes", i);
    ids[i] = ptcon_task_spawn(name, "task", i % 2 ? "f.c" : "g.c", (uint32_t)(i % 7), NULL, 0);
    PT_ASSERT(ids[i] != 0);
  }
  ptcon_agg_collect(a, ptcon_mono_ns());
  const size_t limit = 64 * 1024;
  upd u = {0};
  PT_ASSERT_INT_EQ(ptcon_agg_encode_updates(a, 1, 0, 0, limit, collect_emit, &u), 0);
  PT_ASSERT(u.n >= 5);
  int total = 0;
  for (int i = 0; i < u.n; i++) {
    PT_ASSERT(u.len[i] <= limit);
    pbr m = {u.msg[i], u.len[i], 0};
    PT_ASSERT(has_field(&m, 1));                      /* each has now */
    PT_ASSERT_INT_EQ(has_field(&m, 5), i == 0);       /* metadata first only */
    if (i == 0) {
      pbr md = sub_of(&m, 5), s;
      uint64_t v;
      int nm = 0;
      while (next_field(&md, &s, &v)) nm++;
      PT_ASSERT_INT_EQ(nm, 14);                      /* 2 files x 7 lines */
    }
    /* each new task comes with its stats in the same Update */
    pbr tu = sub_of(&m, 2), s;
    uint64_t v;
    uint32_t f;
    int nt = 0, ns = 0;
    while ((f = next_field(&tu, &s, &v))) {
      if (f == 1) nt++;
      if (f == 3) ns++;
    }
    PT_ASSERT_INT_EQ(nt, ns);
    total += nt;
  }
  PT_ASSERT_INT_EQ(total, N);
  for (int i = 0; i < N; i += 97) PT_ASSERT(stats_for(&u, ids[i]).p != NULL);
  upd_free(&u);
  ptcon_agg_del(a);
}

static void *other_thread(void *arg) {
  uint64_t id = *(uint64_t *)arg;
  ptcon_task_wake(id);
  ptcon_task_wake(id);
  return NULL;
}

PT_TEST(console_agg_cross_thread_and_table_full) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t t = ptcon_task_spawn("x", "task", "h.c", 1, NULL, 0);
  ptcon_task_wake(t);   /* registers this thread's ring first */
  pthread_t th;
  pthread_create(&th, NULL, other_thread, &t);
  pthread_join(th, NULL);
  ptcon_task_poll_begin(t);
  ptcon_task_poll_end(t);
  ptcon_agg_collect(a, ptcon_mono_ns());
  ptcon_rec *r = ptcon_agg_find(a, t);
  PT_ASSERT_UINT_EQ(r->wakes, 3);
  PT_ASSERT_UINT_EQ(r->self_wakes, 0);
  /* the poll after the other thread's wakes is one scheduling delay */
  PT_ASSERT(r->sched_hist && r->sched_hist->total == 1);
  ptcon_instrument_stats is;
  ptcon_instrument_get_stats(&is);
  PT_ASSERT_UINT_EQ(is.threads, 2);
  /* Fill the table: spawns beyond it return 0 and count as dropped. */
  uint32_t ok = 1;
  while (ptcon_task_spawn("fill", "task", "h.c", 2, NULL, 0)) ok++;
  PT_ASSERT_UINT_EQ(ok, PTCON_MAX_LIVE_TASKS);
  ptcon_instrument_get_stats(&is);
  PT_ASSERT_UINT_EQ(is.dropped_events, 1);
  ptcon_agg_del(a);
}

/* Several threads spawn, poll, wake each other's tasks and end tasks while
 * the aggregator collects concurrently; rings are small enough relative to
 * the rate that some events may be dropped. Afterwards every task must be
 * completed (no ghosts), every slot returned, and the counts consistent. */
static _Atomic int g_churn_done;

typedef struct churn_arg {
  int n;
  uint64_t *shared;   /* a task another thread wakes */
} churn_arg;

static void *churn(void *p) {
  churn_arg *a = p;
  for (int i = 0; i < a->n; i++) {
    uint64_t t = ptcon_task_spawn("churn", "task", "k.c", (uint32_t)(i % 5), NULL, 0);
    if (!t) continue;
    ptcon_task_waker_clone(t);
    ptcon_task_poll_begin(t);
    ptcon_task_wake(t);
    ptcon_task_poll_end(t);
    uint64_t other = __atomic_load_n(a->shared, __ATOMIC_RELAXED);
    if (other) ptcon_task_wake(other);   /* maybe ended already: harmless */
    __atomic_store_n(a->shared, t, __ATOMIC_RELAXED);
    ptcon_task_waker_drop(t);
    ptcon_task_end(t);
  }
  atomic_fetch_add(&g_churn_done, 1);
  return NULL;
}

PT_TEST_T(console_agg_concurrent_no_ghosts, 60000) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 600000, 200000), 0);
  enum { T = 4, N = 20000 };
  pthread_t th[T];
  churn_arg args[T];
  uint64_t shared = 0;
  for (int i = 0; i < T; i++) {
    args[i] = (churn_arg){N, &shared};
    pthread_create(&th[i], NULL, churn, &args[i]);
  }
  /* Collect concurrently, as the server thread would, until all are done. */
  while (atomic_load(&g_churn_done) < T) {
    ptcon_agg_collect(a, ptcon_mono_ns());
    sched_yield();
  }
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  ptcon_agg_collect(a, ptcon_mono_ns());
  ptcon_instrument_stats is;
  ptcon_instrument_get_stats(&is);
  PT_ASSERT_UINT_EQ(is.live_tasks, 0);          /* every slot came back */
  uint32_t live = 0;
  for (uint32_t i = 0; i < a->nrecs; i++)
    if (!a->recs[i]->dropped) live++;
  PT_ASSERT_UINT_EQ(live, 0);                    /* no ghost */
  /* Everything spawned was seen (as a record, possibly evicted); nothing
   * counted twice: records + removed = spawned. */
  uint64_t refused = atomic_load(&ptcon_spawn_dropped);
  PT_ASSERT_UINT_EQ(a->nrecs + a->removed, (uint64_t)T * N - refused);
  PT_ASSERT(a->nrecs + a->removed > 0);
  for (uint32_t i = 0; i < a->nrecs; i++) {
    const ptcon_rec *r = a->recs[i];
    PT_ASSERT(r->polls <= 1);
    PT_ASSERT(r->dropped >= r->created);
    /* busy time is exactly its one poll's span (nothing invented or lost
     * by the accounting, whatever the machine's speed) */
    uint64_t span = r->polls && r->last_poll_ended > r->first_poll
                        ? r->last_poll_ended - r->first_poll : 0;
    PT_ASSERT_UINT_EQ(r->busy_ns, span);
  }
  ptcon_agg_del(a);
}

/* The real limit: 30000 tasks with long names make a state over 4 MiB; it
 * leaves in several Updates under 4 MiB - 64 KiB, none lost. */
PT_TEST(console_agg_split_over_4mib) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  enum { N = 30000 };
  for (int i = 0; i < N; i++) {
    char name[PTCON_NAME_MAX];
    snprintf(name, sizeof name, "t%05d-a-long-name-that-fills-the-whole-sixty-three-bytes-x", i);
    ptcon_field f = {.name = "peer", .type = PTCON_FIELD_STR, .v.str = "unix:/a/rather/long/path"};
    PT_ASSERT(ptcon_task_spawn(name, "task", "some/dir/file.c", (uint32_t)i % 50, &f, 1) != 0);
  }
  ptcon_agg_collect(a, ptcon_mono_ns());
  const size_t limit = 4u * 1024 * 1024 - 64u * 1024;
  upd u = {0};
  PT_ASSERT_INT_EQ(ptcon_agg_encode_updates(a, 1, 0, 0, limit, collect_emit, &u), 0);
  size_t total_bytes = 0;
  int tasks = 0;
  for (int i = 0; i < u.n; i++) {
    PT_ASSERT(u.len[i] <= limit);
    total_bytes += u.len[i];
    tasks += count_new_tasks(&u, i);
  }
  PT_ASSERT_MSG(total_bytes > 4u * 1024 * 1024, "state is only %zu bytes", total_bytes);
  PT_ASSERT(u.n >= 2);
  PT_ASSERT_INT_EQ(tasks, N);
  upd_free(&u);
  ptcon_agg_del(a);
}
