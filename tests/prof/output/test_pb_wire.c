/* Known-good encodings from the protobuf spec and console-protocol.md. */
#include "pt_test.h"
#include "prof/output/ptp_pb_wire.h"

PT_TEST(ptp_pb_wire_known_bytes) {
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  /* State{temporality: PAUSED} = 08 01 */
  ptp_pb_uint64(&b, 1, 1);
  PT_ASSERT_MEM_EQ(b.data, "\x08\x01", 2);
  PT_ASSERT_UINT_EQ(b.len, 2);
  ptp_pb_buf_reset(&b);
  /* TaskDetailsRequest{id: Id{id: 1}} = 0a 02 08 01 */
  ptp_pb_mark m = ptp_pb_begin(&b, 1);
  ptp_pb_uint64(&b, 1, 1);
  ptp_pb_end(&b, m);
  PT_ASSERT_UINT_EQ(b.len, 4);
  PT_ASSERT_MEM_EQ(b.data, "\x0a\x02\x08\x01", 4);
  ptp_pb_buf_reset(&b);
  /* 150 = 96 01; the spec's classic example "08 96 01" */
  ptp_pb_uint64(&b, 1, 150);
  PT_ASSERT_MEM_EQ(b.data, "\x08\x96\x01", 3);
  ptp_pb_buf_reset(&b);
  /* zigzag: -1 -> 1, 1 -> 2, INT64_MIN -> all ones */
  PT_ASSERT_UINT_EQ(ptp_pb_zigzag64(-1), 1);
  PT_ASSERT_UINT_EQ(ptp_pb_zigzag64(1), 2);
  PT_ASSERT_UINT_EQ(ptp_pb_zigzag64(INT64_MIN), UINT64_MAX);
  /* empty nested message = tag + 00 */
  m = ptp_pb_begin(&b, 7);
  ptp_pb_end(&b, m);
  PT_ASSERT_MEM_EQ(b.data, "\x3a\x00", 2);
  PT_ASSERT_UINT_EQ(b.len, 2);
  ptp_pb_buf_free(&b);
}

PT_TEST(ptp_pb_wire_large_nested_and_packed) {
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  ptp_pb_mark m = ptp_pb_begin(&b, 2);
  static uint8_t blob[70000];
  memset(blob, 0xab, sizeof blob);
  ptp_pb_bytes(&b, 1, blob, sizeof blob);
  ptp_pb_end(&b, m);
  PT_ASSERT_INT_EQ(b.err, 0);
  /* outer: tag 0x12, varint(70000 + 1 + 3) */
  size_t inner = 1 + ptp_pb_varint_size(sizeof blob) + sizeof blob;
  PT_ASSERT_UINT_EQ(b.len, 1 + ptp_pb_varint_size(inner) + inner);
  PT_ASSERT_UINT_EQ(b.data[0], 0x12);
  ptp_pb_buf_reset(&b);
  uint64_t v[3] = {3, 270, 86942};
  ptp_pb_packed_uint64(&b, 4, v, 3);
  /* spec example: 22 06 03 8E 02 9E A7 05 */
  PT_ASSERT_UINT_EQ(b.len, 8);
  PT_ASSERT_MEM_EQ(b.data, "\x22\x06\x03\x8e\x02\x9e\xa7\x05", 8);
  ptp_pb_buf_free(&b);
}

PT_TEST(ptp_pb_wire_cap_is_sticky) {
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 16);
  char s[32];
  memset(s, 'x', sizeof s - 1);
  s[31] = 0;
  ptp_pb_string(&b, 1, s);
  PT_ASSERT(b.err < 0);
  size_t len = b.len;
  ptp_pb_uint64(&b, 1, 1);
  PT_ASSERT_UINT_EQ(b.len, len);
  ptp_pb_buf_free(&b);
}
