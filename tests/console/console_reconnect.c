/*
 * console_reconnect.c - the hostile reconnect loop of issue 21 against a task
 * console, as fast as one process can drive it: each loop connects, starts a
 * call, reads the first bytes of the answer and closes, again and again. A
 * real HTTP/2 implementation (nghttp2's client side) makes the bytes; the
 * client grants the largest flow-control windows HTTP/2 allows, so a server
 * that answers with its full state pushes all of it into the socket.
 *
 *   console_reconnect ADDR SECONDS [LOOPS [watch|details|state|connect|calls [OUTFILE]]]
 *     ADDR     127.0.0.1:PORT or [::1]:PORT
 *     SECONDS  how long to loop (0 = until SIGTERM/SIGINT; Nx = N iterations
 *              per loop)
 *     LOOPS    parallel loops (threads), default 1
 *     mode     watch (default): WatchUpdates; details: WatchTaskDetails(1);
 *              state: WatchState; connect: connect and close, nothing sent;
 *              calls: no reconnecting: one connection per loop that keeps
 *              32 unary Pause calls in flight, a new one as each ends (an
 *              iteration is a call); burst: connect, 8 Pause calls at
 *              once, close as soon as the first answer arrives (a fresh
 *              connection's allowance, again and again); ping: one
 *              connection per loop that sends PING frames as fast as the
 *              socket takes them (an iteration is 64 PINGs sent)
 *     OUTFILE  the counters are rewritten here about 10 times a second (for
 *              tests that wait for a count), and once at the end
 *
 * Prints one line at the end (and to OUTFILE):
 *   iterations N served S status R silent C errors E
 * served: DATA bytes arrived; status: a grpc-status other than 0 arrived
 * before any DATA (e.g. NOT_FOUND for the details of task 1); silent: the
 * server closed the connection without sending a single byte (e.g. a
 * connection of another user); errors: connect failed, or the connection
 * ended some other way. Used by tests/console/console_users_test.sh and
 * bench/console/reconnect.sh. Exit 0 unless the arguments are wrong.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

enum { M_WATCH, M_DETAILS, M_STATE, M_CONNECT, M_CALLS, M_BURST, M_PING };

static struct sockaddr_storage g_addr;
static socklen_t g_addrlen;
static int g_mode = M_WATCH;
static long g_iters;   /* > 0: iterations per loop */
static uint64_t g_end;  /* > 0: when to stop */
static atomic_int g_stop;
static atomic_ullong g_iter, g_served, g_refused, g_silent, g_errors;

static void on_sig(int sig) {
  (void)sig;
  atomic_store(&g_stop, 1);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct one {
  size_t data;       /* DATA bytes of our stream */
  size_t rx;         /* bytes received on the socket */
  int status;        /* grpc-status, -1 until seen */
  int closed;
} one;

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t len,
                   void *ud) {
  (void)s;
  (void)flags;
  (void)id;
  (void)d;
  ((one *)ud)->data += len;
  return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud) {
  (void)s;
  (void)f;
  (void)flags;
  if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
    char v[16] = {0};
    memcpy(v, value, valuelen < 15 ? valuelen : 15);
    ((one *)ud)->status = atoi(v);
  }
  return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud) {
  (void)s;
  (void)id;
  (void)err;
  ((one *)ud)->closed++;
  return 0;
}

