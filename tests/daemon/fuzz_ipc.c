/*
 * fuzz_ipc.c - libFuzzer target for everything the daemon does with the
 * bytes a local client sends: the IPC framer (src/common/pt_jsonl.c), the
 * request envelope and hello (src/daemon/pd_ipc.c) and the parameter
 * decoding of every method (src/daemon/pd_methods.c, pd_catalog_ipc.c).
 *
 * No seam and no copy of the dispatch: the harness runs the real daemon in
 * this process (pd_daemon_init, pd_catalog_install, pd_daemon_listen on a
 * private state root), and each input is sent over a real connection to its
 * Unix socket, then the write side is shut. The loop is driven here (the
 * harness is its only thread besides libuv's pool) until the daemon closes
 * the connection.
 *
 * Input: byte 0 is flags (bit 0: send a valid hello line first), the rest
 * goes to the socket as is, except that every "@S" becomes the id of a
 * session created at start-up, so that methods on an existing session are
 * reached. The one method replaced is daemon.stop, which would end the
 * daemon; its parameters are none.
 *
 * Checked: no sanitizer report; the daemon closes every connection within a
 * bound once the client has shut its side (nothing held for a client that
 * left); every line it sends is one JSON object with "id" and "result" or
 * "error", or with "event". Built and run by tests/daemon/ipc_fuzz_test.sh.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/pt_jsonl.h"
#include "daemon/pd_catalog_ipc.h"
#include "daemon/pd_daemon.h"
#include "daemon/pd_ipc.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLOSE_BOUND_MS 5000 /* a half-closed connection must be gone by then */

static uv_loop_t loop;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static char session_id[64];

static void stop_replaced(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  (void)ctx;
  pd_call_reply(call, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *tmp = getenv("TMPDIR");
  char home[512];
  snprintf(home, sizeof home, "%s/fuzz-ipc-home.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(home)) { perror("mkdtemp"); abort(); }
  unsetenv("POLYTOKEN_RESPONDER_CMD");     /* the built-in responder */
  setenv("POLYTOKEN_RESPONDER_DELAY_MS", "0", 1);
  char err[1024] = "";
  if (uv_loop_init(&loop) != 0) abort();
  if (pd_daemon_init(&loop, home, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); abort(); }
  if (pd_catalog_install(pd_daemon_home(), pd_daemon_sessions()) < 0) abort();
  if (pd_daemon_listen(err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); abort(); }
  if (pd_ipc_register_method("daemon.stop", stop_replaced, NULL) < 0) abort();
  pd_session *s = NULL;
  if (pd_sessions_create(pd_daemon_sessions(), "fuzz", &s) < 0) abort();
  snprintf(session_id, sizeof session_id, "%s", s->id);
  snprintf(sock_path, sizeof sock_path, "%s/daemon.sock", pd_daemon_home());
  return 0;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static void check_line(const char *line, size_t len) {
  json_t *o = NULL;
  char err[256];
  if (pt_jsonl_parse(line, len, &o, err, sizeof err) < 0) {
    fprintf(stderr, "daemon sent a line that is not a JSON object (%s): %.*s\n", err, (int)len, line);
    abort();
  }
  int reply = json_object_get(o, "id") &&
              (json_object_get(o, "result") != NULL) + (json_object_get(o, "error") != NULL) == 1;
  int event = json_is_string(json_object_get(o, "event"));
  if (!reply && !event) {
    fprintf(stderr, "daemon sent neither a reply nor an event: %.*s\n", (int)len, line);
    abort();
  }
  json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t len;
  char *req = build_request(data, size, &len);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) abort();
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { perror("connect"); abort(); }
  pt_jsonl *fr = pt_jsonl_new(0);
  if (!fr) abort();
  size_t sent = 0;
  int shut = 0, eof = 0;
  long long deadline = 0;
  char buf[65536];
  long long start = now_ms();
  while (!eof) {
    if (sent < len) {
      ssize_t w = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
      if (w > 0) sent += (size_t)w;
      else if (w < 0 && errno != EAGAIN && errno != EINTR) sent = len; /* daemon closed on us */
    }
    if (sent == len && !shut) {
      shutdown(fd, SHUT_WR);
      shut = 1;
      deadline = now_ms() + CLOSE_BOUND_MS;
    }
    struct pollfd p[2] = {{.fd = uv_backend_fd(&loop), .events = POLLIN},
                          {.fd = fd, .events = POLLIN | (sent < len ? POLLOUT : 0)}};
    int to = uv_backend_timeout(&loop);
    if (to < 0 || to > 20) to = 20;
    poll(p, 2, to);
    uv_run(&loop, UV_RUN_NOWAIT);
    for (;;) {
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r == 0 || (r < 0 && errno == ECONNRESET)) { eof = 1; break; }
      if (r < 0) break;
      if (pt_jsonl_feed(fr, buf, (size_t)r) < 0) abort();
      const char *line;
      size_t ll;
      int k;
      while ((k = pt_jsonl_next(fr, &line, &ll)) == 1) check_line(line, ll);
      if (k == PT_JSONL_EOVERSIZE) { fprintf(stderr, "daemon sent an oversize line\n"); abort(); }
    }
    if (shut && !eof && now_ms() > deadline) {
      fprintf(stderr, "daemon kept a connection open %d ms after the client shut its side\n",
              CLOSE_BOUND_MS);
      abort();
    }
    if (!shut && now_ms() - start > CLOSE_BOUND_MS) {
      fprintf(stderr, "daemon stopped reading a client's request\n");
      abort();
    }
  }
  if (pt_jsonl_pending(fr) != 0) { fprintf(stderr, "daemon's last line has no newline\n"); abort(); }
  pt_jsonl_del(fr);
  close(fd);
  free(req);
  /* Let the daemon finish what the connection started (turns, refreshes). */
  for (int i = 0; i < 4; i++) uv_run(&loop, UV_RUN_NOWAIT);
  return 0;
}
