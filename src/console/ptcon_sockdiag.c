/* ptcon_sockdiag.c - see ptcon_sockdiag.h. Pure: no I/O, no allocation;
 * every read of outside bytes is bounds-checked and goes through memcpy
 * (the kernel's structs may sit unaligned in a fuzzer's buffer). */
#include "console/ptcon_sockdiag.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>

_Static_assert(sizeof(struct nlmsghdr) + sizeof(struct inet_diag_req_v2) == PTCON_SOCKDIAG_REQ_LEN,
               "sock_diag request size");

static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static void set_v4(uint8_t out[16], const void *be32) {
  memcpy(out, v4mapped, 12);
  memcpy(out + 12, be32, 4);
}

static int is_v4(const uint8_t a[16]) { return memcmp(a, v4mapped, 12) == 0; }

static int addr_of(const struct sockaddr *sa, socklen_t len, uint8_t out[16], uint16_t *port) {
  if (!sa) return -EAFNOSUPPORT;
  if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    struct sockaddr_in v4;
    memcpy(&v4, sa, sizeof v4);
    set_v4(out, &v4.sin_addr.s_addr);
    *port = ntohs(v4.sin_port);
    return 0;
  }
  if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 v6;
    memcpy(&v6, sa, sizeof v6);
    memcpy(out, &v6.sin6_addr, 16);
    *port = ntohs(v6.sin6_port);
    return 0;
  }
  return -EAFNOSUPPORT;
}

int ptcon_tuple_from(ptcon_tuple *t, const struct sockaddr *local, socklen_t llen,
                     const struct sockaddr *remote, socklen_t rlen) {
  memset(t, 0, sizeof *t);
  int rc = addr_of(local, llen, t->local, &t->lport);
  if (rc == 0) rc = addr_of(remote, rlen, t->remote, &t->rport);
  return rc;
}

int ptcon_tcp_state_has_owner(unsigned state) {
  return state != 0 && state != PTCON_TCP_TIME_WAIT && state != PTCON_TCP_LISTEN &&
         state != PTCON_TCP_NEW_SYN_RECV && state <= PTCON_TCP_NEW_SYN_RECV;
}

static int same_tuple(const ptcon_tuple *a, const ptcon_tuple *b) {
  return a->lport == b->lport && a->rport == b->rport && memcmp(a->local, b->local, 16) == 0 &&
         memcmp(a->remote, b->remote, 16) == 0;
}

/* ---- NETLINK_SOCK_DIAG --------------------------------------------------- */

size_t ptcon_sockdiag_request(uint8_t *buf, const ptcon_tuple *t, uint32_t seq) {
  struct {
    struct nlmsghdr h;
    struct inet_diag_req_v2 r;
  } q;
  memset(&q, 0, sizeof q);
  q.h.nlmsg_len = sizeof q;
  q.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  q.h.nlmsg_flags = NLM_F_REQUEST;   /* no NLM_F_DUMP: one exact socket */
  q.h.nlmsg_seq = seq;
  q.r.sdiag_protocol = IPPROTO_TCP;
  q.r.idiag_states = ~0u;            /* whatever state it is in */
  /* The kernel looks the socket up by its own view: idiag_src/sport are
   * the socket's local end, idiag_dst/dport its remote end. An IPv4 pair
   * is asked as AF_INET, which also finds a dual-stack socket talking
   * IPv4 (the kernel's table is keyed by the IPv4 addresses then). */
  if (is_v4(t->local) && is_v4(t->remote)) {
    q.r.sdiag_family = AF_INET;
    memcpy(&q.r.id.idiag_src[0], t->local + 12, 4);
    memcpy(&q.r.id.idiag_dst[0], t->remote + 12, 4);
  } else {
    q.r.sdiag_family = AF_INET6;
    memcpy(q.r.id.idiag_src, t->local, 16);
    memcpy(q.r.id.idiag_dst, t->remote, 16);
  }
  q.r.id.idiag_sport = htons(t->lport);
  q.r.id.idiag_dport = htons(t->rport);
  q.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  q.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  memcpy(buf, &q, sizeof q);
  return sizeof q;
}

static int diag_msg(const uint8_t *p, size_t len, const ptcon_tuple *want, uint32_t *uid,
                    unsigned *state) {
  struct inet_diag_msg m;
  if (len < sizeof m) return -EPROTO;
  memcpy(&m, p, sizeof m);
  ptcon_tuple got;
  memset(&got, 0, sizeof got);
  if (m.idiag_family == AF_INET) {
    set_v4(got.local, &m.id.idiag_src[0]);
    set_v4(got.remote, &m.id.idiag_dst[0]);
  } else if (m.idiag_family == AF_INET6) {
    memcpy(got.local, m.id.idiag_src, 16);
    memcpy(got.remote, m.id.idiag_dst, 16);
  } else {
    return -EPROTO;
  }
  got.lport = ntohs(m.id.idiag_sport);
  got.rport = ntohs(m.id.idiag_dport);
  if (!same_tuple(&got, want)) return -ESRCH;
  *uid = m.idiag_uid;
  *state = m.idiag_state;
  return 0;
}

