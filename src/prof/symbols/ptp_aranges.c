/*
 * ptp_aranges.c - the .debug_aranges reader (see ptp_aranges.h).
 * Invariant of the walk: p <= end; every read first checks end - p.
 */
#include "prof/symbols/ptp_aranges.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <stdlib.h>

static uint64_t rd_le(const unsigned char *p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

int ptp_aranges_parse(const void *sec, size_t len, uint64_t info_size, ptp_arange **out,
                      size_t *n) {
  const unsigned char *p = sec, *end = p + len;
  size_t cap = len / 16 + 1, k = 0;   /* entries are 16 bytes with 8-byte addresses */
  ptp_arange *v = ptp_malloc(cap * sizeof *v);
  if (!v) return -ENOMEM;
  int r = -EINVAL;
  while (p < end) {
    const unsigned char *hdr = p;
    if (end - p < 4) goto out;
    uint64_t ulen = rd_le(p, 4);
    unsigned lbytes = 4;
    p += 4;
    if (ulen == 0xffffffffu) {
      if (end - p < 8) goto out;
      p += 8;
      lbytes = 8;
    } else if (ulen >= 0xfffffff0u) {
      goto out;   /* reserved escape codes */
    }
    if (end - p < 2 || rd_le(p, 2) != 2) goto out;
    p += 2;
    if ((size_t)(end - p) < lbytes) goto out;
    uint64_t cu = rd_le(p, lbytes);
    p += lbytes;
    if (info_size < 4 || cu > info_size - 4) goto out;
    if (end - p < 2) goto out;
    unsigned asz = p[0], ssz = p[1];
    p += 2;
    if ((asz != 4 && asz != 8) || ssz != 0) goto out;
    size_t pad = (2 * asz - (size_t)(p - hdr) % (2 * asz)) % (2 * asz);
    if ((size_t)(end - p) < pad) goto out;   /* libdw: the next read fails */
    p += pad;
    for (;;) {
      if ((size_t)(end - p) < 2u * asz) goto out;
      uint64_t lo = rd_le(p, asz), rl = rd_le(p + asz, asz);
      p += 2 * asz;
      if (lo == 0 && rl == 0) break;
      if (k >= UINT32_MAX) { r = -E2BIG; goto out; }
      if (k == cap) {   /* 4-byte addresses: up to twice as many */
        ptp_arange *g = ptp_realloc(v, 2 * cap * sizeof *v);
        if (!g) { r = -ENOMEM; goto out; }
        v = g;
        cap *= 2;
      }
      v[k] = (ptp_arange){lo, rl, cu, (uint32_t)k};
      k++;
    }
  }
  r = 0;
out:
  if (r || k == 0) {
    free(v);
    v = NULL;
  }
  if (r) return r;
  *out = v;
  *n = k;
  return 0;
}
