/*
 * fuzz_cficache.c - libFuzzer harness of the unwind-table cache's file
 * checks (ptp_cficache_parse in src/prof/unwind/ptp_cficache.c, the core of
 * ptp_cficache_load without its I/O); built and run by
 * tests/prof/cficache_fuzz_test.sh. A cache file is read from disk, where
 * any process of the user may have left anything, and the table it gives
 * is walked by the signal handler: every row it accepts is trusted there.
 *
 * Input: one control byte, then the body.
 *   bit 0: load bias 0 or 0x7f0000000000;
 *   bits 1-2: the row limit (16, 256, 4096, 2^20 rows and rules);
 *   bit 3: the object's range [bias, bias + 2^33) or the narrow
 *          [bias + 0x1000, bias + 0x100000);
 *   bit 4: "made": the body is a u16 rule count, then rules and rows (8
 *          bytes each); the harness makes the file image of that table
 *          with ptp_cficache_image (a right header and checksum), so the
 *          mutations reach the checks of the rules and rows behind them;
 *          else the body is the file's bytes as they are.
 * Checked for every input:
 *   - the result is 0, -ESTALE, -E2BIG or -EBADMSG (never -EINVAL: the
 *     arguments are right), and the image is read only inside its length
 *     (a copy of exactly that many bytes, so ASan sees any read past it);
 *   - an accepted table is what the walker relies on: rows sorted,
 *     disjoint and non-empty, inside the object's range, each naming a
 *     rule of the table, every rule's kind known, within the limit;
 *     norule and bytes true to the content; the walker's lookup
 *     (ptp_cfi_tab_lookup) finds each row's rule at the row's first and
 *     last byte and nothing just before a row that follows a gap;
 *   - the image ptp_cficache_image makes of an accepted table is accepted
 *     again, with the same rules and rows byte for byte.
 * Any mismatch aborts (a crash for libFuzzer); ASan/UBSan catch the rest.
 */
#include "prof/unwind/ptp_cficache.h"
#include "prof/signal/ptp_unwind.h"
#include "tests/prof/unwind/fuzz_tab_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char BID[] = "0123456789abcdef0123456789abcdef01234567";
static const uint64_t KEY = 0x5eed5eed5eed5eedull;

static void check_tab(const ptp_cfi_tab *t, size_t len, uintptr_t bias, uintptr_t lo, uintptr_t hi,
                      size_t max) {
  CHECK(t->bias == bias && t->map == NULL && t->maplen == 0);
  CHECK(t->nrules <= PTP_CFI_RULES_MAX && t->nrows + t->nrules <= max);
  CHECK(t->bytes == sizeof *t + len);
  for (size_t i = 0; i < t->nrows; i++)
    CHECK(bias + t->rows[i].start >= lo && bias + t->rows[i].start + t->rows[i].len <= hi);
  fuzz_check_rows(t, bias);
}

/* An 8-aligned copy of exactly n bytes (malloc's alignment is 16). */
static uint8_t *copy(const void *p, size_t n) {
  uint8_t *b = malloc(n ? n : 1);
  CHECK(b);
  if (n) memcpy(b, p, n);
  return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uint8_t ctl = data[0];
  const uintptr_t bias = ctl & 1 ? (uintptr_t)0x7f0000000000 : 0;
  static const size_t limits[4] = {16, 256, 4096, (size_t)1 << 20};
  const size_t max = limits[(ctl >> 1) & 3];
  const uintptr_t lo = ctl & 8 ? bias : bias + 0x1000;
  const uintptr_t hi = ctl & 8 ? bias + ((uintptr_t)1 << 33) : bias + 0x100000;
  const uint8_t *body = data + 1;
  size_t n = size - 1;

  uint8_t *img;
  size_t len;
  if (ctl & 16) {
    if (n < 2) return 0;
    size_t units = (n - 2) / 8, nr = (size_t)(body[0] | body[1] << 8);
    if (nr > units) nr = units;
    uint8_t *parts = copy(body + 2, units * 8);
    ptp_cfi_tab made = {.nrows = units - nr, .nrules = nr, .bias = bias,
                        .rules = (const ptp_cfi_rule *)parts,
                        .rows = (const ptp_cfi_row *)(parts + nr * 8)};
    void *im = NULL;
    int r = ptp_cficache_image(BID, KEY, bias, &made, &im, &len);
    free(parts);
    CHECK(r == 0);
    img = copy(im, len);
    free(im);
  } else {
    img = copy(body, n);
    len = n;
  }

  ptp_cfi_tab t;
  int rc = ptp_cficache_parse(img, len, BID, KEY, bias, lo, hi, max, &t);
  CHECK(rc == 0 || rc == -ESTALE || rc == -E2BIG || rc == -EBADMSG);
  if (rc == 0) {
    check_tab(&t, len, bias, lo, hi, max);
    /* written again, read again: the same table */
    void *im = NULL;
    size_t len2;
    CHECK(ptp_cficache_image(BID, KEY, bias, &t, &im, &len2) == 0);
    CHECK(len2 == len);
    uint8_t *img2 = copy(im, len2);
    free(im);
    ptp_cfi_tab u;
    CHECK(ptp_cficache_parse(img2, len2, BID, KEY, bias, lo, hi, max, &u) == 0);
    CHECK(u.nrows == t.nrows && u.nrules == t.nrules && u.norule == t.norule);
    CHECK(memcmp(u.rules, t.rules, t.nrules * 8) == 0 && memcmp(u.rows, t.rows, t.nrows * 8) == 0);
    free(img2);
  }
  free(img);
  return 0;
}
