/*
 * pd_ipc.c - IPC server. See pd_ipc.h and docs/ipc.md.
 *
 * Connection lifetime: a pd_conn is referenced by the open-connection list
 * (one ref while its pipe is open), by each pending pd_call and by each
 * holder (a running turn it started). The pipe is closed (uv_close) when the
 * peer goes away, on a protocol violation, when its output queue exceeds the
 * cap, or after EOF once nothing holds it and its output is flushed; the
 * memory is freed when the last reference goes. Pending uv_write requests
 * complete (ECANCELED) before the close callback, so write callbacks never
 * see freed memory.
 */
#include "daemon/pd_ipc.h"
#include "daemon/pd_log.h"
#include "daemon/pd_loop.h"
#include "daemon/pd_settings.h"
#include "common/pt_jsonl.h"
#include "common/pt_version.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_METHODS 64
#define MAX_CLIENTS 1024

struct pd_conn {
  pt_task task; /* "ipc.client" */
  uv_pipe_t pipe;
  pt_jsonl *framer;
  unsigned id;
  int refs;   /* list + calls + holds */
  int holds;  /* calls + holds: keep a half-closed connection open */
  int hello_done, eof, closing, close_after_flush;
  size_t queued; /* bytes handed to uv_write and not yet written */
  char session[16]; /* attached session id, "" = none */
  pd_conn *prev, *next;
};

struct pd_call {
  pd_conn *c;
  json_int_t id;
  char method[64];
};

typedef struct {
  uv_write_t req;
  pd_conn *c;
  size_t len;
  char data[];
} wreq;

typedef struct {
  char name[64];
  pd_method_fn fn;
  void *ctx;
} method;

static struct {
  uv_loop_t *loop;
  uv_pipe_t server;
  pt_task accept_task; /* "ipc.accept" */
  int listening;
  char *path;
  pd_conn *conns;
  size_t nconns;
  unsigned next_id;
  size_t outbuf_max;
  int shutting_down;
  method methods[MAX_METHODS];
  int nmethods;
  /* close_all */
  int closing_all;
  void (*all_closed)(void *);
  void *all_closed_ctx;
  uv_timer_t deadline;
  pt_task deadline_task; /* "timer.shutdown" */
  int deadline_init;
} g;

/* ---- registry ---- */

int pd_ipc_register_method(const char *name, pd_method_fn fn, void *ctx) {
  if (!name || !*name || strlen(name) >= sizeof g.methods[0].name || !fn) return -EINVAL;
  for (int i = 0; i < g.nmethods; i++) {
    if (strcmp(g.methods[i].name, name) == 0) {
      g.methods[i].fn = fn;
      g.methods[i].ctx = ctx;
      return 0;
    }
  }
  if (g.nmethods >= MAX_METHODS) return -ENOSPC;
  snprintf(g.methods[g.nmethods].name, sizeof g.methods[0].name, "%s", name);
  g.methods[g.nmethods].fn = fn;
  g.methods[g.nmethods].ctx = ctx;
  g.nmethods++;
  return 0;
}

static const method *find_method(const char *name) {
  for (int i = 0; i < g.nmethods; i++)
    if (strcmp(g.methods[i].name, name) == 0) return &g.methods[i];
  return NULL;
}

static int reserved_for_profiling(const char *name) {
  return strncmp(name, "profile.", 8) == 0 || strncmp(name, "artifacts.", 10) == 0;
}

/* ---- connection lifetime ---- */

static void conn_unref(pd_conn *c) {
  if (--c->refs > 0) return;
  PD_TASK_END(&c->task);
  pt_jsonl_del(c->framer);
  free(c);
}

static void on_conn_closed(uv_handle_t *h) {
  pd_conn *c = h->data;
  if (c->prev) c->prev->next = c->next;
  else g.conns = c->next;
  if (c->next) c->next->prev = c->prev;
  g.nconns--;
  pd_debug("client %u: closed", c->id);
  conn_unref(c);
  if (g.closing_all && g.nconns == 0) {
    g.closing_all = 0;
    if (g.deadline_init) {
      uv_timer_stop(&g.deadline);
      pd_task_disarm(&g.deadline_task);
    }
    if (g.all_closed) g.all_closed(g.all_closed_ctx);
  }
}

