/*
 * pt_client.c - daemon IPC client (see pt_client.h).
 *
 * Invariants:
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

void pt_client_error_set(pt_client_error *e, const char *code, const char *fmt, ...) {
  if (!e) return;
  snprintf(e->code, sizeof e->code, "%s", code);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- paths ---- */

char *pt_client_home(void) {
  char *h = NULL;
  return pt_home_resolve(NULL, &h, NULL, 0) == 0 ? h : NULL;
}

static int is_exec_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

char *pt_client_find_daemon(void) {
  const char *env = getenv("POLYTOKEN_DAEMON");
  if (env && *env) return is_exec_file(env) ? strdup(env) : NULL;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
      *slash = '\0';
      char *cand = NULL;
      if (asprintf(&cand, "%s/polytokend", self) >= 0) {
        if (is_exec_file(cand)) return cand;
        free(cand);
      }
    }
  }
  const char *path = getenv("PATH");
  if (!path) return NULL;
  char *copy = strdup(path);
  if (!copy) return NULL;
  char *save = NULL;
  for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char *cand = NULL;
    if (asprintf(&cand, "%s/polytokend", *dir ? dir : ".") < 0) break;
    if (is_exec_file(cand)) { free(copy); return cand; }
    free(cand);
  }
  free(copy);
  return NULL;
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

/* ---- connect / autostart ---- */

static int sock_path(const pt_client *c, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path, sizeof sa->sun_path, "%s/daemon.sock", c->home);
  return (n < 0 || (size_t)n >= sizeof sa->sun_path) ? -ENAMETOOLONG : 0;
}

/* One connect attempt. Returns an fd or a negative errno. */
static int try_connect(const pt_client *c) {
  struct sockaddr_un sa;
  int rc = sock_path(c, &sa);
  if (rc < 0) return rc;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  return fd;
}

/* The descriptor number the daemon gets its startup-error pipe on
 * (`polytokend --error-fd 3`, see docs/daemon.md). */
#define DAEMON_ERROR_FD 3

/* Spawns polytokend detached. Double fork so the daemon is never our child
 * (no zombie in a long-running TUI); the grandchild pid comes back through a
 * pipe. *errfd_out receives the read end (O_NONBLOCK, caller closes) of a
 * second pipe whose write end the daemon holds as fd DAEMON_ERROR_FD: it
 * writes its fatal startup error there and closes it once it listens, so
 * the reason reaches us even when nothing can be written to the disk.
 * Returns the daemon pid or a negative errno with err filled. */
static pid_t spawn_daemon(pt_client *c, const char *log_path, int *errfd_out,
                          pt_client_error *err) {
  *errfd_out = -1;
  char *exe = pt_client_find_daemon();
  if (!exe) {
    pt_client_error_set(err, "daemon_start_failed",
            "cannot find polytokend (set POLYTOKEN_DAEMON or put it on PATH)");
    return -ENOENT;
  }
  /* Not fatal: on a full or read-only disk the daemon still starts (or
   * says why it cannot through the error pipe); its stderr then goes
   * nowhere. */
  int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (logfd < 0) logfd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  int pfd[2], efd[2] = {-1, -1};
  if (pipe2(pfd, O_CLOEXEC) != 0 || pipe2(efd, O_CLOEXEC) != 0) {
    int e = errno;
    pt_client_error_set(err, "daemon_start_failed", "pipe: %s", strerror(e));
    if (efd[0] < 0) { close(pfd[0]); close(pfd[1]); }
    if (logfd >= 0) close(logfd);
    free(exe);
    return -e;
  }
  char errfd_arg[16];
  snprintf(errfd_arg, sizeof errfd_arg, "%d", DAEMON_ERROR_FD);
  pid_t mid = fork();
  if (mid < 0) {
    int e = errno;
    pt_client_error_set(err, "daemon_start_failed", "fork: %s", strerror(e));
    close(pfd[0]); close(pfd[1]); close(efd[0]); close(efd[1]);
    if (logfd >= 0) close(logfd);
    free(exe);
    return -e;
  }
  if (mid == 0) {
    /* Intermediate child: new session, fork the daemon, report, exit. Only
     * async-signal-safe calls from here on (we may be a threaded process). */
    setsid();
    pid_t d = fork();
    if (d == 0) {
      int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (devnull >= 0) dup2(devnull, 0); /* dup2 clears CLOEXEC on fd 0 */
      if (logfd >= 0) {
        dup2(logfd, 1);
        dup2(logfd, 2);
      }
      /* efd[1] is >= 3 (0-2 are taken), so dup2 never clobbers 0-2;
       * dup2 onto itself would keep CLOEXEC, hence the fcntl. */
      if (efd[1] == DAEMON_ERROR_FD) fcntl(efd[1], F_SETFD, 0);
      else dup2(efd[1], DAEMON_ERROR_FD);
      /* Default signal dispositions and an empty signal mask for the
       * daemon: the mask survives exec, and a TUI thread that blocked
       * SIGTERM/SIGINT would otherwise hand the daemon a mask in which
       * its shutdown signals never arrive. */
      signal(SIGPIPE, SIG_DFL);
      signal(SIGINT, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, NULL);
      char *argv[] = {exe, (char *)"--home", c->home, (char *)"--error-fd", errfd_arg, NULL};
      execv(exe, argv);
      static const char msg[] = "polytoken: exec polytokend failed\n";
      ssize_t w = write(2, msg, sizeof msg - 1);
      w = write(DAEMON_ERROR_FD, msg, sizeof msg - 1);
      (void)w;
      _exit(127);
    }
    ssize_t w = write(pfd[1], &d, sizeof d);
    (void)w;
    _exit(d < 0 ? 1 : 0);
  }
  close(pfd[1]);
  close(efd[1]);
  if (logfd >= 0) close(logfd);
  free(exe);
  pid_t daemon_pid = -1;
  ssize_t r;
  do r = read(pfd[0], &daemon_pid, sizeof daemon_pid); while (r < 0 && errno == EINTR);
  close(pfd[0]);
  int st;
  while (waitpid(mid, &st, 0) < 0 && errno == EINTR) {}
  if (r != (ssize_t)sizeof daemon_pid || daemon_pid <= 0) {
    close(efd[0]);
    pt_client_error_set(err, "daemon_start_failed", "could not fork polytokend");
    return -ECHILD;
  }
  fcntl(efd[0], F_SETFL, fcntl(efd[0], F_GETFL) | O_NONBLOCK);
  *errfd_out = efd[0];
  return daemon_pid;
}

