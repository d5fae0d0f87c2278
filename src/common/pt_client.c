/*
 * pt_client.c - daemon IPC client: the connection's requests, replies and
 * events, async and blocking (see pt_client.h). Finding and starting the
 * daemon is pt_client_start.c; pt_client_error_set is pt_client_error.c.
 *
 * DESIGN (invariants):
 *  - fd >= 0 exactly while connected; the socket is O_NONBLOCK|O_CLOEXEC.
 *  - `out` holds serialised request lines not yet written; out_off <= out_len.
 *  - every request sent on the current connection has one entry in `pending`
 *    until its reply arrives or the connection is lost; an entry either has a
 *    callback (async) or is the single synchronous call in progress
 *    (`sync_id`), whose outcome lands in sync_result/sync_err.
 *  - `events` (a JSON array) queues events only while no event callback is
 *    installed; its length is capped (PT_CLIENT_MAX_QUEUED_EVENTS) so a chatty
 *    daemon cannot grow a CLI that does not read events.
 */
#include "common/pt_client.h"
#include "common/pt_client_start.h"
#include "common/pt_file.h"
#include "common/pt_home.h" /* pt_home_resolve */
#include "common/pt_env.h"
#include "common/pt_jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PT_CLIENT_MAX_QUEUED_EVENTS 65536

typedef struct pending {
  struct pending *next;
  long id;
  pt_client_reply_cb cb;
  void *ud;
} pending;

struct pt_client {
  char *home;
  char *name;
  int fd;
  long next_id;
  pt_jsonl *framer;
  json_t *hello;

  char *out;
  size_t out_len, out_off, out_cap;

  pending *pending;

  long sync_id;      /* id of the blocking call in progress, 0 if none */
  int sync_done;
  json_t *sync_result;
  pt_client_error sync_err;
  int sync_failed;

  json_t *events;    /* queued events (array) when no event callback */

  pt_client_event_cb on_event;
  pt_client_closed_cb on_closed;
  void *cb_ud;
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pt_client_id_str(const json_t *v, char *buf, size_t n) {
  if (n == 0) return -EINVAL;
  buf[0] = '\0';
  if (json_is_string(v)) {
    snprintf(buf, n, "%s", json_string_value(v));
    return 0;
  }
  if (json_is_integer(v)) {
    snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    return 0;
  }
  return -EINVAL;
}

/* ---- lifecycle ---- */

pt_client *pt_client_new(const char *home, const char *client_name) {
  pt_client *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->fd = -1;
  c->next_id = 1;
  c->home = home ? strdup(home) : pt_client_home();
  c->name = strdup(client_name ? client_name : "polytoken");
  c->events = json_array();
  if (!c->home || !c->name || !c->events) goto fail;
  return c;
fail:
  free(c->home);
  free(c->name);
  json_decref(c->events);
  free(c);
  return NULL;
}

const char *pt_client_home_dir(const pt_client *c) { return c->home; }
int pt_client_fd(const pt_client *c) { return c->fd; }
int pt_client_connected(const pt_client *c) { return c->fd >= 0 && c->hello != NULL; }
json_t *pt_client_hello_result(const pt_client *c) { return c->hello; }
int pt_client_wants_write(const pt_client *c) { return c->fd >= 0 && c->out_off < c->out_len; }

void pt_client_set_callbacks(pt_client *c, pt_client_event_cb on_event,
                             pt_client_closed_cb on_closed, void *ud) {
  c->on_event = on_event;
  c->on_closed = on_closed;
  c->cb_ud = ud;
}

/* Tears the connection down; fails pending requests. notify: call async
 * callbacks (0 from pt_client_del, where the owner is going away). */
static void drop_connection(pt_client *c, const pt_client_error *why, int notify) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  pt_jsonl_del(c->framer);
  c->framer = NULL;
  json_decref(c->hello);
  c->hello = NULL;
  c->out_len = c->out_off = 0;
  /* Detach the list first: callbacks may issue new requests (which fail with
   * -ENOTCONN) or close again. */
  pending *p = c->pending;
  c->pending = NULL;
  while (p) {
    pending *next = p->next;
    if (p->id == c->sync_id) {
      c->sync_done = 1;
      c->sync_failed = 1;
      c->sync_err = *why;
    } else if (notify && p->cb) {
      p->cb(c, NULL, why, p->ud);
    }
    free(p);
    p = next;
  }
}