static void conn_close(pd_conn *c, const char *why) {
  if (c->closing) return;
  c->closing = 1;
  if (why) pd_info("client %u: closing: %s", c->id, why);
  uv_read_stop((uv_stream_t *)&c->pipe);
  pd_task_disarm(&c->task);
  uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* Closes once everything queued is written. */
static void conn_close_after_flush(pd_conn *c) {
  c->close_after_flush = 1;
  uv_read_stop((uv_stream_t *)&c->pipe);
  if (c->queued == 0) conn_close(c, NULL);
}

/* After EOF: close when nothing holds the connection and output is out. */
static void maybe_close_eof(pd_conn *c) {
  if (c->eof && !c->closing && c->holds == 0) conn_close_after_flush(c);
}

pd_conn *pd_conn_hold(pd_conn *c) {
  c->refs++;
  c->holds++;
  return c;
}

void pd_conn_release(pd_conn *c) {
  c->holds--;
  maybe_close_eof(c);
  conn_unref(c);
}

unsigned pd_conn_id(const pd_conn *c) { return c->id; }

/* ---- output ---- */

static void write_cb(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  pd_conn *c = w->c;
  PD_POLL(&c->task);
  c->queued -= w->len;
  free(w);
  if (status < 0 && status != UV_ECANCELED) {
    conn_close(c, uv_strerror(status)); /* peer vanished (EPIPE, ECONNRESET) */
    return;
  }
  if (c->close_after_flush && c->queued == 0) conn_close(c, NULL);
}

static void conn_send(pd_conn *c, json_t *msg) {
  if (c->closing) {
    json_decref(msg);
    return;
  }
  char *line;
  size_t len;
  int r = pt_jsonl_dump(msg, 0, &line, &len);
  json_decref(msg);
  if (r < 0) {
    pd_error("client %u: cannot encode a message (%s); dropped", c->id,
             r == PT_JSONL_EOVERSIZE ? "over the line limit" : strerror(-r));
    return;
  }
  if (c->queued + len > g.outbuf_max) {
    free(line);
    pd_warn("client %u: %zu bytes queued and not read (limit %zu); disconnecting", c->id,
            c->queued, g.outbuf_max);
    conn_close(c, "output queue over its limit");
    return;
  }
  wreq *w = malloc(sizeof *w + len);
  if (!w) {
    free(line);
    conn_close(c, "out of memory");
    return;
  }
  w->c = c;
  w->len = len;
  memcpy(w->data, line, len);
  free(line);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
  r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, write_cb);
  if (r < 0) {
    free(w);
    conn_close(c, uv_strerror(r));
    return;
  }
  c->queued += len;
}

static void send_error(pd_conn *c, json_t *id, const char *code, const char *msg) {
  conn_send(c, json_pack("{s:o, s:{s:s, s:s}}", "id", id ? id : json_null(), "error", "code",
                         code, "message", msg));
}

void pd_conn_event(pd_conn *c, const char *name, json_t *params) {
  conn_send(c, json_pack("{s:s, s:o}", "event", name, "params", params ? params : json_object()));
}

void pd_ipc_broadcast(const char *session, pd_conn *also, const char *name, json_t *params) {
  for (pd_conn *c = g.conns; c; c = c->next) {
    if (c == also || (session && strcmp(c->session, session) == 0))
      pd_conn_event(c, name, json_incref(params));
  }
  json_decref(params);
}

void pd_conn_attach(pd_conn *c, const char *session) {
  snprintf(c->session, sizeof c->session, "%s", session ? session : "");
}

void pd_ipc_detach_all(const char *session) {
  for (pd_conn *c = g.conns; c; c = c->next)
    if (strcmp(c->session, session) == 0) c->session[0] = 0;
}

size_t pd_ipc_client_count(void) { return g.nconns; }

/* ---- calls ---- */

static pd_call *call_new(pd_conn *c, json_int_t id, const char *m) {
  pd_call *call = calloc(1, sizeof *call);
  if (!call) return NULL;
  call->c = pd_conn_hold(c);
  call->id = id;
  snprintf(call->method, sizeof call->method, "%s", m);
  return call;
}

static void call_free(pd_call *call) {
  pd_conn_release(call->c);
  free(call);
}

void pd_call_reply(pd_call *call, json_t *result) {
  conn_send(call->c, json_pack("{s:I, s:o}", "id", call->id, "result",
                               result ? result : json_object()));
  call_free(call);
}

void pd_call_error(pd_call *call, const char *code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (strcmp(code, "internal") == 0 || strcmp(code, "io_error") == 0)
    pd_warn("client %u: %s failed: %s: %s", call->c->id, call->method, code, msg);
  send_error(call->c, json_integer(call->id), code, msg);
  call_free(call);
}

pd_conn *pd_call_conn(pd_call *call) { return call->c->closing ? NULL : call->c; }
const char *pd_call_method(const pd_call *call) { return call->method; }

/* ---- requests ---- */