static ssize_t body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                    nghttp2_data_source *src, void *ud) {
  (void)s;
  (void)id;
  (void)src;
  (void)ud;
  /* WatchTaskDetails{id: {id: 1}} = 0a 02 08 01; the others: empty. */
  static const uint8_t details[] = {0, 0, 0, 0, 4, 0x0a, 0x02, 0x08, 0x01};
  static const uint8_t empty[] = {0, 0, 0, 0, 0};
  const uint8_t *m = g_mode == M_DETAILS ? details : empty;
  size_t n = g_mode == M_DETAILS ? sizeof details : sizeof empty;
  if (len < n) return NGHTTP2_ERR_DEFERRED;
  memcpy(buf, m, n);
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

static nghttp2_session_callbacks *g_cbs;

static const nghttp2_nv *headers(const char *path, nghttp2_nv *h) {
  nghttp2_nv v[] = {
    {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
    {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
    {(uint8_t *)":authority", (uint8_t *)"localhost", 10, 9, 0},
    {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
    {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
    {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, 0},
  };
  memcpy(h, v, sizeof v);
  return h;
}

/* Mode ping: one connection, PING frames until the end (the answers are
 * read and dropped). */
static void ping_loop(void) {
  int fd = socket(g_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&g_addr, g_addrlen) != 0) {
    if (fd >= 0) close(fd);
    atomic_fetch_add(&g_errors, 1);
    return;
  }
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
  uint8_t pings[64 * 17];
  for (int i = 0; i < 64; i++) {
    uint8_t *p = pings + 17 * i;
    static const uint8_t h[9] = {0, 0, 8, 6, 0, 0, 0, 0, 0};   /* PING, 8 bytes, stream 0 */
    memcpy(p, h, 9);
    memset(p + 9, i, 8);
  }
  if (send(fd, preface, sizeof preface - 1, MSG_NOSIGNAL) < 0) goto out;
  size_t off = 0;
  while (!atomic_load(&g_stop) && (!g_end || now_ns() < g_end)) {
    /* Never blocked for long: the loop ends on time even when the server
     * reads nothing (its rates) and the socket is full. */
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    if (poll(&pf, 1, 100) <= 0) continue;
    ssize_t w = send(fd, pings + off, sizeof pings - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      atomic_fetch_add(&g_errors, 1);
      break;
    }
    off += (size_t)w;
    if (off == sizeof pings) {
      off = 0;
      atomic_fetch_add(&g_iter, 1);
    }
    uint8_t buf[16384];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
  }
out:
  close(fd);
}

/* Mode calls: one connection, 32 Pause calls in flight until the end;
 * mode burst: the same once, closed at the first answer. */
static void calls_loop(void) {
  int fd = socket(g_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&g_addr, g_addrlen) != 0) {
    if (fd >= 0) close(fd);
    atomic_fetch_add(&g_errors, 1);
    return;
  }
  int one_ = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
  one o = {.status = -1};
  nghttp2_session *s;
  nghttp2_session_client_new(&s, g_cbs, &o);
  nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);
  nghttp2_nv h[6];
  headers("/rs.tokio.console.instrument.Instrument/Pause", h);
  nghttp2_data_provider dp = {.source.ptr = NULL, .read_callback = body};
  int inflight = 0;
  long done = 0;
  while (!atomic_load(&g_stop) && (!g_end || now_ns() < g_end) && (!g_iters || done < g_iters)) {
    while (inflight < (g_mode == M_CALLS ? 32 : 8) && (g_mode == M_CALLS || done == 0) &&
           nghttp2_submit_request(s, NULL, h, 6, &dp, NULL) > 0)
      inflight++;
    const uint8_t *p;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(s, &p)) > 0)
      if (send(fd, p, (size_t)n, MSG_NOSIGNAL) != n) break;
    uint8_t buf[16384];
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0 || nghttp2_session_mem_recv(s, buf, (size_t)r) < 0) {
      atomic_fetch_add(&g_errors, 1);
      break;
    }
    int ended = o.closed;
    o.closed = 0;
    inflight -= ended;
    done += ended;
    if (g_mode == M_BURST) {
      if (!ended) continue;
      atomic_fetch_add(&g_iter, 1);
      atomic_fetch_add(&g_served, 1);
      break;
    }
    atomic_fetch_add(&g_iter, (unsigned long long)ended);
    atomic_fetch_add(&g_served, (unsigned long long)ended);
  }
  nghttp2_session_del(s);
  close(fd);
}

/* One iteration. */
static void once(void) {
  int fd = socket(g_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&g_addr, g_addrlen) != 0) {
    if (fd >= 0) close(fd);
    atomic_fetch_add(&g_errors, 1);
    return;
  }
  atomic_fetch_add(&g_iter, 1);
  if (g_mode == M_CONNECT) {
    close(fd);
    return;
  }
  int one_ = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
  struct timeval tv = {5, 0};   /* a server that answers nothing must not hang us */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  one o = {.status = -1};
  nghttp2_session *s;
  nghttp2_session_client_new(&s, g_cbs, &o);
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, NGHTTP2_MAX_WINDOW_SIZE}};
  nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, 1);
  nghttp2_submit_window_update(s, NGHTTP2_FLAG_NONE, 0,
                               NGHTTP2_MAX_WINDOW_SIZE - NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE);
  const char *path = g_mode == M_DETAILS ? "/rs.tokio.console.instrument.Instrument/WatchTaskDetails"
                     : g_mode == M_STATE ? "/rs.tokio.console.instrument.Instrument/WatchState"
                                         : "/rs.tokio.console.instrument.Instrument/WatchUpdates";
  nghttp2_nv h[6];
  headers(path, h);
  nghttp2_data_provider dp = {.source.ptr = NULL, .read_callback = body};
  nghttp2_submit_request(s, NULL, h, 6, &dp, NULL);
  int outcome = 0;   /* 1 served, 2 refused, 3 silent, 4 error */
  while (!outcome) {
    const uint8_t *p;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(s, &p)) > 0)
      if (send(fd, p, (size_t)n, MSG_NOSIGNAL) != n) break;
    uint8_t buf[16384];
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) {
      outcome = o.rx == 0 && (r == 0 || errno == ECONNRESET) ? 3 : 4;
      break;
    }
    o.rx += (size_t)r;
    if (nghttp2_session_mem_recv(s, buf, (size_t)r) < 0) outcome = 4;
    else if (o.data) outcome = 1;   /* the first bytes of the answer: enough */
    else if (o.status > 0) outcome = 2;
    else if (o.status == 0 || o.closed) outcome = 1;
  }
  nghttp2_session_del(s);
  close(fd);
  atomic_fetch_add(outcome == 1 ? &g_served : outcome == 2 ? &g_refused
                   : outcome == 3 ? &g_silent : &g_errors, 1);
}