void pt_client_close(pt_client *c) {
  if (c->fd < 0 && !c->pending) return;
  pt_client_error e;
  pt_client_error_set(&e, "disconnected", "connection to the daemon was closed");
  drop_connection(c, &e, 1);
}

/* Connection lost while in use: fail pending, then tell the owner. */
static int lose_connection(pt_client *c, const pt_client_error *why, int rc) {
  int was = c->fd >= 0;
  drop_connection(c, why, 1);
  if (was && c->on_closed) c->on_closed(c, why, c->cb_ud);
  return rc;
}

void pt_client_del(pt_client *c) {
  if (!c) return;
  pt_client_error e;
  pt_client_error_set(&e, "disconnected", "client closed");
  drop_connection(c, &e, 0);
  json_decref(c->sync_result);
  json_decref(c->events);
  free(c->out);
  free(c->home);
  free(c->name);
  free(c);
}

int pt_client_adopt_fd(pt_client *c, int fd) {
  pt_client_close(c);
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  c->framer = pt_jsonl_new(0);
  if (!c->framer) return -ENOMEM;
  c->fd = fd;
  c->hello = json_object();
  return 0;
}

/* ---- line handling ---- */

static pending *take_pending(pt_client *c, long id) {
  for (pending **pp = &c->pending; *pp; pp = &(*pp)->next) {
    if ((*pp)->id == id) {
      pending *p = *pp;
      *pp = p->next;
      return p;
    }
  }
  return NULL;
}

static void dispatch_reply(pt_client *c, long id, json_t *msg) {
  pending *p = take_pending(c, id);
  if (!p) return; /* reply to a request we no longer track: ignore */
  json_t *result = json_object_get(msg, "result");
  json_t *error = json_object_get(msg, "error");
  pt_client_error e;
  int failed = 0;
  if (json_is_object(error)) {
    const char *code = json_string_value(json_object_get(error, "code"));
    const char *message = json_string_value(json_object_get(error, "message"));
    pt_client_error_set(&e, code ? code : "internal", "%s", message ? message : (code ? code : "error"));
    failed = 1;
  } else if (!result) {
    pt_client_error_set(&e, "bad_reply", "reply without result or error");
    failed = 1;
  }
  if (id == c->sync_id) {
    c->sync_done = 1;
    c->sync_failed = failed;
    if (failed) {
      c->sync_err = e;
    } else {
      json_decref(c->sync_result);
      c->sync_result = json_incref(result);
    }
  } else if (p->cb) {
    p->cb(c, failed ? NULL : result, failed ? &e : NULL, p->ud);
  }
  free(p);
}

static void dispatch_event(pt_client *c, json_t *msg) {
  const char *name = json_string_value(json_object_get(msg, "event"));
  json_t *params = json_object_get(msg, "params");
  if (c->on_event) {
    json_t *empty = NULL;
    if (!json_is_object(params)) params = empty = json_object();
    c->on_event(c, name, params, c->cb_ud);
    json_decref(empty);
    return;
  }
  if (json_array_size(c->events) < PT_CLIENT_MAX_QUEUED_EVENTS)
    json_array_append(c->events, msg);
}

/* Returns 0, or negative after declaring the connection lost. */
static int handle_line(pt_client *c, const char *line, size_t len) {
  json_t *msg = NULL;
  char why[160];
  if (pt_jsonl_parse(line, len, &msg, why, sizeof why) < 0) {
    pt_client_error e;
    pt_client_error_set(&e, "bad_reply", "daemon sent invalid JSON: %s", why);
    return lose_connection(c, &e, -EPROTO);
  }
  json_t *id = json_object_get(msg, "id");
  if (json_is_string(json_object_get(msg, "event"))) {
    dispatch_event(c, msg);
  } else if (json_is_integer(id)) {
    dispatch_reply(c, (long)json_integer_value(id), msg);
  }
  /* id null (a bad_json reply to a line we never sent) or unknown shapes are
   * ignored: nothing waits for them. */
  json_decref(msg);
  return 0;
}

