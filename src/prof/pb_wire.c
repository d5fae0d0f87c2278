/* pb_wire.c - see pb_wire.h. */
#include "prof/pb_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Room reserved for a nested length: 5 bytes covers 4 GiB - 1, far above
 * any message we build (pprof files and console Updates are capped lower). */
#define PB_LEN_RESERVE 5

void pb_buf_init(pb_buf *b, size_t max) {
  memset(b, 0, sizeof *b);
  b->max = max;
}

void pb_buf_free(pb_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

void pb_buf_reset(pb_buf *b) {
  b->len = 0;
  b->err = 0;
}

uint8_t *pb_buf_take(pb_buf *b, size_t *len) {
  uint8_t *d = b->data;
  *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return d;
}

static int pb_reserve(pb_buf *b, size_t n) {
  if (b->err) return -1;
  if (b->max && b->len + n > b->max) {
    b->err = -E2BIG;
    return -1;
  }
  if (b->len + n <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n) cap *= 2;
  uint8_t *d = realloc(b->data, cap);
  if (!d) {
    b->err = -ENOMEM;
    return -1;
  }
  b->data = d;
  b->cap = cap;
  return 0;
}

void pb_raw(pb_buf *b, const void *p, size_t n) {
  if (n == 0 || pb_reserve(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

size_t pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) { v >>= 7; n++; }
  return n;
}

void pb_varint_raw(pb_buf *b, uint64_t v) {
  if (pb_reserve(b, 10)) return;
  uint8_t *p = b->data + b->len;
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  b->len = (size_t)(p - b->data);
}

void pb_tag(pb_buf *b, uint32_t field, uint32_t wiretype) {
  pb_varint_raw(b, ((uint64_t)field << 3) | wiretype);
}

void pb_uint64(pb_buf *b, uint32_t field, uint64_t v) {
  pb_tag(b, field, 0);
  pb_varint_raw(b, v);
}

void pb_int64(pb_buf *b, uint32_t field, int64_t v) { pb_uint64(b, field, (uint64_t)v); }

void pb_sint64(pb_buf *b, uint32_t field, int64_t v) { pb_uint64(b, field, pb_zigzag64(v)); }

void pb_bool(pb_buf *b, uint32_t field, int v) { pb_uint64(b, field, v ? 1 : 0); }

void pb_fixed64(pb_buf *b, uint32_t field, uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(v >> (8 * i));
  pb_tag(b, field, 1);
  pb_raw(b, le, 8);
}

void pb_double(pb_buf *b, uint32_t field, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  pb_fixed64(b, field, u);
}

void pb_bytes(pb_buf *b, uint32_t field, const void *p, size_t n) {
  pb_tag(b, field, 2);
  pb_varint_raw(b, n);
  pb_raw(b, p, n);
}

void pb_string(pb_buf *b, uint32_t field, const char *s) {
  if (!s) s = "";
  pb_bytes(b, field, s, strlen(s));
}

void pb_packed_uint64(pb_buf *b, uint32_t field, const uint64_t *v, size_t n) {
  if (n == 0) return;
  size_t body = 0;
  for (size_t i = 0; i < n; i++) body += pb_varint_size(v[i]);
  pb_tag(b, field, 2);
  pb_varint_raw(b, body);
  for (size_t i = 0; i < n; i++) pb_varint_raw(b, v[i]);
}

pb_mark pb_begin(pb_buf *b, uint32_t field) {
  pb_tag(b, field, 2);
  if (pb_reserve(b, PB_LEN_RESERVE)) return 0;
  pb_mark m = b->len;
  b->len += PB_LEN_RESERVE;
  return m;
}

void pb_end(pb_buf *b, pb_mark m) {
  if (b->err) return;
  size_t body_start = m + PB_LEN_RESERVE;
  size_t body = b->len - body_start;
  size_t need = pb_varint_size(body);
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
