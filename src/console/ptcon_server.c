/*
 * ptcon_server.c - the task console server's I/O: one thread, epoll, the
 * listening socket, accepting (with eviction when the table is full), the
 * connections' sockets and their unsent bytes, timers, and rate-limited
 * logging. Everything about HTTP/2, gRPC and the service is the sans-I/O
 * layer (ptcon_grpc.c), fed the bytes read and asked for the bytes to send.
 *
 * Threads: everything below runs on the server thread, except
 * ptcon_server_new/_del (caller's thread), which only start and stop it. The
 * aggregator is owned by the server thread; app threads reach it only
 * through the lock-free rings and slots (ptcon_instrument.c).
 *
 * Wake-ups (an idle console costs nothing): the thread sleeps in epoll_wait
 * until a client sends something, a ring crosses its fill mark (the
 * producer writes the process's wake eventfd, ptcon_instr.h), or a timer of
 * the gRPC layer is really due (the 1 s publishing tick only while a stream
 * watches; connection time-outs; house-keeping every 10 s otherwise), or a
 * log summary is due.
 *
 * Who is served (issue 21): right after accept, before a byte of ours is
 * sent, the other end's uid comes from the kernel's socket table
 * (ptcon_peer.h); unless allow_other_users, a connection of another uid, or
 * one whose uid cannot be told, is closed at once and counted in the
 * rate-limited log.
 *
 * Load: accepts take a token of s->accepts (accept_rate_per_s, burst
 * accept_burst); without one the listener leaves epoll until the next token
 * is due, and newcomers wait in the kernel's backlog. A connection whose
 * input the gRPC layer holds back (over its calls or bytes a second) is
 * not read (no EPOLLIN) until it takes input again. With the gRPC layer's
 * limit on new watch calls and its shared initial state, a client that
 * loops, reconnecting or not, costs a bounded amount of work a second.
 *
 * Bounds (outside input): at most max_connections connections; a newcomer
 * beyond that evicts the connection idle longest (ptcon_grpc_evict_candidate),
 * so a real client always gets in; per connection at most OUT_BATCH bytes
 * of nghttp2 output (plus one chunk) wait for the socket; everything else
 * is bounded in ptcon_grpc.h. Log lines about connections are rate-limited
 * per cause (ptcon_ratelog.h).
 */
#include "ptprof_console.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "console/ptcon_agg.h"
#include "console/ptcon_bucket.h"
#include "console/ptcon_grpc.h"
#include "console/ptcon_peer.h"
#include "console/ptcon_ratelog.h"
#include "ptprof.h"

/* One log shape across the library: a program passes one callback to both. */
_Static_assert(PTCON_LOG_ERROR == PTPROF_LOG_ERROR && PTCON_LOG_WARN == PTPROF_LOG_WARN &&
                   PTCON_LOG_INFO == PTPROF_LOG_INFO,
               "ptcon and ptprof log levels differ");

#define OUT_BATCH (64u * 1024u)          /* output gathered per send, and at most waiting */
#define ACCEPT_PAUSE_NS 100000000u       /* listener out of epoll after EMFILE */

/* epoll tags for the fds that are not connections */
static char g_tag_listen, g_tag_stop, g_tag_wake;

typedef struct sconn {
  struct sconn *next, *prev;
  int fd;
  ptcon_gconn *g;
  uint8_t *out;              /* nghttp2 output gathered for, or refused by, the socket */
  size_t outlen, outoff, outcap;
  uint32_t events;           /* current epoll interest */
  int eof;                   /* the peer closed or reset: close silently */
} sconn;

struct ptcon_server {
  ptcon_server_options opt;
  int lfd, efd, epfd, wfd;
  uint16_t port;
  pthread_t thr;
  ptcon_agg *agg;
  ptcon_grpc *grpc;
  sconn *conns;
  ptcon_ratelog rl;
  uint64_t accept_resume;    /* listener out of epoll until then (EMFILE, rate); 0 = in */
  uint64_t drops_logged;     /* streams ended by the total budget, as logged */
  uint64_t waits_logged;     /* watch calls that waited for the rate, as logged */
  uint32_t uid;              /* whom we serve (geteuid at start) */
  ptcon_peer peer;
  ptcon_bucket accepts;
};

