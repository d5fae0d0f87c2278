/*
 * ipc_harness.h - a driver of the IPC core (src/daemon/pd_ipc.h) for unit
 * tests: it records what the core asks for (bytes sent, stop reading,
 * close) per connection, and feeds it input and made-up moments. Used by
 * test_ipc.c and test_ipc_alloc.c. Not a test itself.
 */
#ifndef IPC_HARNESS_H
#define IPC_HARNESS_H

#include "daemon/pd_ipc.h"

#include <stddef.h>

typedef struct th_conn {
  pd_conn *c;
  char *out;     /* everything sent, NUL-terminated (grows) */
  size_t outlen, outcap;
  size_t taken;  /* th_take's read position */
  size_t unsent; /* sent by the core, not yet reported written */
  int stop_calls, close_calls;
  int send_error; /* returned by the send callback when non-zero */
} th_conn;

typedef struct th_log {
  char text[16384]; /* "LEVEL msg\n" lines */
  size_t len;
} th_log;

/* The harness's callbacks (conn_data is the th_conn). */
extern const pd_ipc_callbacks th_callbacks;
/* Sets pid 4242 (if o->pid is 0) and, if log is not NULL, logging into
 * *log. */
void th_options(pd_ipc_options *o, th_log *log);
/* Creates a core with the harness callbacks; o may be NULL (defaults);
 * th_options is applied. Aborts the test on failure. */
pd_ipc *th_core(pd_ipc_options *o, th_log *log);
/* Opens a connection at `now`; returns pd_ipc_conn_open's result. */
int th_open(pd_ipc *ipc, th_conn *tc, uint64_t now);
/* Feeds a string (without its NUL) at `now`. */
int th_feed(th_conn *tc, const char *s, uint64_t now);
/* Reports every unsent byte written, at `now`. */
void th_flush(th_conn *tc, uint64_t now);
/* The output since the previous th_take (NUL-terminated, borrowed until the
 * next call on tc). */
const char *th_take(th_conn *tc);
/* Frees what the harness holds for tc (not the core's connection). */
void th_conn_free(th_conn *tc);

/* The hello reply the core sends for id with pid 4242. */
const char *th_hello_reply(int id);

#endif
