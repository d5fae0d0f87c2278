/*
 * ptcon_peer.h - the user at the other end of an accepted loopback TCP
 * connection, from the kernel's socket table: the peer's socket is the one
 * whose local end is our remote end and whose remote end is ours, and the
 * kernel records the uid that created it. Asked through NETLINK_SOCK_DIAG
 * (inet_diag: one exact lookup by the 4-tuple, no dump), or, where that is
 * unavailable, by reading /proc/net/tcp and /proc/net/tcp6. The bytes are
 * built and parsed by ptcon_sockdiag.c (no I/O there); this file does the
 * I/O.
 *
 * Ownership: a ptcon_peer holds one netlink socket (close-on-exec) from
 * _init to _fini. Threads: one (the server thread). Every call is
 * non-blocking: the kernel answers a sock_diag request before sendto
 * returns.
 */
#ifndef PTCON_PEER_H
#define PTCON_PEER_H

#include <stdint.h>

typedef struct ptcon_peer {
  int nl;            /* NETLINK_SOCK_DIAG socket, -1 when /proc is used */
  uint32_t seq;
  int nl_err;        /* why sock_diag is not used (0 = it is) */
} ptcon_peer;

/* Opens the netlink socket and checks that the kernel answers a lookup
 * (of the listening socket listen_fd, whose owner must be us); else the
 * lookups read /proc/net/tcp{,6}. 0 always (a lookup that cannot be made
 * fails later, per connection); ptcon_peer_method names the way chosen. */
int ptcon_peer_init(ptcon_peer *p, int listen_fd);
void ptcon_peer_fini(ptcon_peer *p);
/* "sock_diag" or "/proc/net/tcp" (static). */
const char *ptcon_peer_method(const ptcon_peer *p);

/* The uid that owns the other end of the connected TCP socket fd. 0 and
 * *uid; -ENOENT when that socket no longer exists or has no owner any more
 * (closed: time-wait), -ENOTCONN when fd has no peer, or another negative
 * errno of the lookup. */
int ptcon_peer_uid(ptcon_peer *p, int fd, uint32_t *uid);

#endif
