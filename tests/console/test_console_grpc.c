/* Unit tests of the console's sans-I/O gRPC layer (src/console/ptcon_grpc.c)
 * without sockets: a real HTTP/2 client session (nghttp2's client side)
 * exchanges bytes with ptcon_gconn in memory, and time is whatever `now` the
 * test passes. Covered: a WatchUpdates call and the next tick's delta; the
 * idle, preface and stall time-outs; garbage after the preface; eviction
 * order; the total queue budget dropping the slowest stream with
 * RESOURCE_EXHAUSTED; memory given back; the rate-limited log; the fill-mark
 * wake of the rings; the tick-clock rule; new watch calls over their rate
 * waiting their turn (one call per connection in turn), with exact
 * counts and times; the initial state built once per publish
 * interval and shared, with no change lost for a stream that starts from
 * it. */
#include "pt_test.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/ptcon_agg.h"
#include "console/ptcon_grpc.h"
#include "console/ptcon_ratelog.h"

#define SEC 1000000000ull
#define MAXS 64

typedef struct cstream {
  int32_t id;
  size_t bytes;      /* DATA bytes received */
  uint8_t *data;     /* all of them, when the test asked (capture) */
  int status;        /* grpc-status, -1 until seen */
  int closed;
} cstream;

typedef struct cli {
  nghttp2_session *s;
  ptcon_gconn *c;
  cstream st[MAXS];
  int n;
  int capture;       /* keep every stream's DATA bytes in st[].data */
} cli;

static cstream *cs_find(cli *k, int32_t id) {
  for (int i = 0; i < k->n; i++)
    if (k->st[i].id == id) return &k->st[i];
  return NULL;
}

static int c_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t len,
                     void *ud) {
  (void)s;
  (void)flags;
  (void)d;
  cli *k = ud;
  cstream *st = cs_find(k, id);
  if (!st) return 0;
  if (k->capture) {
    uint8_t *nd = realloc(st->data, st->bytes + len);
    if (!nd) return NGHTTP2_ERR_CALLBACK_FAILURE;
    memcpy(nd + st->bytes, d, len);
    st->data = nd;
  }
  st->bytes += len;
  return 0;
}

static int c_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                       size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                       void *ud) {
  (void)s;
  (void)flags;
  cstream *st = cs_find(ud, f->hd.stream_id);
  if (st && namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
    char v[16] = {0};
    memcpy(v, value, valuelen < 15 ? valuelen : 15);
    st->status = atoi(v);
  }
  return 0;
}

static int c_on_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud) {
  (void)s;
  (void)err;
  cstream *st = cs_find(ud, id);
  if (st) st->closed = 1;
  return 0;
}

static void cli_init(cli *k, ptcon_grpc *g, uint64_t now) {
  memset(k, 0, sizeof *k);
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c_on_data);
  nghttp2_session_callbacks_set_on_header_callback(cb, c_on_header);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, c_on_close);
  nghttp2_session_client_new(&k->s, cb, k);
  nghttp2_session_callbacks_del(cb);
  nghttp2_submit_settings(k->s, NGHTTP2_FLAG_NONE, NULL, 0);
  ptcon_gconn_new(g, k, now, &k->c);
}

static void cli_free(cli *k) {
  for (int i = 0; i < k->n; i++) free(k->st[i].data);
  nghttp2_session_del(k->s);
  ptcon_gconn_del(k->c);
}

/* Client -> server only (the server's answers stay queued: a non-reader). */
static void push(cli *k, uint64_t now) {
  const uint8_t *p;
  ssize_t n;
  while ((n = nghttp2_session_mem_send(k->s, &p)) > 0) ptcon_gconn_recv(k->c, p, (size_t)n, now);
}

/* Both ways until quiet. */
static void pump(cli *k, uint64_t now) {
  for (int round = 0; round < 1000; round++) {
    int moved = 0;
    const uint8_t *p;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(k->s, &p)) > 0) {
      ptcon_gconn_recv(k->c, p, (size_t)n, now);
      moved = 1;
    }
    while ((n = ptcon_gconn_send(k->c, &p, now)) > 0) {
      nghttp2_session_mem_recv(k->s, p, (size_t)n);
      moved = 1;
    }
    if (!moved) return;
  }
}

/* The request body: one empty gRPC message (an empty protobuf is a valid
 * request of every watch method). */
static ssize_t empty_msg(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)s;
  (void)id;
  (void)src;
  (void)ud;
  if (len < 5) return NGHTTP2_ERR_DEFERRED;
  memset(buf, 0, 5);
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return 5;
}

