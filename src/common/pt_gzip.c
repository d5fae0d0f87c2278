/*
 * pt_gzip.c - one-shot gzip compression with zlib (see pt_gzip.h).
 *
 * The output buffer is sized with deflateBound before compressing, so one
 * deflate(Z_FINISH) call always completes; zlib's gzip header is the
 * default one (no name, mtime 0), which keeps the output deterministic.
 */
#include "common/pt_gzip.h"

#include "common/pt_alloc.h"
#include "common/pt_zalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>


int pt_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen) {
  *out = NULL;
  *outlen = 0;
  /* deflateBound and avail_in count in uLong/uInt: stay within both. */
  if (len > UINT_MAX / 2) return -EFBIG;
  z_stream z;
  memset(&z, 0, sizeof z);
  z.zalloc = pt_zalloc;
  z.zfree = pt_zfree;
  /* 16 + 15: a gzip wrapper, 32 KiB window; memLevel 8 is zlib's default. */
  int zr = deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                        Z_DEFAULT_STRATEGY);
  if (zr != Z_OK) return zr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
  uLong cap = deflateBound(&z, (uLong)len);
  uint8_t *buf = pt_malloc(cap);
  if (!buf) {
    deflateEnd(&z);
    return -ENOMEM;
  }
  static const uint8_t none[1];
  z.next_in = (Bytef *)(len ? in : none);
  z.avail_in = (uInt)len;
  z.next_out = buf;
  z.avail_out = (uInt)cap;
  zr = deflate(&z, Z_FINISH);
  size_t n = (size_t)(cap - z.avail_out);
  deflateEnd(&z);
  if (zr != Z_STREAM_END) {
    free(buf);
    return zr == Z_MEM_ERROR ? -ENOMEM : -EIO;
  }
  *out = buf;
  *outlen = n;
  return 0;
}