int ptcon_sockdiag_reply(const uint8_t *buf, size_t len, const ptcon_tuple *want, uint32_t seq,
                         uint32_t *uid, unsigned *state) {
  size_t off = 0;
  int seen = 0;
  while (len - off >= sizeof(struct nlmsghdr)) {
    struct nlmsghdr h;
    memcpy(&h, buf + off, sizeof h);
    if (h.nlmsg_len < sizeof h || h.nlmsg_len > len - off) return -EPROTO;
    if (h.nlmsg_seq != seq) return -EAGAIN;
    const uint8_t *p = buf + off + sizeof h;
    size_t plen = h.nlmsg_len - sizeof h;
    seen = 1;
    if (h.nlmsg_type == NLMSG_ERROR) {
      int32_t err;
      if (plen < sizeof err) return -EPROTO;
      memcpy(&err, p, sizeof err);
      if (err > 0 || err < -4095) return -EPROTO;
      if (err < 0) return err;
      /* err 0: an acknowledgement; the answer, if any, is elsewhere */
    } else if (h.nlmsg_type == NLMSG_DONE) {
      return -ENOENT;
    } else if (h.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      return diag_msg(p, plen, want, uid, state);
    } else if (h.nlmsg_type != NLMSG_NOOP) {
      return -EPROTO;
    }
    size_t step = NLMSG_ALIGN(h.nlmsg_len);
    if (step > len - off) break;
    off += step;
  }
  return seen ? -ENOENT : -EPROTO;
}

/* ---- /proc/net/tcp, /proc/net/tcp6 --------------------------------------- */

typedef struct cur {
  const char *p, *end;
} cur;

static void skip_spaces(cur *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  return -1;
}

/* Exactly n hex digits into *v (n <= 8). */
static int hex_n(cur *c, int n, uint32_t *v) {
  if (c->end - c->p < n) return -1;
  uint32_t x = 0;
  for (int i = 0; i < n; i++) {
    int d = hexval(c->p[i]);
    if (d < 0) return -1;
    x = x << 4 | (uint32_t)d;
  }
  c->p += n;
  *v = x;
  return 0;
}

static int expect(cur *c, char ch) {
  if (c->p >= c->end || *c->p != ch) return -1;
  c->p++;
  return 0;
}

/* "ADDR:PORT": the kernel prints each 32-bit word of the address as the
 * host-order value of its network-order bytes (%08X), so the word's bytes
 * in memory are the address's bytes. 8 digits: IPv4; 32: IPv6. */
static int endpoint(cur *c, uint8_t out[16], uint16_t *port) {
  size_t n = 0;
  while (c->p + n < c->end && hexval(c->p[n]) >= 0) n++;
  uint32_t w;
  if (n == 8) {
    if (hex_n(c, 8, &w)) return -1;
    set_v4(out, &w);
  } else if (n == 32) {
    for (int i = 0; i < 4; i++) {
      if (hex_n(c, 8, &w)) return -1;
      memcpy(out + 4 * i, &w, 4);
    }
  } else {
    return -1;
  }
  uint32_t pv;
  if (expect(c, ':') || hex_n(c, 4, &pv)) return -1;
  *port = (uint16_t)pv;
  return 0;
}

/* A token of non-space characters. */
static int token(cur *c) {
  skip_spaces(c);
  const char *s = c->p;
  while (c->p < c->end && *c->p != ' ' && *c->p != '\t' && *c->p != '\n') c->p++;
  return c->p > s ? 0 : -1;
}

static int decimal_u32(cur *c, uint32_t *v) {
  skip_spaces(c);
  uint64_t x = 0;
  const char *s = c->p;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    x = x * 10 + (uint64_t)(*c->p - '0');
    if (x > UINT32_MAX) return -1;
    c->p++;
  }
  if (c->p == s) return -1;
  *v = (uint32_t)x;
  return 0;
}

int ptcon_proctcp_line(const char *line, size_t len, const ptcon_tuple *want, uint32_t *uid,
                       unsigned *state) {
  cur c = {line, line + len};
  ptcon_tuple got;
  memset(&got, 0, sizeof got);
  uint32_t sl, st, u;
  if (decimal_u32(&c, &sl) || expect(&c, ':')) return -EINVAL;   /* "  sl  local_address ..." */
  skip_spaces(&c);
  if (endpoint(&c, got.local, &got.lport)) return -EINVAL;
  skip_spaces(&c);
  if (endpoint(&c, got.remote, &got.rport)) return -EINVAL;
  skip_spaces(&c);
  if (hex_n(&c, 2, &st)) return -EINVAL;
  /* tx_queue:rx_queue tr:tm->when retrnsmt, uid, then at least the
   * timeout (a line cut inside the uid must not read as another uid) */
  if (token(&c) || token(&c) || token(&c) || decimal_u32(&c, &u)) return -EINVAL;
  if (c.p >= c.end || (*c.p != ' ' && *c.p != '\t') || token(&c)) return -EINVAL;
  if (!same_tuple(&got, want)) return 0;
  *uid = u;
  *state = st;
  return 1;
}