static cstream *call2(cli *k, const char *path) {
  nghttp2_nv h[] = {
    {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
    {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
    {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0},
    {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
    {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, 0},
  };
  nghttp2_data_provider dp = {.source.ptr = NULL, .read_callback = empty_msg};
  int32_t id = nghttp2_submit_request(k->s, NULL, h, 6, &dp, NULL);
  cstream *st = &k->st[k->n++];
  st->id = id;
  st->status = -1;
  return st;
}

#define UPDATES "/rs.tokio.console.instrument.Instrument/WatchUpdates"
#define STATE "/rs.tokio.console.instrument.Instrument/WatchState"
#define RESUME "/rs.tokio.console.instrument.Instrument/Resume"

/* Whether the stream's DATA bytes from offset `from` contain `text`. */
static int got_text(const cstream *st, size_t from, const char *text) {
  size_t n = strlen(text);
  return st->data && st->bytes > from && memmem(st->data + from, st->bytes - from, text, n) != NULL;
}

PT_TEST(console_grpc_watch_updates_in_memory) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t t = ptcon_task_spawn("grpc.task", "task", "g.c", 1, NULL, 0);
  uint64_t now = ptcon_mono_ns();
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, NULL, now), 0);
  PT_ASSERT_UINT_EQ(ptcon_grpc_nwatching(g), 0);
  /* Nobody watches: the next thing due is house-keeping, 10 s away. */
  PT_ASSERT(ptcon_grpc_next_due(g) >= now + 10 * SEC);
  cli k;
  cli_init(&k, g, now);
  cstream *u = call2(&k, UPDATES);
  pump(&k, now);
  PT_ASSERT(u->bytes > 5);                      /* the full state */
  PT_ASSERT_INT_EQ(u->status, -1);               /* still open */
  PT_ASSERT_UINT_EQ(ptcon_grpc_nwatching(g), 1);
  PT_ASSERT_UINT_EQ(ptcon_grpc_next_due(g), now + SEC);  /* the tick */
  size_t first = u->bytes;
  ptcon_grpc_timer(g, now + SEC / 2);            /* not due: nothing sent */
  pump(&k, now + SEC / 2);
  PT_ASSERT_UINT_EQ(u->bytes, first);
  ptcon_grpc_timer(g, now + SEC);
  pump(&k, now + SEC);
  PT_ASSERT(u->bytes > first);                   /* one delta a second */
  PT_ASSERT(ptcon_gconn_closing(k.c) == NULL);
  cli_free(&k);
  PT_ASSERT_UINT_EQ(ptcon_grpc_nwatching(g), 0);
  ptcon_grpc_del(g);
  ptcon_task_end(t);
  ptcon_agg_del(a);
}

PT_TEST(console_grpc_timeouts) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t now = ptcon_mono_ns();
  ptcon_grpc_limits lim = {.idle_timeout_ns = 5 * SEC, .preface_timeout_ns = 2 * SEC,
                           .stall_timeout_ns = 3 * SEC};
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, &lim, now), 0);
  /* 1. A TCP connection that never sends the preface. */
  ptcon_gconn *silent;
  PT_ASSERT_INT_EQ(ptcon_gconn_new(g, NULL, now, &silent), 0);
  /* 2. Preface and SETTINGS, then nothing (the lock-out). */
  cli idle;
  cli_init(&idle, g, now);
  pump(&idle, now);
  /* 3. Preface, then garbage frames of an unknown type (ignored by
   * HTTP/2): they must not keep the slot either. */
  cli junk;
  cli_init(&junk, g, now);
  pump(&junk, now);
  static const uint8_t unknown_frame[] = {0, 0, 4, 0xee, 0, 0, 0, 0, 0, 'j', 'u', 'n', 'k'};
  for (int i = 1; i <= 4; i++)
    PT_ASSERT_INT_EQ(ptcon_gconn_recv(junk.c, unknown_frame, sizeof unknown_frame, now + (uint64_t)i * SEC), 0);
  /* 4. A watcher that never reads. */
  cli slow;
  cli_init(&slow, g, now);
  call2(&slow, STATE);
  push(&slow, now);
  PT_ASSERT(ptcon_grpc_queued(g) > 0);
  PT_ASSERT(ptcon_grpc_next_due(g) <= now + 2 * SEC);
  ptcon_grpc_timer(g, now + 2 * SEC - 1);
  PT_ASSERT(ptcon_gconn_closing(silent) == NULL);
  ptcon_grpc_timer(g, now + 2 * SEC);
  PT_ASSERT_STR_EQ(ptcon_gconn_closing(silent), "no HTTP/2 preface");
  PT_ASSERT(ptcon_gconn_closing(idle.c) == NULL);
  ptcon_grpc_timer(g, now + 3 * SEC);
  PT_ASSERT_STR_EQ(ptcon_gconn_closing(slow.c), "client is not reading (stalled)");
  ptcon_grpc_timer(g, now + 5 * SEC - 1);
  PT_ASSERT(ptcon_gconn_closing(idle.c) == NULL);
  ptcon_grpc_timer(g, now + 5 * SEC);
  PT_ASSERT_STR_EQ(ptcon_gconn_closing(idle.c), "idle (no open call)");
  PT_ASSERT_STR_EQ(ptcon_gconn_closing(junk.c), "idle (no open call)");
  ptcon_gconn_del(silent);
  cli_free(&idle);
  cli_free(&junk);
  cli_free(&slow);
  PT_ASSERT_UINT_EQ(ptcon_grpc_queued(g), 0);
  ptcon_grpc_del(g);
  ptcon_agg_del(a);
}