static _Atomic int g_server_running;

void ptcon_server_options_init(ptcon_server_options *opt) { memset(opt, 0, sizeof *opt); }

/* ---- connections -------------------------------------------------------- */

/* Interest: input unless the gRPC layer holds some back (the client is over
 * its input rates: what it sends waits in the kernel, and TCP flow control
 * slows it down); output while bytes wait for the socket. */
static void conn_update_events(ptcon_server *s, sconn *c) {
  uint32_t ev = (ptcon_gconn_wants_input(c->g) ? EPOLLIN : 0) |
                (c->outoff < c->outlen ? EPOLLOUT : 0);
  if (ev == c->events) return;
  struct epoll_event e = {.events = ev, .data.ptr = c};
  epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &e);
  c->events = ev;
}

static void conn_close(ptcon_server *s, sconn *c) {
  epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  ptcon_gconn_del(c->g);
  free(c->out);
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  free(c);
}

/* Sends what the gRPC layer has: its output (one HTTP/2 frame or a run of
 * DATA per ptcon_gconn_send) is gathered in c->out up to OUT_BATCH and
 * written with one send, so that many small frames (a client's PINGs
 * answered, many short calls) cost one system call, not one each; bytes
 * the socket refuses wait there (at most OUT_BATCH + one chunk). Returns
 * -1 if the connection is to be closed (logged here). */
static int conn_flush(ptcon_server *s, sconn *c, uint64_t now) {
  if (c->eof) return -1;
  for (;;) {
    while (c->outlen - c->outoff < OUT_BATCH) {
      const uint8_t *p;
      ssize_t n = ptcon_gconn_send(c->g, &p, now);
      if (n <= 0) break;
      if (c->outoff && c->outlen + (size_t)n > c->outcap) {
        memmove(c->out, c->out + c->outoff, c->outlen - c->outoff);
        c->outlen -= c->outoff;
        c->outoff = 0;
      }
      if (c->outlen + (size_t)n > c->outcap) {
        size_t cap = c->outlen + (size_t)n < OUT_BATCH ? OUT_BATCH : c->outlen + (size_t)n;
        uint8_t *o = realloc(c->out, cap);
        if (!o) return -1;
        c->out = o;
        c->outcap = cap;
      }
      memcpy(c->out + c->outlen, p, (size_t)n);
      c->outlen += (size_t)n;
    }
    if (c->outoff == c->outlen) {
      c->outoff = c->outlen = 0;
      break;
    }
    ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return -1;
    }
    c->outoff += (size_t)w;
    if (c->outoff < c->outlen) break;   /* the socket is full */
    c->outoff = c->outlen = 0;
  }
  const char *why = ptcon_gconn_closing(c->g);
  if (why == ptcon_gconn_ended) {
    if (c->outoff == c->outlen) return -1;
  } else if (why) {
    ptcon_ratelog_event(&s->rl, now, PTCON_LOG_INFO, "connections closed", why,
                        "task console: closing connection: %s", why);
    return -1;
  }
  conn_update_events(s, c);
  return 0;
}

static void conn_read(sconn *c, uint32_t events, uint64_t now) {
  uint8_t buf[16384];
  if (!ptcon_gconn_wants_input(c->g)) {
    /* Not reading (over its rates); a hang-up still ends it. */
    if (events & (EPOLLHUP | EPOLLERR)) c->eof = 1;
    return;
  }
  for (int rounds = 0; rounds < 16 && ptcon_gconn_wants_input(c->g); rounds++) {
    ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      c->eof = 1;
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      c->eof = 1;
      return;
    }
    if (ptcon_gconn_recv(c->g, buf, (size_t)n, now) != 0) return;
  }
}

static void listener_pause(ptcon_server *s, uint64_t until) {
  if (!s->accept_resume) epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
  s->accept_resume = until ? until : 1;
}

/* Whether the other end of fd is a socket of our own user; logs (rate-
 * limited) why not. */
