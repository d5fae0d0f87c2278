/* Unit tests of the console's byte-level pieces: HdrHistogram V2, State,
 * request decoding (well-formed and malformed), bind-string validation. */
#include "pt_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>

#include "console/ptcon_hdrhist.h"
#include "console/ptcon_agg.h"
#include "console/ptcon_request.h"
#include "ptprof_console.h"

static const uint8_t k_header[40] = {
  0x1c, 0x84, 0x93, 0x13,             /* cookie V2 */
  0, 0, 0, 0,                         /* payload length (patched per case) */
  0, 0, 0, 0,                         /* normalizing offset */
  0, 0, 0, 1,                         /* significant figures */
  0, 0, 0, 0, 0, 0, 0, 1,             /* lowest */
  0, 0, 0, 0x0f, 0xff, 0xff, 0xff, 0xff, /* highest 2^36 - 1 */
  0x3f, 0xf0, 0, 0, 0, 0, 0, 0,       /* 1.0 */
};

PT_TEST(console_hist_empty_is_header_plus_zero) {
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  ptcon_hist_encode_v2(NULL, &b);
  PT_ASSERT_UINT_EQ(b.len, 41);
  uint8_t want[41];
  memcpy(want, k_header, 40);
  want[7] = 1;   /* payload length 1 */
  want[40] = 0;
  PT_ASSERT_MEM_EQ(b.data, want, 41);
  ptp_pb_buf_free(&b);
}

PT_TEST(console_hist_grows_by_bucket) {
  ptcon_hist *h = NULL;
  PT_ASSERT_INT_EQ(ptcon_hist_record(&h, 5), 0);
  PT_ASSERT_UINT_EQ(h->ncounts, 32);             /* minimum: bucket 0 */
  PT_ASSERT_INT_EQ(ptcon_hist_record(&h, 1000000), 0);   /* 1 ms */
  PT_ASSERT(h->ncounts > ptcon_hist_index(1000000));
  PT_ASSERT(h->ncounts <= 320);                  /* ~1.2 KiB, not the full 2.1 */
  PT_ASSERT_UINT_EQ(h->counts[5], 1);
  PT_ASSERT_UINT_EQ(h->counts[ptcon_hist_index(1000000)], 1);
  PT_ASSERT_INT_EQ(ptcon_hist_record(&h, UINT64_MAX), 0);
  PT_ASSERT_UINT_EQ(h->ncounts, PTCON_HIST_COUNTS);
  PT_ASSERT_UINT_EQ(h->total, 3);
  for (uint32_t i = 0; i < h->ncounts; i++)
    if (i != 5 && i != ptcon_hist_index(1000000) && i != PTCON_HIST_COUNTS - 1)
      PT_ASSERT_UINT_EQ(h->counts[i], 0);           /* growth zeroes new counters */
  free(h);
}

PT_TEST(console_hist_index_layout) {
  /* Bucket 0 holds 0..31 exactly; then 16 sub-buckets per power of two. */
  for (uint32_t v = 0; v < 32; v++) PT_ASSERT_UINT_EQ(ptcon_hist_index(v), v);
  PT_ASSERT_UINT_EQ(ptcon_hist_index(32), 32);
  PT_ASSERT_UINT_EQ(ptcon_hist_index(33), 32);   /* resolution 2 in bucket 1 */
  PT_ASSERT_UINT_EQ(ptcon_hist_index(34), 33);
  PT_ASSERT_UINT_EQ(ptcon_hist_index(64), 48);
  PT_ASSERT_UINT_EQ(ptcon_hist_index(PTCON_HIST_HIGHEST), PTCON_HIST_COUNTS - 1);
  for (uint32_t i = 0; i < PTCON_HIST_COUNTS; i++)
    PT_ASSERT_UINT_EQ(ptcon_hist_index(ptcon_hist_value_at(i)), i);
}