int pt_client_feed(pt_client *c, const void *data, size_t len) {
  if (!c->framer) return -ENOTCONN;
  if (pt_jsonl_feed(c->framer, data, len) < 0) {
    pt_client_error e;
    pt_client_error_set(&e, "no_memory", "out of memory reading from the daemon");
    return lose_connection(c, &e, -ENOMEM);
  }
  for (;;) {
    const char *line;
    size_t n;
    int r = pt_jsonl_next(c->framer, &line, &n);
    if (r == 0) return 0;
    if (r == PT_JSONL_EOVERSIZE) {
      pt_client_error e;
      pt_client_error_set(&e, "oversize", "daemon sent a line over %zu bytes", PT_JSONL_MAX_LINE);
      return lose_connection(c, &e, -EMSGSIZE);
    }
    /* handle_line may close the connection (and free the framer). */
    int rc = handle_line(c, line, n);
    if (rc < 0) return rc;
    if (!c->framer) return -ECONNRESET;
  }
}

int pt_client_pump(pt_client *c) {
  char buf[65536];
  for (;;) {
    if (c->fd < 0) return -ENOTCONN;
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n > 0) {
      int rc = pt_client_feed(c, buf, (size_t)n);
      if (rc < 0) return rc;
      continue;
    }
    if (n == 0) {
      pt_client_error e;
      pt_client_error_set(&e, "disconnected", "the daemon closed the connection");
      return lose_connection(c, &e, -ECONNRESET);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    pt_client_error e;
    pt_client_error_set(&e, "disconnected", "reading from the daemon: %s", strerror(errno));
    return lose_connection(c, &e, -errno);
  }
}

int pt_client_flush(pt_client *c) {
  while (c->fd >= 0 && c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 1;
    int e0 = n < 0 ? errno : EPIPE;
    pt_client_error e;
    pt_client_error_set(&e, "disconnected", "writing to the daemon: %s", strerror(e0));
    return lose_connection(c, &e, -e0);
  }
  if (c->fd < 0) return -ENOTCONN;
  c->out_len = c->out_off = 0;
  return 0;
}

/* Serialises and queues a request; registers it as pending. */
static long queue_request(pt_client *c, const char *method, json_t *params,
                          pt_client_reply_cb cb, void *ud) {
  if (!params) params = json_object();
  if (c->fd < 0) { json_decref(params); return -ENOTCONN; }
  long id = c->next_id++;
  json_t *req = json_pack("{s:I, s:s, s:o}", "id", (json_int_t)id, "method", method, "params", params);
  if (!req) return -ENOMEM; /* json_pack's "o" steals params even on failure */
  char *line = NULL;
  size_t len = 0;
  int rc = pt_jsonl_dump(req, 0, &line, &len);
  json_decref(req);
  if (rc < 0) return rc;
  pending *p = calloc(1, sizeof *p);
  if (!p) { free(line); return -ENOMEM; }
  if (c->out_off > 0 && c->out_off == c->out_len) c->out_off = c->out_len = 0;
  if (c->out_len + len > c->out_cap) {
    size_t ncap = c->out_cap ? c->out_cap : 4096;
    while (ncap < c->out_len + len) ncap *= 2;
    char *nb = realloc(c->out, ncap);
    if (!nb) { free(line); free(p); return -ENOMEM; }
    c->out = nb;
    c->out_cap = ncap;
  }
  memcpy(c->out + c->out_len, line, len);
  c->out_len += len;
  free(line);
  p->id = id;
  p->cb = cb;
  p->ud = ud;
  p->next = c->pending;
  c->pending = p;
  return id;
}

int pt_client_request(pt_client *c, const char *method, json_t *params,
                      pt_client_reply_cb cb, void *ud) {
  long id = queue_request(c, method, params, cb, ud);
  if (id < 0) return (int)id;
  int rc = pt_client_flush(c);
  if (rc < 0) return rc;
  return (int)id;
}

/* ---- blocking style ---- */

/* Waits for the fd (POLLIN, plus POLLOUT while output is queued) and services
 * it once. Returns 0, -ETIMEDOUT when the deadline passed, or negative after
 * connection loss. */
