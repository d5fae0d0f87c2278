/*
 * pd_ipc.h - the daemon's IPC protocol core, without I/O (docs/ipc.md):
 * per-connection JSONL framing (common/pt_jsonl.h), the hello handshake,
 * the request envelope, dispatch through a method registry, replies and
 * events, the output cap, the connection limit and the shutdown flush
 * deadline.
 *
 * Sans-I/O, in the nghttp2 style: a pd_ipc handle owns the protocol state
 * of every connection and does no I/O of its own. Its driver (the libuv one
 * is pd_ipc_uv.h; the unit tests and the fuzz target drive it directly)
 *   - feeds it what happens: a connection opened (pd_ipc_conn_open), bytes
 *     read (pd_conn_recv), the peer's end of input (pd_conn_eof), bytes
 *     written (pd_conn_sent), a transport error (pd_conn_abort), the
 *     transport closed (pd_conn_closed), and the time
 *     (pd_ipc_tick; every function that needs "now" takes it, in
 *     milliseconds of any monotonic clock, never decreasing);
 *   - gets back through its callbacks (pd_ipc_callbacks) the bytes to
 *     write, "stop reading" and "close this connection".
 * The core reads no clock, opens no socket and calls no libuv function, so
 * every behaviour is tested on made-up moments with exact bytes
 * (tests/daemon/test_ipc.c) and fuzzed without a daemon
 * (tests/daemon/fuzz_ipc.c).
 *
 * Connection lifetime: a pd_conn is referenced by the core while its
 * transport is open (until pd_conn_closed), by each pending pd_call and by
 * each holder (pd_conn_hold: a running turn it started). The core asks for
 * the close (the `close` callback) when the peer must go: a protocol
 * violation, the output cap, a transport error, after EOF once nothing
 * holds it and its output is written, at the shutdown deadline. The memory
 * is freed when the last reference goes, so a call may be completed after
 * its client left (the reply is then dropped).
 *
 * Threads: one thread (the daemon's loop thread); no function may be called
 * from inside a callback of the same handle unless its comment says so.
 * Errors: functions return 0 or a negative errno.
 */
#ifndef PD_IPC_H
#define PD_IPC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define PD_IPC_PROTOCOL 1
/* Default cap of bytes queued for one client that does not read (replies
 * and events); over it the client is disconnected. */
#define PD_IPC_OUTBUF_MAX ((size_t)8 << 20)
/* Default connection limit; the next one gets `busy` and is closed. */
#define PD_IPC_MAX_CLIENTS 1024
/* pd_ipc_next_deadline when nothing is due. */
#define PD_IPC_NO_DEADLINE UINT64_MAX

/* Log levels of pd_ipc_options.log (the library's scale, plus debug). */
#define PD_IPC_LOG_ERROR 0
#define PD_IPC_LOG_WARN 1
#define PD_IPC_LOG_INFO 2
#define PD_IPC_LOG_DEBUG 3

typedef struct pd_ipc pd_ipc;
typedef struct pd_conn pd_conn;
typedef struct pd_call pd_call;

/* The driver's side. `conn_data` is what the driver passed to
 * pd_ipc_conn_open. Each callback is called only for a connection whose
 * transport is open (never after `close` was called for it, never after
 * pd_conn_closed), may be called from inside any pd_ipc / pd_conn / pd_call
 * function (including pd_ipc_conn_open, before it returns), and must not
 * call back into the core. */
typedef struct pd_ipc_callbacks {
  /* Write `len` bytes (one or more whole '\n'-terminated lines) to the
   * peer, after everything sent before. The driver copies or queues them
   * before returning, and reports them with pd_conn_sent once written (or
   * dropped because the transport failed or closed). Returns 0, or a
   * negative errno: the core then asks to close the connection (nothing of
   * these bytes was taken). */
  int (*send)(pd_conn *c, const char *data, size_t len, void *conn_data);
  /* Stop reading from the peer: the core takes no more input on c and will
   * ask to close it once its output is written. */
  void (*stop_reading)(pd_conn *c, void *conn_data);
  /* Close c's transport now: stop reading, drop what is not written, and
   * call pd_conn_closed(c) once the transport is gone (later, from the
   * driver's own callback). Called once per connection. */
  void (*close)(pd_conn *c, void *conn_data);
} pd_ipc_callbacks;