/* Reads what the daemon wrote to its error pipe so far (non-blocking)
 * into buf (NUL-terminated, at most cap - 1 bytes kept). Returns 1 at EOF
 * (the daemon closed it: listening, or exited), else 0. */
static int read_daemon_errors(int fd, char *buf, size_t cap, size_t *len) {
  for (;;) {
    char tmp[512];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 0; /* EAGAIN: nothing more yet */
    if (n == 0) return 1;
    size_t room = cap - 1 - *len;
    size_t k = (size_t)n < room ? (size_t)n : room;
    memcpy(buf + *len, tmp, k);
    *len += k;
    buf[*len] = '\0';
  }
}

/* The first non-empty line of the daemon's startup errors, in line (cap
 * bytes), or "" if it wrote none. */
static void first_line(const char *text, char *line, size_t cap) {
  while (*text == '\n') text++;
  size_t n = strcspn(text, "\n");
  if (n >= cap) n = cap - 1;
  memcpy(line, text, n);
  line[n] = '\0';
}

/* 1 if pid is gone or a zombie (its parent, init or a subreaper, may not have
 * reaped it yet). */
int pt_client_pid_gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 1;
  buf[n] = '\0';
  char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* The pid recorded in $home/daemon.lock if that process is still alive,
 * else 0. The daemon writes its pid there after taking the lock and empties
 * the file just before it exits, so a live pid here is a daemon that holds
 * (or is about to release) the lock. Reading never takes the lock, so it
 * cannot make a starting daemon fail. */
static pid_t lock_holder(const pt_client *c) {
  char path[PATH_MAX], buf[32];
  if (snprintf(path, sizeof path, "%s/daemon.lock", c->home) >= (int)sizeof path) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  long v = strtol(buf, NULL, 10);
  if (v <= 0 || v > INT_MAX) return 0;
  return pt_client_pid_gone((pid_t)v) ? 0 : (pid_t)v;
}

static int start_timeout_ms(void) {
  /* Strict (pt_env.h): "10abc" is not 10. The client has no log of its own;
   * a bad value falls back to the default. */
  return (int)pt_env_int("POLYTOKEN_START_TIMEOUT_MS", 10000, 1, INT_MAX - 1, NULL, 0);
}

typedef struct start_state {
  int errfd;           /* read end of the current daemon's error pipe, or -1 */
  char errors[2048];   /* what that daemon wrote to it */
  size_t errors_len;
} start_state;

