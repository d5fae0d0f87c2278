/*
 * server.c - the task console server: one thread, epoll, h2c (HTTP/2 with
 * prior knowledge) through nghttp2, gRPC framing and the Instrument service.
 *
 * Threads: everything below runs on the server thread, except
 * ptcon_server_new/_del (caller's thread), which only start and stop it. The
 * aggregator is owned by the server thread; app threads reach it only
 * through the lock-free rings and slots (instrument.c).
 *
 * Bounds (outside input): a request body is kept up to
 * PTCON_MAX_REQUEST_BYTES + 5 bytes (beyond: RESOURCE_EXHAUSTED); at most
 * max_connections connections (more are accepted and closed at once); per
 * connection at most max_queued_bytes of responses wait for the client to
 * read them (beyond: the connection is closed); a connection whose queue
 * makes no progress for stall_timeout_ms is closed too; a slow reader gets
 * coalesced deltas (no new message while the last is queued), so a client
 * that never reads cannot grow our memory; nghttp2 enforces HTTP/2 flow
 * control both ways.
 * A connection that has not completed the HTTP/2 preface within 10 s is
 * closed.
 */
#include "ptprof_console.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "console/aggregator.h"
#include "console/request.h"

#define DRAIN_INTERVAL_NS 10000000u      /* rings drained every 10 ms ... */
#define DRAIN_FAST_NS 1000000u           /* ... or every 1 ms while busy */
#define PREFACE_TIMEOUT_NS 10000000000u  /* 10 s to send the HTTP/2 preface */
#define OUT_HIGH_WATER (256u * 1024u)    /* stop pulling from nghttp2 above this */

typedef struct qmsg {
  struct qmsg *next;
  size_t len, off;
  uint8_t data[];            /* gRPC frame: 5-byte prefix + message */
} qmsg;

typedef struct conn conn;

typedef struct stream {
  struct stream *next, *prev;
  conn *c;
  int32_t id;
  ptcon_method method;
  uint8_t *req;
  size_t reqlen;
  int oversize;
  int responding;            /* response headers submitted with a data provider */
  int want_end;              /* send trailers once the queue is empty */
  int end_status;
  const char *end_msg;
  qmsg *qhead, *qtail;
  uint64_t upto;             /* WatchUpdates: generations delivered */
  uint64_t dropped_sent;
  uint64_t task_id;          /* WatchTaskDetails */
} stream;

struct conn {
  conn *next, *prev;
  ptcon_server *srv;
  int fd;
  nghttp2_session *sess;
  uint8_t *out;              /* bytes nghttp2 produced that the socket refused */
  size_t outlen, outoff, outcap;
  size_t queued;             /* bytes in all stream queues */
  int paused;
  int dead;
  int got_frame;
  uint64_t accepted_at;
  uint64_t last_progress;    /* last time the queue was empty or drained */
  uint32_t events;           /* current epoll interest */
  stream *streams;
};

struct ptcon_server {
  ptcon_server_options opt;
  int lfd, efd, epfd;
  uint16_t port;
  pthread_t thr;
  ptcon_agg *agg;
  conn *conns;
  uint32_t nconns;
  uint64_t next_tick, next_drain;
  uint64_t ticks;
  uint64_t now;              /* mono ns, updated each loop iteration */
  uint64_t accept_resume;    /* listener out of epoll until then (EMFILE); 0 = in */
  uint64_t accept_logged;    /* last time that was logged (once per 10 s) */
};

static _Atomic int g_server_running;

