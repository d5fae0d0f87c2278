/*
 * pt_client.h - client side of the daemon IPC (docs/ipc.md): connects to
 * $POLYTOKEN_HOME/daemon.sock, performs the `hello` handshake, starts the
 * daemon when it is not running, and exchanges one-JSON-object-per-line
 * requests, replies and events.
 *
 * Two usage styles on the same handle:
 *
 *  - Blocking (the CLI): pt_client_call() sends a request and waits (bounded)
 *    for its reply; pt_client_next_event() waits for the next event. Events
 *    that arrive while a call waits are queued for pt_client_next_event()
 *    unless an event callback is installed.
 *
 *  - Non-blocking (the TUI's libuv loop): watch pt_client_fd() for
 *    readability (and for writability while pt_client_wants_write()), call
 *    pt_client_pump() when readable and pt_client_flush() when writable.
 *    pt_client_request() queues a request; its reply is delivered to a
 *    callback from inside pt_client_pump(); events go to the event callback.
 *
 * The socket is always non-blocking; the blocking style waits with poll().
 *
 * jansson ownership, per function:
 *  - `params` passed to pt_client_call / pt_client_request is STOLEN (the
 *    client owns it afterwards, also on error). NULL means {}.
 *  - `*result` from pt_client_call and `*event` from pt_client_next_event are
 *    NEW references: the caller json_decref()s them.
 *  - json_t pointers handed to callbacks are BORROWED: valid only during the
 *    callback; json_incref() them to keep them.
 *  - pt_client_hello_result() returns a BORROWED reference valid until the
 *    next connect/close/del.
 *
 * Threads: a pt_client is not thread-safe; use each handle from one thread.
 * Callbacks run on the thread calling pt_client_pump/call/next_event. A
 * callback may issue new requests and may call pt_client_close(), but must
 * not pt_client_del() the handle.
 *
 * Errors: functions return 0 (or a positive value where documented) or a
 * negative errno-style code; where a pt_client_error is passed, it is filled
 * with a protocol error code (e.g. "not_found", "busy") or a local one
 * ("not_running", "connect_failed", "daemon_start_failed", "disconnected",
 * "timeout", "bad_reply", "oversize", "no_memory", "unsafe_state_root",
 * "unsafe_socket") and a one-line human-readable message.
 */
#ifndef PT_CLIENT_H
#define PT_CLIENT_H

#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>

#define PT_CLIENT_PROTOCOL 1

typedef struct pt_client pt_client;

typedef struct pt_client_error {
  char code[32];
  char message[512];
} pt_client_error;

/* Fills *e (if not NULL) with `code` and a printf-style message, both
 * truncated to fit. For code that reports through a pt_client_error
 * (this library, the feedback fetch). Any thread; touches only *e. */
