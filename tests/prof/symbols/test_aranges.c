/*
 * test_aranges.c - the .debug_aranges reader (ptp_aranges) on crafted
 * sections, each case what libdw 0.188's dwarf_getaranges does with it:
 *   - two sets of 8-byte addresses: every entry, in section order, with
 *     its set's CU offset; the (0, 0) terminators are not entries;
 *   - a set of 4-byte addresses (its own padding) and a 64-bit DWARF set;
 *   - the next set starts after the terminator, not at the set's length;
 *   - refused: version 3, a segment selector size, an address size of 2, a
 *     reserved length escape, a CU offset leaving under 4 bytes of
 *     .debug_info, and every truncation of a valid section;
 *   - an empty section is valid and has no entries.
 */
#include "pt_test.h"
#include "prof/symbols/ptp_aranges.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct sec {
  uint8_t b[1024];
  size_t n;
} sec;

static void put(sec *s, uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; i++) s->b[s->n++] = (uint8_t)(v >> (8 * i));
}

/* Appends one set: header (ver, cu, asz, seg), padding, entries, (0, 0). */
static void add_set(sec *s, int dw64, unsigned ver, uint64_t cu, unsigned asz, unsigned seg,
                    const uint64_t (*ents)[2], size_t nents) {
  size_t start = s->n;
  put(s, dw64 ? 0xffffffffu : 0, 4);
  if (dw64) put(s, 0, 8);
  size_t len_at = s->n;
  put(s, ver, 2);
  put(s, cu, dw64 ? 8 : 4);
  put(s, asz, 1);
  put(s, seg, 1);
  while ((s->n - start) % (2 * (asz ? asz : 1))) put(s, 0, 1);
  for (size_t i = 0; i < nents; i++) {
    put(s, ents[i][0], asz);
    put(s, ents[i][1], asz);
  }
  put(s, 0, asz);
  put(s, 0, asz);
  uint64_t len = s->n - len_at;
  for (unsigned i = 0; i < (dw64 ? 8u : 4u); i++)
    s->b[(dw64 ? start + 4 : start) + i] = (uint8_t)(len >> (8 * i));
}

static const uint64_t E1[][2] = {{0x1000, 0x40}, {0x1100, 0x20}};
static const uint64_t E2[][2] = {{0x1040, 0x30}};

PT_TEST(prof_aranges_sets_in_order) {
  sec s = {.n = 0};
  add_set(&s, 0, 2, 0, 8, 0, E1, 2);
  add_set(&s, 0, 2, 0x80, 8, 0, E2, 1);
  ptp_arange *v = NULL;
  size_t n = 0;
  PT_ASSERT_INT_EQ(ptp_aranges_parse(s.b, s.n, 0x1000, &v, &n), 0);
  PT_ASSERT_UINT_EQ(n, 3);
  PT_ASSERT(v[0].lo == 0x1000 && v[0].len == 0x40 && v[0].cu == 0 && v[0].ord == 0);
  PT_ASSERT(v[1].lo == 0x1100 && v[1].len == 0x20 && v[1].cu == 0 && v[1].ord == 1);
  PT_ASSERT(v[2].lo == 0x1040 && v[2].len == 0x30 && v[2].cu == 0x80 && v[2].ord == 2);
  free(v);
}

PT_TEST(prof_aranges_addr4_and_dwarf64) {
  sec s = {.n = 0};
  add_set(&s, 0, 2, 0x10, 4, 0, E2, 1);
  add_set(&s, 1, 2, 0x20, 8, 0, E1, 2);
  ptp_arange *v = NULL;
  size_t n = 0;
  PT_ASSERT_INT_EQ(ptp_aranges_parse(s.b, s.n, 0x1000, &v, &n), 0);
  PT_ASSERT_UINT_EQ(n, 3);
  PT_ASSERT(v[0].lo == 0x1040 && v[0].len == 0x30 && v[0].cu == 0x10);
  PT_ASSERT(v[1].lo == 0x1000 && v[1].cu == 0x20 && v[2].lo == 0x1100 && v[2].cu == 0x20);
  free(v);
}

PT_TEST(prof_aranges_next_set_after_terminator) {
  /* a length that claims more than the set holds is not used to find the
   * next set (libdw reads on from the terminator) */
  sec s = {.n = 0};
  add_set(&s, 0, 2, 0, 8, 0, E1, 2);
  s.b[0] = (uint8_t)(s.b[0] + 16);
  add_set(&s, 0, 2, 0x80, 8, 0, E2, 1);
  ptp_arange *v = NULL;
  size_t n = 0;
  PT_ASSERT_INT_EQ(ptp_aranges_parse(s.b, s.n, 0x1000, &v, &n), 0);
  PT_ASSERT_UINT_EQ(n, 3);
  PT_ASSERT(v[2].cu == 0x80);
  free(v);
}

static int parse_one(unsigned ver, uint64_t cu, unsigned asz, unsigned seg, uint64_t info) {
  sec s = {.n = 0};
  add_set(&s, 0, ver, cu, asz, seg, E1, 2);
  ptp_arange *v = (ptp_arange *)&s;   /* must stay untouched on failure */
  size_t n = 99;
  int r = ptp_aranges_parse(s.b, s.n, info, &v, &n);
  if (r) PT_ASSERT(v == (ptp_arange *)&s && n == 99);
  else free(v);
  return r;
}

PT_TEST(prof_aranges_refused) {
  PT_ASSERT_INT_EQ(parse_one(2, 0, 8, 0, 0x1000), 0);
  PT_ASSERT_INT_EQ(parse_one(3, 0, 8, 0, 0x1000), -EINVAL);
  PT_ASSERT_INT_EQ(parse_one(2, 0, 8, 1, 0x1000), -EINVAL);
  PT_ASSERT_INT_EQ(parse_one(2, 0, 2, 0, 0x1000), -EINVAL);
  PT_ASSERT_INT_EQ(parse_one(2, 0xffc, 8, 0, 0x1000), 0);        /* 4 bytes left */
  PT_ASSERT_INT_EQ(parse_one(2, 0xffd, 8, 0, 0x1000), -EINVAL);
  PT_ASSERT_INT_EQ(parse_one(2, 0, 8, 0, 3), -EINVAL);
  sec s = {.n = 0};
  add_set(&s, 0, 2, 0, 8, 0, E1, 2);
  ptp_arange *v = NULL;
  size_t n = 0;
  s.b[0] = 0xf0; s.b[1] = 0xff; s.b[2] = 0xff; s.b[3] = 0xff;   /* reserved escape */
  PT_ASSERT_INT_EQ(ptp_aranges_parse(s.b, s.n, 0x1000, &v, &n), -EINVAL);
}

PT_TEST(prof_aranges_truncated_and_empty) {
  sec s = {.n = 0};
  add_set(&s, 0, 2, 0, 8, 0, E1, 2);
  ptp_arange *v = NULL;
  size_t n = 0;
  for (size_t len = 1; len < s.n; len++)
    PT_ASSERT_MSG(ptp_aranges_parse(s.b, len, 0x1000, &v, &n) == -EINVAL, "len %zu", len);
  n = 7;
  PT_ASSERT_INT_EQ(ptp_aranges_parse(s.b, 0, 0x1000, &v, &n), 0);
  PT_ASSERT_UINT_EQ(n, 0);
  PT_ASSERT(v == NULL);
}