static void slog(ptcon_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void slog(ptcon_server *s, const char *fmt, ...) {
  if (!s->opt.log) return;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  s->opt.log(s->opt.log_ud, line);
}

void ptcon_server_options_init(ptcon_server_options *opt) { memset(opt, 0, sizeof *opt); }

/* ---- streams ------------------------------------------------------------ */

static void stream_free(stream *st) {
  conn *c = st->c;
  if (st->prev) st->prev->next = st->next;
  else c->streams = st->next;
  if (st->next) st->next->prev = st->prev;
  for (qmsg *m = st->qhead, *n; m; m = n) {
    n = m->next;
    c->queued -= m->len - m->off;
    free(m);
  }
  free(st->req);
  free(st);
}

/* Queues one gRPC message (copying it behind the 5-byte prefix). Returns 0,
 * -ENOMEM, or -ENOBUFS when the connection's queue cap is exceeded (the
 * caller then closes the connection). */
static int stream_queue(stream *st, const uint8_t *msg, size_t len) {
  conn *c = st->c;
  if (c->queued + len + 5 > c->srv->opt.max_queued_bytes) return -ENOBUFS;
  qmsg *m = malloc(sizeof *m + len + 5);
  if (!m) return -ENOMEM;
  m->next = NULL;
  m->len = len + 5;
  m->off = 0;
  m->data[0] = 0;
  m->data[1] = (uint8_t)(len >> 24);
  m->data[2] = (uint8_t)(len >> 16);
  m->data[3] = (uint8_t)(len >> 8);
  m->data[4] = (uint8_t)len;
  if (len) memcpy(m->data + 5, msg, len);
  if (st->qtail) st->qtail->next = m;
  else st->qhead = m;
  st->qtail = m;
  c->queued += m->len;
  if (st->responding) nghttp2_session_resume_data(c->sess, st->id);
  return 0;
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
    memcpy(buf + n, m->data + m->off, k);
    m->off += k;
    n += k;
    st->c->queued -= k;
    st->c->last_progress = st->c->srv->now;
    if (m->off == m->len) {
      st->qhead = m->next;
      if (!st->qhead) st->qtail = NULL;
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

static void stream_respond(stream *st) {
  static const nghttp2_nv hdrs[] = {
    {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
  };
  nghttp2_data_provider dp;
  dp.source.ptr = st;
  dp.read_callback = data_read_cb;
  if (nghttp2_submit_response(st->c->sess, st->id, hdrs, 2, &dp) == 0) st->responding = 1;
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

/* Ends a responding stream with status once its queue is flushed. */
static void stream_end(stream *st, int status, const char *msg) {
  st->want_end = 1;
  st->end_status = status;
  st->end_msg = msg;
  nghttp2_session_resume_data(st->c->sess, st->id);
}

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

static int send_updates(ptcon_server *s, stream *st, int full) {
  uint64_t total = s->agg->dropped_total;
  emit_ctx e = {st, 0};
  int rc = ptcon_agg_encode_updates(s->agg, full, st->upto, total - st->dropped_sent,
                                    s->opt.max_message_bytes, emit_to_stream, &e);
  st->dropped_sent = total;
  return rc ? rc : e.err;
}

static int send_details(ptcon_server *s, stream *st) {
  pb_buf b;
  pb_buf_init(&b, 0);
  int rc = ptcon_agg_encode_details(s->agg, st->task_id, &b);
  if (rc == 0) rc = b.err;
  if (rc == 0) rc = stream_queue(st, b.data, b.len);
  pb_buf_free(&b);
  return rc;
}

static int send_state(stream *st) {
  uint8_t m[2] = {0x08, 0x01};
  return stream_queue(st, m, st->c->paused ? 2 : 0);
}

static void conn_kill(conn *c, const char *why) {
  if (!c->dead) slog(c->srv, "task console: closing connection: %s", why);
  c->dead = 1;
}

/* A complete request arrived (END_STREAM). */
static void dispatch(stream *st) {
  conn *c = st->c;
  ptcon_server *s = c->srv;
  ptcon_request req;
  const char *why = "";
  int status;
  if (st->oversize) {
    status = PTCON_GRPC_RESOURCE_EXHAUSTED;
    why = "request too large";
  } else {
    status = ptcon_request_decode(st->method, st->req, st->reqlen, &req, &why);
  }
  if (status != PTCON_GRPC_OK) {
    stream_fail(st, status, why);
    return;
  }
  int rc = 0;
  switch (req.method) {
  case PTCON_M_WATCH_UPDATES:
    ptcon_agg_collect(s->agg);
    st->upto = ptcon_agg_seal(s->agg);
    st->dropped_sent = 0;
    stream_respond(st);
    rc = send_updates(s, st, 1);
    break;
  case PTCON_M_WATCH_STATE:
    stream_respond(st);
    rc = send_state(st);
    break;
  case PTCON_M_WATCH_TASK_DETAILS:
    ptcon_agg_collect(s->agg);
    st->task_id = req.task_id;
    if (!ptcon_agg_find(s->agg, req.task_id)) {
      stream_fail(st, PTCON_GRPC_NOT_FOUND, "no such task");
      return;
    }
    stream_respond(st);
    rc = send_details(s, st);
    break;
  case PTCON_M_PAUSE:
  case PTCON_M_RESUME:
    c->paused = req.method == PTCON_M_PAUSE;
    stream_respond(st);
    rc = stream_queue(st, NULL, 0);
    stream_end(st, PTCON_GRPC_OK, NULL);
    break;
  default:
    stream_fail(st, PTCON_GRPC_UNIMPLEMENTED, "unknown method");
    return;
  }
  if (rc == -ENOBUFS) conn_kill(c, "client is not reading (queue cap reached)");
  else if (rc) stream_end(st, PTCON_GRPC_INTERNAL, "encoding failed");
}

/* ---- nghttp2 callbacks -------------------------------------------------- */

static int on_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *ud) {
  conn *c = ud;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
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
  return 0;
}

static int on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *ud) {
  (void)flags;
  (void)ud;
  stream *st = nghttp2_session_get_stream_user_data(sess, stream_id);
  if (!st || st->oversize) return 0;
  const size_t cap = PTCON_MAX_REQUEST_BYTES + 5;
  if (st->reqlen + len > cap) {
    st->oversize = 1;   /* the rest is discarded; answered at END_STREAM */
    free(st->req);
    st->req = NULL;
    st->reqlen = 0;
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
  conn *c = ud;
  c->got_frame = 1;
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    stream *st = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
    if (st && !st->responding) dispatch(st);
  }
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

static nghttp2_session_callbacks *g_cbs;

/* ---- connections -------------------------------------------------------- */

static void conn_update_events(conn *c) {
  uint32_t ev = EPOLLIN | (c->outoff < c->outlen ? EPOLLOUT : 0);
  if (ev == c->events) return;
  struct epoll_event e = {.events = ev, .data.ptr = c};
  epoll_ctl(c->srv->epfd, EPOLL_CTL_MOD, c->fd, &e);
  c->events = ev;
}

static void conn_close(conn *c) {
  ptcon_server *s = c->srv;
  epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  nghttp2_session_del(c->sess);
  while (c->streams) stream_free(c->streams);
  free(c->out);
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  s->nconns--;
  free(c);   /* its pause, if any, ends here */
}

/* Sends what nghttp2 has, keeping at most one refused chunk in c->out.
 * Returns -1 if the connection is to be closed. */
static int conn_flush(conn *c) {
  for (;;) {
    if (c->outoff < c->outlen) {
      ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return -1;
      }
      c->outoff += (size_t)n;
      if (c->outoff < c->outlen) break;
      c->outoff = c->outlen = 0;
    }
    const uint8_t *p;
    ssize_t n = nghttp2_session_mem_send(c->sess, &p);
    if (n < 0) return -1;
    if (n == 0) break;
    ssize_t w = send(c->fd, p, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
      w = 0;
    }
    if (w < n) {
      size_t rest = (size_t)(n - w);
      if (rest > c->outcap) {
        uint8_t *o = realloc(c->out, rest);
        if (!o) return -1;
        c->out = o;
        c->outcap = rest;
      }
      memcpy(c->out, p + w, rest);
      c->outoff = 0;
      c->outlen = rest;
      if (rest > OUT_HIGH_WATER) break;
    }
  }
  if (c->dead) return -1;
  if (!nghttp2_session_want_read(c->sess) && !nghttp2_session_want_write(c->sess) &&
      c->outoff == c->outlen)
    return -1;
  conn_update_events(c);
  return 0;
}

static void conn_read(conn *c) {
  uint8_t buf[16384];
  for (int rounds = 0; rounds < 16; rounds++) {
    ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      c->dead = 1;
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      c->dead = 1;
      return;
    }
    ssize_t r = nghttp2_session_mem_recv(c->sess, buf, (size_t)n);
    if (r < 0) {
      conn_kill(c, nghttp2_strerror((int)r));
      return;
    }
    if (c->dead) return;
  }
}

static void conn_accept(ptcon_server *s) {
  for (;;) {
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* The pending connection stays queued and the level-triggered
         * listener would fire again at once: take it out of epoll for
         * 100 ms instead of spinning (and logging) in a loop. */
        uint64_t t = ptcon_mono_ns();
        if (!s->accept_logged || t - s->accept_logged > 10000000000u) {
          slog(s, "task console: accept: %s (pausing accepts for 100 ms at a time)",
               strerror(errno));
          s->accept_logged = t;
        }
        epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
        s->accept_resume = t + 100000000u;
      }
      return;
    }
    if (s->nconns >= s->opt.max_connections) {
      close(fd);   /* over the cap: refuse by closing */
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn *c = calloc(1, sizeof *c);
    if (!c) {
      close(fd);
      continue;
    }
    c->srv = s;
    c->fd = fd;
    c->accepted_at = c->last_progress = ptcon_mono_ns();
    if (nghttp2_session_server_new(&c->sess, g_cbs, c) != 0) {
      free(c);
      close(fd);
      continue;
    }
    nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 64},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384},
    };
    nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, 2);
    c->events = EPOLLIN;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
      nghttp2_session_del(c->sess);
      free(c);
      close(fd);
      continue;
    }
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    if (conn_flush(c)) conn_close(c);
  }
}

