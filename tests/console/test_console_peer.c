/* Unit tests of what decides who and how often the console serves (issue
 * 21): the token bucket on made-up moments with exact values; the
 * sock_diag request bytes; the parsing of the kernel's answers and of
 * /proc/net/tcp{,6} lines (well-formed, another socket, errors, truncated);
 * the peer lookup over real loopback sockets by both ways (sock_diag and
 * /proc), our own and (as root) another user's; and the programs' setting
 * POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS (src/common/pt_console_env.h). A second user's connection is refused in
 * tests/console/console_users_test.sh (real processes, useradd). */
#include "pt_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/pt_console_env.h"
#include "console/ptcon_bucket.h"
#include "console/ptcon_peer.h"
#include "console/ptcon_sockdiag.h"

#define SEC 1000000000ull

PT_TEST(console_bucket_exact) {
  ptcon_bucket b;
  uint64_t t0 = 7 * SEC;
  ptcon_bucket_init(&b, 4, 3, t0);   /* a token every 250 ms, 3 at once */
  PT_ASSERT_UINT_EQ(b.period_ns, 250000000u);
  PT_ASSERT_UINT_EQ(ptcon_bucket_peek(&b, t0), 3);
  PT_ASSERT_UINT_EQ(ptcon_bucket_next(&b, t0), t0);
  for (int i = 0; i < 3; i++) PT_ASSERT_INT_EQ(ptcon_bucket_take(&b, t0), 1);
  PT_ASSERT_INT_EQ(ptcon_bucket_take(&b, t0), 0);
  PT_ASSERT_UINT_EQ(ptcon_bucket_next(&b, t0), t0 + 250000000u);
  PT_ASSERT_INT_EQ(ptcon_bucket_take(&b, t0 + 250000000u - 1), 0);
  PT_ASSERT_INT_EQ(ptcon_bucket_take(&b, t0 + 250000000u), 1);
  PT_ASSERT_INT_EQ(ptcon_bucket_take(&b, t0 + 250000000u), 0);
  /* Partial periods carry over: 1.9 periods give 1 token, the 0.9 stays. */
  PT_ASSERT_UINT_EQ(ptcon_bucket_peek(&b, t0 + 250000000u + 475000000u), 1);
  PT_ASSERT_UINT_EQ(ptcon_bucket_peek(&b, t0 + 250000000u + 500000000u - 1), 1);
  PT_ASSERT_UINT_EQ(ptcon_bucket_peek(&b, t0 + 250000000u + 500000000u), 2);
  /* A long pause fills it to the burst, not beyond; a time going back
   * earns nothing. */
  PT_ASSERT_UINT_EQ(ptcon_bucket_peek(&b, t0 + 3600 * SEC), 3);
  PT_ASSERT_INT_EQ(ptcon_bucket_take(&b, t0 + 3600 * SEC), 1);
  PT_ASSERT_UINT_EQ(ptcon_bucket_peek(&b, t0), 2);
  PT_ASSERT_UINT_EQ(ptcon_bucket_next(&b, t0 + 3600 * SEC), t0 + 3600 * SEC);
  /* 1000 takes a second of attempts at 1 kHz against 16/s, burst 64:
   * exactly 64 + 15 succeed in the first second (the 16th token comes at
   * 1 s exactly, after the last attempt at 0.999 s). */
  ptcon_bucket_init(&b, 16, 64, 0);
  int ok = 0;
  for (uint64_t t = 0; t < SEC; t += SEC / 1000) ok += ptcon_bucket_take(&b, t);
  PT_ASSERT_INT_EQ(ok, 64 + 15);
  /* Degenerate settings are made sane. */
  ptcon_bucket_init(&b, 0, 0, 0);
  PT_ASSERT_UINT_EQ(b.period_ns, SEC);
  PT_ASSERT_UINT_EQ(b.burst, 1);
}