static void handle_hello(pd_conn *c, json_int_t id, json_t *params) {
  json_t *p = json_object_get(params, "protocol");
  if (!json_is_integer(p)) {
    send_error(c, json_integer(id), "bad_request", "hello needs params.protocol (an integer)");
    return;
  }
  if (json_integer_value(p) != PD_IPC_PROTOCOL) {
    char msg[160];
    snprintf(msg, sizeof msg, "this daemon speaks protocol %d, the client asked for %lld",
             PD_IPC_PROTOCOL, (long long)json_integer_value(p));
    send_error(c, json_integer(id), "protocol_mismatch", msg);
    conn_close_after_flush(c);
    return;
  }
  const char *client = json_string_value(json_object_get(params, "client"));
  c->hello_done = 1;
  pd_info("client %u: hello from %s", c->id, client ? client : "(unnamed)");
  conn_send(c, json_pack("{s:I, s:{s:i, s:s, s:b, s:i}}", "id", id, "result", "protocol",
                         PD_IPC_PROTOCOL, "version", pt_version(), "profiling",
                         pt_is_profiling_build(), "pid", (int)getpid()));
}

static void handle_line(pd_conn *c, const char *line, size_t len) {
  json_t *msg = NULL;
  char err[256];
  if (pt_jsonl_parse(line, len, &msg, err, sizeof err) < 0) {
    send_error(c, NULL, "bad_json", err);
    return;
  }
  json_t *jid = json_object_get(msg, "id");
  json_t *jm = json_object_get(msg, "method");
  json_t *params = json_object_get(msg, "params");
  if (!json_is_integer(jid) || json_integer_value(jid) <= 0) {
    send_error(c, NULL, "bad_request", "a request needs \"id\": a positive integer");
    goto out;
  }
  json_int_t id = json_integer_value(jid);
  if (!json_is_string(jm) || json_string_length(jm) == 0 || json_string_length(jm) >= 64) {
    send_error(c, json_integer(id), "bad_request", "a request needs \"method\": a string");
    goto out;
  }
  if (params && !json_is_object(params)) {
    send_error(c, json_integer(id), "bad_request", "\"params\" must be an object");
    goto out;
  }
  const char *name = json_string_value(jm);
  json_t *p = params ? json_incref(params) : json_object();
  if (strcmp(name, "hello") == 0) {
    if (c->hello_done) send_error(c, json_integer(id), "bad_request", "hello was already done");
    else handle_hello(c, id, p);
  } else if (!c->hello_done) {
    send_error(c, json_integer(id), "bad_request", "the first request must be hello");
  } else if (g.shutting_down && strcmp(name, "daemon.status") != 0) {
    send_error(c, json_integer(id), "shutting_down", "the daemon is shutting down");
  } else {
    const method *m = find_method(name);
    if (!m) {
      char e[160];
      if (reserved_for_profiling(name)) {
        snprintf(e, sizeof e, "%s needs a profiling build (this daemon was built without profiling)",
                 name);
        send_error(c, json_integer(id), "not_profiling", e);
      } else {
        snprintf(e, sizeof e, "unknown method \"%s\"", name);
        send_error(c, json_integer(id), "unknown_method", e);
      }
    } else {
      pd_call *call = call_new(c, id, name);
      if (!call) send_error(c, json_integer(id), "internal", "out of memory");
      else m->fn(call, p, m->ctx);
    }
  }
  json_decref(p);
out:
  json_decref(msg);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  (void)suggested;
  static char slab[65536]; /* loop thread only; fed to the framer at once */
  *buf = uv_buf_init(slab, sizeof slab);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  pd_conn *c = s->data;
  PD_POLL(&c->task);
  pd_task_wake(&c->task);
  if (nread == 0) return;
  if (nread < 0) {
    if (nread != UV_EOF) {
      conn_close(c, uv_strerror((int)nread));
      return;
    }
    size_t pend = pt_jsonl_pending(c->framer);
    if (pend) pd_info("client %u: hung up in the middle of a message (%zu bytes dropped)", c->id, pend);
    else pd_debug("client %u: end of input", c->id);
    c->eof = 1;
    uv_read_stop(s);
    pd_task_disarm(&c->task);
    maybe_close_eof(c);
    return;
  }
  if (pt_jsonl_feed(c->framer, buf->base, (size_t)nread) < 0) {
    conn_close(c, "out of memory");
    return;
  }
  /* hold the connection: a handler may close it */
  c->refs++;
  const char *line;
  size_t len;
  int r;
  while (!c->closing && !c->close_after_flush && (r = pt_jsonl_next(c->framer, &line, &len)) != 0) {
    if (r == PT_JSONL_EOVERSIZE) {
      char e[128];
      snprintf(e, sizeof e, "message exceeds %zu bytes (newline included); closing", PT_JSONL_MAX_LINE);
      pd_warn("client %u: oversize message; closing", c->id);
      send_error(c, NULL, "oversize", e);
      conn_close_after_flush(c);
      break;
    }
    handle_line(c, line, len);
  }
  conn_unref(c);
}

static void on_accept_failed_closed(uv_handle_t *h) {
  pd_conn *c = h->data;
  pt_jsonl_del(c->framer);
  free(c);
}

