/*
 * fuzz_gunzip.c - libFuzzer target for the reading of untrusted profile
 * files by the feedback review: pt_gunzip (src/common/pt_gunzip.c, zlib
 * with an output cap) and pt_pprof_summarize (src/common/pt_pprof_summary.c
 * over pt_pprof_read.c).
 *
 * Differential: for every input, a one-shot zlib inflate of the first gzip
 * member (into a buffer of the cap + 1) and pt_gunzip (growing its buffer,
 * capped) must agree on success or failure, on "too big", and on every
 * byte. The seeds (fuzz_seeds/gunzip) are the ones the hand-written
 * DEFLATE decoder was checked with before zlib replaced it: dynamic and
 * fixed Huffman codes, stored blocks, header flags. Then the summary must
 * not crash and must keep its documented bounds. Built and run by
 * tests/common/gunzip_fuzz_test.sh.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/pt_gunzip.h"
#include "common/pt_pprof_summary.h"

#define MAX_OUT ((size_t)1 << 20) /* keeps each run fast; the cap path is fuzzed too */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* zlib's answer: 0 and *n bytes in out (holding up to MAX_OUT + 1 bytes, so
 * "too big" is visible as *n > MAX_OUT), or -1 for a damaged stream. */
static int zlib_gunzip(const uint8_t *in, size_t len, uint8_t *out, size_t *n) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + 15) != Z_OK) abort(); /* gzip only, 32 KiB window */
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)len;
  z.next_out = out;
  z.avail_out = (uInt)(MAX_OUT + 1);
  int r = inflate(&z, Z_FINISH);
  *n = z.total_out;
  inflateEnd(&z);
  if (r == Z_STREAM_END) return 0;
  if (r == Z_BUF_ERROR && z.avail_out == 0) return 0; /* output cap reached: too big */
  return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t *zout;
  if (!zout && !(zout = malloc(MAX_OUT + 1))) abort();
  /* An exact-size heap copy, so ASan sees any read past the end. */
  uint8_t *in = malloc(size ? size : 1);
  if (!in) return 0;
  memcpy(in, data, size);

  uint8_t *out = NULL;
  size_t outlen = 0;
  int r = pt_gunzip(in, size, MAX_OUT, &out, &outlen);
  size_t zn = 0;
  int zr = size >= 2 && in[0] == 0x1f && in[1] == 0x8b ? zlib_gunzip(in, size, zout, &zn) : -1;
  if (r == 0) {
    if (zr != 0 || zn > MAX_OUT) {
      fprintf(stderr, "pt_gunzip accepted %zu bytes that zlib rejects (zlib %d, %zu bytes)\n",
              outlen, zr, zn);
      abort();
    }
    if (outlen != zn || memcmp(out, zout, zn) != 0) {
      fprintf(stderr, "pt_gunzip and zlib disagree: %zu vs %zu bytes\n", outlen, zn);
      abort();
    }
    if (!out) abort();
  } else {
    if (out || outlen) abort(); /* nothing handed out on error */
    if (r != -EINVAL && r != -EFBIG && r != -ENOMEM) abort();
    if (zr == 0 && zn <= MAX_OUT) {
      fprintf(stderr, "pt_gunzip rejects (%d) a stream zlib inflates to %zu bytes\n", r, zn);
      abort();
    }
    if (r == -EFBIG && !(zr == 0 && zn > MAX_OUT)) {
      fprintf(stderr, "pt_gunzip says too big; zlib says %d after %zu bytes\n", zr, zn);
      abort();
    }
  }
  free(out);

  pt_pprof_summary s;
  size_t top_n = size ? (size_t)(in[size - 1] % (PT_PPROF_TOP_MAX + 3)) : 5;
  int sr = pt_pprof_summarize(in, size, top_n, &s);
  if (sr == 0) {
    if (s.n_top > top_n || s.n_top > PT_PPROF_TOP_MAX) abort();
    for (size_t i = 0; i < s.n_top; i++) {
      if (!s.top[i].name) abort();
      for (const char *p = s.top[i].name; *p; p++)
        if ((unsigned char)*p < 0x20) abort(); /* no control characters reach the screen */
    }
    if (memchr(s.sample_types, 0, sizeof s.sample_types) == NULL) abort();
  } else {
    if (sr != -EINVAL && sr != -EFBIG && sr != -ENOMEM) abort();
    if (s.n_top != 0) abort(); /* cleared on error */
  }
  pt_pprof_summary_clear(&s);
  free(in);
  return 0;
}