PT_TEST(console_grpc_evicts_idle_longest) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t now = ptcon_mono_ns();
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, NULL, now), 0);
  PT_ASSERT(ptcon_grpc_evict_candidate(g) == NULL);
  cli watcher, old_idle, new_idle;
  cli_init(&watcher, g, now);
  call2(&watcher, STATE);
  pump(&watcher, now);
  cli_init(&old_idle, g, now + 1);
  pump(&old_idle, now + 1);
  cli_init(&new_idle, g, now + 2);
  pump(&new_idle, now + 2);
  /* Idle connections go first, the one idle longest first; a connection
   * with a call open goes only when no connection is idle. */
  PT_ASSERT(ptcon_grpc_evict_candidate(g) == old_idle.c);
  cli_free(&old_idle);
  PT_ASSERT(ptcon_grpc_evict_candidate(g) == new_idle.c);
  cli_free(&new_idle);
  PT_ASSERT(ptcon_grpc_evict_candidate(g) == watcher.c);
  cli_free(&watcher);
  ptcon_grpc_del(g);
  ptcon_agg_del(a);
}

PT_TEST(console_grpc_total_budget_drops_slowest) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  enum { NT = 400, NC = 8 };
  uint64_t ids[NT];
  for (int i = 0; i < NT; i++) ids[i] = ptcon_task_spawn("budget.task.with.a.long.name", "task", "b.c", 1, NULL, 0);
  uint64_t now = ptcon_mono_ns();
  /* Measure one full state, then allow three of them in total. */
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, NULL, now), 0);
  cli probe;
  cli_init(&probe, g, now);
  call2(&probe, UPDATES);
  push(&probe, now);
  size_t one = ptcon_grpc_queued(g);
  PT_ASSERT(one > 10000);
  cli_free(&probe);
  ptcon_grpc_del(g);
  ptcon_grpc_limits lim = {.max_total_queued_bytes = 3 * one + one / 2};
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, &lim, now), 0);
  cli k[NC];
  for (int i = 0; i < NC; i++) {
    cli_init(&k[i], g, now);
    call2(&k[i], UPDATES);
    push(&k[i], now);   /* nobody reads */
    PT_ASSERT(ptcon_grpc_queued(g) <= lim.max_total_queued_bytes);
  }
  ptcon_grpc_stats s;
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.streams_dropped, NC - 3);
  PT_ASSERT(s.peak_queued <= lim.max_total_queued_bytes);
  /* When the clients read again, the dropped ones see RESOURCE_EXHAUSTED,
   * the others their state. */
  int exhausted = 0, served = 0;
  for (int i = 0; i < NC; i++) {
    pump(&k[i], now);
    if (k[i].st[0].status == 8) exhausted++;
    else if (k[i].st[0].status == -1 && k[i].st[0].bytes >= one - 64) served++;
  }
  PT_ASSERT_INT_EQ(exhausted, NC - 3);
  PT_ASSERT_INT_EQ(served, 3);
  for (int i = 0; i < NC; i++) cli_free(&k[i]);
  PT_ASSERT_UINT_EQ(ptcon_grpc_queued(g), 0);
  ptcon_grpc_del(g);
  for (int i = 0; i < NT; i++) ptcon_task_end(ids[i]);
  ptcon_agg_del(a);
}

