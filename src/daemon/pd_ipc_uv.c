/*
 * pd_ipc_uv.c - the libuv driver of the IPC core. See pd_ipc_uv.h.
 *
 * DESIGN
 *  - One uv_conn per accepted pipe, linked to its core pd_conn. The core's
 *    `close` callback starts uv_close; the close callback reports
 *    pd_conn_closed and frees the uv_conn, so the core never sees a
 *    connection whose pipe is gone and the driver never touches a pd_conn
 *    after reporting it closed.
 *  - Writes: the core's `send` copies the bytes into a write request; its
 *    completion reports pd_conn_sent (also when cancelled by a close:
 *    pending uv_write requests complete with UV_ECANCELED before the close
 *    callback, so write callbacks never see freed memory).
 *  - Reads land in one buffer of the driver (loop thread only) and are fed
 *    to the core at once.
 *  - The core is told uv_now() of the loop.
 */
#include "daemon/pd_ipc_uv.h"
#include "daemon/pd_log.h"
#include "daemon/pd_loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

typedef struct uv_conn {
  pt_task task; /* "ipc.client" */
  uv_pipe_t pipe;
  pd_ipc_uv *srv;
  pd_conn *c;      /* the core's side; NULL if the core could not open one */
  int no_read;     /* the core said stop_reading (maybe before reading began) */
  int armed;       /* reading: the task waits on the pipe */
  int closing;
} uv_conn;

typedef struct wreq {
  uv_write_t req;
  uv_conn *uc;
  size_t len;
  char data[];
} wreq;

struct pd_ipc_uv {
  uv_loop_t *loop;
  pd_ipc *ipc;
  uv_pipe_t server;
  pt_task accept_task; /* "ipc.accept" */
  int listening;
  char *path;
  /* close_all */
  uv_timer_t deadline;
  pt_task deadline_task; /* "timer.shutdown" */
  int deadline_init;
  void (*all_closed)(void *);
  void *all_closed_ctx;
  char rbuf[65536]; /* read buffer; fed to the core at once */
};

/* ---- the core's callbacks ---- */

static void write_cb(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  uv_conn *uc = w->uc;
  PD_POLL(&uc->task);
  size_t len = w->len;
  free(w);
  /* a peer that vanished (EPIPE, ECONNRESET); ECANCELED: we closed */
  if (status < 0 && status != UV_ECANCELED) pd_conn_abort(uc->c, uv_strerror(status));
  pd_conn_sent(uc->c, len, uv_now(uc->srv->loop));
}

static int cb_send(pd_conn *c, const char *data, size_t len, void *conn_data) {
  (void)c;
  uv_conn *uc = conn_data;
  wreq *w = malloc(sizeof *w + len);
  if (!w) return -ENOMEM;
  w->uc = uc;
  w->len = len;
  memcpy(w->data, data, len);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
  int r = uv_write(&w->req, (uv_stream_t *)&uc->pipe, &b, 1, write_cb);
  if (r < 0) {
    free(w);
    return r;
  }
  return 0;
}

static void cb_stop_reading(pd_conn *c, void *conn_data) {
  (void)c;
  uv_conn *uc = conn_data;
  uc->no_read = 1;
  if (!uc->armed) return;
  uc->armed = 0;
  uv_read_stop((uv_stream_t *)&uc->pipe);
  pd_task_disarm(&uc->task);
}

static void on_conn_closed(uv_handle_t *h) {
  uv_conn *uc = h->data;
  if (uc->c) pd_conn_closed(uc->c, uv_now(uc->srv->loop));
  PD_TASK_END(&uc->task);
  free(uc);
}

static void cb_close(pd_conn *c, void *conn_data) {
  (void)c;
  uv_conn *uc = conn_data;
  cb_stop_reading(c, uc);
  uc->closing = 1;
  uv_close((uv_handle_t *)&uc->pipe, on_conn_closed);
}

static const pd_ipc_callbacks callbacks = {cb_send, cb_stop_reading, cb_close};

/* ---- reading ---- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  uv_conn *uc = h->data;
  *buf = uv_buf_init(uc->srv->rbuf, sizeof uc->srv->rbuf);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  uv_conn *uc = s->data;
  PD_POLL(&uc->task);
  pd_task_wake(&uc->task);
  if (nread == 0) return;
  uint64_t now = uv_now(uc->srv->loop);
  if (nread < 0) {
    if (nread != UV_EOF) {
      pd_conn_abort(uc->c, uv_strerror((int)nread));
      return;
    }
    cb_stop_reading(uc->c, uc);
    pd_conn_eof(uc->c, now);
    return;
  }
  pd_conn_recv(uc->c, buf->base, (size_t)nread, now);
}

/* ---- accepting ---- */

static void on_unaccepted_closed(uv_handle_t *h) {
  uv_conn *uc = h->data;
  PD_TASK_END(&uc->task);
  free(uc);
}

