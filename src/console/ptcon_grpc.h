/*
 * ptcon_grpc.h - the console's gRPC layer without I/O: HTTP/2 sessions
 * (nghttp2 driven by mem_recv/mem_send), gRPC streams and their response
 * queues, the Instrument service, the publishing tick, the shared memory
 * budget and the connection time-outs. It is fed bytes in, hands bytes out
 * and is told `now` (CLOCK_MONOTONIC ns); it never reads a clock, opens a
 * socket or logs. The epoll loop (ptcon_server.c) and the unit tests and the
 * fuzz target (tests/console) drive it the same way.
 *
 * Threads: one. Everything here, and the aggregator it is given, is used by
 * the thread that drives it (the server thread, or a test).
 *
 * Load (issue 21): per connection, calls and bytes received are limited to
 * conn_calls_per_s and conn_bytes_per_s (with bursts): beyond, input is
 * held back and the caller stops reading (ptcon_gconn_wants_input). New
 * watch calls (WatchUpdates, WatchState,
 * WatchTaskDetails) are served at most watch_rate_per_s a second (burst
 * watch_burst); beyond that a call waits, costing nothing, until
 * ptcon_grpc_timer serves it (pending calls one per connection in turn);
 * the initial state of WatchUpdates is encoded at most once per publish
 * interval and shared by reference between the streams that start while
 * it is current (ptcon_initstate.h).
 *
 * Bounds (all outside input): a request body up to PTCON_MAX_REQUEST_BYTES
 * + 5 bytes (beyond: RESOURCE_EXHAUSTED); per connection at most
 * max_queued_bytes of unsent responses (beyond: the connection is to be
 * closed); across all connections at most max_total_queued_bytes (beyond:
 * the stream with the most queued bytes, the slowest consumer, loses its
 * queue and ends with RESOURCE_EXHAUSTED); a stream whose previous messages
 * are still queued gets nothing new at a tick (deltas coalesce); 64
 * concurrent streams per connection, 16 KiB of request headers.
 * Time-outs (ptcon_grpc_timer): no HTTP/2 preface within preface_timeout;
 * no open stream for idle_timeout; queued responses that make no progress
 * for stall_timeout.
 */
#ifndef PTCON_GRPC_H
#define PTCON_GRPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "console/ptcon_agg.h"
#include "ptprof_console.h"

typedef struct ptcon_grpc ptcon_grpc;
typedef struct ptcon_gconn ptcon_gconn;

typedef struct ptcon_grpc_limits {
  uint64_t publish_interval_ns;     /* Update/State tick; 0 = 1 s */
  size_t max_message_bytes;         /* Update split threshold; 0 = 4 MiB - 64 KiB */
  size_t max_queued_bytes;          /* per connection; 0 = 32 MiB */
  size_t max_total_queued_bytes;    /* all connections; 0 = 64 MiB */
  uint64_t stall_timeout_ns;        /* 0 = 30 s */
  uint64_t idle_timeout_ns;         /* no open stream; 0 = 30 s */
  uint64_t preface_timeout_ns;      /* 0 = 10 s */
  uint32_t watch_rate_per_s;        /* new watch calls a second; 0 = 16 */
  uint32_t watch_burst;             /* ... and at once; 0 = 64 */
  uint32_t conn_calls_per_s;        /* calls (streams) a second per connection; 0 = 8 */
  uint32_t conn_calls_burst;        /* ... and at once; 0 = 8 */
  uint32_t conn_bytes_per_s;        /* bytes read a second per connection; 0 = 1024 */
  uint32_t conn_bytes_burst;        /* ... and at once; 0 = 16 KiB */
} ptcon_grpc_limits;

/* Creates the service over agg (borrowed: it must outlive the service).
 * limits may be NULL (all defaults). 0 or -ENOMEM. */
int ptcon_grpc_new(ptcon_grpc **out, ptcon_agg *agg, const ptcon_grpc_limits *limits,
                   uint64_t now);
/* Frees the service and every connection still open. NULL ok. */
void ptcon_grpc_del(ptcon_grpc *g);