PT_TEST(console_grpc_gives_memory_back_after_a_burst) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  enum { NT = 2000, NC = 12 };
  static uint64_t ids[NT];
  for (int i = 0; i < NT; i++) ids[i] = ptcon_task_spawn("trim.task", "task", "t.c", 1, NULL, 0);
  uint64_t now = ptcon_mono_ns();
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, NULL, now), 0);
  cli k[NC];
  for (int i = 0; i < NC; i++) {
    cli_init(&k[i], g, now);
    for (int j = 0; j < 4; j++) call2(&k[i], UPDATES);
    push(&k[i], now);
  }
  PT_ASSERT(ptcon_grpc_queued(g) >= 8u << 20);   /* a burst worth trimming */
  for (int i = 0; i < NC; i++) cli_free(&k[i]);
  PT_ASSERT(ptcon_grpc_next_due(g) <= now + SEC);
  ptcon_grpc_timer(g, now + SEC);
  ptcon_grpc_stats s;
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.trims, 1);
  ptcon_grpc_timer(g, now + 3 * SEC);   /* once is enough */
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.trims, 1);
  ptcon_grpc_del(g);
  for (int i = 0; i < NT; i++) ptcon_task_end(ids[i]);
  ptcon_agg_del(a);
}

typedef struct lines {
  int n;
  int last_level;
  char last[256];
} lines;

static void keep_line(int level, const char *line, void *user_data) {
  lines *l = user_data;
  l->n++;
  l->last_level = level;
  snprintf(l->last, sizeof l->last, "%s", line);
}

PT_TEST(console_ratelog_one_line_per_cause_then_summary) {
  lines l = {0};
  ptcon_ratelog rl;
  ptcon_ratelog_init(&rl, keep_line, &l, 10 * SEC);
  uint64_t t0 = 5 * SEC;
  for (int i = 0; i < 1000; i++)
    ptcon_ratelog_event(&rl, t0 + (uint64_t)i * 1000000u, PTCON_LOG_WARN, "connections closed",
                        "idle", "closed %d", i);
  ptcon_ratelog_event(&rl, t0, PTCON_LOG_INFO, "connections closed", "no HTTP/2 preface", "other");
  PT_ASSERT_INT_EQ(l.n, 2);   /* one line per cause */
  PT_ASSERT_INT_EQ(l.last_level, PTCON_LOG_INFO);
  PT_ASSERT_UINT_EQ(ptcon_ratelog_next_due(&rl), t0 + 10 * SEC);
  ptcon_ratelog_flush(&rl, t0 + 10 * SEC - 1);
  PT_ASSERT_INT_EQ(l.n, 2);
  ptcon_ratelog_flush(&rl, t0 + 10 * SEC);
  PT_ASSERT_INT_EQ(l.n, 3);   /* the preface cause had nothing suppressed */
  PT_ASSERT_STR_EQ(l.last, "task console: 999 more connections closed (idle) in the last 10 s");
  PT_ASSERT_INT_EQ(l.last_level, PTCON_LOG_WARN);   /* the summary has its cause's level */
  PT_ASSERT_UINT_EQ(ptcon_ratelog_next_due(&rl), UINT64_MAX);
  ptcon_ratelog_event(&rl, t0 + 11 * SEC, PTCON_LOG_WARN, "connections closed", "idle",
                      "closed again");
  PT_ASSERT_INT_EQ(l.n, 4);
  PT_ASSERT_STR_EQ(l.last, "closed again");
}

PT_TEST(console_ring_fill_mark_wakes_consumer) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  int fd = ptcon_wake_fd();
  PT_ASSERT(fd >= 0);
  PT_ASSERT_INT_EQ(ptcon_wake_fd(), fd);   /* one per process */
  uint64_t v;
  while (read(fd, &v, sizeof v) > 0) {
  }
  ptcon_agg_drain(a, ptcon_mono_ns());
  ptcon_wake_rearm();
  uint64_t t = ptcon_task_spawn("mark", "task", "m.c", 1, NULL, 0);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  /* Below the mark: no wake. */
  for (unsigned i = 0; i < PTCON_RING_MARK - 1; i++) ptcon_task_wake(t);
  PT_ASSERT_INT_EQ(poll(&p, 1, 0), 0);
  ptcon_task_wake(t);   /* the mark */
  PT_ASSERT_INT_EQ(poll(&p, 1, 0), 1);
  /* One wake until the consumer re-arms, however much more comes. */
  PT_ASSERT(read(fd, &v, sizeof v) == sizeof v);
  for (unsigned i = 0; i < PTCON_RING_MARK; i++) ptcon_task_wake(t);
  PT_ASSERT_INT_EQ(poll(&p, 1, 0), 0);
  ptcon_wake_rearm();
  ptcon_agg_drain(a, ptcon_mono_ns());
  PT_ASSERT_UINT_EQ(ptcon_agg_find(a, t)->wakes, 2 * PTCON_RING_MARK);   /* none dropped */
  for (unsigned i = 0; i < PTCON_RING_MARK; i++) ptcon_task_wake(t);
  PT_ASSERT_INT_EQ(poll(&p, 1, 0), 1);   /* re-armed: the next crossing wakes */
  while (read(fd, &v, sizeof v) > 0) {
  }
  ptcon_wake_rearm();
  ptcon_task_end(t);
  ptcon_agg_del(a);
}

