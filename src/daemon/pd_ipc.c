/*
 * pd_ipc.c - the IPC protocol core, without I/O. See pd_ipc.h and
 * docs/ipc.md.
 *
 * DESIGN
 *  - All state is in the pd_ipc handle and its connections; nothing is
 *    file-level. The driver owns the transport (its pointer is
 *    pd_conn.data) and the core tells it what to do through three
 *    callbacks; the core never waits and never reads a clock.
 *  - Flags of a connection, each only ever set:
 *      stopped  no more input (stop_reading was called: a protocol error,
 *               EOF, close_all); `flush` says to close once queued == 0;
 *      closing  `close` was called (at most once); no more output;
 *      gone     pd_conn_closed: the transport is gone, the core's
 *               reference dropped.
 *    queued counts bytes handed to `send` and not yet reported by
 *    pd_conn_sent; the output cap applies to it.
 *  - References: one for the open transport (until pd_conn_closed), one per
 *    pending call and per hold. The memory goes with the last one. The
 *    handle itself is freed by pd_ipc_del once no connection memory refers
 *    to it (deleted + nconns_mem == 0), so a call completed late finds the
 *    handle still there (its reply is dropped: the connection is gone).
 *  - Out of memory never loses a request silently: a reply that cannot be
 *    built or encoded becomes an "internal" error formatted into a stack
 *    buffer (no allocation); an event that cannot be encoded is dropped and
 *    logged; a request whose call record cannot be allocated is answered
 *    "internal".
 */
#include "daemon/pd_ipc.h"
#include "daemon/pd_json_alloc.h"
#include "common/pt_jsonl.h"
#include "common/pt_version.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_METHODS 64
#define METHOD_NAME_MAX 64 /* bytes with the NUL */

struct pd_conn {
  pd_ipc *ipc;
  void *data; /* the driver's */
  pt_jsonl *framer;
  unsigned id;
  int refs;  /* transport + calls + holds */
  int holds; /* calls + holds: keep a half-closed connection open */
  int hello_done, eof, stopped, flush, closing, gone;
  size_t queued;    /* bytes handed to send and not yet sent */
  char session[16]; /* attached session id, "" = none */
  pd_conn *prev, *next;
};

struct pd_call {
  pd_conn *c;
  json_int_t id;
  char method[METHOD_NAME_MAX];
};

typedef struct {
  char name[METHOD_NAME_MAX];
  pd_method_fn fn;
  void *ctx;
} method;

struct pd_ipc {
  pd_ipc_callbacks cb;
  pd_ipc_mem mem;
  size_t outbuf_max, max_clients, max_line;
  long pid;
  void (*log)(int, const char *, void *);
  void *log_ud;
  pd_conn *conns; /* transport open (not gone) */
  size_t nconns;
  size_t nconns_mem; /* connection structs allocated (gone or not) */
  unsigned next_id;
  int shutting_down, deleted;
  method methods[MAX_METHODS];
  int nmethods;
  /* close_all */
  int closing_all;
  uint64_t deadline; /* PD_IPC_NO_DEADLINE when none */
  void (*all_closed)(void *);
  void *all_closed_ctx;
};

/* ---- memory and log ---- */

static void *std_malloc(size_t n, void *u) {
  (void)u;
  return malloc(n);
}
static void std_free(void *p, void *u) {
  (void)u;
  free(p);
}

static void *ipc_alloc(pd_ipc *ipc, size_t n) { return ipc->mem.malloc(n, ipc->mem.user); }
static void ipc_free(pd_ipc *ipc, void *p) { ipc->mem.free(p, ipc->mem.user); }