static ptcon_tuple tuple4(const char *la, uint16_t lp, const char *ra, uint16_t rp) {
  struct sockaddr_in l = {.sin_family = AF_INET, .sin_port = htons(lp)};
  struct sockaddr_in r = {.sin_family = AF_INET, .sin_port = htons(rp)};
  inet_pton(AF_INET, la, &l.sin_addr);
  inet_pton(AF_INET, ra, &r.sin_addr);
  ptcon_tuple t;
  PT_ASSERT_INT_EQ(ptcon_tuple_from(&t, (struct sockaddr *)&l, sizeof l, (struct sockaddr *)&r,
                                    sizeof r), 0);
  return t;
}

PT_TEST(console_sockdiag_request_bytes) {
  ptcon_tuple t = tuple4("127.0.0.1", 40000, "127.0.0.2", 6669);
  uint8_t buf[PTCON_SOCKDIAG_REQ_LEN];
  PT_ASSERT_UINT_EQ(ptcon_sockdiag_request(buf, &t, 77), PTCON_SOCKDIAG_REQ_LEN);
  struct nlmsghdr h;
  struct inet_diag_req_v2 r;
  memcpy(&h, buf, sizeof h);
  memcpy(&r, buf + sizeof h, sizeof r);
  PT_ASSERT_UINT_EQ(h.nlmsg_len, PTCON_SOCKDIAG_REQ_LEN);
  PT_ASSERT_UINT_EQ(h.nlmsg_type, SOCK_DIAG_BY_FAMILY);
  PT_ASSERT_UINT_EQ(h.nlmsg_flags, NLM_F_REQUEST);   /* one socket, not a dump */
  PT_ASSERT_UINT_EQ(h.nlmsg_seq, 77);
  PT_ASSERT_UINT_EQ(r.sdiag_family, AF_INET);
  PT_ASSERT_UINT_EQ(r.sdiag_protocol, IPPROTO_TCP);
  PT_ASSERT_UINT_EQ(r.idiag_states, 0xffffffffu);
  PT_ASSERT_UINT_EQ(ntohs(r.id.idiag_sport), 40000);
  PT_ASSERT_UINT_EQ(ntohs(r.id.idiag_dport), 6669);
  PT_ASSERT_UINT_EQ(ntohl(r.id.idiag_src[0]), 0x7f000001u);
  PT_ASSERT_UINT_EQ(ntohl(r.id.idiag_dst[0]), 0x7f000002u);
  PT_ASSERT_UINT_EQ(r.id.idiag_cookie[0], INET_DIAG_NOCOOKIE);
  PT_ASSERT_UINT_EQ(r.id.idiag_cookie[1], INET_DIAG_NOCOOKIE);
  /* IPv6: the whole address, family AF_INET6. */
  struct sockaddr_in6 l6 = {.sin6_family = AF_INET6, .sin6_port = htons(1)};
  struct sockaddr_in6 r6 = {.sin6_family = AF_INET6, .sin6_port = htons(2)};
  l6.sin6_addr = in6addr_loopback;
  r6.sin6_addr = in6addr_loopback;
  PT_ASSERT_INT_EQ(ptcon_tuple_from(&t, (struct sockaddr *)&l6, sizeof l6, (struct sockaddr *)&r6,
                                    sizeof r6), 0);
  ptcon_sockdiag_request(buf, &t, 1);
  memcpy(&r, buf + sizeof h, sizeof r);
  PT_ASSERT_UINT_EQ(r.sdiag_family, AF_INET6);
  PT_ASSERT(memcmp(r.id.idiag_src, &in6addr_loopback, 16) == 0);
  /* Families the kernel's TCP table does not hold are refused. */
  struct sockaddr un = {.sa_family = AF_UNIX};
  PT_ASSERT_INT_EQ(ptcon_tuple_from(&t, &un, sizeof un, &un, sizeof un), -EAFNOSUPPORT);
  PT_ASSERT_INT_EQ(ptcon_tuple_from(&t, (struct sockaddr *)&l6, 8, (struct sockaddr *)&r6,
                                    sizeof r6), -EAFNOSUPPORT);
}

/* A datagram as the kernel answers: nlmsghdr + inet_diag_msg + an
 * attribute (the kernel always adds a few). */
