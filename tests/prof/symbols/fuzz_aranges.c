/*
 * fuzz_aranges.c - libFuzzer harness of the .debug_aranges reader
 * (src/prof/symbols/ptp_aranges.c). The first 4 input bytes are the .debug_info
 * size (little-endian), the rest the section, copied into a buffer of
 * exactly its size so ASan sees any read past it. Checked: the result is
 * one of the documented codes and the same on a second call; on success
 * every entry's CU offset leaves 4 bytes of .debug_info, the ordinals are
 * the positions, and there are no more entries than 8-byte pairs fit.
 */
#include "prof/symbols/ptp_aranges.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  uint64_t info = (uint64_t)data[0] | (uint64_t)data[1] << 8 | (uint64_t)data[2] << 16 |
                  (uint64_t)data[3] << 24;
  size_t n = size - 4;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return 0;
  memcpy(buf, data + 4, n);
  ptp_arange *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  int r = ptp_aranges_parse(buf, n, info, &a, &na);
  int r2 = ptp_aranges_parse(buf, n, info, &b, &nb);
  if (r != r2) abort();
  if (r != 0 && r != -EINVAL && r != -ENOMEM && r != -E2BIG) abort();
  if (r == 0) {
    if (na != nb || na > n / 8 || (na && (!a || !b))) abort();
    for (size_t i = 0; i < na; i++) {
      if (a[i].ord != i || info < 4 || a[i].cu > info - 4) abort();
      if (a[i].lo != b[i].lo || a[i].len != b[i].len || a[i].cu != b[i].cu) abort();
      if (a[i].lo == 0 && a[i].len == 0) abort();   /* the terminator is not an entry */
    }
  }
  free(a);
  free(b);
  free(buf);
  return 0;
}
