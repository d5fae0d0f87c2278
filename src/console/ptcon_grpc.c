/*
 * ptcon_grpc.c - see ptcon_grpc.h: HTTP/2 sessions, gRPC streams and queues,
 * the Instrument service, ticks, the shared budget and the time-outs, with
 * no I/O. One thread (the caller's); g->now is the `now` of the current
 * entry point and is the only time read here.
 *
 * Invariants: g->queued == sum of c->queued == sum of st->queued (bytes of
 * queued messages not yet handed to nghttp2; a frame shared by several
 * streams counts in each, so the budgets bound memory from above);
 * g->nwatching == number of streams with st->watching; c->nresponding ==
 * streams of c with st->responding; c->npending == streams of c with
 * st->pending, g->npending their sum; g->init, when set, holds one
 * reference to each of its frames and is current while now < built_at +
 * the publish interval; c->in[c->inoff..c->inlen) is input held back
 * while the connection is over its input rates, and then the server reads
 * nothing more from its socket (ptcon_gconn_wants_input).
 *
 * Load a client can cause (issue 21): per connection, every call (a new
 * stream) takes a token of c->calls and every byte one of c->inbytes; over
 * either rate, input is held back (nghttp2 is paused at the call's first
 * header) and fed on when the tokens come (ptcon_grpc_timer), so a client
 * that floods one connection with calls or frames slows itself down. And a
 * new watch call (WatchUpdates, WatchState, WatchTaskDetails) is served
 * only with a token of g->watches; without one it waits, pending, costing
 * nothing until a token comes (ptcon_grpc_timer serves the pending calls
 * one per connection in turn: the connections with pending calls form a
 * queue, the first one gets one call served and goes to the end if it has
 * more, a connection joins at the end; so a client that loops,
 * reconnecting or not, cannot make another wait for more than one turn per
 * connection waiting ahead of it); a WatchUpdates that is served queues
 * the current shared initial state (ptcon_initstate.h), built at most once
 * per publish interval, however many streams start.
 */
#include "console/ptcon_grpc.h"

#include <errno.h>
#include <malloc.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/ptcon_bucket.h"
#include "console/ptcon_frame.h"
#include "console/ptcon_initstate.h"
#include "console/ptcon_request.h"

#define HOUSEKEEP_NS 10000000000u       /* retention while nobody watches */
#define TRIM_MIN_PEAK (8u * 1024u * 1024u)  /* a burst worth giving back */
#define TRIM_INTERVAL_NS 1000000000u
#define FAST_DRAIN_NS 1000000u          /* while rings fill fast */
#define BUSY_DRAIN_NS 10000000u         /* while events flow at all */
#define HELD_CAP (64u * 1024u)          /* input held back per connection */
#define FEED_MIN 1024u                  /* throttled input goes on in pieces of this */
#define FEED_SLICE_NS 50000000u         /* ... at multiples of 50 ms: one wake-up serves
                                           every throttled connection due in it */

typedef struct qmsg {
  struct qmsg *next;
  ptcon_frame *f;            /* one reference; f->data[off..len) still to send */
  size_t len, off;
} qmsg;

typedef struct stream {
  struct stream *next, *prev;
  ptcon_gconn *c;
  int32_t id;
  ptcon_method method;
  uint8_t *req;
  size_t reqlen;
  int oversize;               /* over PTCON_MAX_REQUEST_BYTES: answered at once */
  int responding;            /* response headers submitted with a data provider */
  int pending;               /* a decoded watch call waiting for a token */
  ptcon_request preq;        /* ... its request */
  int watching;              /* gets periodic messages (counted in g->nwatching) */
  int want_end;              /* send trailers once the queue is empty */
  int end_status;
  const char *end_msg;
  qmsg *qhead, *qtail;
  size_t queued;
  uint64_t upto;             /* WatchUpdates: generations delivered */
  uint64_t dropped_sent;
  uint64_t task_id;          /* WatchTaskDetails */
} stream;

struct ptcon_gconn {
  ptcon_gconn *next, *prev;
  ptcon_grpc *g;
  void *ud;
  nghttp2_session *sess;
  size_t queued;             /* bytes in all stream queues */
  uint32_t nresponding;
  uint32_t npending;
  uint64_t turn;             /* npending > 0: its place in the queue of turns */
  int paused;
  int got_frame;
  const char *why;           /* set: to be closed now */
  uint64_t accepted_at;
  uint64_t idle_since;       /* when open_calls last became 0 */
  uint64_t last_recv;        /* last bytes from the client */
  uint64_t last_progress;    /* queue became non-empty or drained a bit */
  stream *streams;
  ptcon_bucket calls;        /* new streams of this connection */
  ptcon_bucket inbytes;      /* bytes from the client */
  int owe;                   /* a stream began without a calls token: input waits for one */
  int pause;                 /* on_header: stop nghttp2 (NGHTTP2_ERR_PAUSE) */
  uint8_t *in;               /* held input, HELD_CAP bytes when allocated */
  size_t inoff, inlen;
};