PT_TEST(console_clock_rule) {
#if defined(__x86_64__)
  PT_ASSERT_INT_EQ(ptcon_clock_choose("tsc\n", 0), 1);
  PT_ASSERT_INT_EQ(ptcon_clock_choose("tsc", 0), 1);
  PT_ASSERT_INT_EQ(ptcon_clock_choose("kvm-clock\n", 1), 1);   /* the machine */
  PT_ASSERT_INT_EQ(ptcon_clock_choose("kvm-clock\n", 0), 0);
  PT_ASSERT_INT_EQ(ptcon_clock_choose("tsc-early\n", 0), 0);
  PT_ASSERT_INT_EQ(ptcon_clock_choose(NULL, 1), 1);
  PT_ASSERT_INT_EQ(ptcon_clock_choose(NULL, 0), 0);
  /* Both paths convert to CLOCK_MONOTONIC within a millisecond. */
  int was = ptcon_clock_tsc;
  for (int mode = 0; mode < 2; mode++) {
    PT_ASSERT_INT_EQ(ptcon_clock_force(mode), 0);
    ptcon_clock c;
    ptcon_clock_init(&c);
    /* t1 <= m <= t2 in real time whatever the scheduler does; the
     * conversion may err by the calibration's error (well under 1 ms). */
    uint64_t t1 = ptcon_ticks();
    uint64_t m = ptcon_mono_ns();
    uint64_t t2 = ptcon_ticks();
    uint64_t c1 = ptcon_clock_to_mono_ns(&c, t1), c2 = ptcon_clock_to_mono_ns(&c, t2);
    PT_ASSERT_MSG(c1 <= m + 1000000u && c2 + 1000000u >= m, "mode %d: %llu <= %llu <= %llu",
                  mode, (unsigned long long)c1, (unsigned long long)m, (unsigned long long)c2);
  }
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  PT_ASSERT_INT_EQ(ptcon_clock_force(1), -EBUSY);   /* not under a consumer */
  ptcon_agg_del(a);
  PT_ASSERT_INT_EQ(ptcon_clock_force(was), 0);
#else
  PT_ASSERT_INT_EQ(ptcon_clock_choose("tsc\n", 1), 0);
#endif
}