/* ---- ticks -------------------------------------------------------------- */

static void tick(ptcon_server *s) {
  ptcon_agg_collect(s->agg);
  uint64_t sealed = ptcon_agg_seal(s->agg);
  for (conn *c = s->conns; c; c = c->next) {
    for (stream *st = c->streams; st && !c->dead; st = st->next) {
      if (!st->responding || st->want_end) continue;
      /* Coalescing: a stream whose previous messages are still queued (a
       * slow reader) gets nothing new this tick; since Updates carry
       * current values since `upto`, the next delta covers what it
       * missed, and a slow client costs at most one state's worth. */
      if (st->qhead) continue;
      int rc = 0;
      switch (st->method) {
      case PTCON_M_WATCH_UPDATES:
        if (c->paused) break;
        rc = send_updates(s, st, 0);
        st->upto = sealed;
        break;
      case PTCON_M_WATCH_STATE:
        rc = send_state(st);
        break;
      case PTCON_M_WATCH_TASK_DETAILS:
        if (!ptcon_agg_find(s->agg, st->task_id)) stream_end(st, PTCON_GRPC_OK, NULL);
        else if (!c->paused) rc = send_details(s, st);
        break;
      default:
        break;
      }
      if (rc == -ENOBUFS) conn_kill(c, "client is not reading (queue cap reached)");
      else if (rc) stream_end(st, PTCON_GRPC_INTERNAL, "encoding failed");
    }
  }
}

