/*
 * Unit tests for the IPC client's line handling (src/common/pt_client.c):
 * the test plays the daemon on the other end of a real socketpair, so the
 * client's own read/write/framing/dispatch code runs unchanged.
 */
#include "pt_test.h"
#include "common/pt_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct seen {
  int replies, errors, events, closed;
  char last_code[32];
  char last_event[64];
  long long last_value;
} seen;

static void on_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  (void)c;
  seen *s = ud;
  if (err) {
    s->errors++;
    snprintf(s->last_code, sizeof s->last_code, "%s", err->code);
  } else {
    s->replies++;
    s->last_value = json_integer_value(json_object_get(result, "v"));
  }
}

static void on_event(pt_client *c, const char *name, json_t *params, void *ud) {
  (void)c;
  seen *s = ud;
  s->events++;
  snprintf(s->last_event, sizeof s->last_event, "%s", name);
  s->last_value = json_integer_value(json_object_get(params, "n"));
}

static void on_closed(pt_client *c, const pt_client_error *err, void *ud) {
  (void)c;
  seen *s = ud;
  s->closed++;
  snprintf(s->last_code, sizeof s->last_code, "%s", err->code);
}

static pt_client *pair(int *peer) {
  int sv[2];
  PT_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  pt_client *c = pt_client_new("/nonexistent-home", "test");
  PT_ASSERT(c);
  PT_ASSERT_INT_EQ(pt_client_adopt_fd(c, sv[0]), 0);
  *peer = sv[1];
  return c;
}

static void peer_write(int fd, const char *s) {
  size_t n = strlen(s);
  PT_ASSERT(write(fd, s, n) == (ssize_t)n);
}

/* Reads one request line from the client. */
static json_t *peer_read(int fd) {
  char buf[4096];
  size_t n = 0;
  while (n < sizeof buf - 1) {
    ssize_t r = read(fd, buf + n, 1);
    PT_ASSERT(r == 1);
    if (buf[n++] == '\n') break;
  }
  buf[n] = 0;
  json_error_t e;
  json_t *j = json_loads(buf, 0, &e);
  PT_ASSERT_MSG(j, "bad request line: %s", buf);
  return j;
}

/* Pumps until the client has nothing more to read right now. */
static int pump_all(pt_client *c) {
  struct pollfd p = {.fd = pt_client_fd(c), .events = POLLIN};
  if (p.fd < 0) return -ENOTCONN;
  while (poll(&p, 1, 50) > 0) {
    int rc = pt_client_pump(c);
    if (rc < 0) return rc;
  }
  return 0;
}

PT_TEST(tui_client_async_replies_and_events) {
  int peer;
  pt_client *c = pair(&peer);
  seen s = {0};
  pt_client_set_callbacks(c, on_event, on_closed, &s);
  int id1 = pt_client_request(c, "sessions.list", NULL, on_reply, &s);
  int id2 = pt_client_request(c, "turn.send", json_pack("{s:s}", "text", "hi"), on_reply, &s);
  PT_ASSERT(id1 > 0 && id2 > id1);
  json_t *r1 = peer_read(peer), *r2 = peer_read(peer);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(r1, "id")), id1);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(r1, "method")), "sessions.list");
  PT_ASSERT(json_is_object(json_object_get(r1, "params")));
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(r2, "params"), "text")), "hi");
  json_decref(r1);
  json_decref(r2);

  /* Replies out of order, split mid-line, with an event between them. */
  char buf[256];
  snprintf(buf, sizeof buf, "{\"id\":%d,\"result\":{\"v\":2}}\n{\"event\":\"turn.delta\",\"par", id2);
  peer_write(peer, buf);
  PT_ASSERT_INT_EQ(pump_all(c), 0);
  PT_ASSERT_INT_EQ(s.replies, 1);
  PT_ASSERT_INT_EQ(s.last_value, 2);
  PT_ASSERT_INT_EQ(s.events, 0); /* incomplete line: not yet */
  snprintf(buf, sizeof buf, "ams\":{\"n\":7}}\n{\"id\":%d,\"error\":{\"code\":\"busy\",\"message\":\"m\"}}\n", id1);
  peer_write(peer, buf);
  PT_ASSERT_INT_EQ(pump_all(c), 0);
  PT_ASSERT_INT_EQ(s.events, 1);
  PT_ASSERT_STR_EQ(s.last_event, "turn.delta");
  PT_ASSERT_INT_EQ(s.last_value, 7);
  PT_ASSERT_INT_EQ(s.errors, 1);
  PT_ASSERT_STR_EQ(s.last_code, "busy");
  /* A reply to an id nobody waits for, and an id:null error, are ignored. */
  peer_write(peer, "{\"id\":999,\"result\":{}}\n{\"id\":null,\"error\":{\"code\":\"bad_json\",\"message\":\"x\"}}\n");
  PT_ASSERT_INT_EQ(pump_all(c), 0);
  PT_ASSERT_INT_EQ(s.replies + s.errors, 2);
  PT_ASSERT_INT_EQ(s.closed, 0);

  /* Peer hangs up: pending requests fail with "disconnected", then closed. */
  PT_ASSERT(pt_client_request(c, "x", NULL, on_reply, &s) > 0);
  close(peer);
  PT_ASSERT(pump_all(c) < 0);
  PT_ASSERT_INT_EQ(s.errors, 2);
  PT_ASSERT_INT_EQ(s.closed, 1);
  PT_ASSERT_STR_EQ(s.last_code, "disconnected");
  PT_ASSERT_INT_EQ(pt_client_fd(c), -1);
  PT_ASSERT_INT_EQ(pt_client_request(c, "x", NULL, on_reply, &s), -ENOTCONN);
  pt_client_del(c);
}