static void on_connection(uv_stream_t *server, int status) {
  PD_POLL(&g.accept_task);
  pd_task_wake(&g.accept_task);
  if (status < 0) {
    pd_warn("accept: %s", uv_strerror(status));
    return;
  }
  pd_conn *c = calloc(1, sizeof *c);
  if (!c || !(c->framer = pt_jsonl_new(PT_JSONL_MAX_LINE))) {
    free(c);
    pd_error("accept: out of memory");
    return;
  }
  uv_pipe_init(g.loop, &c->pipe, 0);
  c->pipe.data = c;
  c->refs = 1;
  c->id = ++g.next_id;
  if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
    c->closing = 1;
    uv_close((uv_handle_t *)&c->pipe, on_accept_failed_closed);
    return;
  }
  c->next = g.conns;
  if (g.conns) g.conns->prev = c;
  g.conns = c;
  g.nconns++;
  PD_TASK_START(&c->task, "ipc.client");
  if (g.nconns > MAX_CLIENTS) {
    send_error(c, NULL, "busy", "too many clients");
    conn_close_after_flush(c);
    return;
  }
  pd_debug("client %u: connected", c->id);
  uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb);
  pd_task_arm(&c->task);
}

int pd_ipc_listen(uv_loop_t *loop, const char *path) {
  struct sockaddr_un sa;
  if (strlen(path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
  g.loop = loop;
  g.outbuf_max = (size_t)pd_env_int("POLYTOKEN_IPC_OUTBUF_MAX", (int)PD_IPC_OUTBUF_MAX, 1024,
                                    1 << 30);
  free(g.path);
  g.path = strdup(path);
  if (!g.path) return -ENOMEM;
  /* We hold the daemon lock: a socket file here is a leftover. */
  if (unlink(path) != 0 && errno != ENOENT) return -errno;
  int r = uv_pipe_init(loop, &g.server, 0);
  if (r < 0) return r;
  /* umask while binding so the socket is never reachable by others, not
   * even between bind and chmod (single-threaded at this point). */
  mode_t old = umask(0177);
  r = uv_pipe_bind(&g.server, path);
  umask(old);
  if (r == 0 && chmod(path, 0600) != 0) r = -errno;
  /* Backlog SOMAXCONN (4096 in glibc; the kernel caps it at
   * net.core.somaxconn): a burst of connects from many clients at once
   * waits in the queue instead of failing with EAGAIN while the loop is
   * busy (docs/ipc.md, "Limits"). */
  if (r == 0) r = uv_listen((uv_stream_t *)&g.server, SOMAXCONN, on_connection);
  if (r < 0) {
    uv_close((uv_handle_t *)&g.server, NULL);
    return r;
  }
  g.listening = 1;
  PD_TASK_START(&g.accept_task, "ipc.accept");
  pd_task_arm(&g.accept_task);
  return 0;
}

static void on_server_closed(uv_handle_t *h) {
  (void)h;
  PD_TASK_END(&g.accept_task);
}

void pd_ipc_stop_accepting(void) {
  if (!g.listening) return;
  g.listening = 0;
  pd_task_disarm(&g.accept_task);
  uv_close((uv_handle_t *)&g.server, on_server_closed);
  if (g.path) unlink(g.path);
}

void pd_ipc_set_shutting_down(void) { g.shutting_down = 1; }

static void deadline_cb(uv_timer_t *t) {
  (void)t;
  PD_POLL(&g.deadline_task);
  pd_task_wake(&g.deadline_task);
  pd_task_disarm(&g.deadline_task);
  for (pd_conn *c = g.conns; c; c = c->next) conn_close(c, "shutdown deadline");
}

static void on_deadline_closed(uv_handle_t *h) {
  (void)h;
  PD_TASK_END(&g.deadline_task);
}

void pd_ipc_close_all(int deadline_ms, void (*done)(void *), void *ctx) {
  g.all_closed = done;
  g.all_closed_ctx = ctx;
  if (g.nconns == 0) {
    if (done) done(ctx);
    return;
  }
  g.closing_all = 1;
  if (!g.deadline_init) {
    uv_timer_init(g.loop, &g.deadline);
    uv_unref((uv_handle_t *)&g.deadline);
    g.deadline_init = 1;
    PD_TASK_START(&g.deadline_task, "timer.shutdown");
  }
  uv_timer_start(&g.deadline, deadline_cb, (uint64_t)deadline_ms, 0);
  pd_task_arm(&g.deadline_task);
  for (pd_conn *c = g.conns, *n; c; c = n) {
    n = c->next;
    conn_close_after_flush(c);
  }
}

void pd_ipc_fini(void) {
  if (g.deadline_init) {
    g.deadline_init = 0;
    uv_close((uv_handle_t *)&g.deadline, on_deadline_closed);
  }
  free(g.path);
  g.path = NULL;
}
