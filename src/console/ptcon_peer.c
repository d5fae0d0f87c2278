/* ptcon_peer.c - see ptcon_peer.h. The server thread only. */
#include "console/ptcon_peer.h"

#include <errno.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "console/ptcon_sockdiag.h"

/* One datagram of the kernel's answer: the inet_diag_msg and the few
 * attributes the kernel always adds fit many times over. */
#define REPLY_CAP 8192u

static int nl_lookup(ptcon_peer *p, const ptcon_tuple *t, uint32_t *uid, unsigned *state) {
  uint8_t req[PTCON_SOCKDIAG_REQ_LEN];
  uint32_t seq = ++p->seq;
  size_t n = ptcon_sockdiag_request(req, t, seq);
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  ssize_t w;
  do {
    w = sendto(p->nl, req, n, 0, (struct sockaddr *)&kernel, sizeof kernel);
  } while (w < 0 && errno == EINTR);
  if (w < 0) return -errno;
  uint8_t buf[REPLY_CAP];
  /* The answer is queued before sendto returns; answers to earlier
   * requests that were given up on (none expected) are skipped. */
  for (int tries = 0; tries < 8; tries++) {
    struct sockaddr_nl from;
    socklen_t fl = sizeof from;
    ssize_t r = recvfrom(p->nl, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC,
                         (struct sockaddr *)&from, &fl);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
      struct pollfd pf = {.fd = p->nl, .events = POLLIN};
      if (poll(&pf, 1, 50) <= 0) return -ETIMEDOUT;
      continue;
    }
    if (from.nl_pid != 0) continue;                 /* only the kernel answers */
    if ((size_t)r > sizeof buf) return -EMSGSIZE;   /* truncated */
    int rc = ptcon_sockdiag_reply(buf, (size_t)r, t, seq, uid, state);
    if (rc != -EAGAIN) return rc;
  }
  return -ETIMEDOUT;
}

static int proc_scan(const char *path, const ptcon_tuple *t, uint32_t *uid, unsigned *state) {
  FILE *f = fopen(path, "re");
  if (!f) return -errno;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int rc = -ENOENT;
  while ((n = getline(&line, &cap, f)) > 0) {
    if (ptcon_proctcp_line(line, (size_t)n, t, uid, state) == 1) {
      rc = 0;
      break;
    }
  }
  free(line);
  fclose(f);
  return rc;
}

static int proc_lookup(const ptcon_tuple *t, uint32_t *uid, unsigned *state) {
  /* An IPv4 connection's peer may be an AF_INET socket (tcp) or a
   * dual-stack AF_INET6 one (tcp6, v4-mapped); an IPv6 one is in tcp6
   * only. For IPv4, tcp's answer stands unless tcp6 has the socket (a
   * kernel without IPv6 has no tcp6 file). */
  static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  int v4 = memcmp(t->local, v4mapped, 12) == 0;
  int rc = v4 ? proc_scan("/proc/net/tcp", t, uid, state) : -ENOENT;
  if (rc == 0) return 0;
  int rc6 = proc_scan("/proc/net/tcp6", t, uid, state);
  if (rc6 == 0) return 0;
  return v4 ? rc : rc6;
}

static int lookup(ptcon_peer *p, const ptcon_tuple *t, uint32_t *uid, unsigned *state) {
  return p->nl >= 0 ? nl_lookup(p, t, uid, state) : proc_lookup(t, uid, state);
}

int ptcon_peer_init(ptcon_peer *p, int listen_fd) {
  memset(p, 0, sizeof *p);
  p->nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
  if (p->nl < 0) {
    p->nl_err = errno;
    return 0;
  }
  /* The probe: the kernel must find our own listener. A kernel without
   * inet_diag for TCP answers ENOENT to every lookup, which would
   * otherwise read as "that socket is gone". */
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  struct sockaddr_storage none;
  memset(&none, 0, sizeof none);
  ptcon_tuple t;
  uint32_t uid = 0;
  unsigned state = 0;
  int rc = getsockname(listen_fd, (struct sockaddr *)&ss, &sl) ? -errno : 0;
  if (rc == 0) {
    none.ss_family = ss.ss_family;
    rc = ptcon_tuple_from(&t, (struct sockaddr *)&ss, sl, (struct sockaddr *)&none, sizeof none);
  }
  if (rc == 0) rc = nl_lookup(p, &t, &uid, &state);
  if (rc == 0 && state != PTCON_TCP_LISTEN) rc = -ESRCH;
  if (rc) {
    close(p->nl);
    p->nl = -1;
    p->nl_err = -rc;
  }
  return 0;
}

void ptcon_peer_fini(ptcon_peer *p) {
  if (p->nl >= 0) close(p->nl);
  p->nl = -1;
}

const char *ptcon_peer_method(const ptcon_peer *p) {
  return p->nl >= 0 ? "sock_diag" : "/proc/net/tcp";
}

int ptcon_peer_uid(ptcon_peer *p, int fd, uint32_t *uid) {
  struct sockaddr_storage mine, theirs;
  socklen_t ml = sizeof mine, tl = sizeof theirs;
  if (getsockname(fd, (struct sockaddr *)&mine, &ml) != 0) return -errno;
  if (getpeername(fd, (struct sockaddr *)&theirs, &tl) != 0) return -errno;
  ptcon_tuple t;   /* the peer's socket: its local end is our remote one */
  int rc = ptcon_tuple_from(&t, (struct sockaddr *)&theirs, tl, (struct sockaddr *)&mine, ml);
  if (rc) return rc;
  unsigned state = 0;
  rc = lookup(p, &t, uid, &state);
  if (rc == -ESRCH) rc = -ENOENT;   /* another socket answered: ours is gone */
  if (rc == 0 && !ptcon_tcp_state_has_owner(state)) rc = -ENOENT;
  return rc;
}
