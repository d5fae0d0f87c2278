/* ptp_pb_wire.c - see ptp_pb_wire.h. */
#include "prof/output/ptp_pb_wire.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Room reserved for a nested length: 5 bytes covers 4 GiB - 1, far above
 * any message we build (pprof files and console Updates are capped lower). */
#define PB_LEN_RESERVE 5

void ptp_pb_buf_init(ptp_pb_buf *b, size_t max) {
  memset(b, 0, sizeof *b);
  b->max = max;
}

void ptp_pb_buf_free(ptp_pb_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

void ptp_pb_buf_reset(ptp_pb_buf *b) {
  b->len = 0;
  b->err = 0;
}

uint8_t *ptp_pb_buf_take(ptp_pb_buf *b, size_t *len) {
  uint8_t *d = b->data;
  *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return d;
}

static int ptp_pb_reserve(ptp_pb_buf *b, size_t n) {
  if (b->err) return -1;
  if (b->max && b->len + n > b->max) {
    b->err = -E2BIG;
    return -1;
  }
  if (b->len + n <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n) cap *= 2;
  uint8_t *d = ptp_realloc(b->data, cap);
  if (!d) {
    b->err = -ENOMEM;
    return -1;
  }
  b->data = d;
  b->cap = cap;
  return 0;
}

void ptp_pb_raw(ptp_pb_buf *b, const void *p, size_t n) {
  if (n == 0 || ptp_pb_reserve(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

size_t ptp_pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) { v >>= 7; n++; }
  return n;
}

void ptp_pb_varint_raw(ptp_pb_buf *b, uint64_t v) {
  if (ptp_pb_reserve(b, 10)) return;
  uint8_t *p = b->data + b->len;
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  b->len = (size_t)(p - b->data);
}

void ptp_pb_tag(ptp_pb_buf *b, uint32_t field, uint32_t wiretype) {
  ptp_pb_varint_raw(b, ((uint64_t)field << 3) | wiretype);
}

void ptp_pb_uint64(ptp_pb_buf *b, uint32_t field, uint64_t v) {
  ptp_pb_tag(b, field, 0);
  ptp_pb_varint_raw(b, v);
}

void ptp_pb_int64(ptp_pb_buf *b, uint32_t field, int64_t v) { ptp_pb_uint64(b, field, (uint64_t)v); }

void ptp_pb_sint64(ptp_pb_buf *b, uint32_t field, int64_t v) { ptp_pb_uint64(b, field, ptp_pb_zigzag64(v)); }

void ptp_pb_bool(ptp_pb_buf *b, uint32_t field, int v) { ptp_pb_uint64(b, field, v ? 1 : 0); }

void ptp_pb_fixed64(ptp_pb_buf *b, uint32_t field, uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(v >> (8 * i));
  ptp_pb_tag(b, field, 1);
  ptp_pb_raw(b, le, 8);
}

void ptp_pb_double(ptp_pb_buf *b, uint32_t field, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  ptp_pb_fixed64(b, field, u);
}

void ptp_pb_bytes(ptp_pb_buf *b, uint32_t field, const void *p, size_t n) {
  ptp_pb_tag(b, field, 2);
  ptp_pb_varint_raw(b, n);
  ptp_pb_raw(b, p, n);
}

void ptp_pb_string(ptp_pb_buf *b, uint32_t field, const char *s) {
  if (!s) s = "";
  ptp_pb_bytes(b, field, s, strlen(s));
}

void ptp_pb_packed_uint64(ptp_pb_buf *b, uint32_t field, const uint64_t *v, size_t n) {
  if (n == 0) return;
  size_t body = 0;
  for (size_t i = 0; i < n; i++) body += ptp_pb_varint_size(v[i]);
  ptp_pb_tag(b, field, 2);
  ptp_pb_varint_raw(b, body);
  for (size_t i = 0; i < n; i++) ptp_pb_varint_raw(b, v[i]);
}

ptp_pb_mark ptp_pb_begin(ptp_pb_buf *b, uint32_t field) {
  ptp_pb_tag(b, field, 2);
  if (ptp_pb_reserve(b, PB_LEN_RESERVE)) return 0;
  ptp_pb_mark m = b->len;
  b->len += PB_LEN_RESERVE;
  return m;
}

void ptp_pb_end(ptp_pb_buf *b, ptp_pb_mark m) {
  if (b->err) return;
  size_t body_start = m + PB_LEN_RESERVE;
  size_t body = b->len - body_start;
  size_t need = ptp_pb_varint_size(body);
  uint8_t *p = b->data + m;
  uint64_t v = body;
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  if (need < PB_LEN_RESERVE) {
    memmove(b->data + m + need, b->data + body_start, body);
    b->len -= PB_LEN_RESERVE - need;
  }
}