struct ptcon_grpc {
  ptcon_grpc_limits lim;
  ptcon_agg *agg;
  ptcon_gconn *conns;
  uint32_t nconns, nwatching;
  size_t queued, peak_since_trim;
  uint64_t now;
  uint64_t next_tick, next_house, last_trim;
  uint64_t next_drain;       /* 0 = none: the fill mark wakes us */
  ptcon_bucket watches;      /* new watch calls */
  uint32_t npending;         /* watch calls waiting for a token */
  uint64_t turns;            /* places handed out in the queue of turns */
  ptcon_initstate *init;     /* the shared initial state, or NULL */
  ptcon_grpc_stats stats;
};

const char ptcon_gconn_ended[] = "session ended";

/* Calls the client waits on: answered ones still open, and pending ones. */
static uint32_t open_calls(const ptcon_gconn *c) { return c->nresponding + c->npending; }

static nghttp2_session_callbacks *g_cbs;
static pthread_once_t g_cbs_once = PTHREAD_ONCE_INIT;

/* ---- queues ------------------------------------------------------------- */

static void unqueue(stream *st, size_t n) {
  st->queued -= n;
  st->c->queued -= n;
  st->c->g->queued -= n;
}

static void stream_unwatch(stream *st) {
  if (!st->watching) return;
  st->watching = 0;
  st->c->g->nwatching--;
}

/* Frees queued messages; keep_partial keeps a head message that nghttp2 has
 * already started sending (dropping it would cut a gRPC frame in two). */
static void queue_free(stream *st, int keep_partial) {
  qmsg *m = st->qhead;
  qmsg *keep = NULL;
  if (keep_partial && m && m->off > 0) {
    keep = m;
    m = m->next;
    keep->next = NULL;
  }
  for (qmsg *n; m; m = n) {
    n = m->next;
    unqueue(st, m->len - m->off);
    ptcon_frame_unref(m->f);
    free(m);
  }
  st->qhead = st->qtail = keep;
}

static void stream_free(stream *st) {
  ptcon_gconn *c = st->c;
  if (st->prev) st->prev->next = st->next;
  else c->streams = st->next;
  if (st->next) st->next->prev = st->prev;
  queue_free(st, 0);
  stream_unwatch(st);
  if (st->pending) {
    c->npending--;
    c->g->npending--;
  }
  if (st->responding) c->nresponding--;
  if ((st->responding || st->pending) && open_calls(c) == 0) c->idle_since = c->g->now;
  free(st->req);
  free(st);
}

/* Ends a responding stream with status once its queue is flushed. */
static void stream_end(stream *st, int status, const char *msg) {
  st->want_end = 1;
  st->end_status = status;
  st->end_msg = msg;
  stream_unwatch(st);
  nghttp2_session_resume_data(st->c->sess, st->id);
}

/* The total budget is exceeded: this stream (the slowest consumer) loses
 * what it has queued and ends with RESOURCE_EXHAUSTED; the client sees the
 * status once it reads again (the stall time-out closes it otherwise). */
static void stream_drop(stream *st) {
  queue_free(st, 1);
  st->c->g->stats.streams_dropped++;
  stream_end(st, PTCON_GRPC_RESOURCE_EXHAUSTED,
             "client too slow: the console's memory budget for unsent messages is exhausted");
}

static size_t droppable(const stream *st) {
  if (st->want_end) return 0;
  size_t keep = st->qhead && st->qhead->off ? st->qhead->len - st->qhead->off : 0;
  return st->queued - keep;
}

static stream *slowest(ptcon_grpc *g) {
  stream *best = NULL;
  size_t most = 0;
  for (ptcon_gconn *c = g->conns; c; c = c->next)
    for (stream *st = c->streams; st; st = st->next) {
      size_t d = droppable(st);
      if (d > most) {
        most = d;
        best = st;
      }
    }
  return best;
}

/* Queues one gRPC frame, taking over the caller's reference to f (freed on
 * every error). Returns 0, -ENOMEM, -ENOBUFS when the connection's cap is
 * exceeded (the caller closes the connection), or -EDQUOT when this stream
 * was dropped for the total budget (already ended; the caller does nothing
 * more). */