static size_t diag_answer(uint8_t *buf, uint32_t seq, int family, const char *src, uint16_t sp,
                          const char *dst, uint16_t dp, unsigned state, uint32_t uid) {
  struct nlmsghdr h = {.nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_seq = seq};
  struct inet_diag_msg m;
  memset(&m, 0, sizeof m);
  m.idiag_family = (uint8_t)family;
  m.idiag_state = (uint8_t)state;
  m.id.idiag_sport = htons(sp);
  m.id.idiag_dport = htons(dp);
  if (family == AF_INET) {
    inet_pton(AF_INET, src, &m.id.idiag_src[0]);
    inet_pton(AF_INET, dst, &m.id.idiag_dst[0]);
  } else {
    inet_pton(AF_INET6, src, m.id.idiag_src);
    inet_pton(AF_INET6, dst, m.id.idiag_dst);
  }
  m.idiag_uid = uid;
  uint8_t attr[8] = {8, 0, 8 /* INET_DIAG_SHUTDOWN */, 0, 0, 0, 0, 0};
  h.nlmsg_len = (uint32_t)(sizeof h + sizeof m + sizeof attr);
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, &m, sizeof m);
  memcpy(buf + sizeof h + sizeof m, attr, sizeof attr);
  return h.nlmsg_len;
}

static size_t nl_error(uint8_t *buf, uint32_t seq, int32_t err) {
  struct nlmsghdr h = {.nlmsg_type = NLMSG_ERROR, .nlmsg_seq = seq};
  h.nlmsg_len = (uint32_t)(sizeof h + sizeof err + sizeof h);
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, &err, sizeof err);
  memcpy(buf + sizeof h + sizeof err, &h, sizeof h);   /* the request's header */
  return h.nlmsg_len;
}

PT_TEST(console_sockdiag_reply_parsing) {
  ptcon_tuple t = tuple4("127.0.0.1", 40000, "127.0.0.1", 6669);
  uint8_t buf[512];
  uint32_t uid = 0;
  unsigned st = 0;
  size_t n = diag_answer(buf, 5, AF_INET, "127.0.0.1", 40000, "127.0.0.1", 6669, 1, 1234);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), 0);
  PT_ASSERT_UINT_EQ(uid, 1234);
  PT_ASSERT_UINT_EQ(st, PTCON_TCP_ESTABLISHED);
  /* A dual-stack socket talking IPv4 is described as AF_INET6, v4-mapped. */
  n = diag_answer(buf, 5, AF_INET6, "::ffff:127.0.0.1", 40000, "::ffff:127.0.0.1", 6669, 1, 99);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), 0);
  PT_ASSERT_UINT_EQ(uid, 99);
  /* Another socket (a port, an address, ends swapped, a listener). */
  n = diag_answer(buf, 5, AF_INET, "127.0.0.1", 40001, "127.0.0.1", 6669, 1, 1);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -ESRCH);
  n = diag_answer(buf, 5, AF_INET, "127.0.0.2", 40000, "127.0.0.1", 6669, 1, 1);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -ESRCH);
  n = diag_answer(buf, 5, AF_INET, "127.0.0.1", 6669, "127.0.0.1", 40000, 1, 1);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -ESRCH);
  n = diag_answer(buf, 5, AF_INET, "127.0.0.1", 40000, "0.0.0.0", 0, PTCON_TCP_LISTEN, 1);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -ESRCH);
  /* An answer to an earlier request is skipped. */
  n = diag_answer(buf, 4, AF_INET, "127.0.0.1", 40000, "127.0.0.1", 6669, 1, 1);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -EAGAIN);
  /* The kernel's errors. */
  n = nl_error(buf, 5, -ENOENT);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -ENOENT);
  n = nl_error(buf, 5, -EPERM);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -EPERM);
  n = nl_error(buf, 5, 7);   /* no such errno */
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -EPROTO);
  /* Malformed: every truncation of a good answer, a length past the end,
   * an unknown family. */
  n = diag_answer(buf, 5, AF_INET, "127.0.0.1", 40000, "127.0.0.1", 6669, 1, 1);
  for (size_t cut = 0; cut < sizeof(struct nlmsghdr) + sizeof(struct inet_diag_msg); cut++) {
    uint8_t *c = malloc(cut ? cut : 1);
    memcpy(c, buf, cut);
    PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(c, cut, &t, 5, &uid, &st), -EPROTO);
    free(c);
  }
  buf[0] = 0xff;   /* nlmsg_len beyond the datagram */
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -EPROTO);
  n = diag_answer(buf, 5, AF_UNIX, "127.0.0.1", 40000, "127.0.0.1", 6669, 1, 1);
  PT_ASSERT_INT_EQ(ptcon_sockdiag_reply(buf, n, &t, 5, &uid, &st), -EPROTO);
  /* What may carry a uid: not time-wait, listener or request sockets. */
  PT_ASSERT(ptcon_tcp_state_has_owner(PTCON_TCP_ESTABLISHED));
  PT_ASSERT(ptcon_tcp_state_has_owner(5));   /* FIN_WAIT2 */
  PT_ASSERT(!ptcon_tcp_state_has_owner(PTCON_TCP_TIME_WAIT));
  PT_ASSERT(!ptcon_tcp_state_has_owner(PTCON_TCP_LISTEN));
  PT_ASSERT(!ptcon_tcp_state_has_owner(PTCON_TCP_NEW_SYN_RECV));
  PT_ASSERT(!ptcon_tcp_state_has_owner(0));
  PT_ASSERT(!ptcon_tcp_state_has_owner(200));
}

