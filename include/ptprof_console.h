/*
 * ptprof_console.h - task instrumentation for a C event loop, and a
 * tokio-console compatible gRPC server (console-api 0.9 / tokio-console
 * 0.1.14) that shows those tasks live.
 *
 * Two halves:
 *
 * 1. Instrumentation (ptcon_task_*). Called by the application's loop
 *    threads around each unit of work. It never blocks, never takes a lock
 *    and never allocates per event. A task occupies one slot of a
 *    process-wide pre-allocated table (PTCON_MAX_LIVE_TASKS); per-event data
 *    (poll begin/end, wake, waker clone/drop) goes into a per-thread
 *    single-producer ring that the server thread drains. A full ring drops
 *    the event and counts it (reported to clients as `dropped_events`).
 *    Spawn and end are recorded in the slot itself, so a task always ends,
 *    even when events were dropped (no ghost tasks).
 *    While no server runs, per-event calls cost one relaxed atomic load and
 *    return; spawn and end still maintain the slot table so tasks spawned
 *    before the server starts show up once it does.
 *
 * 2. The server (ptcon_server_*). Runs on its own thread: h2c (HTTP/2 with
 *    prior knowledge) via nghttp2, gRPC framing, the Instrument service
 *    (WatchUpdates, WatchState, WatchTaskDetails, Pause, Resume). At most one
 *    server per process (it is the only consumer of the rings). By default
 *    it serves only its own user: a connection whose other end belongs to
 *    another uid (the kernel's socket table says) is closed before any byte
 *    is sent. New connections, new watch calls, and each connection's calls
 *    and bytes are rate-limited (beyond a rate they wait; nothing a client
 *    asked for is refused for it), so no client, however it loops, keeps
 *    the server thread busy.
 *
 * Errors: functions returning int return 0 or a negative errno-style code;
 * ptcon_strerror() describes them.
 */
#ifndef PTPROF_CONSOLE_H
#define PTPROF_CONSOLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libptprof.so (the library is built with hidden visibility). */
#if defined(__GNUC__)
#define PTCON_API __attribute__((visibility("default")))
#else
#define PTCON_API
#endif

/* ---- instrumentation ---------------------------------------------------- */

/* Capacity of the live-task table. Spawning beyond it returns 0 (the task is
 * simply not instrumented) and counts a dropped event. */
#define PTCON_MAX_LIVE_TASKS 32768u
/* Extra fields kept per task; more are ignored. */
#define PTCON_MAX_FIELDS 4u
/* Bytes kept of a task name and of a string field value (incl. NUL); longer
 * values are truncated. */
#define PTCON_NAME_MAX 64u
#define PTCON_FIELD_STR_MAX 40u

typedef enum ptcon_field_type {
  PTCON_FIELD_STR = 0,
  PTCON_FIELD_U64,
  PTCON_FIELD_I64,
  PTCON_FIELD_BOOL,
} ptcon_field_type;

/* An extra task field, shown in the client's Fields column.
 * `name` must have static storage duration (a string literal): only the
 * pointer is kept. A string value is copied (truncated to
 * PTCON_FIELD_STR_MAX - 1 bytes). */
typedef struct ptcon_field {
  const char *name;
  ptcon_field_type type;
  union {
    const char *str;
    uint64_t u64;
    int64_t i64;
    int b;
  } v;
} ptcon_field;

/* Registers a new task and returns its nonzero id, or 0 when the task table
 * is full (then every other call with id 0 is a no-op in pt_task.h).
 * name: copied (truncated to PTCON_NAME_MAX - 1). kind: "task", "local",
 * "blocking" or "block_on"; NULL = "task". kind and file must be string
 * literals (static storage): only the pointers are kept. fields may be NULL
 * when nfields == 0. Any thread; lock-free; no allocation. */
PTCON_API uint64_t ptcon_task_spawn(const char *name, const char *kind, const char *file,
                                    uint32_t line, const ptcon_field *fields, size_t nfields);

/* Around each run of the task's callback; on the thread that runs it. Polls
 * of different tasks must not nest on one thread (a libuv loop never does);
 * a nested poll of the same task counts once (outermost). While a sampler
 * runs, CPU samples taken between begin and end carry the task's labels
 * (include/ptprof.h "labels"); a nested poll's end restores the outer task. */
PTCON_API void ptcon_task_poll_begin(uint64_t id);
PTCON_API void ptcon_task_poll_end(uint64_t id);
/* The task was woken. Any thread. A wake issued from inside the task's own
 * poll (same thread, between begin and end) counts as a self-wake. */
PTCON_API void ptcon_task_wake(uint64_t id);
/* A wake source was armed (registered fd, pending timer) / disarmed. The
 * client shows clones - drops as the number of live wakers. Any thread. */
PTCON_API void ptcon_task_waker_clone(uint64_t id);
PTCON_API void ptcon_task_waker_drop(uint64_t id);
/* The task ended; the id must not be used again. Any thread. While a
 * sampler runs it also hands the task's name to the sampler (one mutex).  Never lost:
 * recorded in the task's slot (an END event follows only as a hint for
 * prompt clean-up; if the ring drops it, the server's slot scan ends the
 * task anyway). */
PTCON_API void ptcon_task_end(uint64_t id);

/* Counters of the instrumentation itself (for tests and benchmarks).
 * Any thread; values are approximate while events are being recorded. */
typedef struct ptcon_instrument_stats {
  uint64_t live_tasks;       /* slots in use (live or ended, not yet reaped) */
  uint64_t dropped_events;   /* ring-full drops + failed spawns, since start */
  uint64_t threads;          /* rings registered (one per recording thread) */
} ptcon_instrument_stats;
PTCON_API void ptcon_instrument_get_stats(ptcon_instrument_stats *out);