static void on_connection(uv_stream_t *server, int status) {
  pd_ipc_uv *s = server->data;
  PD_POLL(&s->accept_task);
  pd_task_wake(&s->accept_task);
  if (status < 0) {
    pd_warn("accept: %s", uv_strerror(status));
    return;
  }
  uv_conn *uc = calloc(1, sizeof *uc);
  if (!uc) {
    pd_error("accept: out of memory");
    return;
  }
  uc->srv = s;
  uv_pipe_init(s->loop, &uc->pipe, 0);
  uc->pipe.data = uc;
  PD_TASK_START(&uc->task, "ipc.client");
  if (uv_accept(server, (uv_stream_t *)&uc->pipe) != 0) {
    uv_close((uv_handle_t *)&uc->pipe, on_unaccepted_closed);
    return;
  }
  if (pd_ipc_conn_open(s->ipc, uc, uv_now(s->loop), &uc->c) < 0) {
    /* the client sees the connection close without a word: the line below
     * would need memory we do not have */
    pd_error("accept: out of memory");
    uv_close((uv_handle_t *)&uc->pipe, on_unaccepted_closed);
    return;
  }
  if (uc->no_read || uc->closing) return; /* busy: answered, closing */
  if (uv_read_start((uv_stream_t *)&uc->pipe, alloc_cb, read_cb) != 0) {
    pd_conn_abort(uc->c, "cannot read");
    return;
  }
  uc->armed = 1;
  pd_task_arm(&uc->task);
}

/* ---- server ---- */

int pd_ipc_uv_new(pd_ipc_uv **out, uv_loop_t *loop, const pd_ipc_options *o) {
  *out = NULL;
  pd_ipc_uv *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  s->loop = loop;
  int r = pd_ipc_new(&s->ipc, o, &callbacks);
  if (r < 0) {
    free(s);
    return r;
  }
  *out = s;
  return 0;
}

pd_ipc *pd_ipc_uv_core(pd_ipc_uv *s) { return s->ipc; }

int pd_ipc_uv_listen(pd_ipc_uv *s, const char *path) {
  struct sockaddr_un sa;
  if (strlen(path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
  free(s->path);
  s->path = strdup(path);
  if (!s->path) return -ENOMEM;
  /* We hold the daemon lock: a socket file here is a leftover. */
  if (unlink(path) != 0 && errno != ENOENT) return -errno;
  int r = uv_pipe_init(s->loop, &s->server, 0);
  if (r < 0) return r;
  s->server.data = s;
  /* umask while binding so the socket is never reachable by others, not
   * even between bind and chmod (single-threaded at this point). */
  mode_t old = umask(0177);
  r = uv_pipe_bind(&s->server, path);
  umask(old);
  if (r == 0 && chmod(path, 0600) != 0) r = -errno;
  /* Backlog SOMAXCONN (4096 in glibc; the kernel caps it at
   * net.core.somaxconn): a burst of connects from many clients at once
   * waits in the queue instead of failing with EAGAIN while the loop is
   * busy (docs/ipc.md, "Limits"). */
  if (r == 0) r = uv_listen((uv_stream_t *)&s->server, SOMAXCONN, on_connection);
  if (r < 0) {
    uv_close((uv_handle_t *)&s->server, NULL);
    return r;
  }
  s->listening = 1;
  PD_TASK_START(&s->accept_task, "ipc.accept");
  pd_task_arm(&s->accept_task);
  return 0;
}

static void on_server_closed(uv_handle_t *h) {
  pd_ipc_uv *s = h->data;
  PD_TASK_END(&s->accept_task);
}

void pd_ipc_uv_stop_accepting(pd_ipc_uv *s) {
  if (!s->listening) return;
  s->listening = 0;
  pd_task_disarm(&s->accept_task);
  uv_close((uv_handle_t *)&s->server, on_server_closed);
  if (s->path) unlink(s->path);
}

static void deadline_cb(uv_timer_t *t) {
  pd_ipc_uv *s = t->data;
  PD_POLL(&s->deadline_task);
  pd_task_wake(&s->deadline_task);
  pd_task_disarm(&s->deadline_task);
  pd_ipc_tick(s->ipc, uv_now(s->loop));
}

/* The core's done callback: every connection closed. */
static void on_all_closed(void *ctx) {
  pd_ipc_uv *s = ctx;
  if (s->deadline_init) {
    uv_timer_stop(&s->deadline);
    pd_task_disarm(&s->deadline_task);
  }
  if (s->all_closed) s->all_closed(s->all_closed_ctx);
}

void pd_ipc_uv_close_all(pd_ipc_uv *s, uint64_t deadline_ms, void (*done)(void *), void *ctx) {
  s->all_closed = done;
  s->all_closed_ctx = ctx;
  uint64_t now = uv_now(s->loop);
  pd_ipc_close_all(s->ipc, now, deadline_ms, on_all_closed, s);
  uint64_t due = pd_ipc_next_deadline(s->ipc);
  if (due == PD_IPC_NO_DEADLINE) return; /* none open: done already ran */
  if (!s->deadline_init) {
    uv_timer_init(s->loop, &s->deadline);
    s->deadline.data = s;
    uv_unref((uv_handle_t *)&s->deadline);
    s->deadline_init = 1;
    PD_TASK_START(&s->deadline_task, "timer.shutdown");
  }
  uv_timer_start(&s->deadline, deadline_cb, due > now ? due - now : 0, 0);
  pd_task_arm(&s->deadline_task);
}

static void on_deadline_closed(uv_handle_t *h) {
  pd_ipc_uv *s = h->data;
  PD_TASK_END(&s->deadline_task);
}

void pd_ipc_uv_close(pd_ipc_uv *s) {
  pd_ipc_uv_stop_accepting(s);
  if (s->deadline_init) {
    s->deadline_init = 0;
    uv_close((uv_handle_t *)&s->deadline, on_deadline_closed);
  }
}

void pd_ipc_uv_del(pd_ipc_uv *s) {
  if (!s) return;
  pd_ipc_del(s->ipc);
  free(s->path);
  free(s);
}