static int peer_is_ours(ptcon_server *s, int fd, uint64_t now) {
  uint32_t uid;
  int rc = ptcon_peer_uid(&s->peer, fd, &uid);
  if (rc == 0 && uid == s->uid) return 1;
  if (rc == 0)
    ptcon_ratelog_event(&s->rl, now, PTCON_LOG_WARN, "connections refused", "another user",
                        "task console: refused a connection of uid %u (this console serves "
                        "uid %u only)", (unsigned)uid, (unsigned)s->uid);
  else
    ptcon_ratelog_event(&s->rl, now, PTCON_LOG_WARN, "connections refused", "user unknown",
                        "task console: refused a connection whose user cannot be told "
                        "(%s: %s)", ptcon_peer_method(&s->peer), strerror(-rc));
  return 0;
}

static void conn_accept(ptcon_server *s, uint64_t now) {
  for (;;) {
    if (!ptcon_bucket_peek(&s->accepts, now)) {
      /* Over the rate: newcomers wait in the backlog (the kernel's memory,
       * not our time) until the next token. */
      ptcon_ratelog_event(&s->rl, now, PTCON_LOG_WARN, "accept pauses", "connection rate limit",
                          "task console: more than %u new connections a second: accepting the "
                          "next ones later (they wait in the backlog)",
                          (unsigned)s->opt.accept_rate_per_s);
      listener_pause(s, ptcon_bucket_next(&s->accepts, now));
      return;
    }
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* The pending connection stays queued and the level-triggered
         * listener would fire again at once: take it out of epoll for
         * 100 ms instead of spinning (and logging) in a loop. */
        ptcon_ratelog_event(&s->rl, now, PTCON_LOG_WARN, "accept failures", "out of resources",
                            "task console: accept: %s (pausing accepts for 100 ms at a time)",
                            strerror(errno));
        listener_pause(s, now + ACCEPT_PAUSE_NS);
      }
      return;
    }
    ptcon_bucket_take(&s->accepts, now);
    if (!s->opt.allow_other_users && !peer_is_ours(s, fd, now)) {
      close(fd);   /* nothing of ours was sent: not even SETTINGS */
      continue;
    }
    if (ptcon_grpc_nconns(s->grpc) >= s->opt.max_connections) {
      /* Full: the newcomer may be the real client an attacker locks out;
       * make room by closing the connection idle longest. */
      ptcon_gconn *v = ptcon_grpc_evict_candidate(s->grpc);
      ptcon_ratelog_event(&s->rl, now, PTCON_LOG_WARN, "connections evicted", "table full",
                          "task console: %u connections: closing the one idle longest for a "
                          "newcomer", (unsigned)s->opt.max_connections);
      if (v) conn_close(s, ptcon_gconn_ud(v));
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sconn *c = calloc(1, sizeof *c);
    if (!c) {
      close(fd);
      continue;
    }
    c->fd = fd;
    if (ptcon_gconn_new(s->grpc, c, now, &c->g) != 0) {
      free(c);
      close(fd);
      continue;
    }
    c->events = EPOLLIN;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
      ptcon_gconn_del(c->g);
      free(c);
      close(fd);
      continue;
    }
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    if (conn_flush(s, c, now)) conn_close(s, c);
  }
}

/* ---- the loop ----------------------------------------------------------- */

