/*
 * ptcon_sockdiag.h - who owns the other end of a loopback TCP connection,
 * from the kernel's socket table: the bytes of a NETLINK_SOCK_DIAG
 * (inet_diag) request for one exact socket, the parsing of the kernel's
 * answer, and the parsing of one line of /proc/net/tcp or /proc/net/tcp6
 * (the fallback where sock_diag is unavailable). No I/O here (ptcon_peer.c
 * sends, receives and reads); every parser takes untrusted bytes and is
 * fuzzed (tests/console/fuzz_sockdiag.c).
 *
 * A socket is named by its tuple as seen from that socket: its local
 * address and port and its remote address and port. For the peer of a
 * connection we accepted, local = the address accept() reported, remote =
 * our own end (getsockname). Addresses are kept in IPv6 form (IPv4 as
 * ::ffff:a.b.c.d), so a dual-stack socket talking IPv4 matches as the
 * kernel reports it either way.
 *
 * Threads: any; pure functions.
 */
#ifndef PTCON_SOCKDIAG_H
#define PTCON_SOCKDIAG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct ptcon_tuple {
  uint8_t local[16], remote[16];   /* IPv6 form, network byte order */
  uint16_t lport, rport;           /* host byte order */
} ptcon_tuple;

/* TCP states as the kernel numbers them (include/net/tcp_states.h). */
enum {
  PTCON_TCP_ESTABLISHED = 1,
  PTCON_TCP_TIME_WAIT = 6,
  PTCON_TCP_LISTEN = 10,
  PTCON_TCP_NEW_SYN_RECV = 12,
};

/* Fills *t from a socket's local and remote addresses (AF_INET or
 * AF_INET6). 0, or -EAFNOSUPPORT for another family or a short length. */
int ptcon_tuple_from(ptcon_tuple *t, const struct sockaddr *local, socklen_t llen,
                     const struct sockaddr *remote, socklen_t rlen);

/* Whether the kernel's uid for a socket in this state names the process
 * that owns it: not for a time-wait or request socket (the kernel reports
 * uid 0 for those: nobody holds them any more) nor a listener. */
int ptcon_tcp_state_has_owner(unsigned state);

/* The request's size: nlmsghdr + inet_diag_req_v2. */
#define PTCON_SOCKDIAG_REQ_LEN 72u

/* Writes into buf (at least PTCON_SOCKDIAG_REQ_LEN bytes) the
 * SOCK_DIAG_BY_FAMILY request, without NLM_F_DUMP, for the one TCP socket
 * named by *t (any state), with sequence number seq. Returns its length. */
size_t ptcon_sockdiag_request(uint8_t *buf, const ptcon_tuple *t, uint32_t seq);

/* Parses one datagram the kernel answered (len bytes). Returns:
 *   0        it describes exactly the socket *want: *uid and *state set;
 *   -ENOENT  the kernel says there is no such socket (or, on a kernel
 *            without inet_diag for TCP, that it cannot tell: see
 *            ptcon_peer.c's start-up probe);
 *   -EAGAIN  the datagram answers another request (sequence number): skip;
 *   -ESRCH   a socket was described, but not this one;
 *   another negative errno the kernel returned (NLMSG_ERROR);
 *   -EPROTO  malformed.
 * Never reads outside buf[0..len). */
int ptcon_sockdiag_reply(const uint8_t *buf, size_t len, const ptcon_tuple *want, uint32_t seq,
                         uint32_t *uid, unsigned *state);

/* Parses one line of /proc/net/tcp or /proc/net/tcp6 (len bytes, the
 * trailing newline optional; no NUL needed). Returns 1 and sets *uid and
 * *state when the line is the socket *want, 0 when it is another socket,
 * -EINVAL when it is not a socket line (the header, or malformed). Never
 * reads outside line[0..len). */
int ptcon_proctcp_line(const char *line, size_t len, const ptcon_tuple *want, uint32_t *uid,
                       unsigned *state);

#endif