static void lg(const pd_ipc *ipc, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void lg(const pd_ipc *ipc, int level, const char *fmt, ...) {
  if (!ipc->log || ipc->deleted) return;
  char msg[1200]; /* no allocation: also used when memory is short */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ipc->log(level, msg, ipc->log_ud);
}

/* ---- handle ---- */

void pd_ipc_options_init(pd_ipc_options *o) { memset(o, 0, sizeof *o); }

int pd_ipc_new(pd_ipc **out, const pd_ipc_options *o, const pd_ipc_callbacks *cb) {
  *out = NULL;
  if (!cb || !cb->send || !cb->stop_reading || !cb->close) return -EINVAL;
  pd_ipc_mem mem = {std_malloc, std_free, NULL};
  if (o && o->mem) mem = *o->mem;
  pd_ipc *ipc = mem.malloc(sizeof *ipc, mem.user);
  if (!ipc) return -ENOMEM;
  memset(ipc, 0, sizeof *ipc);
  ipc->cb = *cb;
  ipc->mem = mem;
  ipc->outbuf_max = o && o->outbuf_max ? o->outbuf_max : PD_IPC_OUTBUF_MAX;
  ipc->max_clients = o && o->max_clients ? o->max_clients : PD_IPC_MAX_CLIENTS;
  ipc->max_line = o && o->max_line ? o->max_line : PT_JSONL_MAX_LINE;
  ipc->pid = o && o->pid ? o->pid : (long)getpid();
  ipc->log = o ? o->log : NULL;
  ipc->log_ud = o ? o->log_user_data : NULL;
  ipc->deadline = PD_IPC_NO_DEADLINE;
  *out = ipc;
  return 0;
}

static void maybe_free_ipc(pd_ipc *ipc) {
  if (ipc->deleted && ipc->nconns_mem == 0) ipc_free(ipc, ipc);
}

void pd_ipc_del(pd_ipc *ipc) {
  if (!ipc) return;
  ipc->deleted = 1;
  maybe_free_ipc(ipc);
}

/* ---- registry ---- */

int pd_ipc_register_method(pd_ipc *ipc, const char *name, pd_method_fn fn, void *ctx) {
  if (!name || !*name || strlen(name) >= METHOD_NAME_MAX || !fn) return -EINVAL;
  for (int i = 0; i < ipc->nmethods; i++) {
    if (strcmp(ipc->methods[i].name, name) == 0) {
      ipc->methods[i].fn = fn;
      ipc->methods[i].ctx = ctx;
      return 0;
    }
  }
  if (ipc->nmethods >= MAX_METHODS) return -ENOSPC;
  method *m = &ipc->methods[ipc->nmethods++];
  snprintf(m->name, sizeof m->name, "%s", name);
  m->fn = fn;
  m->ctx = ctx;
  return 0;
}

static const method *find_method(const pd_ipc *ipc, const char *name) {
  for (int i = 0; i < ipc->nmethods; i++)
    if (strcmp(ipc->methods[i].name, name) == 0) return &ipc->methods[i];
  return NULL;
}

static int reserved_for_profiling(const char *name) {
  return strncmp(name, "profile.", 8) == 0 || strncmp(name, "artifacts.", 10) == 0;
}

/* ---- connection lifetime ---- */

static void conn_unref(pd_conn *c) {
  if (--c->refs > 0) return;
  pd_ipc *ipc = c->ipc;
  pt_jsonl_del(c->framer);
  ipc_free(ipc, c);
  ipc->nconns_mem--;
  maybe_free_ipc(ipc);
}

/* Asks the driver to close the transport (once). */
static void conn_close(pd_conn *c, const char *why) {
  if (c->closing || c->gone) return;
  c->closing = c->stopped = 1;
  if (why) lg(c->ipc, PD_IPC_LOG_INFO, "client %u: closing: %s", c->id, why);
  c->ipc->cb.close(c, c->data);
}

/* No more input; close once everything queued is written. */
static void conn_close_after_flush(pd_conn *c) {
  if (c->closing || c->gone) return;
  c->flush = 1;
  if (!c->stopped) {
    c->stopped = 1;
    c->ipc->cb.stop_reading(c, c->data);
  }
  if (c->queued == 0) conn_close(c, NULL);
}

/* After EOF: close when nothing holds the connection and output is out. */
static void maybe_close_eof(pd_conn *c) {
  if (c->eof && c->holds == 0) conn_close_after_flush(c);
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

/* Hands bytes to the driver, within the output cap. */
static void conn_write(pd_conn *c, const char *data, size_t len) {
  pd_ipc *ipc = c->ipc;
  if (c->queued + len > ipc->outbuf_max) {
    lg(ipc, PD_IPC_LOG_WARN, "client %u: %zu bytes queued and not read (limit %zu); disconnecting",
       c->id, c->queued, ipc->outbuf_max);
    conn_close(c, "output queue over its limit");
    return;
  }
  int r = ipc->cb.send(c, data, len, c->data);
  if (r < 0) {
    conn_close(c, r == -ENOMEM ? "out of memory" : strerror(-r));
    return;
  }
  c->queued += len;
}

/* Encodes msg as one line (with '\n') in memory from the core's allocator,
 * so that failures there can be injected (pd_ipc_mem). 0, -ENOMEM (which
 * jansson also gives for a value it cannot encode: ours always can), or
 * PT_JSONL_EOVERSIZE. */
static int encode_line(pd_ipc *ipc, const json_t *msg, char **out, size_t *len) {
  size_t need = json_dumpb(msg, NULL, 0, JSON_COMPACT);
  if (need == 0) return -ENOMEM;
  if (need + 1 > PT_JSONL_MAX_LINE) return PT_JSONL_EOVERSIZE;
  char *b = ipc_alloc(ipc, need + 1);
  if (!b) return -ENOMEM;
  if (json_dumpb(msg, b, need, JSON_COMPACT) != need) {
    ipc_free(ipc, b);
    return -ENOMEM;
  }
  b[need] = '\n';
  *out = b;
  *len = need + 1;
  return 0;
}

/* Sends msg (stolen; NULL = it could not be built). 0, or the reason it
 * was not sent: -ENOMEM, PT_JSONL_EOVERSIZE, -EPIPE (closing). */
static int conn_send(pd_conn *c, json_t *msg) {
  if (c->closing || c->gone) {
    json_decref(msg);
    return -EPIPE;
  }
  if (!msg) return -ENOMEM;
  char *line = NULL;
  size_t len = 0;
  int r = encode_line(c->ipc, msg, &line, &len);
  json_decref(msg);
  if (r < 0) return r;
  conn_write(c, line, len);
  ipc_free(c->ipc, line);
  return 0;
}

/* An error line built without allocating: code and msg need no JSON
 * escaping (ours: letters, digits, spaces and punctuation other than '"'
 * and '\\'). id 0 = null. */
static void send_fixed_error(pd_conn *c, json_int_t id, const char *code, const char *msg) {
  if (c->closing || c->gone) return;
  char line[256], idbuf[32];
  if (id > 0) snprintf(idbuf, sizeof idbuf, "%lld", (long long)id);
  else snprintf(idbuf, sizeof idbuf, "null");
  int n = snprintf(line, sizeof line, "{\"id\":%s,\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
                   idbuf, code, msg);
  if (n > 0 && (size_t)n < sizeof line) conn_write(c, line, (size_t)n);
}

static const char *unsent_reason(int r) {
  return r == PT_JSONL_EOVERSIZE ? "the reply is over the line limit"
                                 : "out of memory building the reply";
}

/* An error reply; id 0 = null. msg is any text (escaped by jansson). If
 * that cannot be built, a fixed "internal" error goes instead. */
static void send_error(pd_conn *c, json_int_t id, const char *code, const char *msg) {
  json_t *jid = id > 0 ? json_integer(id) : json_null();
  json_t *m = jid ? json_pack("{s:o, s:{s:s, s:s}}", "id", jid, "error", "code", code, "message",
                              msg)
                  : NULL;
  int r = conn_send(c, m);
  if (r == -ENOMEM || r == PT_JSONL_EOVERSIZE) send_fixed_error(c, id, "internal", unsent_reason(r));
}

void pd_conn_event(pd_conn *c, const char *name, json_t *params) {
  if (!params) params = json_object();
  json_t *m = params ? json_pack("{s:s, s:o}", "event", name, "params", params) : NULL;
  int r = conn_send(c, m);
  if (r == -ENOMEM || r == PT_JSONL_EOVERSIZE)
    lg(c->ipc, PD_IPC_LOG_ERROR, "client %u: cannot encode a message (%s); dropped", c->id,
       r == PT_JSONL_EOVERSIZE ? "over the line limit" : "out of memory");
}

void pd_ipc_broadcast(pd_ipc *ipc, const char *session, pd_conn *also, const char *name,
                      json_t *params) {
  for (pd_conn *c = ipc->conns; c; c = c->next) {
    if (c == also || (session && strcmp(c->session, session) == 0))
      pd_conn_event(c, name, json_incref(params));
  }
  /* `also` may be gone from the list (closed) and still held: nothing to
   * send to it then. */
  json_decref(params);
}

void pd_conn_attach(pd_conn *c, const char *session) {
  snprintf(c->session, sizeof c->session, "%s", session ? session : "");
}

void pd_ipc_detach_all(pd_ipc *ipc, const char *session) {
  for (pd_conn *c = ipc->conns; c; c = c->next)
    if (strcmp(c->session, session) == 0) c->session[0] = 0;
}

size_t pd_ipc_client_count(const pd_ipc *ipc) { return ipc->nconns; }

void pd_ipc_set_shutting_down(pd_ipc *ipc) { ipc->shutting_down = 1; }

/* ---- calls ---- */

static pd_call *call_new(pd_conn *c, json_int_t id, const char *m) {
  pd_call *call = ipc_alloc(c->ipc, sizeof *call);
  if (!call) return NULL;
  call->c = pd_conn_hold(c);
  call->id = id;
  snprintf(call->method, sizeof call->method, "%s", m);
  return call;
}

static void call_free(pd_call *call) {
  pd_conn *c = call->c;
  ipc_free(c->ipc, call);
  pd_conn_release(c);
}

void pd_call_reply(pd_call *call, json_t *result) {
  pd_conn *c = call->c;
  json_t *jid = result ? json_integer(call->id) : NULL;
  json_t *m = jid ? json_pack("{s:o, s:o}", "id", jid, "result", result) : NULL;
  if (!jid) json_decref(result);
  int r = conn_send(c, m);
  if (r == -ENOMEM || r == PT_JSONL_EOVERSIZE) {
    lg(c->ipc, PD_IPC_LOG_WARN, "client %u: %s failed: internal: %s", c->id, call->method,
       unsent_reason(r));
    send_fixed_error(c, call->id, "internal", unsent_reason(r));
  }
  call_free(call);
}

void pd_call_error(pd_call *call, const char *code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pd_conn *c = call->c;
  if (strcmp(code, "internal") == 0 || strcmp(code, "io_error") == 0)
    lg(c->ipc, PD_IPC_LOG_WARN, "client %u: %s failed: %s: %s", c->id, call->method, code, msg);
  send_error(c, call->id, code, msg);
  call_free(call);
}

pd_conn *pd_call_conn(pd_call *call) { return call->c->closing || call->c->gone ? NULL : call->c; }
const char *pd_call_method(const pd_call *call) { return call->method; }

/* ---- requests ---- */

static void handle_hello(pd_conn *c, json_int_t id, json_t *params) {
  json_t *p = json_object_get(params, "protocol");
  if (!json_is_integer(p)) {
    send_error(c, id, "bad_request", "hello needs params.protocol (an integer)");
    return;
  }
  if (json_integer_value(p) != PD_IPC_PROTOCOL) {
    char msg[160];
    snprintf(msg, sizeof msg, "this daemon speaks protocol %d, the client asked for %lld",
             PD_IPC_PROTOCOL, (long long)json_integer_value(p));
    send_error(c, id, "protocol_mismatch", msg);
    conn_close_after_flush(c);
    return;
  }
  const char *client = json_string_value(json_object_get(params, "client"));
  json_t *m = json_pack("{s:I, s:{s:i, s:s, s:b, s:I}}", "id", id, "result", "protocol",
                        PD_IPC_PROTOCOL, "version", pt_version(), "profiling",
                        pt_is_profiling_build(), "pid", (json_int_t)c->ipc->pid);
  int r = conn_send(c, m);
  if (r == -ENOMEM || r == PT_JSONL_EOVERSIZE) {
    /* not done: the client may try again */
    send_fixed_error(c, id, "internal", unsent_reason(r));
    return;
  }
  c->hello_done = 1;
  /* the name is the client's: printable ASCII only, so it cannot forge log
   * lines or escape sequences */
  char name[65];
  size_t n = 0;
  for (const char *q = client ? client : "(unnamed)"; *q && n < sizeof name - 1; q++)
    name[n++] = *q >= 0x20 && *q < 0x7f ? *q : '?';
  name[n] = 0;
  lg(c->ipc, PD_IPC_LOG_INFO, "client %u: hello from %s", c->id, name);
}

/* Parses one line. 0 and the object in *out; -EINVAL (not a JSON object,
 * reason in err) or -ENOMEM. Unlike pt_jsonl_parse, it tells out of
 * memory apart from bad input, so the client is not told its JSON is bad
 * when the daemon is short of memory: jansson reports some failed
 * allocations as syntax errors, and some with no reason at all, so a
 * failed allocation during the parse (pd_json_alloc.h) decides. */
static int parse_line(const char *line, size_t len, json_t **out, char *err, size_t errlen) {
  json_error_t je;
  unsigned long failures = pd_json_alloc_failures();
  *out = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
  if (!*out) {
    if (pd_json_alloc_failures() != failures || json_error_code(&je) == json_error_out_of_memory ||
        !je.text[0])
      return -ENOMEM;
    snprintf(err, errlen, "invalid JSON at column %d: %s", je.column, je.text);
    return -EINVAL;
  }
  if (!json_is_object(*out)) {
    json_decref(*out);
    *out = NULL;
    snprintf(err, errlen, "message is not a JSON object");
    return -EINVAL;
  }
  return 0;
}

static void handle_line(pd_conn *c, const char *line, size_t len) {
  pd_ipc *ipc = c->ipc;
  json_t *msg = NULL;
  char err[256];
  int r = parse_line(line, len, &msg, err, sizeof err);
  if (r == -ENOMEM) {
    send_fixed_error(c, 0, "internal", "out of memory reading the request");
    return;
  }
  if (r < 0) {
    send_error(c, 0, "bad_json", err);
    return;
  }
  json_t *jid = json_object_get(msg, "id");
  json_t *jm = json_object_get(msg, "method");
  json_t *params = json_object_get(msg, "params");
  if (!json_is_integer(jid) || json_integer_value(jid) <= 0) {
    send_error(c, 0, "bad_request", "a request needs \"id\": a positive integer");
    goto out;
  }
  json_int_t id = json_integer_value(jid);
  if (!json_is_string(jm) || json_string_length(jm) == 0 ||
      json_string_length(jm) >= METHOD_NAME_MAX) {
    send_error(c, id, "bad_request", "a request needs \"method\": a string");
    goto out;
  }
  if (params && !json_is_object(params)) {
    send_error(c, id, "bad_request", "\"params\" must be an object");
    goto out;
  }
  const char *name = json_string_value(jm);
  json_t *p = params ? json_incref(params) : json_object();
  if (!p) {
    send_fixed_error(c, id, "internal", "out of memory reading the request");
  } else if (strcmp(name, "hello") == 0) {
    if (c->hello_done) send_error(c, id, "bad_request", "hello was already done");
    else handle_hello(c, id, p);
  } else if (!c->hello_done) {
    send_error(c, id, "bad_request", "the first request must be hello");
  } else if (ipc->shutting_down && strcmp(name, "daemon.status") != 0) {
    send_error(c, id, "shutting_down", "the daemon is shutting down");
  } else {
    const method *m = find_method(ipc, name);
    if (!m) {
      char e[160];
      if (reserved_for_profiling(name)) {
        snprintf(e, sizeof e, "%s needs a profiling build (this daemon was built without profiling)",
                 name);
        send_error(c, id, "not_profiling", e);
      } else {
        snprintf(e, sizeof e, "unknown method \"%s\"", name);
        send_error(c, id, "unknown_method", e);
      }
    } else {
      pd_call *call = call_new(c, id, name);
      if (!call) send_fixed_error(c, id, "internal", "out of memory");
      else m->fn(call, p, m->ctx);
    }
  }
  json_decref(p);
out:
  json_decref(msg);
}

/* ---- what the driver reports ---- */

int pd_ipc_conn_open(pd_ipc *ipc, void *conn_data, uint64_t now_ms, pd_conn **out) {
  (void)now_ms;
  *out = NULL;
  pd_conn *c = ipc_alloc(ipc, sizeof *c);
  if (!c) return -ENOMEM;
  memset(c, 0, sizeof *c);
  if (!(c->framer = pt_jsonl_new(ipc->max_line))) {
    ipc_free(ipc, c);
    return -ENOMEM;
  }
  c->ipc = ipc;
  c->data = conn_data;
  c->refs = 1;
  c->id = ++ipc->next_id;
  c->next = ipc->conns;
  if (ipc->conns) ipc->conns->prev = c;
  ipc->conns = c;
  ipc->nconns++;
  ipc->nconns_mem++;
  *out = c;
  if (ipc->nconns > ipc->max_clients) {
    send_fixed_error(c, 0, "busy", "too many clients");
    conn_close_after_flush(c);
  } else {
    lg(ipc, PD_IPC_LOG_DEBUG, "client %u: connected", c->id);
  }
  return 0;
}

int pd_conn_recv(pd_conn *c, const void *data, size_t len, uint64_t now_ms) {
  (void)now_ms;
  if (c->stopped || c->closing || c->gone) return 0;
  if (pt_jsonl_feed(c->framer, data, len) < 0) {
    conn_close(c, "out of memory");
    return -ENOMEM;
  }
  /* hold the connection: a handler may complete calls that release it */
  c->refs++;
  const char *line;
  size_t n;
  int r;
  while (!c->stopped && (r = pt_jsonl_next(c->framer, &line, &n)) != 0) {
    if (r == PT_JSONL_EOVERSIZE) {
      char e[128];
      snprintf(e, sizeof e, "message exceeds %zu bytes (newline included); closing",
               c->ipc->max_line);
      lg(c->ipc, PD_IPC_LOG_WARN, "client %u: oversize message; closing", c->id);
      send_error(c, 0, "oversize", e);
      conn_close_after_flush(c);
      break;
    }
    handle_line(c, line, n);
  }
  conn_unref(c);
  return 0;
}

void pd_conn_eof(pd_conn *c, uint64_t now_ms) {
  (void)now_ms;
  if (c->eof || c->gone) return;
  size_t pend = pt_jsonl_pending(c->framer);
  if (pend)
    lg(c->ipc, PD_IPC_LOG_INFO, "client %u: hung up in the middle of a message (%zu bytes dropped)",
       c->id, pend);
  else
    lg(c->ipc, PD_IPC_LOG_DEBUG, "client %u: end of input", c->id);
  c->eof = 1;
  /* the driver stopped reading on EOF itself */
  c->stopped = 1;
  maybe_close_eof(c);
}

void pd_conn_sent(pd_conn *c, size_t len, uint64_t now_ms) {
  (void)now_ms;
  c->queued = len > c->queued ? 0 : c->queued - len;
  if (c->flush && c->queued == 0) conn_close(c, NULL);
}

void pd_conn_abort(pd_conn *c, const char *why) { conn_close(c, why); }

void pd_conn_closed(pd_conn *c, uint64_t now_ms) {
  (void)now_ms;
  if (c->gone) return;
  pd_ipc *ipc = c->ipc;
  c->gone = c->closing = c->stopped = 1;
  if (c->prev) c->prev->next = c->next;
  else ipc->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  ipc->nconns--;
  lg(ipc, PD_IPC_LOG_DEBUG, "client %u: closed", c->id);
  conn_unref(c);
  if (ipc->closing_all && ipc->nconns == 0) {
    ipc->closing_all = 0;
    ipc->deadline = PD_IPC_NO_DEADLINE;
    if (ipc->all_closed) ipc->all_closed(ipc->all_closed_ctx);
  }
}

/* ---- the server as a whole ---- */

void pd_ipc_close_all(pd_ipc *ipc, uint64_t now_ms, uint64_t deadline_ms, void (*done)(void *),
                      void *ctx) {
  ipc->all_closed = done;
  ipc->all_closed_ctx = ctx;
  if (ipc->nconns == 0) {
    if (done) done(ctx);
    return;
  }
  ipc->closing_all = 1;
  ipc->deadline = now_ms + deadline_ms;
  for (pd_conn *c = ipc->conns, *n; c; c = n) {
    n = c->next;
    conn_close_after_flush(c);
  }
}

uint64_t pd_ipc_next_deadline(const pd_ipc *ipc) { return ipc->deadline; }

void pd_ipc_tick(pd_ipc *ipc, uint64_t now_ms) {
  if (ipc->deadline == PD_IPC_NO_DEADLINE || now_ms < ipc->deadline) return;
  ipc->deadline = PD_IPC_NO_DEADLINE;
  for (pd_conn *c = ipc->conns; c; c = c->next) conn_close(c, "shutdown deadline");
}