/* The core's allocator (like nghttp2_mem), for its own memory (handle,
 * connections, calls, encoded lines); jansson's and the framer's
 * allocations are not covered (json_set_alloc_funcs is process-wide).
 * Tests hand in one that fails on purpose (tests/daemon/test_ipc_alloc.c).
 * malloc(size, user) returns NULL when out of memory; free(NULL) is
 * allowed. */
typedef struct pd_ipc_mem {
  void *(*malloc)(size_t size, void *user);
  void (*free)(void *ptr, void *user);
  void *user;
} pd_ipc_mem;

/* Options: pd_ipc_options_init zero-fills; every 0/NULL means the default
 * written beside it. */
typedef struct pd_ipc_options {
  size_t outbuf_max;  /* 0: PD_IPC_OUTBUF_MAX bytes queued per client */
  size_t max_clients; /* 0: PD_IPC_MAX_CLIENTS */
  size_t max_line;    /* 0: PT_JSONL_MAX_LINE, newline included: the cap
                         on a request line (tests make it small). Output
                         lines are capped at PT_JSONL_MAX_LINE, the
                         clients' own limit. */
  long pid;           /* 0: getpid(); the hello reply's "pid" */
  /* One line without newline, valid during the call; called on the
   * core's thread only. NULL: no log. */
  void (*log)(int level, const char *msg, void *log_user_data);
  void *log_user_data;
  const pd_ipc_mem *mem; /* NULL: malloc/free. Copied. */
} pd_ipc_options;

void pd_ipc_options_init(pd_ipc_options *o);

/* Creates a core with its callbacks (copied; send, stop_reading and close
 * are required). Returns 0 and the handle in *out, -EINVAL (a callback
 * missing), or -ENOMEM. */
int pd_ipc_new(pd_ipc **out, const pd_ipc_options *o, const pd_ipc_callbacks *cb);
/* Frees the core. Every connection must have been closed (pd_conn_closed);
 * connections still referenced by unfinished calls or holds keep the
 * memory they need until released, their late replies dropped without a
 * callback or log. NULL is allowed. */
void pd_ipc_del(pd_ipc *ipc);

/* ---- method registry (seam 3) ----
 *
 * A handler receives the call, the request's params (an object; borrowed:
 * json_incref it to keep it past the handler's return) and its ctx. It must
 * complete the call exactly once with pd_call_reply or pd_call_error,
 * either before returning (synchronous) or later (asynchronous: keep the
 * pd_call pointer; it stays valid until completed even if the client
 * disconnects meanwhile, in which case the reply is dropped). A connection
 * that half-closed is kept open until its pending calls are completed.
 *
 * Register any time. A name registered twice replaces the earlier
 * handler. Up to 64 methods. Returns 0, -EINVAL (bad name: empty or 64
 * bytes or more; fn NULL) or -ENOSPC (full). Methods not registered answer
 * `unknown_method`, except the ones reserved for the profiling build
 * ("profile.*", "artifacts.*"), which answer `not_profiling` until someone
 * registers them. */
typedef void (*pd_method_fn)(pd_call *call, json_t *params, void *ctx);
int pd_ipc_register_method(pd_ipc *ipc, const char *name, pd_method_fn fn, void *ctx);

/* Completes a call with {"id":N,"result":result}. Steals result (NULL means
 * {}). Frees the call. When the reply cannot be built or encoded (out of
 * memory, over the line limit), the client gets {"id":N,"error":{"code":
 * "internal",...}} instead, which needs no allocation. */
void pd_call_reply(pd_call *call, json_t *result);
/* Completes a call with {"id":N,"error":{"code":code,"message":...}}.
 * code: one of the protocol's codes (docs/ipc.md). "internal" and
 * "io_error" are also logged (warning). Frees the call. */