PT_TEST(console_proctcp_line_parsing) {
  /* Lines as the kernel prints them (tcp4_seq_show, tcp6_seq_show); on
   * this little-endian machine 127.0.0.1 is 0100007F. */
  ptcon_tuple t = tuple4("127.0.0.1", 0xB4E5, "127.0.0.1", 0x1A0D);
  uint32_t uid = 0;
  unsigned st = 0;
  const char *hdr = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when "
                    "retrnsmt   uid  timeout inode\n";
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(hdr, strlen(hdr), &t, &uid, &st), -EINVAL);
  const char *mine = "   3: 0100007F:B4E5 0100007F:1A0D 01 00000000:00000000 00:00000000 "
                     "00000000  1001        0 123456 1 0000000000000000 20 4 30 10 -1\n";
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(mine, strlen(mine), &t, &uid, &st), 1);
  PT_ASSERT_UINT_EQ(uid, 1001);
  PT_ASSERT_UINT_EQ(st, PTCON_TCP_ESTABLISHED);
  /* Without the newline, and with lower-case digits. */
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(mine, strlen(mine) - 1, &t, &uid, &st), 1);
  const char *lower = "   3: 0100007f:b4e5 0100007f:1a0d 01 00000000:00000000 00:00000000 "
                      "00000000     7        0 1\n";
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(lower, strlen(lower), &t, &uid, &st), 1);
  PT_ASSERT_UINT_EQ(uid, 7);
  /* The same connection seen from the other end, and a time-wait entry. */
  const char *other = "   4: 0100007F:1A0D 0100007F:B4E5 01 00000000:00000000 00:00000000 "
                      "00000000     0        0 123457 1\n";
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(other, strlen(other), &t, &uid, &st), 0);
  const char *tw = "   5: 0100007F:B4E5 0100007F:1A0D 06 00000000:00000000 03:00001770 "
                   "00000000     0        0 0 3 0000000000000000\n";
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(tw, strlen(tw), &t, &uid, &st), 1);
  PT_ASSERT_UINT_EQ(st, PTCON_TCP_TIME_WAIT);
  PT_ASSERT(!ptcon_tcp_state_has_owner(st));
  /* tcp6: a dual-stack socket talking IPv4 (v4-mapped) matches the IPv4
   * connection; ::1 is 00000000000000000000000001000000. */
  const char *mapped = "   0: 0000000000000000FFFF00000100007F:B4E5 "
                       "0000000000000000FFFF00000100007F:1A0D 01 00000000:00000000 "
                       "00:00000000 00000000  1002        0 99 1\n";
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(mapped, strlen(mapped), &t, &uid, &st), 1);
  PT_ASSERT_UINT_EQ(uid, 1002);
  struct sockaddr_in6 l6 = {.sin6_family = AF_INET6, .sin6_port = htons(0xB4E5)};
  struct sockaddr_in6 r6 = {.sin6_family = AF_INET6, .sin6_port = htons(0x1A0D)};
  l6.sin6_addr = in6addr_loopback;
  r6.sin6_addr = in6addr_loopback;
  ptcon_tuple t6;
  ptcon_tuple_from(&t6, (struct sockaddr *)&l6, sizeof l6, (struct sockaddr *)&r6, sizeof r6);
  const char *v6 = "   0: 00000000000000000000000001000000:B4E5 "
                   "00000000000000000000000001000000:1A0D 01 00000000:00000000 "
                   "00:00000000 00000000  1003        0 98 1\n";
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(v6, strlen(v6), &t6, &uid, &st), 1);
  PT_ASSERT_UINT_EQ(uid, 1003);
  PT_ASSERT_INT_EQ(ptcon_proctcp_line(v6, strlen(v6), &t, &uid, &st), 0);
