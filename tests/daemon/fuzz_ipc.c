/*
 * fuzz_ipc.c - libFuzzer target for everything the daemon does with the
 * bytes a local client sends: the IPC framer (src/common/pt_jsonl.c), the
 * request envelope and hello (the sans-I/O core src/daemon/pd_ipc.c) and
 * the parameter decoding of every method (src/daemon/pd_methods.c,
 * pd_catalog_ipc.c).
 *
 * No daemon and no socket: the harness is the core's driver. It creates a
 * core (pd_ipc_new) with its own callbacks, registers the real methods on
 * it (pd_methods_register, pd_catalog_install) over a real session store
 * in a private state root, and feeds each input to one connection
 * (pd_ipc_conn_open, pd_conn_recv in chunks, pd_conn_eof). A libuv loop runs
 * what the methods start (turns with the built-in responder, catalog work
 * on the threadpool); the harness runs it until the core asks to close the
 * connection.
 *
 * Input: byte 0 is flags:
 *   bit 0     send a valid hello line first;
 *   bits 1-3  chunk size of the pd_conn_recv calls (all at once, 1, 2, 3,
 *             7, 64, 512, 4096 bytes), so lines are cut anywhere;
 *   bit 4     slow reader: written bytes are reported (pd_conn_sent) only
 *             after the end of input, so the output cap (64 KiB here) is
 *             reached by pipelined requests.
 * The rest is the client's bytes, except that every "@S" becomes the id of
 * a session created at start-up, so that methods on an existing session
 * are reached. daemon.stop only calls the harness's request_stop.
 *
 * Checked: no sanitizer report; every line the core sends is one JSON
 * object with "id" and "result" or "error", or with "event", and output
 * ends at a line boundary; every log line is one line of printable text;
 * the core asks to close the connection once the client has shut its side
 * and what it started has finished (within CLOSE_BOUND_MS of loop time, and
 * never with the loop idle); no connection is left open afterwards. Built
 * and run by tests/daemon/ipc_fuzz_test.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/pt_jsonl.h"
#include "daemon/pd_catalog_ipc.h"
#include "daemon/pd_ipc.h"
#include "daemon/pd_json_alloc.h"
#include "daemon/pd_methods.h"
#include "daemon/pd_sessions.h"
#include "daemon/pd_turn.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLOSE_BOUND_MS 5000 /* loop time a half-closed connection may stay */

static uv_loop_t loop;
static pd_ipc *ipc;
static pd_sessions *sessions;
static pd_methods_ctx methods;
static char session_id[64];

/* ---- the harness as the core's driver ---- */

typedef struct hconn {
  pd_conn *c;
  pt_jsonl *out; /* what the core sent, re-framed for checking */
  size_t unsent; /* handed to send, not yet reported written */
  int stopped, close_asked;
} hconn;

static void check_line(const char *line, size_t len) {
  json_t *o = NULL;
  char err[256];
  if (pt_jsonl_parse(line, len, &o, err, sizeof err) < 0) {
    fprintf(stderr, "core sent a line that is not a JSON object (%s): %.*s\n", err, (int)len, line);
    abort();
  }
  int reply = json_object_get(o, "id") &&
              (json_object_get(o, "result") != NULL) + (json_object_get(o, "error") != NULL) == 1;
  int event = json_is_string(json_object_get(o, "event"));
  if (!reply && !event) {
    fprintf(stderr, "core sent neither a reply nor an event: %.*s\n", (int)len, line);
    abort();
  }
  json_decref(o);
}

static int h_send(pd_conn *c, const char *data, size_t len, void *cd) {
  hconn *h = cd;
  if (h->c && c != h->c) abort();
  if (h->close_asked) { fprintf(stderr, "send after close\n"); abort(); }
  if (len == 0 || data[len - 1] != '\n') { fprintf(stderr, "send of a partial line\n"); abort(); }
  if (pt_jsonl_feed(h->out, data, len) < 0) abort();
  const char *line;
  size_t n;
  int k;
  while ((k = pt_jsonl_next(h->out, &line, &n)) == 1) check_line(line, n);
  if (k == PT_JSONL_EOVERSIZE) { fprintf(stderr, "core sent an oversize line\n"); abort(); }
  h->unsent += len;
  return 0;
}

static void h_stop_reading(pd_conn *c, void *cd) {
  (void)c;
  ((hconn *)cd)->stopped = 1;
}

static void h_close(pd_conn *c, void *cd) {
  (void)c;
  hconn *h = cd;
  if (h->close_asked) { fprintf(stderr, "close asked twice\n"); abort(); }
  h->close_asked = 1;
}

static void h_log(int level, const char *msg, void *ud) {
  (void)level;
  (void)ud;
  for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
    if (*p < 0x20 || *p == 0x7f) {
      fprintf(stderr, "log line with a control character: %s\n", msg);
      abort();
    }
}