static void flush_all(ptcon_server *s, uint64_t now) {
  for (conn *c = s->conns, *n; c; c = n) {
    n = c->next;
    if (!c->got_frame && now - c->accepted_at > PREFACE_TIMEOUT_NS)
      conn_kill(c, "no HTTP/2 preface");
    if (c->queued == 0) c->last_progress = now;
    else if (now - c->last_progress > (uint64_t)s->opt.stall_timeout_ms * 1000000u)
      conn_kill(c, "client is not reading (stalled)");
    if (conn_flush(c)) conn_close(c);
  }
}

static void *server_main(void *arg) {
  ptcon_server *s = arg;
  struct epoll_event evs[64];
  uint64_t now = ptcon_mono_ns();
  s->next_tick = now + (uint64_t)s->opt.publish_interval_ms * 1000000u;
  s->next_drain = now + DRAIN_INTERVAL_NS;
  for (;;) {
    now = s->now = ptcon_mono_ns();
    if (s->accept_resume && now >= s->accept_resume) {
      struct epoll_event le = {.events = EPOLLIN, .data.ptr = NULL};
      epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &le);
      s->accept_resume = 0;
    }
    uint64_t due = s->next_drain < s->next_tick ? s->next_drain : s->next_tick;
    int timeout = due > now ? (int)((due - now + 999999u) / 1000000u) : 0;
    int n = epoll_wait(s->epfd, evs, 64, timeout);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == NULL) {
        conn_accept(s);
      } else if (evs[i].data.ptr == (void *)s) {
        goto out;   /* stop requested */
      } else {
        conn *c = evs[i].data.ptr;
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_read(c);
      }
    }
    now = s->now = ptcon_mono_ns();
    if (now >= s->next_tick) {
      tick(s);
      s->ticks++;
      s->next_tick += (uint64_t)s->opt.publish_interval_ms * 1000000u;
      if (s->next_tick <= now) s->next_tick = now + (uint64_t)s->opt.publish_interval_ms * 1000000u;
      s->next_drain = now + DRAIN_INTERVAL_NS;
    } else if (now >= s->next_drain) {
      /* A ring that held more than 1/8 of its capacity after one interval
       * would overflow at 8x that rate: poll faster until it calms down. */
      uint32_t most = ptcon_agg_drain(s->agg);
      s->next_drain = now + (most > PTCON_RING_CAP / 8 ? DRAIN_FAST_NS : DRAIN_INTERVAL_NS);
    }
    /* Every connection: flush output, close the dead ones. Cheap with few
     * connections; bounded by max_connections. */
    flush_all(s, now);
  }