#endif
  /* Malformed: every prefix of a good line up to its uid (a line cut
   * inside the uid must not read as another uid), bad digits, a uid past
   * 32 bits, a 12-digit address. */
  size_t upto = (size_t)(strstr(mine, " 1001 ") - mine) + 5;
  for (size_t cut = 0; cut <= upto; cut++) {
    char *c = malloc(cut ? cut : 1);
    memcpy(c, mine, cut);
    PT_ASSERT_INT_EQ(ptcon_proctcp_line(c, cut, &t, &uid, &st), -EINVAL);
    free(c);
  }
  const char *bad[] = {
    "   3: 0100007G:B4E5 0100007F:1A0D 01 00000000:00000000 00:00000000 00000000 1 0 1\n",
    "   3: 0100007F:B4E5 0100007F:1A0D 01 00000000:00000000 00:00000000 00000000 4294967296 0\n",
    "   3: 0100007F0000:B4E5 0100007F:1A0D 01 00000000:00000000 00:00000000 00000000 1 0\n",
    "   3 0100007F:B4E5 0100007F:1A0D 01 00000000:00000000 00:00000000 00000000 1 0\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    PT_ASSERT_INT_EQ(ptcon_proctcp_line(bad[i], strlen(bad[i]), &t, &uid, &st), -EINVAL);
}

/* A connected pair over loopback: *cfd the client's end, *sfd ours. */
static void loop_pair(int family, int *lfd, int *cfd, int *sfd) {
  struct sockaddr_storage ss;
  socklen_t sl;
  memset(&ss, 0, sizeof ss);
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sl = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    sl = sizeof *a;
  }
  *lfd = socket(family, SOCK_STREAM, 0);
  if (family == AF_INET6 && (*lfd < 0 || bind(*lfd, (struct sockaddr *)&ss, sl) != 0)) {
    if (*lfd >= 0) close(*lfd);   /* no IPv6 loopback here */
    *lfd = -1;
    return;
  }
  PT_ASSERT(*lfd >= 0);
  if (family == AF_INET) PT_ASSERT(bind(*lfd, (struct sockaddr *)&ss, sl) == 0);
  PT_ASSERT(listen(*lfd, 4) == 0);
  getsockname(*lfd, (struct sockaddr *)&ss, &sl);
  *cfd = socket(family, SOCK_STREAM, 0);
  PT_ASSERT(connect(*cfd, (struct sockaddr *)&ss, sl) == 0);
  *sfd = accept(*lfd, NULL, NULL);
  PT_ASSERT(*sfd >= 0);
}