PT_TEST(tui_client_blocking_call_queues_events) {
  int peer;
  pt_client *c = pair(&peer);
  /* Ids are assigned from 1 on a fresh handle: answer before asking (the
   * bytes wait in the socket until the call reads them). */
  peer_write(peer, "{\"event\":\"turn.started\",\"params\":{\"n\":1}}\n"
                   "{\"id\":1,\"result\":{\"v\":42}}\n");
  json_t *res = NULL;
  pt_client_error err;
  PT_ASSERT_INT_EQ(pt_client_call(c, "a", NULL, 5000, &res, &err), 0);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(res, "v")), 42);
  json_decref(res);
  peer_write(peer, "{\"id\":2,\"error\":{\"code\":\"not_found\",\"message\":\"no session abc\"}}\n"
                   "{\"event\":\"turn.done\",\"params\":{\"n\":2}}\n");
  PT_ASSERT_INT_EQ(pt_client_call(c, "b", json_object(), 5000, &res, &err), -EPROTO);
  PT_ASSERT(res == NULL);
  PT_ASSERT_STR_EQ(err.code, "not_found");
  PT_ASSERT_STR_EQ(err.message, "no session abc");
  json_t *ev = NULL;
  PT_ASSERT_INT_EQ(pt_client_next_event(c, 5000, &ev, &err), 0);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(ev, "event")), "turn.started");
  json_decref(ev);
  PT_ASSERT_INT_EQ(pt_client_next_event(c, 5000, &ev, &err), 0);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(ev, "event")), "turn.done");
  json_decref(ev);
  /* Nothing more: a bounded wait times out, the connection stays up. */
  PT_ASSERT_INT_EQ(pt_client_next_event(c, 50, &ev, &err), -ETIMEDOUT);
  PT_ASSERT_STR_EQ(err.code, "timeout");
  PT_ASSERT_INT_EQ(pt_client_call(c, "c", NULL, 50, &res, &err), -ETIMEDOUT);
  PT_ASSERT(pt_client_fd(c) >= 0);
  /* The late reply to the timed-out call is ignored, not misdelivered. */
  peer_write(peer, "{\"id\":3,\"result\":{\"v\":1}}\n{\"id\":4,\"result\":{\"v\":4}}\n");
  PT_ASSERT_INT_EQ(pt_client_call(c, "d", NULL, 5000, &res, &err), 0);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(res, "v")), 4);
  json_decref(res);
  close(peer);
  PT_ASSERT_INT_EQ(pt_client_call(c, "e", NULL, 5000, &res, &err), -ECONNRESET);
  PT_ASSERT_STR_EQ(err.code, "disconnected");
  pt_client_del(c);
}