out:
  while (s->conns) conn_close(s->conns);
  return NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

static pthread_once_t g_cbs_once = PTHREAD_ONCE_INIT;

static void cbs_init(void) {
  if (nghttp2_session_callbacks_new(&g_cbs) != 0) return;
  nghttp2_session_callbacks_set_on_begin_headers_callback(g_cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(g_cbs, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(g_cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(g_cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(g_cbs, on_stream_close);
}

int ptcon_server_new(ptcon_server **out, const ptcon_server_options *opt) {
  int rc;
  struct sockaddr_storage ss;
  socklen_t sslen;
  if (!out || !opt) return -EINVAL;
  rc = ptcon_bind_parse(opt->bind, opt->allow_non_loopback, &ss, &sslen);
  if (rc) return rc;
  pthread_once(&g_cbs_once, cbs_init);
  if (!g_cbs) return -ENOMEM;
  int expect = 0;
  if (!atomic_compare_exchange_strong(&g_server_running, &expect, 1)) return -EBUSY;
  ptcon_server *s = calloc(1, sizeof *s);
  if (!s) {
    rc = -ENOMEM;
    goto fail_alloc;
  }
  s->opt = *opt;
  s->opt.bind = NULL;   /* not kept: the caller owns the string */
  if (!s->opt.publish_interval_ms) s->opt.publish_interval_ms = 1000;
  if (!s->opt.max_connections) s->opt.max_connections = 128;
  if (!s->opt.max_message_bytes) s->opt.max_message_bytes = 4u * 1024 * 1024 - 64u * 1024;
  if (!s->opt.max_queued_bytes) s->opt.max_queued_bytes = 32u * 1024 * 1024;
  if (!s->opt.stall_timeout_ms) s->opt.stall_timeout_ms = 30000;
  s->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->lfd < 0) {
    rc = -errno;
    goto fail_socket;
  }
  int one = 1;
  setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s->lfd, (struct sockaddr *)&ss, sslen) != 0 || listen(s->lfd, 1024) != 0) {
    rc = -errno;
    goto fail_bind;
  }
  struct sockaddr_storage got;
  socklen_t gl = sizeof got;
  getsockname(s->lfd, (struct sockaddr *)&got, &gl);
  s->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                            : ((struct sockaddr_in *)&got)->sin_port);
  rc = ptcon_agg_new(&s->agg, opt->retention_ms, opt->max_retained);
  if (rc) goto fail_bind;
  s->epfd = epoll_create1(EPOLL_CLOEXEC);
  s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->epfd < 0 || s->efd < 0) {
    rc = -errno;
    goto fail_fds;
  }
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
  struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = s};
  if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &e) || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->efd, &e2)) {
    rc = -errno;
    goto fail_fds;
  }
  /* The server thread takes none of the app's asynchronous signals (their
   * handlers belong on app threads); SIGPROF stays open so the sampler sees
   * the server's CPU too, and faults stay deliverable. */
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGPROF);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  sigdelset(&all, SIGABRT);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = -pthread_create(&s->thr, NULL, server_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) goto fail_fds;
  pthread_setname_np(s->thr, "ptcon-server");
  slog(s, "task console listening on %s (port %u)", opt->bind, (unsigned)s->port);
  *out = s;
  return 0;