/* Runs what is due at `now`: pending watch calls as the rate allows, the
 * publishing tick (collect, seal, one message
 * per watching stream) while any stream watches, the connection time-outs,
 * retention house-keeping while nobody watches, giving memory back after a
 * burst. Cheap when nothing is due. */
void ptcon_grpc_timer(ptcon_grpc *g, uint64_t now);
/* The next time ptcon_grpc_timer has something to do (UINT64_MAX: nothing
 * until input arrives). */
uint64_t ptcon_grpc_next_due(const ptcon_grpc *g);
/* Drains the aggregator's rings now (a ring crossed its fill mark). While
 * events keep coming this schedules the next drain (1 ms later when a ring
 * fills fast, else 10 ms; in next_due); none once a drain finds nothing. */
void ptcon_grpc_drain(ptcon_grpc *g, uint64_t now);

/* Number of connections, of streams that receive periodic messages, and of
 * watch calls waiting for their turn. */
uint32_t ptcon_grpc_nconns(const ptcon_grpc *g);
uint32_t ptcon_grpc_nwatching(const ptcon_grpc *g);
uint32_t ptcon_grpc_npending(const ptcon_grpc *g);
/* Bytes queued across all connections, and the most there ever were. */
size_t ptcon_grpc_queued(const ptcon_grpc *g);
/* Counters for tests and the summary log. */
typedef struct ptcon_grpc_stats {
  uint64_t streams_dropped;   /* ended by the total budget */
  uint64_t watches_waited;    /* new watch calls that waited for the rate */
  uint64_t calls_throttled;   /* calls that waited for their connection's call rate */
  uint64_t input_held;        /* reads held back (partly) by a connection's rates */
  uint64_t initial_builds;    /* shared initial states encoded */
  uint64_t trims;             /* malloc_trim calls */
  size_t peak_queued;
} ptcon_grpc_stats;
void ptcon_grpc_get_stats(const ptcon_grpc *g, ptcon_grpc_stats *out);

/* The connection to evict to make room for a newcomer: the one without an
 * open stream that has been so the longest, else the one whose client sent
 * nothing for the longest. NULL when there is no connection. */
ptcon_gconn *ptcon_grpc_evict_candidate(const ptcon_grpc *g);

/* A new HTTP/2 server session (our SETTINGS are queued at once). ud is the
 * caller's (ptcon_gconn_ud). 0 or -ENOMEM. */
int ptcon_gconn_new(ptcon_grpc *g, void *ud, uint64_t now, ptcon_gconn **out);
/* Frees the connection and its streams. NULL ok. */
void ptcon_gconn_del(ptcon_gconn *c);
void *ptcon_gconn_ud(const ptcon_gconn *c);

/* Feeds bytes the client sent. 0, or -EPROTO when the connection is to be
 * closed (ptcon_gconn_closing says why). Any byte sequence is safe. Bytes
 * beyond the connection's input rates (calls and bytes a second) are held
 * back, up to 64 KiB, and fed on by ptcon_grpc_timer when their tokens
 * come: while ptcon_gconn_wants_input is 0 the caller reads no more from
 * the client (the kernel's buffers and TCP flow control hold the rest). */
int ptcon_gconn_recv(ptcon_gconn *c, const uint8_t *in, size_t n, uint64_t now);
/* 1 when the connection takes input now, 0 while it holds some back. */
int ptcon_gconn_wants_input(const ptcon_gconn *c);
/* The next bytes to send: returns their length and sets *out (valid until
 * the next call on this connection), 0 when there is nothing to send now,
 * or -EPROTO when the connection is to be closed. */
ssize_t ptcon_gconn_send(ptcon_gconn *c, const uint8_t **out, uint64_t now);
/* NULL while the connection should stay open; ptcon_gconn_ended when the
 * HTTP/2 session has finished normally (close once the bytes handed out are
 * sent; nothing to log); otherwise why it is to be closed now (a static
 * string naming the cause: it is also the log key). */
extern const char ptcon_gconn_ended[];
const char *ptcon_gconn_closing(const ptcon_gconn *c);
/* Marks the connection to be closed for `why` (static string). */
void ptcon_gconn_kill(ptcon_gconn *c, const char *why);

#endif