void pd_call_error(pd_call *call, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The connection the call came from (NULL once it is closing), and the
 * request's method name (valid until the call completes). */
pd_conn *pd_call_conn(pd_call *call);
const char *pd_call_method(const pd_call *call);

/* ---- connections: what the driver reports ---- */

/* A new connection; conn_data is the driver's pointer handed back to the
 * callbacks. Over the connection limit, the connection is still created,
 * gets {"id":null,"error":{"code":"busy",...}} and is closed once that is
 * written (the callbacks run before this returns: the driver must be ready
 * for them, and must not start reading if stop_reading was called).
 * Returns 0 and the connection in *out, or -ENOMEM (nothing was created;
 * the driver closes its transport). */
int pd_ipc_conn_open(pd_ipc *ipc, void *conn_data, uint64_t now_ms, pd_conn **out);
/* Bytes read from the peer: framed, parsed and dispatched (replies go out
 * through `send` before this returns for synchronous methods). Input after
 * stop_reading or close is ignored. Returns 0, or -ENOMEM when the framer
 * could not buffer the bytes (the connection is being closed then). */
int pd_conn_recv(pd_conn *c, const void *data, size_t len, uint64_t now_ms);
/* The peer shut its side: a partial line is dropped (logged); the
 * connection is closed once nothing holds it and its output is written. */
void pd_conn_eof(pd_conn *c, uint64_t now_ms);
/* `len` bytes handed to `send` are written (or dropped: the transport
 * failed or closed). */
void pd_conn_sent(pd_conn *c, size_t len, uint64_t now_ms);
/* The transport failed (read or write error): the core asks to close it.
 * why: for the log ("client N: closing: <why>"). */
void pd_conn_abort(pd_conn *c, const char *why);
/* The transport is gone (after the `close` callback, or on its own): the
 * core drops its reference; c must not be used by the driver afterwards.
 * May complete a pd_ipc_close_all (its done callback runs in here). */
void pd_conn_closed(pd_conn *c, uint64_t now_ms);

/* ---- connections: what the daemon does with them ---- */

/* Sends an event {"event":name,"params":params} to c (steals params;
 * NULL means {}). Dropped (logged) when out of memory or c is closing. */
void pd_conn_event(pd_conn *c, const char *name, json_t *params);
/* Sends the event to every connection attached to `session` (may be
 * NULL), and to `also` (if not NULL and not already attached). Steals
 * params. */
void pd_ipc_broadcast(pd_ipc *ipc, const char *session, pd_conn *also, const char *name,
                      json_t *params);
/* Attaches c to a session's events (replaces an earlier attach). */
void pd_conn_attach(pd_conn *c, const char *session);
/* Detaches every connection from a (deleted) session. */
void pd_ipc_detach_all(pd_ipc *ipc, const char *session);
/* Reference counting for holders that outlive a callback (a running turn
 * keeps its sender): a held connection that half-closed stays open to
 * receive events until released. pd_conn_hold returns c. */
pd_conn *pd_conn_hold(pd_conn *c);
void pd_conn_release(pd_conn *c);
/* A small number identifying the connection in logs (1, 2, ...). */
unsigned pd_conn_id(const pd_conn *c);

/* ---- the server as a whole ---- */

/* Number of connections whose transport is open (including closing ones). */
size_t pd_ipc_client_count(const pd_ipc *ipc);
/* From now on requests other than daemon.status get `shutting_down`. */
void pd_ipc_set_shutting_down(pd_ipc *ipc);
/* Closes every connection after flushing what is queued for it; at
 * now_ms + deadline_ms (pd_ipc_tick) the ones left are closed anyway.
 * done(ctx) runs once all are closed: at once if there are none, else
 * from the pd_conn_closed of the last one. */
void pd_ipc_close_all(pd_ipc *ipc, uint64_t now_ms, uint64_t deadline_ms, void (*done)(void *),
                      void *ctx);
/* The next moment pd_ipc_tick has something to do, or PD_IPC_NO_DEADLINE. */
uint64_t pd_ipc_next_deadline(const pd_ipc *ipc);
/* Does what is due at now_ms (the shutdown deadline: "client N: closing:
 * shutdown deadline"). */
void pd_ipc_tick(pd_ipc *ipc, uint64_t now_ms);

#endif