static int timeout_ms(uint64_t due, uint64_t now) {
  if (due == UINT64_MAX) return -1;
  if (due <= now) return 0;
  uint64_t ms = (due - now + 999999u) / 1000000u;   /* never wake early */
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

static void *server_main(void *arg) {
  ptcon_server *s = arg;
  struct epoll_event evs[64];
  for (;;) {
    uint64_t now = ptcon_mono_ns();
    if (s->accept_resume && now >= s->accept_resume) {
      struct epoll_event le = {.events = EPOLLIN, .data.ptr = &g_tag_listen};
      epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &le);
      s->accept_resume = 0;
    }
    uint64_t due = ptcon_grpc_next_due(s->grpc);
    uint64_t d2 = ptcon_ratelog_next_due(&s->rl);
    if (d2 < due) due = d2;
    if (s->accept_resume && s->accept_resume < due) due = s->accept_resume;
    int n = epoll_wait(s->epfd, evs, 64, timeout_ms(due, now));
    if (n < 0 && errno != EINTR) break;
    now = ptcon_mono_ns();
    for (int i = 0; i < n; i++) {
      void *tag = evs[i].data.ptr;
      if (tag == &g_tag_listen) {
        conn_accept(s, now);
      } else if (tag == &g_tag_stop) {
        goto out;
      } else if (tag == &g_tag_wake) {
        uint64_t v;
        if (read(s->wfd, &v, sizeof v) < 0) { /* EAGAIN: another wake raced us */ }
        ptcon_wake_rearm();   /* before draining: a crossing during it wakes us again */
        ptcon_grpc_drain(s->grpc, now);
      } else {
        sconn *c = tag;
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_read(c, evs[i].events, now);
      }
    }
    ptcon_grpc_timer(s->grpc, now);
    ptcon_grpc_stats gs;
    ptcon_grpc_get_stats(s->grpc, &gs);
    if (gs.watches_waited != s->waits_logged) {
      ptcon_ratelog_event(&s->rl, now, PTCON_LOG_WARN, "watch calls waited", "rate limit",
                          "task console: more than %u new watch calls a second: %llu wait "
                          "their turn", (unsigned)s->opt.watch_rate_per_s,
                          (unsigned long long)(gs.watches_waited - s->waits_logged));
      s->waits_logged = gs.watches_waited;
    }
    if (gs.streams_dropped != s->drops_logged) {
      ptcon_ratelog_event(&s->rl, now, PTCON_LOG_WARN, "budget drops",
                          "unsent messages over the total budget",
                          "task console: ended %llu calls of the slowest clients with "
                          "RESOURCE_EXHAUSTED (unsent messages over the total budget)",
                          (unsigned long long)(gs.streams_dropped - s->drops_logged));
      s->drops_logged = gs.streams_dropped;
    }
    ptcon_ratelog_flush(&s->rl, now);
    /* Every connection: flush output, close the dead ones. Bounded by
     * max_connections, and only when something woke us. */
    for (sconn *c = s->conns, *next; c; c = next) {
      next = c->next;
      if (conn_flush(s, c, now)) conn_close(s, c);
    }
  }
out:
  while (s->conns) conn_close(s, s->conns);
  ptcon_ratelog_flush(&s->rl, UINT64_MAX);
  return NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

int ptcon_server_new(ptcon_server **out, const ptcon_server_options *opt) {
  int rc;
  struct sockaddr_storage ss;
  socklen_t sslen;
  if (!out || !opt) return -EINVAL;
  rc = ptcon_bind_parse(opt->bind, opt->allow_non_loopback, &ss, &sslen);
  if (rc) return rc;
  int wfd = ptcon_wake_fd();
  if (wfd < 0) return wfd;
  int expect = 0;
  if (!atomic_compare_exchange_strong(&g_server_running, &expect, 1)) return -EBUSY;
  ptcon_server *s = calloc(1, sizeof *s);
  if (!s) {
    rc = -ENOMEM;
    goto fail_alloc;
  }
  s->opt = *opt;
  s->opt.bind = NULL;   /* not kept: the caller owns the string */
  s->wfd = wfd;
  if (!s->opt.max_connections) s->opt.max_connections = 128;
  if (!s->opt.accept_rate_per_s) s->opt.accept_rate_per_s = 128;
  if (!s->opt.accept_burst) s->opt.accept_burst = 128;
  if (!s->opt.watch_rate_per_s) s->opt.watch_rate_per_s = 16;
  if (!s->opt.watch_burst) s->opt.watch_burst = 64;
  s->uid = (uint32_t)geteuid();
  s->peer.nl = -1;
  ptcon_ratelog_init(&s->rl, opt->log, opt->log_user_data, 0);
  s->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->lfd < 0) {
    rc = -errno;
    goto fail_socket;
  }
  int one = 1;
  setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s->lfd, (struct sockaddr *)&ss, sslen) != 0 || listen(s->lfd, 1024) != 0) {
    rc = -errno;
    goto fail_bind;
  }
  struct sockaddr_storage got;
  socklen_t gl = sizeof got;
  getsockname(s->lfd, (struct sockaddr *)&got, &gl);
  s->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                            : ((struct sockaddr_in *)&got)->sin_port);
  if (!s->opt.allow_other_users) ptcon_peer_init(&s->peer, s->lfd);
  ptcon_bucket_init(&s->accepts, s->opt.accept_rate_per_s, s->opt.accept_burst, ptcon_mono_ns());
  rc = ptcon_agg_new(&s->agg, opt->retention_ms, opt->max_retained);
  if (rc) goto fail_bind;
  ptcon_grpc_limits lim = {
    .publish_interval_ns = (uint64_t)opt->publish_interval_ms * 1000000u,
    .max_message_bytes = opt->max_message_bytes,
    .max_queued_bytes = opt->max_queued_bytes,
    .max_total_queued_bytes = opt->max_total_queued_bytes,
    .stall_timeout_ns = (uint64_t)opt->stall_timeout_ms * 1000000u,
    .idle_timeout_ns = (uint64_t)opt->idle_timeout_ms * 1000000u,
    .watch_rate_per_s = s->opt.watch_rate_per_s,
    .watch_burst = s->opt.watch_burst,
  };
  rc = ptcon_grpc_new(&s->grpc, s->agg, &lim, ptcon_mono_ns());
  if (rc) goto fail_grpc;
  s->epfd = epoll_create1(EPOLL_CLOEXEC);
  s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->epfd < 0 || s->efd < 0) {
    rc = -errno;
    goto fail_fds;
  }
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = &g_tag_listen};
  struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = &g_tag_stop};
  struct epoll_event e3 = {.events = EPOLLIN, .data.ptr = &g_tag_wake};
  if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &e) ||
      epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->efd, &e2) ||
      epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wfd, &e3)) {
    rc = -errno;
    goto fail_fds;
  }
  /* The server thread takes none of the app's asynchronous signals (their
   * handlers belong on app threads); SIGPROF stays open so the sampler sees
   * the server's CPU too, and faults stay deliverable. */
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGPROF);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  sigdelset(&all, SIGABRT);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = -pthread_create(&s->thr, NULL, server_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) goto fail_fds;
  pthread_setname_np(s->thr, "ptcon-server");
  if (opt->log) {
    char line[320];
    if (s->opt.allow_other_users)
      snprintf(line, sizeof line, "task console listening on %s (port %u), for every user",
               opt->bind, (unsigned)s->port);
    else
      snprintf(line, sizeof line,
               "task console listening on %s (port %u), for uid %u only (users told by %s)",
               opt->bind, (unsigned)s->port, (unsigned)s->uid, ptcon_peer_method(&s->peer));
    opt->log(PTCON_LOG_INFO, line, opt->log_user_data);
  }
  *out = s;
  return 0;
fail_fds:
  if (s->efd >= 0) close(s->efd);
  if (s->epfd >= 0) close(s->epfd);
  ptcon_grpc_del(s->grpc);
fail_grpc:
  ptcon_agg_del(s->agg);
fail_bind:
  ptcon_peer_fini(&s->peer);
  close(s->lfd);
fail_socket:
  free(s);
fail_alloc:
  atomic_store(&g_server_running, 0);
  return rc;
}

uint16_t ptcon_server_port(const ptcon_server *s) { return s ? s->port : 0; }

void ptcon_server_del(ptcon_server *s) {
  if (!s) return;
  uint64_t v = 1;
  if (write(s->efd, &v, sizeof v) != sizeof v) { /* cannot fail: counter far from max */ }
  pthread_join(s->thr, NULL);
  close(s->efd);
  close(s->epfd);   /* the wake eventfd stays open: producers may still write it */
  close(s->lfd);
  ptcon_peer_fini(&s->peer);
  ptcon_grpc_del(s->grpc);
  ptcon_agg_del(s->agg);
  free(s);
  atomic_store(&g_server_running, 0);
}