PT_TEST(console_hist_runs_and_zigzag) {
  ptcon_hist *h = NULL;
  ptcon_hist_record(&h, 1);      /* index 1 */
  ptcon_hist_record(&h, 1);
  ptcon_hist_record(&h, 3);      /* index 3: one zero between (index 2) */
  ptcon_hist_record(&h, 7);      /* index 7: three zeros between (4,5,6) */
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  ptcon_hist_encode_v2(h, &b);
  /* counts 0..7: [0, 2, 0, 1, 0, 0, 0, 1] -> 0 (single zero at 0), 2, 0, 1, -3, 1
   * zigzag: 0->00, 2->04, 0->00, 1->02, -3->05, 1->02 */
  static const uint8_t payload[] = {0x00, 0x04, 0x00, 0x02, 0x05, 0x02};
  PT_ASSERT_UINT_EQ(b.len, 40 + sizeof payload);
  PT_ASSERT_MEM_EQ(b.data + 40, payload, sizeof payload);
  PT_ASSERT_UINT_EQ(b.data[7], sizeof payload);
  PT_ASSERT_UINT_EQ(h->max, 7);
  free(h);
  /* A leading run: value 40 alone -> counts[0..36] = 36 zeros then 1 */
  h = NULL;
  ptcon_hist_record(&h, 40);     /* index 32 + (40>>1) - 16 = 36 */
  ptp_pb_buf_reset(&b);
  ptcon_hist_encode_v2(h, &b);
  static const uint8_t p2[] = {0x47, 0x02};   /* zigzag(-36) = 71 = 0x47 */
  PT_ASSERT_UINT_EQ(b.len, 42);
  PT_ASSERT_MEM_EQ(b.data + 40, p2, 2);
  /* Outliers are clamped and counted. */
  ptcon_hist_record(&h, PTCON_HIST_HIGHEST + 5);
  PT_ASSERT_UINT_EQ(h->high_outliers, 1);
  PT_ASSERT_UINT_EQ(h->highest_outlier, PTCON_HIST_HIGHEST + 5);
  PT_ASSERT_UINT_EQ(h->max, PTCON_HIST_HIGHEST);
  free(h);
  ptp_pb_buf_free(&b);
}

PT_TEST(console_hist_zigzag_leb128_nine_bytes) {
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  ptcon_hist_put_zz(&b, 300);          /* zigzag 600 = 0xd8 0x04 */
  PT_ASSERT_UINT_EQ(b.len, 2);
  PT_ASSERT_MEM_EQ(b.data, "\xd8\x04", 2);
  ptp_pb_buf_reset(&b);
  ptcon_hist_put_zz(&b, INT64_MIN);    /* zigzag = 2^64-1: 8 x 0xff then 0xff */
  PT_ASSERT_UINT_EQ(b.len, 9);
  PT_ASSERT_MEM_EQ(b.data, "\xff\xff\xff\xff\xff\xff\xff\xff\xff", 9);
  ptp_pb_buf_free(&b);
}

PT_TEST(console_state_encoding) {
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  ptcon_encode_state(&b, 1);
  PT_ASSERT_UINT_EQ(b.len, 2);
  PT_ASSERT_MEM_EQ(b.data, "\x08\x01", 2);
  ptp_pb_buf_reset(&b);
  ptcon_encode_state(&b, 0);
  PT_ASSERT_UINT_EQ(b.len, 0);
  ptp_pb_buf_free(&b);
}

static int decode(ptcon_method m, const void *p, size_t n, ptcon_request *r) {
  const char *why = NULL;
  int st = ptcon_request_decode(m, p, n, r, &why);
  PT_ASSERT(why != NULL);
  return st;
}

PT_TEST(console_request_decode_valid) {
  ptcon_request r;
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_UPDATES, "\0\0\0\0\0", 5, &r), PTCON_GRPC_OK);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_TASK_DETAILS, "\0\0\0\0\x04\x0a\x02\x08\x01", 9, &r),
                   PTCON_GRPC_OK);
  PT_ASSERT_UINT_EQ(r.task_id, 1);
  /* Unknown fields are skipped; last id wins. */
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_TASK_DETAILS,
                          "\0\0\0\0\x0b\x10\x05\x0a\x02\x08\x01\x0a\x03\x08\x96\x01", 16, &r),
                   PTCON_GRPC_OK);
  PT_ASSERT_UINT_EQ(r.task_id, 150);
  PT_ASSERT_INT_EQ(decode(PTCON_M_PAUSE, "\0\0\0\0\x02\x08\x07", 7, &r), PTCON_GRPC_OK);
  PT_ASSERT_INT_EQ(ptcon_method_from_path("/rs.tokio.console.instrument.Instrument/WatchState", 50),
                   PTCON_M_WATCH_STATE);
  PT_ASSERT_INT_EQ(ptcon_method_from_path("/rs.tokio.console.instrument.Instrument/Watch", 45),
                   PTCON_M_UNKNOWN);
  PT_ASSERT_INT_EQ(ptcon_method_from_path("/x", 2), PTCON_M_UNKNOWN);
}

