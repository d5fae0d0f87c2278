/*
 * test_crc.c - the cache checksums (ptp_crc.h) pinned to values computed
 * outside this code (a bitwise CRC-32C and Python's zlib.crc32 over the
 * same bytes, three lanes and blocks as ptp_crc.h defines them), so a
 * change of what an algorithm id computes fails here instead of silently
 * turning every cache file on disk into a miss (or worse, a misread):
 *   - PTP_CRC_ZLIB: the CRC-32 check value of "123456789", a 1000-byte
 *     pattern, the same in pieces and in blocks (blocks change nothing);
 *   - PTP_CRC_C3 (skipped without SSE4.2): one block of 9 bytes (lanes
 *     empty but the third), one block of 1000 bytes, 256-byte blocks (the
 *     last shorter), 18432-byte blocks (the unwind-table cache's block of
 *     768 rows) over 40000 bytes, and a continuation over two ranges;
 *   - an empty range leaves crc unchanged; an unknown id is not
 *     supported and never continues a checksum.
 */
#include "pt_test.h"
#include "prof/cache/ptp_crc.h"

#include <stdlib.h>
#include <string.h>

static const char CHECK[] = "123456789";

static uint8_t *pattern(size_t n, int big) {
  uint8_t *p = malloc(n);
  PT_ASSERT(p);
  for (size_t i = 0; i < n; i++)
    p[i] = big ? (uint8_t)((i * 131 + i / 7) & 0xff) : (uint8_t)((i * 31 + 7) & 0xff);
  return p;
}

PT_TEST(prof_crc_zlib_pinned) {
  PT_ASSERT(ptp_crc_supported(PTP_CRC_ZLIB));
  PT_ASSERT_UINT_EQ(ptp_crc_block(PTP_CRC_ZLIB, 0, CHECK, 9), 0xcbf43926u);
  uint8_t *p = pattern(1000, 0);
  PT_ASSERT_UINT_EQ(ptp_crc_block(PTP_CRC_ZLIB, 0, p, 1000), 0x8902161eu);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(PTP_CRC_ZLIB, 0, p, 1000, 256), 0x8902161eu);
  uint32_t c = ptp_crc_block(PTP_CRC_ZLIB, 0, p, 333);
  PT_ASSERT_UINT_EQ(ptp_crc_block(PTP_CRC_ZLIB, c, p + 333, 667), 0x8902161eu);
  free(p);
  p = pattern(40000, 1);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(PTP_CRC_ZLIB, 0, p, 40000, 18432), 0x6f383e9fu);
  free(p);
}

PT_TEST(prof_crc_c3_pinned) {
  if (ptp_crc_algo() != PTP_CRC_C3) PT_SKIP("no SSE4.2: PTP_CRC_C3 not computed here");
  PT_ASSERT(ptp_crc_supported(PTP_CRC_C3));
  PT_ASSERT_UINT_EQ(ptp_crc_block(PTP_CRC_C3, 0, CHECK, 9), 0x36a7a743u);
  uint8_t *p = pattern(1000, 0);
  PT_ASSERT_UINT_EQ(ptp_crc_block(PTP_CRC_C3, 0, p, 1000), 0xd233ec85u);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(PTP_CRC_C3, 0, p, 1000, 256), 0xc5257a99u);
  /* blocks are part of the value */
  PT_ASSERT(ptp_crc_blocks(PTP_CRC_C3, 0, p, 1000, 256) != ptp_crc_block(PTP_CRC_C3, 0, p, 1000));
  uint32_t c = ptp_crc_blocks(PTP_CRC_C3, 0, p, 1000, 256);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(PTP_CRC_C3, c, CHECK, 9, 256), 0xe01af82eu);
  /* one flipped bit anywhere changes it */
  p[517] ^= 0x10;
  PT_ASSERT(ptp_crc_blocks(PTP_CRC_C3, 0, p, 1000, 256) != 0xc5257a99u);
  free(p);
  p = pattern(40000, 1);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(PTP_CRC_C3, 0, p, 40000, 18432), 0x0d12656eu);
  free(p);
}

PT_TEST(prof_crc_empty_and_unknown) {
  PT_ASSERT_UINT_EQ(ptp_crc_block(PTP_CRC_ZLIB, 0x1234u, NULL, 0), 0x1234u);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(PTP_CRC_ZLIB, 0x1234u, NULL, 0, 64), 0x1234u);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(ptp_crc_algo(), 0x1234u, NULL, 0, 64), 0x1234u);
  PT_ASSERT(ptp_crc_supported(ptp_crc_algo()));
  PT_ASSERT(!ptp_crc_supported(0) && !ptp_crc_supported(1) && !ptp_crc_supported(4));
  PT_ASSERT_UINT_EQ(ptp_crc_block(1, 0, CHECK, 9), 0xffffffffu);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(7, 5, CHECK, 9, 4), 5u ^ 0xffffffffu);
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(7, 5, CHECK, 8, 4), 5u ^ 0xffffffffu);   /* 2 blocks */
  PT_ASSERT_UINT_EQ(ptp_crc_block(1, 5, NULL, 0), 5u ^ 0xffffffffu);
  /* the same answer every time (the cached CPU probe) */
  PT_ASSERT_UINT_EQ(ptp_crc_algo(), ptp_crc_algo());
}
