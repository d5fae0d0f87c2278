/*
 * ptp_crc.h - the checksum of the library's persistent caches (the
 * unwind-table cache ptp_cficache.c, the symbol cache ptp_symcache.c): one
 * unit, so both compute and check the same algorithms the same way, and a
 * file records which one it used (the algorithm ids below are written into
 * cache files: never renumber them, never change what one computes).
 *
 * Algorithms:
 *  - PTP_CRC_ZLIB (2): zlib's crc32 (CRC-32, the gzip polynomial) over the
 *    bytes; blocks make no difference (a CRC continues piece by piece).
 *  - PTP_CRC_C3 (3): on CPUs with SSE4.2. Each block's bytes in three
 *    lanes (the first two (n / 3) rounded down to 8 bytes, the third the
 *    rest), the CRC-32C of the three lanes computed side by side with the
 *    crc32 instruction (latency 3 cycles, throughput 1: three independent
 *    chains run about 3x faster than one), and the checksum the CRC-32C,
 *    continued from block to block, of each block's three lane CRCs (12
 *    bytes per block). A corrupt lane changes its CRC (any burst up to 32
 *    bits, any odd number of flipped bits), and so the folded value.
 *    Block boundaries are part of the value: writer and reader must cut
 *    the same blocks (ptp_crc_blocks cuts them from the start of the bytes
 *    it is given).
 * Id 1 (a single-chain CRC-32C) was written by early unwind-table caches
 * and is not computed any more: a file carrying it is stale.
 *
 * Contract: pure functions of their arguments (the only state is the
 * cached answer of ptp_crc_algo, an atomic); any thread. Not for signal
 * handlers: ptp_crc_algo runs __builtin_cpu_init the first time, and
 * nothing here was written or checked for async-signal safety. Every
 * crc argument is the value to continue (0 to start): ptp_crc_blocks(a,
 * ptp_crc_blocks(a, 0, p, n, b), q, m, b) sums p and then q, each cut into
 * blocks from its own start. An empty range (n == 0, p may be NULL)
 * returns crc unchanged for both algorithms. An id this CPU does not
 * compute (ptp_crc_supported) returns crc ^ 0xffffffff from either
 * function, whatever the range (never a valid continuation, so a check
 * against it fails).
 */
#ifndef PTP_CRC_H
#define PTP_CRC_H

#include <stddef.h>
#include <stdint.h>

#define PTP_CRC_ZLIB 2u
#define PTP_CRC_C3 3u

/* The algorithm this CPU computes best: PTP_CRC_C3 with SSE4.2, else
 * PTP_CRC_ZLIB. The same answer for the life of the process. */
unsigned ptp_crc_algo(void);

/* Whether this CPU can compute algo (PTP_CRC_ZLIB always, PTP_CRC_C3 with
 * SSE4.2); 0 for an unknown id. */
int ptp_crc_supported(unsigned algo);

/* Continues crc with one block [p, p + n) (for PTP_CRC_C3: one fold of
 * three lanes, whatever n; n == 0 adds nothing). */
uint32_t ptp_crc_block(unsigned algo, uint32_t crc, const void *p, size_t n);

/* Continues crc with [p, p + n) cut into blocks of block bytes from p (the
 * last one shorter; block 0: one block). */
uint32_t ptp_crc_blocks(unsigned algo, uint32_t crc, const void *p, size_t n, size_t block);

#endif