static int wait_once(pt_client *c, int64_t deadline) {
  if (c->fd < 0) return -ENOTCONN;
  int timeout = -1;
  if (deadline >= 0) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return -ETIMEDOUT;
    timeout = left > INT_MAX ? INT_MAX : (int)left;
  }
  struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
  if (pt_client_wants_write(c)) pfd.events |= POLLOUT;
  int n = poll(&pfd, 1, timeout);
  if (n < 0) return errno == EINTR ? 0 : -errno;
  if (n == 0) return -ETIMEDOUT;
  if (pfd.revents & POLLOUT) {
    int rc = pt_client_flush(c);
    if (rc < 0) return rc;
  }
  if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) return pt_client_pump(c) < 0 ? -ECONNRESET : 0;
  return 0;
}

int pt_client_call(pt_client *c, const char *method, json_t *params, int timeout_ms,
                   json_t **result, pt_client_error *err) {
  if (result) *result = NULL;
  if (c->fd < 0) {
    json_decref(params);
    pt_client_error_set(err, "disconnected", "not connected to the daemon");
    return -ENOTCONN;
  }
  if (c->sync_id) {
    json_decref(params);
    pt_client_error_set(err, "internal", "nested blocking call");
    return -EBUSY;
  }
  long id = queue_request(c, method, params, NULL, NULL);
  if (id < 0) {
    pt_client_error_set(err, id == PT_JSONL_EOVERSIZE ? "oversize" : "no_memory",
            "cannot send %s: %s", method, strerror((int)-id));
    return (int)id;
  }
  c->sync_id = id;
  c->sync_done = 0;
  c->sync_failed = 0;
  int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  int rc = pt_client_flush(c) < 0 ? -ECONNRESET : 0;
  while (rc == 0 && !c->sync_done) rc = wait_once(c, deadline);
  c->sync_id = 0;
  if (c->sync_done && !c->sync_failed) {
    if (result) *result = c->sync_result;
    else json_decref(c->sync_result);
    c->sync_result = NULL;
    return 0;
  }
  if (c->sync_done) {
    if (err) *err = c->sync_err;
    return strcmp(c->sync_err.code, "disconnected") == 0 ? -ECONNRESET : -EPROTO;
  }
  /* Timed out or lost: forget the pending entry so a late reply is ignored. */
  free(take_pending(c, id));
  if (rc == -ETIMEDOUT)
    pt_client_error_set(err, "timeout", "no reply to %s from the daemon within %d ms", method, timeout_ms);
  else
    pt_client_error_set(err, "disconnected", "lost the connection to the daemon during %s", method);
  return rc == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
}

int pt_client_next_event(pt_client *c, int timeout_ms, json_t **event, pt_client_error *err) {
  *event = NULL;
  int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
  for (;;) {
    if (json_array_size(c->events) > 0) {
      *event = json_incref(json_array_get(c->events, 0));
      json_array_remove(c->events, 0);
      return 0;
    }
    int rc = wait_once(c, deadline);
    if (rc == -ETIMEDOUT) {
      pt_client_error_set(err, "timeout", "no event from the daemon within %d ms", timeout_ms);
      return rc;
    }
    if (rc < 0) {
      if (json_array_size(c->events) > 0) continue; /* deliver what arrived first */
      pt_client_error_set(err, "disconnected", "lost the connection to the daemon");
      return -ECONNRESET;
    }
  }
}

/* ---- connect (finding and starting the daemon: pt_client_start.c) ---- */

int pt_client_connect(pt_client *c, int autostart_daemon, int timeout_ms, pt_client_error *err) {
  pt_client_close(c);
  int fd = pt_client_start_connect(c->home, autostart_daemon, err);
  if (fd < 0) return fd;
  c->framer = pt_jsonl_new(0);
  if (!c->framer) {
    close(fd);
    pt_client_error_set(err, "no_memory", "out of memory");
    return -ENOMEM;
  }
  c->fd = fd;
  json_t *res = NULL;
  pt_client_error e;
  int rc = pt_client_call(c, "hello",
                          json_pack("{s:i, s:s}", "protocol", PT_CLIENT_PROTOCOL, "client", c->name),
                          timeout_ms, &res, &e);
  if (rc < 0) {
    if (err) {
      *err = e;
      if (strcmp(e.code, "protocol_mismatch") != 0) {
        char m[sizeof e.message];
        snprintf(m, sizeof m, "handshake with the daemon failed: %.400s", e.message);
        snprintf(err->message, sizeof err->message, "%s", m);
      }
    }
    pt_client_close(c);
    return rc;
  }
  c->hello = res;
  return 0;
}