void pt_client_error_set(pt_client_error *e, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Resolves the state root: $POLYTOKEN_HOME, else
 * ${XDG_STATE_HOME:-$HOME/.local/state}/polytoken. Returns a malloc'd string
 * (caller frees) or NULL if neither HOME nor the other variables are set or
 * on out of memory. Does not create the directory. */
char *pt_client_home(void);

/* Finds the polytokend executable: $POLYTOKEN_DAEMON, else `polytokend` next
 * to /proc/self/exe, else the first executable `polytokend` on PATH.
 * Returns a malloc'd path (caller frees) or NULL if none was found. */
char *pt_client_find_daemon(void);

/* 1 if process `pid` no longer runs (gone, or a zombie not yet reaped by its
 * parent), else 0. Any thread. */
int pt_client_pid_gone(pid_t pid);

/* Creates an unconnected client. home: state root (copied); NULL resolves it
 * with pt_client_home(). client_name: sent in hello ("polytoken-cli",
 * "polytoken-tui"; copied). Returns NULL on out of memory or when the home
 * cannot be resolved. Free with pt_client_del. */
pt_client *pt_client_new(const char *home, const char *client_name);

/* Closes the connection (if any), fails every pending request with
 * "disconnected" WITHOUT calling callbacks, and frees everything. NULL ok. */
void pt_client_del(pt_client *c);

/* The state root this client uses (borrowed, lives as long as c). */
const char *pt_client_home_dir(const pt_client *c);

/* Connects and says hello (blocking, bounded by timeout_ms for the handshake).
 * When the socket is missing or refuses connections and autostart is set,
 * spawns polytokend detached (setsid, stdin /dev/null, stdout/stderr appended
 * to $POLYTOKEN_HOME/logs/daemon.stderr) and waits for its socket for up to
 * $POLYTOKEN_START_TIMEOUT_MS (default 10000) ms.
 * Before anything else the state root is checked (pt_home_prepare; with
 * autostart it is created 0700 when missing) and, before a byte is sent,
 * the socket: a file of ours, accepted by a process of our user
 * (SO_PEERCRED; docs/ipc.md).
 * Returns 0, or -ENOENT/-ECONNREFUSED (err "not_running") when not running and
 * autostart is 0, -EPERM ("unsafe_state_root": a root or a directory above
 * it that another user can write to or replace; "unsafe_socket": the
 * socket file or its listener belongs to another user), or another
 * negative code with err filled ("daemon_start_failed" names the log file;
 * "protocol_mismatch"; ...).
 * Reconnecting an already connected client closes the old connection first. */
int pt_client_connect(pt_client *c, int autostart, int timeout_ms, pt_client_error *err);

/* 1 while connected (after a successful hello), else 0. */
int pt_client_connected(const pt_client *c);

/* The hello result object of the current connection (BORROWED), or NULL. */
json_t *pt_client_hello_result(const pt_client *c);

/* Closes the connection. Pending async requests get their callback with err
 * "disconnected" (the closed callback is NOT called for an explicit close).
 * Safe to call when not connected. */
void pt_client_close(pt_client *c);

/* ---- blocking style ---- */

/* Sends `method` with `params` (STOLEN; NULL = {}) and waits up to timeout_ms
 * (<0: forever) for the reply. On success returns 0 and *result (NEW ref,
 * may be NULL if result is not wanted). A daemon error reply returns -EPROTO
 * with err->code set to the daemon's code. Connection loss: -ECONNRESET
 * ("disconnected"); timeout: -ETIMEDOUT. */
int pt_client_call(pt_client *c, const char *method, json_t *params, int timeout_ms,
                   json_t **result, pt_client_error *err);

/* Waits up to timeout_ms (<0: forever) for the next event and returns 0 with
 * *event = the whole event object {"event":..,"params":..} (NEW ref).
 * -ETIMEDOUT if none arrived, -ECONNRESET if the connection closed. */
int pt_client_next_event(pt_client *c, int timeout_ms, json_t **event, pt_client_error *err);

/* ---- non-blocking style ---- */

/* Reply callback: exactly one of result (BORROWED, the "result" member) or
 * err is non-NULL. Called from pt_client_pump/flush/close. */
typedef void (*pt_client_reply_cb)(pt_client *c, json_t *result, const pt_client_error *err,
                                   void *ud);
/* Event callback: name (BORROWED), params (BORROWED; {} if absent). */
typedef void (*pt_client_event_cb)(pt_client *c, const char *name, json_t *params, void *ud);
/* Connection lost (EOF, read/write error, oversize or garbage from the daemon):
 * called once from pt_client_pump/flush after pending callbacks failed. */
typedef void (*pt_client_closed_cb)(pt_client *c, const pt_client_error *err, void *ud);

/* Installs callbacks (NULL to remove). With an event callback, events are
 * never queued for pt_client_next_event. */
void pt_client_set_callbacks(pt_client *c, pt_client_event_cb on_event,
                             pt_client_closed_cb on_closed, void *ud);

/* The socket fd to watch, or -1 when not connected. Owned by the client. */
int pt_client_fd(const pt_client *c);

/* Queues a request (params STOLEN; NULL = {}) and tries to write it at once.
 * cb (may be NULL) receives the reply later. Returns the request id (> 0),
 * -ENOTCONN when not connected, -ENOMEM, or PT_JSONL_EOVERSIZE (-90) if the
 * request line would exceed the protocol limit. */
int pt_client_request(pt_client *c, const char *method, json_t *params,
                      pt_client_reply_cb cb, void *ud);

/* Reads everything available without blocking and dispatches replies and
 * events. Returns 0 while the connection is up, or a negative code after the
 * connection was lost (then the client is closed, pending callbacks were
 * called with "disconnected" and the closed callback ran). */
int pt_client_pump(pt_client *c);

/* Writes queued bytes without blocking. Returns 0 when nothing remains, 1
 * when bytes remain (watch for writability), negative after connection loss
 * (handled as in pt_client_pump). */
int pt_client_flush(pt_client *c);

/* 1 when queued bytes wait for writability, else 0. */
int pt_client_wants_write(const pt_client *c);

/* Writes a protocol identifier (e.g. a turn_id, which the daemon may send as
 * a JSON integer or string) into buf as text, so callers can compare ids
 * whatever their JSON type. Returns 0, or -EINVAL (buf = "") when v is
 * neither a string nor an integer. v is BORROWED. */
int pt_client_id_str(const json_t *v, char *buf, size_t n);

/* ---- testing and special use ---- */

/* Adopts an already connected stream fd (e.g. one end of a socketpair) as the
 * connection, skipping hello. The client owns fd afterwards. Returns 0. */
int pt_client_adopt_fd(pt_client *c, int fd);

/* Processes bytes as if read from the socket (line framing, dispatch).
 * Returns 0, or negative after the connection was declared lost (oversize
 * line or a line that is not a JSON object). */
int pt_client_feed(pt_client *c, const void *data, size_t len);

#endif