static int stream_queue_frame(stream *st, ptcon_frame *f) {
  ptcon_gconn *c = st->c;
  ptcon_grpc *g = c->g;
  size_t need = f->len;
  if (c->queued + need > g->lim.max_queued_bytes) {
    ptcon_frame_unref(f);
    return -ENOBUFS;
  }
  while (g->queued + need > g->lim.max_total_queued_bytes) {
    stream *v = slowest(g);
    if (!v || v == st || droppable(v) < droppable(st)) {
      ptcon_frame_unref(f);
      stream_drop(st);
      return -EDQUOT;
    }
    stream_drop(v);
  }
  qmsg *m = malloc(sizeof *m);
  if (!m) {
    ptcon_frame_unref(f);
    return -ENOMEM;
  }
  m->next = NULL;
  m->f = f;
  m->len = need;
  m->off = 0;
  if (st->qtail) st->qtail->next = m;
  else st->qhead = m;
  st->qtail = m;
  if (c->queued == 0) c->last_progress = g->now;
  st->queued += need;
  c->queued += need;
  g->queued += need;
  if (g->queued > g->stats.peak_queued) g->stats.peak_queued = g->queued;
  if (g->queued > g->peak_since_trim) g->peak_since_trim = g->queued;
  if (st->responding) nghttp2_session_resume_data(c->sess, st->id);
  return 0;
}

/* Queues one gRPC message (copied behind its 5-byte prefix); the returns of
 * stream_queue_frame. */
static int stream_queue(stream *st, const uint8_t *msg, size_t len) {
  ptcon_frame *f = ptcon_frame_new(msg, len);
  if (!f) return -ENOMEM;
  return stream_queue_frame(st, f);
}

static ssize_t data_read_cb(nghttp2_session *sess, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *flags, nghttp2_data_source *src,
                            void *ud) {
  (void)ud;
  stream *st = src->ptr;
  size_t n = 0;
  while (st->qhead && n < length) {
    qmsg *m = st->qhead;
    size_t k = m->len - m->off;
    if (k > length - n) k = length - n;
    memcpy(buf + n, m->f->data + m->off, k);
    m->off += k;
    n += k;
    unqueue(st, k);
    st->c->last_progress = st->c->g->now;
    if (m->off == m->len) {
      st->qhead = m->next;
      if (!st->qhead) st->qtail = NULL;
      ptcon_frame_unref(m->f);
      free(m);
    }
  }
  if (st->qhead || n) return (ssize_t)n;
  if (!st->want_end) return NGHTTP2_ERR_DEFERRED;
  *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
  char code[12];
  snprintf(code, sizeof code, "%d", st->end_status);
  nghttp2_nv tr[2] = {
    {(uint8_t *)"grpc-status", (uint8_t *)code, 11, strlen(code), NGHTTP2_NV_FLAG_NONE},
    {(uint8_t *)"grpc-message", (uint8_t *)(st->end_msg ? st->end_msg : ""), 12,
     st->end_msg ? strlen(st->end_msg) : 0, NGHTTP2_NV_FLAG_NONE},
  };
  nghttp2_submit_trailer(sess, stream_id, tr, st->end_msg && *st->end_msg ? 2 : 1);
  return 0;
}

