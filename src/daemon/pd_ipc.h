/*
 * pd_ipc.h - the daemon's IPC server: Unix socket, connections, JSONL
 * framing (common/pt_jsonl.h), the hello handshake, request dispatch through
 * a method registry, replies and events. Protocol: docs/ipc.md.
 *
 * Threads: everything here runs on the loop thread.
 * Errors: functions return 0 or a negative errno / uv error code.
 */
#ifndef PD_IPC_H
#define PD_IPC_H

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

#define PD_IPC_PROTOCOL 1
/* Default cap of bytes queued for one client that does not read (replies
 * and events); over it the client is disconnected. Override with
 * POLYTOKEN_IPC_OUTBUF_MAX (bytes, for tests). */
#define PD_IPC_OUTBUF_MAX ((size_t)8 << 20)

typedef struct pd_conn pd_conn;
typedef struct pd_call pd_call;

/* ---- method registry (seam 3) ----
 *
 * A handler receives the call, the request's params (an object; borrowed:
 * json_incref it to keep it past the handler's return) and its ctx. It must
 * complete the call exactly once with pd_call_reply or pd_call_error,
 * either before returning (synchronous) or later from any loop callback
 * (asynchronous: keep the pd_call pointer; it stays valid until completed
 * even if the client disconnects meanwhile, in which case the reply is
 * dropped). A connection that half-closed is kept open until its pending
 * calls are completed.
 *
 * Register before or after pd_ipc_listen (loop thread). A name registered
 * twice replaces the earlier handler. Up to 64 methods. Returns 0,
 * -EINVAL (bad name) or -ENOSPC (full).
 * Methods not registered answer `unknown_method`, except the ones reserved
 * for the profiling build ("profile.*", "artifacts.*"), which answer
 * `not_profiling` until someone registers them. */
typedef void (*pd_method_fn)(pd_call *call, json_t *params, void *ctx);
int pd_ipc_register_method(const char *name, pd_method_fn fn, void *ctx);

/* Completes a call with {"id":N,"result":result}. Steals result (NULL means
 * {}). Frees the call. */
void pd_call_reply(pd_call *call, json_t *result);
/* Completes a call with {"id":N,"error":{"code":code,"message":...}}.
 * code: one of the protocol's codes (docs/ipc.md). Frees the call. */
void pd_call_error(pd_call *call, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The connection the call came from (NULL if it has closed), and the
 * request's method name (valid until the call completes). */
pd_conn *pd_call_conn(pd_call *call);
const char *pd_call_method(const pd_call *call);

/* ---- server ---- */

/* Binds the socket at path (mode 0600, a stale socket file is replaced:
 * the caller holds the daemon lock, so no live daemon owns it) and starts
 * accepting. Returns 0 or a negative error (-ENAMETOOLONG if the path does
 * not fit in sockaddr_un). */
int pd_ipc_listen(uv_loop_t *loop, const char *path);
/* Stops accepting and removes the socket file (shutdown step 1). */
void pd_ipc_stop_accepting(void);
/* From now on requests other than daemon.status get `shutting_down`. */
void pd_ipc_set_shutting_down(void);
/* Closes every connection after flushing what is queued for it (at most
 * `deadline_ms`, then closes anyway); calls done(ctx) when all are closed
 * (from a later callback, or right away if there are none). */
void pd_ipc_close_all(int deadline_ms, void (*done)(void *), void *ctx);
/* Releases what the server still holds (after pd_ipc_close_all finished;
 * final teardown before the loop's last run). */
void pd_ipc_fini(void);
/* Number of open client connections. */
size_t pd_ipc_client_count(void);

/* ---- connections ---- */

/* Sends an event {"event":name,"params":params} to c (steals params). */
void pd_conn_event(pd_conn *c, const char *name, json_t *params);
/* Sends the event to every connection attached to `session`, and to `also`
 * (if not NULL and not already attached). Steals params. */
void pd_ipc_broadcast(const char *session, pd_conn *also, const char *name, json_t *params);
/* Attaches c to a session's events (replaces an earlier attach). */
void pd_conn_attach(pd_conn *c, const char *session);
/* Detaches every connection from a (deleted) session. */
void pd_ipc_detach_all(const char *session);
/* Reference counting for holders that outlive a callback (a running turn
 * keeps its sender): a held connection that half-closed stays open to
 * receive events until released. pd_conn_hold returns c. */
pd_conn *pd_conn_hold(pd_conn *c);
void pd_conn_release(pd_conn *c);
/* A small number identifying the connection in logs. */
unsigned pd_conn_id(const pd_conn *c);

#endif