PT_TEST(console_grpc_new_watch_calls_rate_limited) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t t0 = 1000 * SEC;
  /* 4 a second = one token every 250 ms exactly; 3 at once. */
  ptcon_grpc_limits lim = {.watch_rate_per_s = 4, .watch_burst = 3};
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, &lim, t0), 0);
  cli k;
  cli_init(&k, g, t0);
  cstream *w[4];
  for (int i = 0; i < 4; i++) w[i] = call2(&k, i == 1 ? UPDATES : STATE);
  cstream *p = call2(&k, RESUME);   /* not a watch call: never limited */
  pump(&k, t0);
  for (int i = 0; i < 3; i++) PT_ASSERT(w[i]->bytes >= 5);   /* served at once */
  PT_ASSERT_UINT_EQ(w[3]->bytes, 0);                          /* waits: nothing yet */
  PT_ASSERT_INT_EQ(w[3]->status, -1);
  PT_ASSERT_INT_EQ(p->status, 0);
  PT_ASSERT_UINT_EQ(ptcon_grpc_nwatching(g), 3);
  ptcon_grpc_stats s;
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.watches_waited, 1);
  /* Its turn comes with the next token: not a nanosecond early. */
  PT_ASSERT_UINT_EQ(ptcon_grpc_next_due(g), t0 + SEC / 4);
  ptcon_grpc_timer(g, t0 + SEC / 4 - 1);
  pump(&k, t0 + SEC / 4 - 1);
  PT_ASSERT_UINT_EQ(w[3]->bytes, 0);
  ptcon_grpc_timer(g, t0 + SEC / 4);
  pump(&k, t0 + SEC / 4);
  PT_ASSERT_UINT_EQ(w[3]->bytes, 5);   /* State{LIVE}: an empty message */
  PT_ASSERT_UINT_EQ(ptcon_grpc_nwatching(g), 4);
  /* Turns: connection A has three calls waiting, then B two, then a third
   * connection C (a client that reconnects in a loop) one: the tokens go
   * A, B, C, A, B, A (one call per connection in turn, in the order they
   * began to wait; a connection with more goes to the end of the queue),
   * one per 250 ms. */
  cli b, cc;
  cli_init(&b, g, t0 + SEC / 4);
  cli_init(&cc, g, t0 + SEC / 4);
  cstream *aw[3], *bw[2], *cw;
  for (int i = 0; i < 3; i++) aw[i] = call2(&k, STATE);
  pump(&k, t0 + SEC / 4);
  for (int i = 0; i < 2; i++) bw[i] = call2(&b, STATE);
  pump(&b, t0 + SEC / 4);
  cw = call2(&cc, STATE);
  pump(&cc, t0 + SEC / 4);
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.watches_waited, 7);
  cstream *order[6] = {aw[0], bw[0], cw, aw[1], bw[1], aw[2]};
  for (int turn = 0; turn < 6; turn++) {
    uint64_t t = t0 + SEC / 4 + (uint64_t)(turn + 1) * (SEC / 4);
    PT_ASSERT_UINT_EQ(ptcon_grpc_next_due(g), t);
    ptcon_grpc_timer(g, t);
    pump(&k, t);
    pump(&b, t);
    pump(&cc, t);
    for (int i = 0; i < 6; i++) {   /* (a tick at t0 + 1 s adds a State to those served) */
      if (i <= turn) PT_ASSERT(order[i]->bytes >= 5);
      else PT_ASSERT_UINT_EQ(order[i]->bytes, 0);
    }
  }
  cli_free(&cc);
  /* Much later: the burst again, no more (tokens do not pile up). */
  cstream *late[4];
  for (int i = 0; i < 4; i++) late[i] = call2(&b, STATE);
  pump(&b, t0 + 100 * SEC);
  int served = 0;
  for (int i = 0; i < 4; i++) served += late[i]->bytes > 0;
  PT_ASSERT_INT_EQ(served, 3);
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.watches_waited, 8);
  PT_ASSERT_UINT_EQ(s.initial_builds, 1);   /* the one WatchUpdates */
  /* A connection that goes away with a call waiting leaves nothing. */
  PT_ASSERT_UINT_EQ(ptcon_grpc_npending(g), 1);
  cli_free(&b);
  PT_ASSERT_UINT_EQ(ptcon_grpc_npending(g), 0);
  cli_free(&k);
  PT_ASSERT_UINT_EQ(ptcon_grpc_nwatching(g), 0);
  ptcon_grpc_del(g);
  ptcon_agg_del(a);
}

PT_TEST(console_grpc_initial_state_shared_per_interval) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t early = ptcon_task_spawn("shared.early", "task", "s.c", 1, NULL, 0);
  uint64_t now = ptcon_mono_ns();
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, NULL, now), 0);   /* publish interval 1 s */
  cli k[4];
  cstream *u[4];
  for (int i = 0; i < 4; i++) {
    cli_init(&k[i], g, now);
    k[i].capture = 1;
  }
  u[0] = call2(&k[0], UPDATES);
  pump(&k[0], now);
  ptcon_grpc_stats s;
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.initial_builds, 1);
  PT_ASSERT(got_text(u[0], 0, "shared.early"));
  /* A task spawned after the build; two more streams start within the
   * same interval, the last one a nanosecond before its end: they get the
   * same bytes, encoded once. */
  uint64_t late = ptcon_task_spawn("shared.late", "task", "s.c", 2, NULL, 0);
  u[1] = call2(&k[1], UPDATES);
  pump(&k[1], now + SEC / 2);
  u[2] = call2(&k[2], UPDATES);
  pump(&k[2], now + SEC - 1);
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.initial_builds, 1);
  PT_ASSERT_UINT_EQ(u[1]->bytes, u[0]->bytes);
  PT_ASSERT_UINT_EQ(u[2]->bytes, u[0]->bytes);
  PT_ASSERT(memcmp(u[1]->data, u[0]->data, u[0]->bytes) == 0);
  PT_ASSERT(!got_text(u[1], 0, "shared.late"));
  /* Nothing is lost: the tick's delta of every stream that started from
   * the shared state carries the task spawned after it was built. */
  size_t first[3];
  for (int i = 0; i < 3; i++) first[i] = u[i]->bytes;
  ptcon_grpc_timer(g, now + SEC);
  for (int i = 0; i < 3; i++) {
    pump(&k[i], now + SEC);
    PT_ASSERT(u[i]->bytes > first[i]);
    PT_ASSERT(got_text(u[i], first[i], "shared.late"));
  }
  /* The interval is over: the next stream gets a new state (with it). */
  u[3] = call2(&k[3], UPDATES);
  pump(&k[3], now + SEC);
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.initial_builds, 2);
  PT_ASSERT(got_text(u[3], 0, "shared.late"));
  for (int i = 0; i < 4; i++) cli_free(&k[i]);
  PT_ASSERT_UINT_EQ(ptcon_grpc_queued(g), 0);
  ptcon_grpc_del(g);
  ptcon_task_end(early);
  ptcon_task_end(late);
  ptcon_agg_del(a);
}

