/*
 * ptp_crc.c - the cache checksums (see ptp_crc.h for the algorithms and
 * the contract).
 *
 * Threads: the cached CPU answer (relaxed atomic: every thread computes
 * the same value, so a race only repeats the work). Not for signal
 * handlers.
 */
#include <stdatomic.h>
#include <string.h>
#include <zlib.h>
#include <nmmintrin.h>

#include "prof/cache/ptp_crc.h"

/* Continues the CRC-32C crc (0 to start) over [p, p + n): pre- and
 * post-inverted like zlib's crc32, so a CRC can be computed in pieces. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p,
                                                             size_t n) {
  uint64_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  for (; n; p++, n--) c = _mm_crc32_u8((uint32_t)c, *p);
  return ~(uint32_t)c;
}

/* Continues crc with one block [p, p + n) the PTP_CRC_C3 way. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_3lanes(uint32_t crc, const uint8_t *p,
                                                                size_t n) {
  const size_t l = (n / 3) & ~(size_t)7;
  const uint8_t *a = p, *b = p + l, *c = p + 2 * l;
  uint64_t ca = 0xffffffffu, cb = 0xffffffffu, cc = 0xffffffffu;
  for (size_t i = 0; i < l; i += 8) {
    uint64_t wa, wb, wc;
    memcpy(&wa, a + i, 8);
    memcpy(&wb, b + i, 8);
    memcpy(&wc, c + i, 8);
    ca = _mm_crc32_u64(ca, wa);
    cb = _mm_crc32_u64(cb, wb);
    cc = _mm_crc32_u64(cc, wc);
  }
  uint32_t lanes[3] = { ~(uint32_t)ca, ~(uint32_t)cb, ~(uint32_t)cc };
  lanes[2] = crc32c_hw(lanes[2], c + l, n - 3 * l);           /* the third lane's rest */
  return crc32c_hw(crc, (const uint8_t *)lanes, sizeof lanes);
}

unsigned ptp_crc_algo(void) {
  static _Atomic unsigned algo;
  unsigned a = atomic_load_explicit(&algo, memory_order_relaxed);
  if (!a) {
    __builtin_cpu_init();               /* we may run in a preload constructor */
    a = __builtin_cpu_supports("sse4.2") ? PTP_CRC_C3 : PTP_CRC_ZLIB;
    atomic_store_explicit(&algo, a, memory_order_relaxed);
  }
  return a;
}

int ptp_crc_supported(unsigned algo) {
  return algo == PTP_CRC_ZLIB || (algo == PTP_CRC_C3 && ptp_crc_algo() == PTP_CRC_C3);
}

uint32_t ptp_crc_block(unsigned algo, uint32_t crc, const void *p, size_t n) {
  if (!ptp_crc_supported(algo)) return crc ^ 0xffffffffu;
  if (!n) return crc;   /* also keeps NULL + 0 out of the lane arithmetic */
  if (algo == PTP_CRC_ZLIB) return (uint32_t)crc32_z(crc, (const Bytef *)p, n);
  return crc32c_3lanes(crc, p, n);
}

uint32_t ptp_crc_blocks(unsigned algo, uint32_t crc, const void *p, size_t n, size_t block) {
  /* checked once here: an unknown id over an even number of blocks must
   * not flip crc back to itself */
  if (!ptp_crc_supported(algo)) return crc ^ 0xffffffffu;
  if (algo == PTP_CRC_ZLIB || !block) return ptp_crc_block(algo, crc, p, n);
  const uint8_t *b = p;
  for (size_t off = 0; off < n; off += block)
    crc = ptp_crc_block(algo, crc, b + off, n - off < block ? n - off : block);
  return crc;
}
