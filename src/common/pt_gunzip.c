/*
 * pt_gunzip.c - capped gzip decompression with zlib (see pt_gunzip.h).
 *
 * Invariant: the output buffer never grows past max_out + 1 bytes; the
 * extra byte is how "more than max_out" is seen without inflating further.
 */
#include "common/pt_gunzip.h"

#include "common/pt_alloc.h"
#include "common/pt_zalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>


int pt_is_gzip(const uint8_t *in, size_t len) { return len >= 2 && in[0] == 0x1f && in[1] == 0x8b; }

int pt_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *outlen) {
  *out = NULL;
  *outlen = 0;
  if (!max_out) max_out = PT_GUNZIP_MAX_OUT;
  if (max_out >= SIZE_MAX / 2) max_out = SIZE_MAX / 2;
  if (!pt_is_gzip(in, len)) return -EINVAL;
  z_stream z;
  memset(&z, 0, sizeof z);
  z.zalloc = pt_zalloc;
  z.zfree = pt_zfree;
  /* 16 + 15: a gzip member only (no zlib or raw deflate), 32 KiB window. */
  int zr = inflateInit2(&z, 16 + MAX_WBITS);
  if (zr != Z_OK) return zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
  /* A first guess of 4x the input, at least 64 KiB, never over the cap. */
  size_t cap = len < (SIZE_MAX / 8) ? len * 4 : max_out + 1;
  if (cap < 65536) cap = 65536;
  if (cap > max_out + 1) cap = max_out + 1;
  uint8_t *buf = pt_malloc(cap);
  size_t n = 0, in_off = 0;
  int r = buf ? 0 : -ENOMEM;
  while (r == 0) {
    if (n == cap) {
      if (cap > max_out) { r = -EFBIG; break; }
      size_t ncap = cap * 2 > max_out + 1 ? max_out + 1 : cap * 2;
      uint8_t *nb = pt_realloc(buf, ncap);
      if (!nb) { r = -ENOMEM; break; }
      buf = nb;
      cap = ncap;
    }
    /* zlib counts in uInt: hand it at most UINT_MAX bytes at a time. */
    size_t in_left = len - in_off, out_left = cap - n;
    z.next_in = (Bytef *)(in + in_off);
    z.avail_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
    z.next_out = buf + n;
    z.avail_out = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
    uInt ain = z.avail_in, aout = z.avail_out;
    zr = inflate(&z, Z_NO_FLUSH);
    in_off += ain - z.avail_in;
    n += aout - z.avail_out;
    if (zr == Z_STREAM_END) break;
    if (zr == Z_MEM_ERROR) r = -ENOMEM;
    /* No progress with room to write: the input ended inside the stream. */
    else if (zr == Z_BUF_ERROR && z.avail_out != 0) r = -EINVAL;
    else if (zr != Z_OK && zr != Z_BUF_ERROR) r = -EINVAL; /* Z_DATA_ERROR, Z_NEED_DICT... */
  }
  inflateEnd(&z);
  if (r == 0 && n > max_out) r = -EFBIG;
  if (r < 0) {
    free(buf);
    return r;
  }
  *out = buf;
  *outlen = n;
  return 0;
}