/* (Re)spawns and starts watching the new daemon's error pipe. */
static pid_t start_one(pt_client *c, const char *log_path, start_state *ss, pt_client_error *err) {
  if (ss->errfd >= 0) close(ss->errfd);
  ss->errors_len = 0;
  ss->errors[0] = '\0';
  return spawn_daemon(c, log_path, &ss->errfd, err);
}

static int autostart(pt_client *c, int *fd_out, pt_client_error *err) {
  char *logs = NULL, *log_path = NULL;
  /* Create only: an existing root that is too open is tightened by the
   * daemon, which logs that it did (pt_home_prepare). */
  int rc = pt_mkdir_p(c->home, 0700);
  if (rc < 0) {
    pt_client_error_set(err, "daemon_start_failed", "cannot create %s: %s", c->home, strerror(-rc));
    return rc;
  }
  if (asprintf(&logs, "%s/logs", c->home) < 0) return -ENOMEM;
  if (asprintf(&log_path, "%s/daemon.stderr", logs) < 0) { free(logs); return -ENOMEM; }
  rc = pt_mkdir_p(logs, 0700);
  free(logs);
  if (rc < 0) {
    pt_client_error_set(err, "daemon_start_failed", "cannot create the log directory: %s", strerror(-rc));
    free(log_path);
    return rc;
  }
  start_state ss = {.errfd = -1};
  /* The home goes to the daemon as --home (no setenv: the process
   * environment is not ours to change, and other threads may read it). */
  pid_t pid = start_one(c, log_path, &ss, err);
  if (pid < 0) { free(log_path); return pid; }
  int limit = start_timeout_ms();
  int64_t deadline = now_ms() + limit;
  int dead_checks = 0;
  for (;;) {
    int fd = try_connect(c);
    if (fd >= 0) { *fd_out = fd; rc = 0; goto out; }
    if (ss.errfd >= 0) read_daemon_errors(ss.errfd, ss.errors, sizeof ss.errors, &ss.errors_len);
    pid_t holder = pt_client_pid_gone(pid) ? lock_holder(c) : 0;
    if (holder > 0 && holder != pid) {
      /* Ours exited because another daemon holds the lock: one that is
       * still stopping (its socket is gone, its process not yet: `daemon
       * stop` then Ctrl-R), or one that another client is starting. Wait
       * until that one listens or is gone; if gone, start ours again. */
      while (!pt_client_pid_gone(holder) && now_ms() < deadline) {
        fd = try_connect(c);
        if (fd >= 0) { *fd_out = fd; rc = 0; goto out; }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
      }
      if (now_ms() < deadline) {
        pid = start_one(c, log_path, &ss, err);
        if (pid < 0) { rc = pid; goto out; }
        dead_checks = 0;
        continue;
      }
    }
    /* A daemon that exited may have lost a start race to another one that
     * is about to listen: allow a few more attempts before giving up. */
    if (pt_client_pid_gone(pid) && ++dead_checks > 25) {
      char line[400];
      if (ss.errfd >= 0) read_daemon_errors(ss.errfd, ss.errors, sizeof ss.errors, &ss.errors_len);
      first_line(ss.errors, line, sizeof line);
      if (line[0])
        pt_client_error_set(err, "daemon_start_failed", "polytokend exited during startup: %s (log: %s)",
                            line, log_path);
      else
        pt_client_error_set(err, "daemon_start_failed",
                            "polytokend exited during startup without saying why; see %s", log_path);
      rc = -ECHILD;
      goto out;
    }
    if (now_ms() >= deadline) {
      pt_client_error_set(err, "daemon_start_failed",
              "polytokend did not open its socket within %d ms; see %s", limit, log_path);
      rc = -ETIMEDOUT;
      goto out;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
out:
  if (ss.errfd >= 0) close(ss.errfd);
  free(log_path);
  return rc;
}

int pt_client_connect(pt_client *c, int autostart_daemon, int timeout_ms, pt_client_error *err) {
  pt_client_close(c);
  int fd = try_connect(c);
  if (fd == -ENAMETOOLONG) {
    pt_client_error_set(err, "connect_failed", "socket path too long: %s/daemon.sock", c->home);
    return fd;
  }
  if (fd < 0 && (fd == -ENOENT || fd == -ECONNREFUSED)) {
    if (!autostart_daemon) {
      pt_client_error_set(err, "not_running", "the daemon is not running");
      return fd;
    }
    int rc = autostart(c, &fd, err);
    if (rc < 0) return rc;
  } else if (fd < 0) {
    pt_client_error_set(err, "connect_failed", "cannot connect to %s/daemon.sock: %s", c->home, strerror(-fd));
    return fd;
  }
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