PT_TEST(console_grpc_connection_call_rate) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t t0 = 1000 * SEC;
  /* Per connection: 4 calls a second (one per 250 ms), 2 at once. */
  ptcon_grpc_limits lim = {.conn_calls_per_s = 4, .conn_calls_burst = 2};
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, &lim, t0), 0);
  cli k;
  cli_init(&k, g, t0);
  cstream *r1 = call2(&k, RESUME), *r2 = call2(&k, RESUME);
  pump(&k, t0);
  PT_ASSERT_INT_EQ(r1->status, 0);
  PT_ASSERT_INT_EQ(r2->status, 0);
  PT_ASSERT(ptcon_gconn_wants_input(k.c));
  /* Three more at once. nghttp2 sends the three HEADERS before any DATA;
   * the input stops at the first header of each call beyond the allowance
   * until a token pays for it: at 250, 500 and 750 ms. No call completes
   * before its DATA, which comes after the last HEADERS. */
  cstream *r[3];
  for (int i = 0; i < 3; i++) r[i] = call2(&k, RESUME);
  pump(&k, t0);
  for (int i = 0; i < 3; i++) PT_ASSERT_INT_EQ(r[i]->status, -1);
  PT_ASSERT(!ptcon_gconn_wants_input(k.c));   /* the server reads no more */
  ptcon_grpc_stats s;
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.calls_throttled, 1);
  for (int step = 1; step <= 3; step++) {
    uint64_t t = t0 + (uint64_t)step * (SEC / 4);
    PT_ASSERT_UINT_EQ(ptcon_grpc_next_due(g), t);
    ptcon_grpc_timer(g, t - 1);   /* not a nanosecond early */
    pump(&k, t - 1);
    ptcon_grpc_get_stats(g, &s);
    PT_ASSERT_UINT_EQ(s.calls_throttled, (uint64_t)step);
    PT_ASSERT(!ptcon_gconn_wants_input(k.c));
    ptcon_grpc_timer(g, t);
    pump(&k, t);
    ptcon_grpc_get_stats(g, &s);
    PT_ASSERT_UINT_EQ(s.calls_throttled, step < 3 ? (uint64_t)step + 1 : 3u);
  }
  for (int i = 0; i < 3; i++) PT_ASSERT_INT_EQ(r[i]->status, 0);
  PT_ASSERT(ptcon_gconn_wants_input(k.c));
  PT_ASSERT(ptcon_gconn_closing(k.c) == NULL);
  cli_free(&k);
  ptcon_grpc_del(g);
  ptcon_agg_del(a);
}