PT_TEST(console_request_decode_malformed) {
  ptcon_request r;
  /* id 0 / missing -> INVALID_ARGUMENT */
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_TASK_DETAILS, "\0\0\0\0\0", 5, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_TASK_DETAILS, "\0\0\0\0\x02\x0a\x00", 7, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_TASK_DETAILS, "\0\0\0\0\x04\x0a\x02\x08\x00", 9, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  /* short prefix, length mismatch both ways, bad flag, compressed */
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\0\0\0", 3, &r), PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\0\0\0\0\x05\x08", 6, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\0\0\0\0\x00\x08\x01", 7, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\x07\0\0\0\0", 5, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\x01\0\0\0\0", 5, &r),
                   PTCON_GRPC_UNIMPLEMENTED);
  /* truncated varint, overlong varint, length past the end, group wire
   * type, field 0, Id given as a varint */
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\0\0\0\0\x02\x08\x80", 7, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE,
                          "\0\0\0\0\x0c\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 17, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\0\0\0\0\x02\x0a\x05", 7, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\0\0\0\0\x01\x0b", 6, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, "\0\0\0\0\x02\x00\x01", 7, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_TASK_DETAILS, "\0\0\0\0\x02\x08\x01", 7, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_TASK_DETAILS, "\0\0\0\0\x04\x0a\x02\x08\x80", 9, &r),
                   PTCON_GRPC_INVALID_ARGUMENT);
  /* oversize and unknown method */
  static uint8_t big[PTCON_MAX_REQUEST_BYTES + 1];
  PT_ASSERT_INT_EQ(decode(PTCON_M_WATCH_STATE, big, sizeof big, &r),
                   PTCON_GRPC_RESOURCE_EXHAUSTED);
  PT_ASSERT_INT_EQ(decode(PTCON_M_UNKNOWN, "\0\0\0\0\0", 5, &r), PTCON_GRPC_UNIMPLEMENTED);
  /* every prefix of a valid request is rejected cleanly (no crash) */
  const uint8_t ok[] = {0, 0, 0, 0, 4, 0x0a, 0x02, 0x08, 0x01};
  for (size_t n = 0; n < sizeof ok; n++)
    PT_ASSERT(decode(PTCON_M_WATCH_TASK_DETAILS, ok, n, &r) != PTCON_GRPC_OK);
}

PT_TEST(console_bind_parse) {
  struct sockaddr_storage ss;
  socklen_t len;
  PT_ASSERT_INT_EQ(ptcon_bind_parse("127.0.0.1:6669", 0, &ss, &len), 0);
  PT_ASSERT_INT_EQ(ss.ss_family, AF_INET);
  PT_ASSERT_UINT_EQ(ntohs(((struct sockaddr_in *)&ss)->sin_port), 6669);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("127.5.6.7:1", 0, &ss, &len), 0);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("localhost:6670", 0, &ss, &len), 0);
  PT_ASSERT_UINT_EQ(ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr), 0x7f000001u);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("[::1]:6669", 0, &ss, &len), 0);
  PT_ASSERT_INT_EQ(ss.ss_family, AF_INET6);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("0.0.0.0:6669", 0, &ss, &len), -EPERM);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("10.1.2.3:6669", 0, &ss, &len), -EPERM);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("[::]:6669", 0, &ss, &len), -EPERM);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("0.0.0.0:6669", 1, &ss, &len), 0);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("127.0.0.1", 0, &ss, &len), -EINVAL);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("127.0.0.1:", 0, &ss, &len), -EINVAL);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("127.0.0.1:65536", 0, &ss, &len), -EINVAL);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("127.0.0.1:12ab", 0, &ss, &len), -EINVAL);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("127.1:80", 0, &ss, &len), -EINVAL);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("::1:6669", 0, &ss, &len), -EINVAL);
  PT_ASSERT_INT_EQ(ptcon_bind_parse("example.com:80", 1, &ss, &len), -EINVAL);
  PT_ASSERT_INT_EQ(ptcon_bind_parse(NULL, 0, &ss, &len), -EINVAL);
  PT_ASSERT(strlen(ptcon_strerror(-EPERM)) > 0);
}