static void *loop(void *arg) {
  (void)arg;
  if (g_mode == M_CALLS) {
    calls_loop();
    return NULL;
  }
  if (g_mode == M_PING) {
    ping_loop();
    return NULL;
  }
  if (g_mode == M_BURST) {
    for (long i = 0; !atomic_load(&g_stop) && (!g_end || now_ns() < g_end) && (!g_iters || i < g_iters);
         i++)
      calls_loop();
    return NULL;
  }
  for (long i = 0; !atomic_load(&g_stop) && (!g_end || now_ns() < g_end) && (!g_iters || i < g_iters);
       i++)
    once();
  return NULL;
}

static atomic_int g_running;

static void *loop_main(void *arg) {
  loop(arg);
  atomic_fetch_sub(&g_running, 1);
  return NULL;
}

static void report(const char *path) {
  char line[256];
  snprintf(line, sizeof line, "iterations %llu served %llu status %llu silent %llu errors %llu\n",
           atomic_load(&g_iter), atomic_load(&g_served), atomic_load(&g_refused),
           atomic_load(&g_silent), atomic_load(&g_errors));
  if (!path) {
    fputs(line, stdout);
    return;
  }
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fputs(line, f);
  fclose(f);
  rename(tmp, path);
}

static int parse_addr(const char *a) {
  char host[128];
  const char *colon = strrchr(a, ':');
  if (!colon || (size_t)(colon - a) >= sizeof host) return -1;
  memcpy(host, a, (size_t)(colon - a));
  host[colon - a] = 0;
  int port = atoi(colon + 1);
  char *h = host;
  if (h[0] == '[') {
    h++;
    h[strlen(h) - 1] = 0;
  }
  struct sockaddr_in *v4 = (struct sockaddr_in *)&g_addr;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&g_addr;
  memset(&g_addr, 0, sizeof g_addr);
  if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    g_addrlen = sizeof *v4;
    return 0;
  }
  if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    g_addrlen = sizeof *v6;
    return 0;
  }
  return -1;
}

int main(int argc, char **argv) {
  if (argc < 3 || parse_addr(argv[1]) != 0) {
    fprintf(stderr, "usage: console_reconnect ADDR SECONDS [LOOPS [watch|details|state|connect "
                    "[OUTFILE]]]\n");
    return 2;
  }
  double secs = atof(argv[2]);
  if (argv[2][0] && argv[2][strlen(argv[2]) - 1] == 'x') {
    g_iters = atol(argv[2]);
    secs = 0;
    if (g_iters < 1) return 2;
  }
  int loops = argc > 3 ? atoi(argv[3]) : 1;
  if (loops < 1 || loops > 256) loops = 1;
  if (argc > 4) {
    if (strcmp(argv[4], "details") == 0) g_mode = M_DETAILS;
    else if (strcmp(argv[4], "state") == 0) g_mode = M_STATE;
    else if (strcmp(argv[4], "connect") == 0) g_mode = M_CONNECT;
    else if (strcmp(argv[4], "calls") == 0) g_mode = M_CALLS;
    else if (strcmp(argv[4], "burst") == 0) g_mode = M_BURST;
    else if (strcmp(argv[4], "ping") == 0) g_mode = M_PING;
    else if (strcmp(argv[4], "watch") != 0) return 2;
  }
  const char *out = argc > 5 ? argv[5] : NULL;
  signal(SIGTERM, on_sig);
  signal(SIGINT, on_sig);
  signal(SIGPIPE, SIG_IGN);
  nghttp2_session_callbacks_new(&g_cbs);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(g_cbs, on_data);
  nghttp2_session_callbacks_set_on_header_callback(g_cbs, on_header);
  nghttp2_session_callbacks_set_on_stream_close_callback(g_cbs, on_close);
  if (secs > 0) g_end = now_ns() + (uint64_t)(secs * 1e9);
  pthread_t th[256];
  atomic_store(&g_running, loops);
  for (int i = 0; i < loops; i++) pthread_create(&th[i], NULL, loop_main, NULL);
  while (!atomic_load(&g_stop) && (!g_end || now_ns() < g_end) && atomic_load(&g_running) > 0) {
    if (out) report(out);
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < loops; i++) pthread_join(th[i], NULL);
  if (out) report(out);
  report(NULL);
  nghttp2_session_callbacks_del(g_cbs);
  return 0;
}