PT_TEST(console_grpc_connection_byte_rate) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t t0 = 1000 * SEC;
  /* Per connection: 1024 bytes a second (one per 976562 ns), 8192 at once. */
  ptcon_grpc_limits lim = {.conn_bytes_per_s = 1024, .conn_bytes_burst = 8192};
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, &lim, t0), 0);
  ptcon_gconn *c;
  PT_ASSERT_INT_EQ(ptcon_gconn_new(g, NULL, t0, &c), 0);
  /* The preface, empty SETTINGS, then 1200 frames of an unknown type (which
   * HTTP/2 ignores): 24 + 9 + 1200 * 13 = 15633 bytes at once. */
  static uint8_t in[15633];
  memcpy(in, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
  static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  memcpy(in + 24, settings, 9);
  for (int i = 0; i < 1200; i++) {
    static const uint8_t junk[13] = {0, 0, 4, 0xee, 0, 0, 0, 0, 0, 'j', 'u', 'n', 'k'};
    memcpy(in + 33 + 13 * i, junk, 13);
  }
  PT_ASSERT_INT_EQ(ptcon_gconn_recv(c, in, sizeof in, t0), 0);
  /* 8192 taken in, 7441 held. The rest goes on in pieces of 1024 bytes
   * when earned, on 50 ms boundaries: 1024 * 976562 ns = 999999488 ns ->
   * t0 + 1 s, then one piece a second; the last 273 bytes at
   * t0 + 7441 * 976562 ns = t0 + 7266597842 ns -> t0 + 7.3 s: 8 pieces. */
  PT_ASSERT(!ptcon_gconn_wants_input(c));
  ptcon_grpc_stats s;
  ptcon_grpc_get_stats(g, &s);
  PT_ASSERT_UINT_EQ(s.input_held, 1);
  PT_ASSERT_UINT_EQ(ptcon_grpc_next_due(g), t0 + SEC);
  ptcon_grpc_timer(g, t0 + 999999487u);   /* 1 ns before the 1024th byte is earned */
  PT_ASSERT_UINT_EQ(ptcon_grpc_next_due(g), t0 + SEC);
  PT_ASSERT(!ptcon_gconn_wants_input(c));
  int pieces = 0;
  uint64_t t = 0;
  while (!ptcon_gconn_wants_input(c) && pieces < 100) {
    t = ptcon_grpc_next_due(g);
    PT_ASSERT_UINT_EQ(t % (SEC / 20), 0);   /* on a 50 ms boundary */
    ptcon_grpc_timer(g, t);
    pieces++;
  }
  PT_ASSERT_INT_EQ(pieces, 8);
  PT_ASSERT_UINT_EQ(t, t0 + 7300000000u);
  PT_ASSERT(ptcon_gconn_closing(c) == NULL);
  /* A caller that reads on regardless is cut off at the held cap. */
  int rc = 0;
  for (int i = 0; i < 40 && rc == 0; i++) rc = ptcon_gconn_recv(c, in + 33, 13 * 1000, t0 + 8 * SEC);
  PT_ASSERT_INT_EQ(rc, -EPROTO);
  PT_ASSERT_STR_EQ(ptcon_gconn_closing(c), "client sends too fast (held input over its cap)");
  ptcon_gconn_del(c);
  ptcon_grpc_del(g);
  ptcon_agg_del(a);
}

/* A request body that never ends: 5000 bytes, no END_STREAM. */
static ssize_t endless_msg(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                           uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)s;
  (void)id;
  (void)flags;
  (void)ud;
  if (src->ptr) return NGHTTP2_ERR_DEFERRED;
  if (len < 5000) return NGHTTP2_ERR_DEFERRED;
  memset(buf, 0, 5000);
  buf[3] = 0x13;   /* a 4864-byte message announced */
  buf[4] = 0x00;
  src->ptr = buf;  /* once */
  return 5000;
}

PT_TEST(console_grpc_oversize_request_answered_at_once) {
  ptcon_agg *a;
  PT_ASSERT_INT_EQ(ptcon_agg_new(&a, 60000, 0), 0);
  uint64_t now = 1000 * SEC;
  ptcon_grpc *g;
  PT_ASSERT_INT_EQ(ptcon_grpc_new(&g, a, NULL, now), 0);
  cli k;
  cli_init(&k, g, now);
  nghttp2_nv h[] = {
    {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
    {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
    {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0},
    {(uint8_t *)":path", (uint8_t *)UPDATES, 5, strlen(UPDATES), 0},
    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
  };
  nghttp2_data_provider dp = {.source.ptr = NULL, .read_callback = endless_msg};
  int32_t id = nghttp2_submit_request(k.s, NULL, h, 5, &dp, NULL);
  cstream *st = &k.st[k.n++];
  st->id = id;
  st->status = -1;
  pump(&k, now);
  /* RESOURCE_EXHAUSTED without waiting for the end of the body, and the
   * stream reset so that the client stops sending. */
  PT_ASSERT_INT_EQ(st->status, 8);
  PT_ASSERT_INT_EQ(st->closed, 1);
  PT_ASSERT(ptcon_gconn_closing(k.c) == NULL);
  cli_free(&k);
  ptcon_grpc_del(g);
  ptcon_agg_del(a);
}