PT_TEST(tui_client_rejects_bad_lines) {
  /* Invalid JSON from the daemon: the connection is declared lost. */
  int peer;
  pt_client *c = pair(&peer);
  seen s = {0};
  pt_client_set_callbacks(c, on_event, on_closed, &s);
  PT_ASSERT(pt_client_request(c, "x", NULL, on_reply, &s) > 0);
  peer_write(peer, "this is not json\n");
  PT_ASSERT(pump_all(c) < 0);
  PT_ASSERT_INT_EQ(s.closed, 1);
  PT_ASSERT_STR_EQ(s.last_code, "bad_reply");
  PT_ASSERT_INT_EQ(s.errors, 1); /* the pending request failed */
  close(peer);
  pt_client_del(c);

  /* A line over the 1 MiB cap: lost with "oversize", memory stays bounded. */
  c = pair(&peer);
  memset(&s, 0, sizeof s);
  pt_client_set_callbacks(c, on_event, on_closed, &s);
  size_t big = 1048576 + 10;
  char *line = malloc(big);
  memset(line, 'x', big);
  line[0] = '"';
  int rc = 0;
  for (size_t off = 0; off < big && rc == 0; off += 65536)
    rc = pt_client_feed(c, line + off, big - off < 65536 ? big - off : 65536);
  if (rc == 0) rc = pt_client_feed(c, "\n", 1);
  PT_ASSERT(rc < 0);
  PT_ASSERT_INT_EQ(s.closed, 1);
  PT_ASSERT_STR_EQ(s.last_code, "oversize");
  free(line);
  close(peer);
  pt_client_del(c);
}

PT_TEST(tui_client_home_resolution) {
  setenv("POLYTOKEN_HOME", "/x/pt", 1);
  char *h = pt_client_home();
  PT_ASSERT_STR_EQ(h, "/x/pt");
  free(h);
  unsetenv("POLYTOKEN_HOME");
  setenv("XDG_STATE_HOME", "/y/state", 1);
  h = pt_client_home();
  PT_ASSERT_STR_EQ(h, "/y/state/polytoken");
  free(h);
  unsetenv("XDG_STATE_HOME");
  setenv("HOME", "/home/z", 1);
  h = pt_client_home();
  PT_ASSERT_STR_EQ(h, "/home/z/.local/state/polytoken");
  free(h);
}

PT_TEST_T(tui_client_autostart_failure_names_log, 60000) {
  char *home = pt_tmpdir("tui-client");
  pt_client *c = pt_client_new(home, "test");
  pt_client_error err;
  /* Not running, no autostart: a clear "not_running". */
  PT_ASSERT(pt_client_connect(c, 0, 1000, &err) < 0);
  PT_ASSERT_STR_EQ(err.code, "not_running");
  /* A "daemon" that exits at once: the error names the log file. */
  setenv("POLYTOKEN_DAEMON", "/bin/false", 1);
  PT_ASSERT(pt_client_connect(c, 1, 1000, &err) < 0);
  PT_ASSERT_STR_EQ(err.code, "daemon_start_failed");
  PT_ASSERT_MSG(strstr(err.message, "logs/daemon.stderr") != NULL, "message: %s", err.message);
  struct stat st;
  char path[512];
  snprintf(path, sizeof path, "%s/logs/daemon.stderr", home);
  PT_ASSERT(stat(path, &st) == 0);
  /* A daemon path that does not exist: says what to set. */
  setenv("POLYTOKEN_DAEMON", "/nonexistent/polytokend", 1);
  PT_ASSERT(pt_client_connect(c, 1, 1000, &err) < 0);
  PT_ASSERT_MSG(strstr(err.message, "POLYTOKEN_DAEMON") != NULL, "message: %s", err.message);
  unsetenv("POLYTOKEN_DAEMON");
  pt_client_del(c);
  pt_rm_rf(home);
  free(home);
}

PT_TEST(tui_client_id_str_any_type) {
  char b[32];
  json_t *i = json_integer(42), *s = json_string("t-7"), *o = json_object();
  PT_ASSERT_INT_EQ(pt_client_id_str(i, b, sizeof b), 0);
  PT_ASSERT_STR_EQ(b, "42");
  PT_ASSERT_INT_EQ(pt_client_id_str(s, b, sizeof b), 0);
  PT_ASSERT_STR_EQ(b, "t-7");
  PT_ASSERT_INT_EQ(pt_client_id_str(o, b, sizeof b), -EINVAL);
  PT_ASSERT_STR_EQ(b, "");
  PT_ASSERT_INT_EQ(pt_client_id_str(NULL, b, sizeof b), -EINVAL);
  json_decref(i);
  json_decref(s);
  json_decref(o);
}