PT_TEST(console_peer_uid_of_loopback_connections) {
  for (int family = AF_INET; family; family = family == AF_INET ? AF_INET6 : 0) {
    int lfd, cfd, sfd;
    loop_pair(family, &lfd, &cfd, &sfd);
    if (family == AF_INET6 && lfd < 0) break;
    for (int way = 0; way < 2; way++) {
      ptcon_peer p;
      PT_ASSERT_INT_EQ(ptcon_peer_init(&p, lfd), 0);
      if (way == 1) {   /* the fallback: /proc/net/tcp{,6} */
        ptcon_peer_fini(&p);
      } else if (p.nl < 0) {
        fprintf(stderr, "# sock_diag unavailable here (errno %d): only /proc is tested\n",
                p.nl_err);
        continue;
      }
      uint32_t uid = 12345;
      PT_ASSERT_INT_EQ(ptcon_peer_uid(&p, sfd, &uid), 0);
      PT_ASSERT_UINT_EQ(uid, (uint32_t)geteuid());
      /* The listening socket has no peer. */
      PT_ASSERT_INT_EQ(ptcon_peer_uid(&p, lfd, &uid), -ENOTCONN);
      ptcon_peer_fini(&p);
    }
    close(cfd);
    close(sfd);
    close(lfd);
  }
}

/* The other end belongs to another user: a child that became nobody
 * (65534) connects; the lookup must name its uid, not ours (which is what
 * asking about our own end of the connection would give). Root only (the
 * child must change its uid); CI runs as root. */
PT_TEST(console_peer_uid_of_another_user) {
  if (geteuid() != 0) PT_SKIP("needs root to connect as another user");
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  PT_ASSERT(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
  PT_ASSERT(listen(lfd, 4) == 0);
  socklen_t al = sizeof a;
  getsockname(lfd, (struct sockaddr *)&a, &al);
  int done[2];
  PT_ASSERT(pipe(done) == 0);
  pid_t pid = fork();
  PT_ASSERT(pid >= 0);
  if (pid == 0) {
    char x;
    close(done[1]);
    if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)) _exit(2);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0) _exit(3);
    if (read(done[0], &x, 1) < 0) _exit(4);   /* hold the socket until the parent looked */
    _exit(0);
  }
  close(done[0]);
  int sfd = accept(lfd, NULL, NULL);
  PT_ASSERT(sfd >= 0);
  for (int way = 0; way < 2; way++) {
    ptcon_peer p;
    ptcon_peer_init(&p, lfd);
    if (way == 1) ptcon_peer_fini(&p);   /* /proc/net/tcp */
    uint32_t uid = 0;
    PT_ASSERT_INT_EQ(ptcon_peer_uid(&p, sfd, &uid), 0);
    PT_ASSERT_UINT_EQ(uid, 65534);
    ptcon_peer_fini(&p);
  }
  close(done[1]);
  int st;
  PT_ASSERT(waitpid(pid, &st, 0) == pid);
  PT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(sfd);
  close(lfd);
}

PT_TEST(console_env_allow_other_users) {
  ptcon_server_options o;
  char err[192];
  unsetenv("POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS");
  pt_console_options_from_env(&o, NULL, "127.0.0.1:0", err, sizeof err);
  PT_ASSERT_INT_EQ(o.allow_other_users, 0);
  setenv("POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS", "1", 1);
  pt_console_options_from_env(&o, NULL, "127.0.0.1:0", err, sizeof err);
  PT_ASSERT_INT_EQ(o.allow_other_users, 1);
  PT_ASSERT_STR_EQ(err, "");
  /* Anything but "1" keeps the default, with a line that says so. */
  const char *no[] = {"0", "yes", "", "1 "};
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
    setenv("POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS", no[i], 1);
    pt_console_options_from_env(&o, NULL, "127.0.0.1:0", err, sizeof err);
    PT_ASSERT_INT_EQ(o.allow_other_users, 0);
  }
  setenv("POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS", "yes", 1);
  pt_console_options_from_env(&o, NULL, "127.0.0.1:0", err, sizeof err);
  PT_ASSERT(strstr(err, "POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS") != NULL);
  unsetenv("POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS");
}
