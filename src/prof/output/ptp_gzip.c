/* ptp_gzip.c - see ptp_gzip.h. */
#include "prof/output/ptp_gzip.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <zlib.h>

/* zlib's allocations go through ptp_alloc.h too, so fault-injection tests
 * reach deflateInit2's and inflate's. */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size) {
  (void)opaque;
  return (uint64_t)items * size > SIZE_MAX ? NULL : ptp_malloc((size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p) {
  (void)opaque;
  free(p);
}

int ptp_gzip(const uint8_t *in, size_t len, int level, uint8_t **out, size_t *outlen) {
  z_stream z = { .zalloc = z_alloc, .zfree = z_free };
  /* windowBits 15 + 16 selects the gzip wrapper; memLevel 8 is zlib's default. */
  int zr = deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  if (zr == Z_MEM_ERROR) return -ENOMEM;
  if (zr != Z_OK) return -EIO;
  size_t cap = deflateBound(&z, (uLong)len) + 64;
  uint8_t *buf = ptp_malloc(cap);
  if (!buf) {
    deflateEnd(&z);
    return -ENOMEM;
  }
  /* zlib counts in uInt: feed and drain in chunks so > 4 GiB would still work. */
  size_t in_off = 0, out_off = 0;
  int flush = Z_NO_FLUSH;
  for (;;) {
    size_t in_chunk = len - in_off > UINT_MAX ? UINT_MAX : len - in_off;
    size_t out_chunk = cap - out_off > UINT_MAX ? UINT_MAX : cap - out_off;
    z.next_in = (Bytef *)(uintptr_t)(in + in_off);
    z.avail_in = (uInt)in_chunk;
    z.next_out = buf + out_off;
    z.avail_out = (uInt)out_chunk;
    flush = in_off + in_chunk == len ? Z_FINISH : Z_NO_FLUSH;
    zr = deflate(&z, flush);
    in_off += in_chunk - z.avail_in;
    out_off += out_chunk - z.avail_out;
    if (zr == Z_STREAM_END) break;
    if (zr != Z_OK && zr != Z_BUF_ERROR) {
      free(buf);
      deflateEnd(&z);
      return -EIO;
    }
    if (out_off == cap) {
      /* deflateBound is an upper bound, so this is not expected; grow anyway. */
      uint8_t *nb = ptp_realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        deflateEnd(&z);
        return -ENOMEM;
      }
      buf = nb;
      cap *= 2;
    }
  }
  deflateEnd(&z);
  *out = buf;
  *outlen = out_off;
  return 0;
}

int ptp_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *outlen) {
  if (len < 18 || in[0] != 0x1f || in[1] != 0x8b) return -EBADMSG;
  z_stream z = { .zalloc = z_alloc, .zfree = z_free };
  int zr = inflateInit2(&z, 15 + 16);
  if (zr == Z_MEM_ERROR) return -ENOMEM;
  if (zr != Z_OK) return -EIO;
  size_t cap = len * 4 + 256, olen = 0;
  if (max_out && cap > max_out + 1) cap = max_out + 1;
  uint8_t *buf = ptp_malloc(cap);
  if (!buf) {
    inflateEnd(&z);
    return -ENOMEM;
  }
  size_t in_off = 0;
  int ret = 0;
  for (;;) {
    if (olen == cap) {
      if (max_out && cap > max_out) { ret = -E2BIG; break; }
      size_t ncap = cap * 2;
      if (max_out && ncap > max_out + 1) ncap = max_out + 1;
      uint8_t *nb = ptp_realloc(buf, ncap);
      if (!nb) { ret = -ENOMEM; break; }
      buf = nb;
      cap = ncap;
    }
    size_t in_chunk = len - in_off > UINT_MAX ? UINT_MAX : len - in_off;
    size_t out_chunk = cap - olen > UINT_MAX ? UINT_MAX : cap - olen;
    z.next_in = (Bytef *)(uintptr_t)(in + in_off);
    z.avail_in = (uInt)in_chunk;
    z.next_out = buf + olen;
    z.avail_out = (uInt)out_chunk;
    zr = inflate(&z, Z_NO_FLUSH);
    in_off += in_chunk - z.avail_in;
    olen += out_chunk - z.avail_out;
    if (zr == Z_STREAM_END) {
      if (in_off != len) ret = -ENOTUNIQ;
      break;
    }
    if (zr == Z_MEM_ERROR) { ret = -ENOMEM; break; }
    if (zr != Z_OK && !(zr == Z_BUF_ERROR && olen == cap)) { ret = -EBADMSG; break; }
    if (zr == Z_OK && in_off == len && z.avail_out > 0) { ret = -EBADMSG; break; } /* truncated */
  }
  inflateEnd(&z);
  if (max_out && ret == 0 && olen > max_out) ret = -E2BIG;
  if (ret) {
    free(buf);
    return ret;
  }
  *out = buf;
  *outlen = olen;
  return 0;
}
