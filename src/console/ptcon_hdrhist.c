/* ptcon_hdrhist.c - see ptcon_hdrhist.h. */
#include "console/ptcon_hdrhist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Bucket layout with unit magnitude 0 (lowest = 1):
 *   bucket_index     = (64 - half_mag - 1) - clz(v | sub_bucket_mask)
 *   sub_bucket_index = v >> bucket_index
 *   index            = ((bucket_index + 1) << half_mag) + sub_bucket_index - half
 * Values below 32 map to themselves. */
#define LZC_BASE (64u - PTCON_HIST_SUB_HALF_MAG - 1u)
#define SUB_MASK ((uint64_t)(PTCON_HIST_SUB_COUNT - 1u))

uint32_t ptcon_hist_index(uint64_t v) {
  if (v > PTCON_HIST_HIGHEST) v = PTCON_HIST_HIGHEST;
  uint32_t bucket = LZC_BASE - (uint32_t)__builtin_clzll(v | SUB_MASK);
  uint32_t sub = (uint32_t)(v >> bucket);
  return ((bucket + 1u) << PTCON_HIST_SUB_HALF_MAG) + sub - PTCON_HIST_SUB_HALF;
}

uint64_t ptcon_hist_value_at(uint32_t i) {
  if (i < PTCON_HIST_SUB_COUNT) return i;  /* bucket 0: values 0..31 exactly */
  uint32_t bucket = (i >> PTCON_HIST_SUB_HALF_MAG) - 1u;
  uint32_t sub = (i & (PTCON_HIST_SUB_HALF - 1u)) + PTCON_HIST_SUB_HALF;
  return (uint64_t)sub << bucket;
}

int ptcon_hist_record(ptcon_hist **hp, uint64_t v) {
  ptcon_hist *h = *hp;
  uint64_t clamped = v > PTCON_HIST_HIGHEST ? PTCON_HIST_HIGHEST : v;
  uint32_t i = ptcon_hist_index(clamped);
  if (!h || i >= h->ncounts) {
    /* Grow to whole buckets (16 counters); never shrink. */
    uint32_t n = (i / PTCON_HIST_SUB_HALF + 1u) * PTCON_HIST_SUB_HALF;
    if (n < 2u * PTCON_HIST_SUB_HALF) n = 2u * PTCON_HIST_SUB_HALF;
    if (n > PTCON_HIST_COUNTS) n = PTCON_HIST_COUNTS;
    uint32_t old = h ? h->ncounts : 0;
    ptcon_hist *g = realloc(h, sizeof *g + (size_t)n * sizeof g->counts[0]);
    if (!g) return -ENOMEM;
    if (!h) memset(g, 0, sizeof *g);
    memset(g->counts + old, 0, (size_t)(n - old) * sizeof g->counts[0]);
    g->ncounts = n;
    *hp = h = g;
  }
  if (v > PTCON_HIST_HIGHEST) {
    h->high_outliers++;
    if (v > h->highest_outlier) h->highest_outlier = v;
  }
  if (h->counts[i] != UINT32_MAX) h->counts[i]++;
  h->total++;
  if (clamped > h->max) h->max = clamped;
  return 0;
}

void ptcon_hist_put_zz(ptp_pb_buf *b, int64_t v) {
  uint64_t z = ptp_pb_zigzag64(v);
  uint8_t out[9];
  size_t n = 0;
  /* LEB128 with at most 9 bytes: the 9th byte holds the top 8 bits whole. */
  while (n < 8 && z >= 0x80) {
    out[n++] = (uint8_t)(z | 0x80);
    z >>= 7;
  }
  out[n++] = (uint8_t)z;
  ptp_pb_raw(b, out, n);
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v) {
  put_be32(p, (uint32_t)(v >> 32));
  put_be32(p + 4, (uint32_t)v);
}

void ptcon_hist_encode_v2(const ptcon_hist *h, ptp_pb_buf *b) {
  size_t start = b->len;
  uint8_t hdr[PTCON_HIST_HEADER_LEN];
  put_be32(hdr, PTCON_HIST_V2_COOKIE);
  put_be32(hdr + 4, 0);                       /* payload length, patched below */
  put_be32(hdr + 8, 0);                       /* normalizing index offset */
  put_be32(hdr + 12, PTCON_HIST_SIGFIGS);
  put_be64(hdr + 16, PTCON_HIST_LOWEST);
  put_be64(hdr + 24, PTCON_HIST_HIGHEST);
  double one = 1.0;
  uint64_t bits;
  memcpy(&bits, &one, 8);
  put_be64(hdr + 32, bits);
  ptp_pb_raw(b, hdr, sizeof hdr);
  /* Counts from index 0 to index(max): one 0 for an empty histogram. */
  uint32_t last = h ? ptcon_hist_index(h->max) : 0;
  for (uint32_t i = 0; i <= last;) {
    uint32_t c = h && i < h->ncounts ? h->counts[i] : 0;
    if (c == 0) {
      uint32_t k = 1;
      while (i + k <= last && h->counts[i + k] == 0) k++;
      ptcon_hist_put_zz(b, k >= 2 ? -(int64_t)k : 0);
      i += k;
    } else {
      ptcon_hist_put_zz(b, (int64_t)c);
      i++;
    }
  }
  if (b->err) return;
  put_be32(b->data + start + 4, (uint32_t)(b->len - start - PTCON_HIST_HEADER_LEN));
}
