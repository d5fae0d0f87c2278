/* ptcon_bind.c - bind-string validation (ptcon_bind_parse) and ptcon_strerror. */
#include "ptprof_console.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

static int parse_port(const char *s, uint16_t *port) {
  if (!*s) return -EINVAL;
  unsigned long v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -EINVAL;
    v = v * 10 + (unsigned long)(*p - '0');
    if (v > 65535) return -EINVAL;
  }
  *port = (uint16_t)v;
  return 0;
}

int ptcon_bind_parse(const char *bind, int allow_non_loopback,
                     struct sockaddr_storage *ss, socklen_t *sslen) {
  char host[64];
  const char *colon, *port_s;
  uint16_t port;
  if (!bind || !ss || !sslen) return -EINVAL;
  memset(ss, 0, sizeof *ss);
  if (bind[0] == '[') {
    const char *close = strchr(bind, ']');
    if (!close || close[1] != ':') return -EINVAL;
    size_t hl = (size_t)(close - bind - 1);
    if (hl == 0 || hl >= sizeof host) return -EINVAL;
    memcpy(host, bind + 1, hl);
    host[hl] = 0;
    port_s = close + 2;
    if (parse_port(port_s, &port)) return -EINVAL;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1) return -EINVAL;
    *sslen = sizeof *s6;
    if (!allow_non_loopback && !IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr)) return -EPERM;
    return 0;
  }
  colon = strrchr(bind, ':');
  if (!colon || colon == bind) return -EINVAL;
  size_t hl = (size_t)(colon - bind);
  if (hl >= sizeof host) return -EINVAL;
  memcpy(host, bind, hl);
  host[hl] = 0;
  if (strchr(host, ':')) return -EINVAL;   /* bare IPv6 needs brackets */
  if (parse_port(colon + 1, &port)) return -EINVAL;
  struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
  s4->sin_family = AF_INET;
  s4->sin_port = htons(port);
  if (strcmp(host, "localhost") == 0) {
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    /* inet_pton (unlike inet_aton) accepts only the dotted-quad form. */
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) return -EINVAL;
  }
  *sslen = sizeof *s4;
  if (!allow_non_loopback && (ntohl(s4->sin_addr.s_addr) >> 24) != 127) return -EPERM;
  return 0;
}

const char *ptcon_strerror(int err) {
  switch (err) {
  case 0: return "success";
  case -EINVAL: return "invalid argument (bind address must be HOST:PORT or [IPV6]:PORT)";
  case -EPERM: return "refusing a non-loopback bind address (not forced)";
  case -EADDRINUSE: return "address already in use";
  case -EBUSY: return "a task console server already runs in this process";
  case -ENOMEM: return "out of memory";
  default: return err < 0 ? strerror(-err) : "unknown error";
  }
}