static void stream_respond(stream *st, int watching) {
  static const nghttp2_nv hdrs[] = {
    {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
  };
  nghttp2_data_provider dp;
  dp.source.ptr = st;
  dp.read_callback = data_read_cb;
  if (nghttp2_submit_response(st->c->sess, st->id, hdrs, 2, &dp) != 0) return;
  st->responding = 1;
  st->c->nresponding++;
  if (watching) {
    ptcon_grpc *g = st->c->g;
    st->watching = 1;
    if (g->nwatching++ == 0) g->next_tick = g->now + g->lim.publish_interval_ns;
  }
}

/* Trailers-only response: one HEADERS frame with END_STREAM. */
static void stream_fail(stream *st, int status, const char *msg) {
  char code[12];
  snprintf(code, sizeof code, "%d", status);
  nghttp2_nv h[4] = {
    {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
    {(uint8_t *)"grpc-status", (uint8_t *)code, 11, strlen(code), NGHTTP2_NV_FLAG_NONE},
    {(uint8_t *)"grpc-message", (uint8_t *)msg, 12, strlen(msg), NGHTTP2_NV_FLAG_NONE},
  };
  nghttp2_submit_response(st->c->sess, st->id, h, 4, NULL);
}

/* ---- the service -------------------------------------------------------- */

typedef struct emit_ctx {
  stream *st;
  int err;
} emit_ctx;

static int emit_to_stream(void *ud, uint8_t *msg, size_t len) {
  emit_ctx *e = ud;
  int rc = stream_queue(e->st, msg, len);
  free(msg);
  if (rc) e->err = rc;
  return rc;
}

/* The delta of one tick for st (the initial state is shared: dispatch). */
static int send_updates(ptcon_grpc *g, stream *st) {
  uint64_t total = g->agg->dropped_total;
  emit_ctx e = {st, 0};
  int rc = ptcon_agg_encode_updates(g->agg, 0, st->upto, total - st->dropped_sent,
                                    g->lim.max_message_bytes, emit_to_stream, &e);
  st->dropped_sent = total;
  return e.err ? e.err : rc;
}

static int send_details(ptcon_grpc *g, stream *st) {
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  int rc = ptcon_agg_encode_details(g->agg, st->task_id, &b);
  if (rc == 0) rc = b.err;
  if (rc == 0) rc = stream_queue(st, b.data, b.len);
  ptp_pb_buf_free(&b);
  return rc;
}

static int send_state(stream *st) {
  uint8_t m[2] = {0x08, 0x01};
  return stream_queue(st, m, st->c->paused ? 2 : 0);
}

static void after_send(stream *st, int rc) {
  if (rc == -ENOBUFS) ptcon_gconn_kill(st->c, "client is not reading (queue cap reached)");
  else if (rc && rc != -EDQUOT) stream_end(st, PTCON_GRPC_INTERNAL, "encoding failed");
}

static int is_watch(ptcon_method m) {
  return m == PTCON_M_WATCH_UPDATES || m == PTCON_M_WATCH_STATE || m == PTCON_M_WATCH_TASK_DETAILS;
}

/* Makes g->init the current shared initial state: kept while younger than
 * one publish interval, else rebuilt (collect, seal, encode). */
static int initial_state(ptcon_grpc *g) {
  ptcon_initstate *is = g->init;
  if (is && g->now >= is->built_at && g->now - is->built_at < g->lim.publish_interval_ns) return 0;
  ptcon_initstate_del(is);
  g->init = NULL;
  int rc = ptcon_initstate_build(&g->init, g->agg, g->now, g->lim.max_message_bytes);
  if (rc == 0) g->stats.initial_builds++;
  return rc;
}

static void serve(stream *st, const ptcon_request *rq);

/* A complete request arrived (END_STREAM). */
static void dispatch(stream *st) {
  ptcon_gconn *c = st->c;
  ptcon_grpc *g = c->g;
  ptcon_request req;
  const char *why = "";
  int status = ptcon_request_decode(st->method, st->req, st->reqlen, &req, &why);
  free(st->req);   /* decoded: not needed any more (4 KiB per open stream) */
  st->req = NULL;
  st->reqlen = 0;
  if (status != PTCON_GRPC_OK) {
    stream_fail(st, status, why);
    return;
  }
  if (is_watch(req.method) && !ptcon_bucket_take(&g->watches, g->now)) {
    /* Over the rate: the call waits for its turn (ptcon_grpc_timer),
     * costing nothing until then. */
    st->pending = 1;
    st->preq = req;
    if (c->npending++ == 0) c->turn = ++g->turns;   /* joins the queue at its end */
    g->npending++;
    g->stats.watches_waited++;
    return;
  }
  serve(st, &req);
}

/* Answers a decoded call (a watch call has its token). */
static void serve(stream *st, const ptcon_request *rq) {
  ptcon_grpc *g = st->c->g;
  ptcon_gconn *c = st->c;
  ptcon_request req = *rq;
  int rc = 0;
  switch (req.method) {
  case PTCON_M_WATCH_UPDATES:
    rc = initial_state(g);
    stream_respond(st, 1);
    if (rc) break;
    st->upto = g->init->gen;
    st->dropped_sent = g->init->dropped;
    for (uint32_t i = 0; i < g->init->n && rc == 0; i++)
      rc = stream_queue_frame(st, ptcon_frame_ref(g->init->frames[i]));
    break;
  case PTCON_M_WATCH_STATE:
    stream_respond(st, 1);
    rc = send_state(st);
    break;
  case PTCON_M_WATCH_TASK_DETAILS:
    ptcon_agg_collect(g->agg, g->now);
    st->task_id = req.task_id;
    if (!ptcon_agg_find(g->agg, req.task_id)) {
      stream_fail(st, PTCON_GRPC_NOT_FOUND, "no such task");
      return;
    }
    stream_respond(st, 1);
    rc = send_details(g, st);
    break;
  case PTCON_M_PAUSE:
  case PTCON_M_RESUME:
    c->paused = req.method == PTCON_M_PAUSE;
    stream_respond(st, 0);
    rc = stream_queue(st, NULL, 0);
    if (rc == 0) stream_end(st, PTCON_GRPC_OK, NULL);
    break;
  default:
    stream_fail(st, PTCON_GRPC_UNIMPLEMENTED, "unknown method");
    return;
  }
  after_send(st, rc);
}

static void after_drain(ptcon_grpc *g, uint32_t most);

static void tick(ptcon_grpc *g) {
  after_drain(g, ptcon_agg_collect(g->agg, g->now));
  uint64_t sealed = ptcon_agg_seal(g->agg);
  for (ptcon_gconn *c = g->conns; c; c = c->next) {
    for (stream *st = c->streams, *next; st && !c->why; st = next) {
      next = st->next;
      if (!st->watching) continue;
      /* Coalescing: a stream whose previous messages are still queued (a
       * slow reader) gets nothing new this tick; since Updates carry
       * current values since `upto`, the next delta covers what it
       * missed, and a slow client costs at most one state's worth. */
      if (st->qhead) continue;
      int rc = 0;
      switch (st->method) {
      case PTCON_M_WATCH_UPDATES:
        if (c->paused) break;
        rc = send_updates(g, st);
        st->upto = sealed;
        break;
      case PTCON_M_WATCH_STATE:
        rc = send_state(st);
        break;
      case PTCON_M_WATCH_TASK_DETAILS:
        if (!ptcon_agg_find(g->agg, st->task_id)) stream_end(st, PTCON_GRPC_OK, NULL);
        else if (!c->paused) rc = send_details(g, st);
        break;
      default:
        break;
      }
      after_send(st, rc);
    }
  }
}

/* ---- nghttp2 callbacks -------------------------------------------------- */

static int on_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *ud) {
  ptcon_gconn *c = ud;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  if (!ptcon_bucket_take(&c->calls, c->g->now)) {
    /* Over this connection's call rate: this stream goes on, but the
     * input stops at its first header until a token pays for it. */
    c->owe = 1;
    c->pause = 1;
    c->g->stats.calls_throttled++;
  }
  stream *st = calloc(1, sizeof *st);
  if (!st) return NGHTTP2_ERR_CALLBACK_FAILURE;
  st->c = c;
  st->id = f->hd.stream_id;
  st->next = c->streams;
  if (c->streams) c->streams->prev = st;
  c->streams = st;
  nghttp2_session_set_stream_user_data(sess, st->id, st);
  return 0;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud) {
  (void)flags;
  (void)ud;
  if (f->hd.type != NGHTTP2_HEADERS) return 0;
  stream *st = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
  if (!st) return 0;
  if (namelen == 5 && memcmp(name, ":path", 5) == 0)
    st->method = ptcon_method_from_path((const char *)value, valuelen);
  ptcon_gconn *c = st->c;
  if (c->pause) {   /* this header is taken; nghttp2 stops after it */
    c->pause = 0;
    return NGHTTP2_ERR_PAUSE;
  }
  return 0;
}

static int on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  (void)ud;
  stream *st = nghttp2_session_get_stream_user_data(sess, stream_id);
  if (!st || st->oversize || st->responding || st->pending) return 0;
  const size_t cap = PTCON_MAX_REQUEST_BYTES + 5;
  if (st->reqlen + len > cap) {
    /* Answered now, and the stream reset (NO_ERROR) once that answer is
     * out (on_frame_send), so that the client stops sending: the rest
     * would only cost its input budget. */
    st->oversize = 1;
    free(st->req);
    st->req = NULL;
    st->reqlen = 0;
    stream_fail(st, PTCON_GRPC_RESOURCE_EXHAUSTED, "request too large");
    return 0;
  }
  if (!st->req) {
    st->req = malloc(cap);
    if (!st->req) return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  memcpy(st->req + st->reqlen, data, len);
  st->reqlen += len;
  return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *ud) {
  ptcon_gconn *c = ud;
  c->got_frame = 1;
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    stream *st = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
    if (st && !st->responding && !st->pending && !st->oversize) dispatch(st);
  }
  return 0;
}

