/*
 * fuzz_sockdiag.c - libFuzzer target for the parsers of the kernel's socket
 * table (src/console/ptcon_sockdiag.c): a NETLINK_SOCK_DIAG answer and a
 * line of /proc/net/tcp{,6}. The first input byte picks the parser (even:
 * the netlink answer, odd: the /proc line), the rest is the bytes, copied
 * to an exact-size buffer so ASan sees any over-read. The socket looked
 * for is 127.0.0.1:40000 -> 127.0.0.1:6669, the sequence number 5 (the
 * seeds in fuzz_sockdiag_seeds/ describe it). Checks the contracts: a
 * match has a tuple-exact answer (parsed again, it matches again), errors
 * are the documented ones. Built by console_fuzz_sockdiag_test.sh.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "console/ptcon_sockdiag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  struct sockaddr_in l = {.sin_family = AF_INET, .sin_port = htons(40000),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct sockaddr_in r = {.sin_family = AF_INET, .sin_port = htons(6669),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ptcon_tuple t;
  if (ptcon_tuple_from(&t, (struct sockaddr *)&l, sizeof l, (struct sockaddr *)&r, sizeof r))
    abort();
  size_t n = size - 1;
  uint8_t *b = malloc(n ? n : 1);
  if (!b) return 0;
  memcpy(b, data + 1, n);
  uint32_t uid = 0;
  unsigned state = 0;
  if (data[0] % 2 == 0) {
    int rc = ptcon_sockdiag_reply(b, n, &t, 5, &uid, &state);
    if (rc > 0 || rc < -4095) abort();
    if (rc == 0 && state > 255) abort();   /* a u8 on the wire */
  } else {
    int rc = ptcon_proctcp_line((const char *)b, n, &t, &uid, &state);
    if (rc != 1 && rc != 0 && rc != -EINVAL) abort();
    if (rc == 1) {
      uint32_t uid2 = 0;
      unsigned state2 = 0;
      if (ptcon_proctcp_line((const char *)b, n, &t, &uid2, &state2) != 1 || uid2 != uid ||
          state2 != state)
        abort();
    }
  }
  free(b);
  return 0;
}
