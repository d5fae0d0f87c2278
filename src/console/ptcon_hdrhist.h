/*
 * ptcon_hdrhist.h - a small fixed-layout HdrHistogram (the bucket layout of the
 * HdrHistogram family) with the "V2" serialisation the tokio-console client
 * decodes.
 *
 * Layout for the console: values in nanoseconds, lowest discernible 1,
 * highest trackable 2^36 - 1 ns (~68.7 s; larger values are clamped and
 * counted as high outliers), 1 significant figure (32 sub-buckets, relative
 * error <= 1/16). That layout has PTCON_HIST_COUNTS counters of 32 bits; a
 * histogram allocates only those up to the largest value recorded so far
 * (in steps of one bucket, 16 counters), so a task whose polls stay under
 * 1 ms holds about 1.2 KiB and the worst case is 2.1 KiB.
 *
 * Not thread-safe; owned by the aggregator (server thread).
 */
#ifndef PTCON_HDRHIST_H
#define PTCON_HDRHIST_H

#include <stddef.h>
#include <stdint.h>

#include "prof/output/ptp_pb_wire.h"

#define PTCON_HIST_LOWEST 1u
#define PTCON_HIST_HIGHEST ((UINT64_C(1) << 36) - 1)
#define PTCON_HIST_SIGFIGS 1u
#define PTCON_HIST_SUB_HALF_MAG 4u                   /* sub_bucket_half_count = 16 */
#define PTCON_HIST_SUB_HALF (1u << PTCON_HIST_SUB_HALF_MAG)
#define PTCON_HIST_SUB_COUNT (2u * PTCON_HIST_SUB_HALF)
/* bucket_count: smallest untrackable value 32 << (k-1) > HIGHEST -> k = 32. */
#define PTCON_HIST_BUCKETS 32u
#define PTCON_HIST_COUNTS ((PTCON_HIST_BUCKETS + 1u) * PTCON_HIST_SUB_HALF)

/* V2 cookie (encoding cookie base 0x1c849303 | 0x10). */
#define PTCON_HIST_V2_COOKIE 0x1C849313u
#define PTCON_HIST_HEADER_LEN 40u

typedef struct ptcon_hist {
  uint64_t total;
  uint64_t max;              /* largest recorded value (after clamping) */
  uint64_t high_outliers;    /* values above HIGHEST */
  uint64_t highest_outlier;  /* largest such value (0 = none) */
  uint32_t ncounts;          /* counters allocated; index(max) < ncounts */
  uint32_t counts[];
} ptcon_hist;

/* Index of the counter for value v (v <= HIGHEST). */
uint32_t ptcon_hist_index(uint64_t v);
/* Smallest value that maps to index i (for tests and decoding checks). */
uint64_t ptcon_hist_value_at(uint32_t i);
/* Records v into *hp, allocating (*hp == NULL) or growing the histogram to
 * cover v's counter. Returns 0, or -ENOMEM (*hp unchanged, v not recorded).
 * Free with free(). */
int ptcon_hist_record(ptcon_hist **hp, uint64_t v);
/* Appends the V2 serialisation (header + ZigZag LEB128 counts up to the
 * index of max, runs of k >= 2 zeros as -k) to b. h == NULL encodes an
 * empty histogram (header + one 0). */
void ptcon_hist_encode_v2(const ptcon_hist *h, ptp_pb_buf *b);
/* Writes the 9-byte-max ZigZag LEB128 of v (HdrHistogram flavour). */
void ptcon_hist_put_zz(ptp_pb_buf *b, int64_t v);

#endif