static int on_frame_send(nghttp2_session *sess, const nghttp2_frame *f, void *ud) {
  (void)ud;
  if (f->hd.type != NGHTTP2_HEADERS || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
  stream *st = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
  if (st && st->oversize)
    nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
  return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t stream_id, uint32_t err, void *ud) {
  (void)err;
  (void)ud;
  stream *st = nghttp2_session_get_stream_user_data(sess, stream_id);
  if (st) {
    nghttp2_session_set_stream_user_data(sess, stream_id, NULL);
    stream_free(st);
  }
  return 0;
}

static void cbs_init(void) {
  if (nghttp2_session_callbacks_new(&g_cbs) != 0) return;
  nghttp2_session_callbacks_set_on_begin_headers_callback(g_cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(g_cbs, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(g_cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(g_cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(g_cbs, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(g_cbs, on_frame_send);
}

/* ---- connections -------------------------------------------------------- */

int ptcon_gconn_new(ptcon_grpc *g, void *ud, uint64_t now, ptcon_gconn **out) {
  g->now = now;
  ptcon_gconn *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  c->g = g;
  c->ud = ud;
  c->accepted_at = c->idle_since = c->last_recv = c->last_progress = now;
  ptcon_bucket_init(&c->calls, g->lim.conn_calls_per_s, g->lim.conn_calls_burst, now);
  ptcon_bucket_init(&c->inbytes, g->lim.conn_bytes_per_s, g->lim.conn_bytes_burst, now);
  if (nghttp2_session_server_new(&c->sess, g_cbs, c) != 0) {
    free(c);
    return -ENOMEM;
  }
  nghttp2_settings_entry iv[] = {
    {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 64},
    {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384},
  };
  nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, 2);
  c->next = g->conns;
  if (g->conns) g->conns->prev = c;
  g->conns = c;
  g->nconns++;
  *out = c;
  return 0;
}

void ptcon_gconn_del(ptcon_gconn *c) {
  if (!c) return;
  ptcon_grpc *g = c->g;
  /* Streams first: nghttp2_session_del calls no close callbacks. */
  while (c->streams) stream_free(c->streams);
  nghttp2_session_del(c->sess);
  if (c->prev) c->prev->next = c->next;
  else g->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  g->nconns--;
  free(c->in);
  free(c);   /* its pause, if any, ends here */
}

void *ptcon_gconn_ud(const ptcon_gconn *c) { return c->ud; }

void ptcon_gconn_kill(ptcon_gconn *c, const char *why) {
  if (!c->why) c->why = why;
}

/* Hands nghttp2 as much of p[0..n) as the connection's rates allow now;
 * returns the bytes consumed (0 .. n), or -EPROTO. */
static ssize_t consume(ptcon_gconn *c, const uint8_t *p, size_t n) {
  ptcon_grpc *g = c->g;
  if (c->owe) {
    if (!ptcon_bucket_take(&c->calls, g->now)) return 0;
    c->owe = 0;
  }
  uint32_t want = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
  uint32_t allow = ptcon_bucket_take_n(&c->inbytes, g->now, want);
  if (!allow) return 0;
  ssize_t r = nghttp2_session_mem_recv(c->sess, p, allow);
  c->pause = 0;
  if (r < 0) {
    ptcon_gconn_kill(c, "HTTP/2 protocol error");
    return -EPROTO;
  }
  if ((size_t)r < allow) ptcon_bucket_give(&c->inbytes, allow - (uint32_t)r);   /* paused */
  if ((size_t)r < n) g->stats.input_held++;
  return c->why ? -EPROTO : r;
}

/* Feeds held input (what the rates allow now). A call that paused the
 * input is paid for first, even when nothing else is held (the pause fell
 * at the end of what was read). */
static int feed_held(ptcon_gconn *c) {
  if (c->owe) {
    if (!ptcon_bucket_take(&c->calls, c->g->now)) return 0;
    c->owe = 0;
  }
  while (c->inoff < c->inlen) {
    ssize_t r = consume(c, c->in + c->inoff, c->inlen - c->inoff);
    if (r < 0) return -EPROTO;
    if (r == 0) break;
    c->inoff += (size_t)r;
  }
  if (c->inoff == c->inlen) c->inoff = c->inlen = 0;
  return 0;
}

int ptcon_gconn_recv(ptcon_gconn *c, const uint8_t *in, size_t n, uint64_t now) {
  c->g->now = now;
  if (c->why) return -EPROTO;
  if (n) c->last_recv = now;
  if (c->inoff < c->inlen || c->owe) {
    /* Already holding back: keep these too (the server stops reading; a
     * caller that does not is cut off at the cap). */
    if (feed_held(c)) return -EPROTO;
  } else {
    while (n) {
      ssize_t r = consume(c, in, n);
      if (r < 0) return -EPROTO;
      if (r == 0) break;
      in += r;
      n -= (size_t)r;
    }
  }
  if (!n) return 0;
  if (c->inlen - c->inoff + n > HELD_CAP) {
    ptcon_gconn_kill(c, "client sends too fast (held input over its cap)");
    return -EPROTO;
  }
  if (!c->in && !(c->in = malloc(HELD_CAP))) {
    ptcon_gconn_kill(c, "out of memory");
    return -EPROTO;
  }
  if (c->inoff) {
    memmove(c->in, c->in + c->inoff, c->inlen - c->inoff);
    c->inlen -= c->inoff;
    c->inoff = 0;
  }
  memcpy(c->in + c->inlen, in, n);
  c->inlen += n;
  return 0;
}

int ptcon_gconn_wants_input(const ptcon_gconn *c) {
  return !c->why && c->inoff == c->inlen && !c->owe;
}

/* When held input can go on (UINT64_MAX: none held): now if the tokens are
 * there, else when they will be, rounded up to a multiple of
 * FEED_SLICE_NS. */
static uint64_t input_due(const ptcon_gconn *c, uint64_t now) {
  if (c->why || (c->inoff == c->inlen && !c->owe)) return UINT64_MAX;
  uint64_t t;
  if (c->owe) {
    t = ptcon_bucket_next(&c->calls, now);
  } else {
    size_t held = c->inlen - c->inoff;
    t = ptcon_bucket_next_n(&c->inbytes, now, held < FEED_MIN ? (uint32_t)held : FEED_MIN);
  }
  if (t <= now) return now;
  return (t + FEED_SLICE_NS - 1) / FEED_SLICE_NS * FEED_SLICE_NS;
}

ssize_t ptcon_gconn_send(ptcon_gconn *c, const uint8_t **out, uint64_t now) {
  c->g->now = now;
  if (c->why) return -EPROTO;
  ssize_t n = nghttp2_session_mem_send(c->sess, out);
  if (n < 0) {
    ptcon_gconn_kill(c, "HTTP/2 protocol error");
    return -EPROTO;
  }
  return n;
}

const char *ptcon_gconn_closing(const ptcon_gconn *c) {
  if (c->why) return c->why;
  if (!nghttp2_session_want_read(c->sess) && !nghttp2_session_want_write(c->sess))
    return ptcon_gconn_ended;
  return NULL;
}

/* ---- the service object ------------------------------------------------- */

int ptcon_grpc_new(ptcon_grpc **out, ptcon_agg *agg, const ptcon_grpc_limits *limits,
                   uint64_t now) {
  pthread_once(&g_cbs_once, cbs_init);
  if (!g_cbs) return -ENOMEM;
  ptcon_grpc *g = calloc(1, sizeof *g);
  if (!g) return -ENOMEM;
  if (limits) g->lim = *limits;
  ptcon_grpc_limits *l = &g->lim;
  if (!l->publish_interval_ns) l->publish_interval_ns = 1000000000u;
  if (!l->max_message_bytes) l->max_message_bytes = 4u * 1024 * 1024 - 64u * 1024;
  if (!l->max_queued_bytes) l->max_queued_bytes = 32u * 1024 * 1024;
  if (!l->max_total_queued_bytes) l->max_total_queued_bytes = 64u * 1024 * 1024;
  if (!l->stall_timeout_ns) l->stall_timeout_ns = 30000000000u;
  if (!l->idle_timeout_ns) l->idle_timeout_ns = 30000000000u;
  if (!l->preface_timeout_ns) l->preface_timeout_ns = 10000000000u;
  if (!l->watch_rate_per_s) l->watch_rate_per_s = 16;
  if (!l->watch_burst) l->watch_burst = 64;
  if (!l->conn_calls_per_s) l->conn_calls_per_s = 8;
  if (!l->conn_calls_burst) l->conn_calls_burst = 8;
  if (!l->conn_bytes_per_s) l->conn_bytes_per_s = 1024;
  if (!l->conn_bytes_burst) l->conn_bytes_burst = 16u * 1024;
  ptcon_bucket_init(&g->watches, l->watch_rate_per_s, l->watch_burst, now);
  g->agg = agg;
  g->now = now;
  g->next_house = now + HOUSEKEEP_NS;
  *out = g;
  return 0;
}

void ptcon_grpc_del(ptcon_grpc *g) {
  if (!g) return;
  while (g->conns) ptcon_gconn_del(g->conns);
  ptcon_initstate_del(g->init);
  free(g);
}

static uint64_t conn_deadline(const ptcon_grpc *g, const ptcon_gconn *c) {
  if (c->why) return 0;
  uint64_t d = input_due(c, g->now);
  if (!c->got_frame && c->accepted_at + g->lim.preface_timeout_ns < d)
    d = c->accepted_at + g->lim.preface_timeout_ns;
  if (open_calls(c) == 0 && c->idle_since + g->lim.idle_timeout_ns < d)
    d = c->idle_since + g->lim.idle_timeout_ns;
  if (c->queued && c->last_progress + g->lim.stall_timeout_ns < d)
    d = c->last_progress + g->lim.stall_timeout_ns;
  return d;
}

static int trim_wanted(const ptcon_grpc *g) {
  return g->peak_since_trim >= TRIM_MIN_PEAK && g->queued < g->peak_since_trim / 4;
}

uint64_t ptcon_grpc_next_due(const ptcon_grpc *g) {
  uint64_t d = g->nwatching ? g->next_tick : g->next_house;
  if (g->npending) {
    uint64_t t = ptcon_bucket_next(&g->watches, g->now);
    if (t < d) d = t;
  }
  if (g->next_drain && g->next_drain < d) d = g->next_drain;
  if (trim_wanted(g) && g->last_trim + TRIM_INTERVAL_NS < d) d = g->last_trim + TRIM_INTERVAL_NS;
  for (const ptcon_gconn *c = g->conns; c; c = c->next) {
    uint64_t cd = conn_deadline(g, c);
    if (cd < d) d = cd;
  }
  return d;
}

/* Serves pending watch calls while tokens last, one per connection in
 * turn: the connection first in the queue (smallest c->turn) gets its
 * oldest call served and, if it has more, goes to the end. */
static void serve_pending(ptcon_grpc *g) {
  while (g->npending && ptcon_bucket_peek(&g->watches, g->now)) {
    ptcon_gconn *c = NULL;
    for (ptcon_gconn *x = g->conns; x; x = x->next)
      if (x->npending && !x->why && (!c || x->turn < c->turn)) c = x;
    if (!c) return;   /* only connections about to close wait */
    stream *st = NULL;
    for (stream *x = c->streams; x; x = x->next)
      if (x->pending && (!st || x->id < st->id)) st = x;   /* its oldest call */
    ptcon_bucket_take(&g->watches, g->now);
    st->pending = 0;
    g->npending--;
    if (--c->npending) c->turn = ++g->turns;
    serve(st, &st->preq);
  }
}

void ptcon_grpc_timer(ptcon_grpc *g, uint64_t now) {
  g->now = now;
  for (ptcon_gconn *c = g->conns; c; c = c->next)
    if (!c->why && input_due(c, now) <= now) feed_held(c);   /* kills c on error */
  if (g->npending) serve_pending(g);
  if (g->next_drain && now >= g->next_drain) ptcon_grpc_drain(g, now);
  if (g->nwatching) {
    if (now >= g->next_tick) {
      tick(g);
      g->next_tick += g->lim.publish_interval_ns;
      if (g->next_tick <= now) g->next_tick = now + g->lim.publish_interval_ns;
    }
    g->next_house = now + HOUSEKEEP_NS;
  } else if (now >= g->next_house) {
    after_drain(g, ptcon_agg_collect(g->agg, now));   /* retention and reaping, nobody watching */
    g->next_house = now + HOUSEKEEP_NS;
  }
  /* A stale shared state is not kept for the next client: it is rebuilt
   * then anyway, and its memory (~250 B per retained task) goes now. */
  if (g->init && (now < g->init->built_at ||
                  now - g->init->built_at >= g->lim.publish_interval_ns)) {
    ptcon_initstate_del(g->init);
    g->init = NULL;
  }
  for (ptcon_gconn *c = g->conns; c; c = c->next) {
    if (c->why) continue;
    if (!c->got_frame && now >= c->accepted_at + g->lim.preface_timeout_ns)
      ptcon_gconn_kill(c, "no HTTP/2 preface");
    else if (c->queued && now >= c->last_progress + g->lim.stall_timeout_ns)
      ptcon_gconn_kill(c, "client is not reading (stalled)");
    else if (open_calls(c) == 0 && now >= c->idle_since + g->lim.idle_timeout_ns)
      ptcon_gconn_kill(c, "idle (no open call)");
  }
  /* After a burst (many slow readers gone) the allocator keeps the freed
   * pages; hand them back, at most once a second. */
  if (trim_wanted(g) && now >= g->last_trim + TRIM_INTERVAL_NS) {
    malloc_trim(0);
    g->stats.trims++;
    g->last_trim = now;
    g->peak_since_trim = g->queued;
  }
}

/* After every drain: while events flow, drain again soon (1 ms when a ring
 * held half a mark's worth, else 10 ms); once a drain finds nothing, sleep
 * until the fill mark or a timer. The mark alone is not enough on a loaded
 * machine: the producer's eventfd write may wake us on its own CPU, late,
 * so a busy ring is also drained on time, as before; an idle one costs no
 * wake-up. */
static void after_drain(ptcon_grpc *g, uint32_t most) {
  if (most >= PTCON_RING_MARK / 2) g->next_drain = g->now + FAST_DRAIN_NS;
  else if (most > 0) g->next_drain = g->now + BUSY_DRAIN_NS;
  else g->next_drain = 0;
}

void ptcon_grpc_drain(ptcon_grpc *g, uint64_t now) {
  g->now = now;
  after_drain(g, ptcon_agg_drain(g->agg, now));
}

ptcon_gconn *ptcon_grpc_evict_candidate(const ptcon_grpc *g) {
  const ptcon_gconn *best = NULL;
  for (const ptcon_gconn *c = g->conns; c; c = c->next) {
    if (!best) {
      best = c;
      continue;
    }
    int ci = open_calls(c) == 0, bi = open_calls(best) == 0;
    if (ci != bi) {
      if (ci) best = c;
      continue;
    }
    uint64_t ck = ci ? c->idle_since : c->last_recv;
    uint64_t bk = bi ? best->idle_since : best->last_recv;
    if (ck < bk) best = c;
  }
  return (ptcon_gconn *)best;
}

uint32_t ptcon_grpc_nconns(const ptcon_grpc *g) { return g->nconns; }
uint32_t ptcon_grpc_nwatching(const ptcon_grpc *g) { return g->nwatching; }
uint32_t ptcon_grpc_npending(const ptcon_grpc *g) { return g->npending; }
size_t ptcon_grpc_queued(const ptcon_grpc *g) { return g->queued; }

void ptcon_grpc_get_stats(const ptcon_grpc *g, ptcon_grpc_stats *out) { *out = g->stats; }