static void turn_emit(void *ctx, const char *session, pd_conn *sender, const char *name,
                      json_t *params) {
  pd_ipc_broadcast(ctx, session, sender, name, params);
}

static void request_stop(const char *why) { (void)why; }
static int stopping(void) { return 0; }
static uint64_t uptime_ms(void) { return 1; }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *tmp = getenv("TMPDIR");
  char home[512];
  snprintf(home, sizeof home, "%s/fuzz-ipc-home.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(home)) { perror("mkdtemp"); abort(); }
  pd_json_alloc_install(); /* as polytokend's main does */
  if (uv_loop_init(&loop) != 0) abort();
  if (pd_sessions_open(home, &sessions) < 0) abort();
  static const pd_ipc_callbacks cb = {h_send, h_stop_reading, h_close};
  pd_ipc_options o;
  pd_ipc_options_init(&o);
  o.outbuf_max = 65536;
  o.log = h_log;
  if (pd_ipc_new(&ipc, &o, &cb) < 0) abort();
  methods = (pd_methods_ctx){.loop = &loop, .ipc = ipc, .sessions = sessions,
                             .request_stop = request_stop, .stopping = stopping,
                             .uptime_ms = uptime_ms};
  if (pd_methods_register(&methods) < 0) abort();
  /* the built-in responder, tokens without delay */
  pd_turn_config tc = {turn_emit,       pd_conn_hold, pd_conn_release, NULL, ipc,
                       &pd_resp_builtin, {NULL, 0, PD_RESP_TIMEOUT_MS_DEFAULT}};
  pd_turn_configure(&tc);
  if (pd_catalog_install(&loop, home, ipc, sessions) < 0) abort();
  pd_session *s = NULL;
  if (pd_sessions_create(sessions, "fuzz", &s) < 0) abort();
  snprintf(session_id, sizeof session_id, "%s", s->id);
  return 0;
}

/* The request bytes: optional hello, then the input with "@S" replaced. */
static char *build_request(const uint8_t *data, size_t size, size_t *len) {
  static const char hello[] = "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1}}\n";
  size_t idl = strlen(session_id);
  char *out = malloc(sizeof hello + (size ? size : 1) * (idl > 2 ? idl : 2));
  if (!out) abort();
  size_t n = 0;
  if (size && (data[0] & 1)) { memcpy(out, hello, sizeof hello - 1); n = sizeof hello - 1; }
  for (size_t i = 1; i < size; i++) {
    if (data[i] == '@' && i + 1 < size && data[i + 1] == 'S') {
      memcpy(out + n, session_id, idl);
      n += idl;
      i++;
    } else {
      out[n++] = (char)data[i];
    }
  }
  *len = n;
  return out;
}

static uint64_t now(void) {
  uv_update_time(&loop);
  return uv_now(&loop);
}

/* The peer read everything it was sent. */
static void drain(hconn *h) {
  if (h->unsent && !h->close_asked) {
    size_t n = h->unsent;
    h->unsent = 0;
    pd_conn_sent(h->c, n, now());
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t chunks[8] = {0, 1, 2, 3, 7, 64, 512, 4096};
  size_t chunk = size ? chunks[(data[0] >> 1) & 7] : 0;
  int slow = size && (data[0] & 16);
  size_t len;
  char *req = build_request(data, size, &len);
  hconn h = {0};
  if (!(h.out = pt_jsonl_new(0))) abort();
  if (pd_ipc_conn_open(ipc, &h, now(), &h.c) < 0) abort();
  for (size_t off = 0; off < len && !h.stopped && !h.close_asked;) {
    size_t n = chunk && chunk < len - off ? chunk : len - off;
    pd_conn_recv(h.c, req + off, n, now());
    off += n;
    if (!slow) drain(&h);
  }
  if (!h.close_asked) pd_conn_eof(h.c, now());
  uint64_t start = now();
  while (!h.close_asked) {
    drain(&h);
    if (h.close_asked) break;
    int more = uv_run(&loop, UV_RUN_NOWAIT);
    if (!more && h.unsent == 0 && !h.close_asked) {
      /* nothing left to run, nothing to write: held for nothing */
      fprintf(stderr, "the core kept a connection open after the client left, with nothing running\n");
      abort();
    }
    if (now() - start > CLOSE_BOUND_MS) {
      fprintf(stderr, "the core kept a connection open %d ms after the client left\n",
              CLOSE_BOUND_MS);
      abort();
    }
  }
  pd_conn_closed(h.c, now());
  if (pd_ipc_client_count(ipc) != 0) { fprintf(stderr, "a connection is left open\n"); abort(); }
  if (pt_jsonl_pending(h.out) != 0) { fprintf(stderr, "the core's last line has no newline\n"); abort(); }
  pt_jsonl_del(h.out);
  free(req);
  /* Let what the connection started finish (turns, refreshes) before the
   * next input: it may still hold the connection's memory. */
  for (int i = 0; i < 4; i++) uv_run(&loop, UV_RUN_NOWAIT);
  return 0;
}