/* ---- bind addresses ----------------------------------------------------- */

/* Parses and validates a bind string: "HOST:PORT" with HOST one of an IPv4
 * address, "[IPv6]" or "localhost" ("localhost" means 127.0.0.1). Unless
 * allow_non_loopback is nonzero only loopback addresses are accepted
 * (127.0.0.0/8, ::1, localhost). Port 0 asks the kernel for a free port.
 * Returns 0 and fills *ss and *sslen, -EINVAL for a malformed string, -EPERM for
 * a non-loopback address without allow_non_loopback. Pure; any thread. */
PTCON_API int ptcon_bind_parse(const char *bind, int allow_non_loopback,
                               struct sockaddr_storage *ss, socklen_t *sslen);

/* ---- server ------------------------------------------------------------- */

typedef struct ptcon_server ptcon_server;

/* Log levels passed to the log callback (the same values as PTPROF_LOG_*
 * in ptprof.h). ERROR: there is no console (ptcon_server_new failed);
 * WARN: a setting was refused, the server shed load (accept failures,
 * evictions, calls ended over the budget, connections or watch calls over
 * their rate), or refused a connection of another user; INFO: the rest
 * (listening, connections closed, rate-limit summaries, which keep their
 * cause's level). */
#define PTCON_LOG_ERROR 0
#define PTCON_LOG_WARN  1
#define PTCON_LOG_INFO  2

/* The log callback; the same shape as ptprof_log_fn (ptprof.h), so one
 * function can serve both. level: PTCON_LOG_*; msg: one complete line, no
 * trailing newline, valid only during the call; user_data: the options'
 * log_user_data. Called on the server thread or in ptcon_server_new's
 * caller; must not call back into ptcon_server_ functions. */
typedef void (*ptcon_log_fn)(int level, const char *msg, void *user_data);

/* Options of ptcon_server_new. Fill with ptcon_server_options_init first:
 * every field is then 0 or NULL, which means the default stated beside it
 * (bind has none: it must be set). */
typedef struct ptcon_server_options {
  const char *bind;              /* required, see ptcon_bind_parse */
  int allow_non_loopback;        /* 0 = loopback only */
  uint32_t retention_ms;         /* completed tasks kept this long; 0 = 60000 */
  uint32_t publish_interval_ms;  /* Update/State tick; 0 = 1000 */
  uint32_t max_connections;      /* a newcomer beyond this evicts the connection
                                    idle longest; 0 = 128 */
  uint32_t max_retained;         /* hard cap on completed tasks kept; 0 = 8192
                                    (oldest evicted first) */
  size_t max_message_bytes;      /* Update split threshold; 0 = 4 MiB - 64 KiB */
  size_t max_queued_bytes;       /* per connection, unsent responses; beyond it
                                    the connection is closed; 0 = 32 MiB */
  size_t max_total_queued_bytes; /* all connections together; beyond it the
                                    stream with the most unsent bytes ends with
                                    RESOURCE_EXHAUSTED; 0 = 64 MiB */
  uint32_t stall_timeout_ms;     /* a connection with queued responses that
                                    reads none of them for this long is
                                    closed; 0 = 30000 */
  uint32_t idle_timeout_ms;      /* a connection with no open call for this
                                    long is closed; 0 = 30000 */
  int allow_other_users;         /* 0 = serve only connections whose other end
                                    is a socket of this process's effective
                                    uid (looked up in the kernel's socket
                                    table right after accept; another uid, or
                                    one that cannot be told, is closed before
                                    any byte is sent: remote peers too);
                                    nonzero = serve any user */
  uint32_t accept_rate_per_s;    /* new connections accepted a second; beyond
                                    it they wait in the listen backlog; 0 = 128 */
  uint32_t accept_burst;         /* ... and at once; 0 = 128 */
  uint32_t watch_rate_per_s;     /* new watch calls (WatchUpdates, WatchState,
                                    WatchTaskDetails) served a second; beyond
                                    it they wait their turn, one call per
                                    connection in turn; 0 = 16 */
  uint32_t watch_burst;          /* ... and at once; 0 = 64 */
  ptcon_log_fn log;              /* NULL = messages are dropped */
  void *log_user_data;           /* passed to log as is */
} ptcon_server_options;

/* Zero-fills *opt: every field 0 or NULL, which ptcon_server_new reads as
 * its default (bind NULL must still be set). Any thread; cannot fail. */
PTCON_API void ptcon_server_options_init(ptcon_server_options *opt);

/* Binds, listens and starts the server thread. On success *out owns the
 * server (free with ptcon_server_del). Errors: -EINVAL/-EPERM from the bind
 * string, -EADDRINUSE when the port is taken (the caller should log one line
 * and run on without a console), -EBUSY when a server already runs in this
 * process, -ENOMEM, or another socket/thread error. Call from any thread
 * but not concurrently with another ptcon_server_new/_del. */
PTCON_API int ptcon_server_new(ptcon_server **out, const ptcon_server_options *opt);

/* The port actually bound (useful with port 0). */
PTCON_API uint16_t ptcon_server_port(const ptcon_server *srv);

/* Stops the thread, closes every connection (their calls end abruptly) and
 * frees everything. NULL is a no-op. Not from the server thread (log cb). */
PTCON_API void ptcon_server_del(ptcon_server *srv);

/* Human-readable text for an error code returned by this module. */
PTCON_API const char *ptcon_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