fail_fds:
  if (s->efd >= 0) close(s->efd);
  if (s->epfd >= 0) close(s->epfd);
  ptcon_agg_del(s->agg);
fail_bind:
  close(s->lfd);
fail_socket:
  free(s);
fail_alloc:
  atomic_store(&g_server_running, 0);
  return rc;
}

uint16_t ptcon_server_port(const ptcon_server *s) { return s ? s->port : 0; }

void ptcon_server_del(ptcon_server *s) {
  if (!s) return;
  uint64_t v = 1;
  if (write(s->efd, &v, sizeof v) != sizeof v) { /* cannot fail: counter far from max */ }
  pthread_join(s->thr, NULL);
  close(s->efd);
  close(s->epfd);
  close(s->lfd);
  ptcon_agg_del(s->agg);
  free(s);
  atomic_store(&g_server_running, 0);
}

int ptcon_server_start_env(ptcon_server **out, const char *bind_env, const char *default_bind,
                           ptcon_log_fn log, void *log_ud) {
  ptcon_server_options o;
  ptcon_server_options_init(&o);
  const char *b = bind_env ? getenv(bind_env) : NULL;
  o.bind = b && *b ? b : default_bind;
  const char *r = getenv("POLYTOKEN_CONSOLE_RETENTION_MS");
  if (r && *r) {
    char *end;
    unsigned long v = strtoul(r, &end, 10);
    if (*end == 0 && v > 0 && v <= 24ul * 3600 * 1000) o.retention_ms = (uint32_t)v;
  }
  const char *force = getenv("POLYTOKEN_CONSOLE_ALLOW_REMOTE");
  o.allow_non_loopback = force && strcmp(force, "1") == 0;
  o.log = log;
  o.log_ud = log_ud;
  int rc = ptcon_server_new(out, &o);
  if (rc && log) {
    char line[256];
    snprintf(line, sizeof line, "task console disabled: %s: %s", o.bind ? o.bind : "(no address)",
             ptcon_strerror(rc));
    log(log_ud, line);
  }
  return rc;
}
