/*
 * fuzz_cfi_parse.c - libFuzzer harness of the CFI parser's .debug_frame
 * reader and the compact table it makes (src/prof/unwind/ptp_cfi_parse.c,
 * the table format of src/prof/signal/ptp_unwind.h, looked up by the
 * signal handler's ptp_cfi_tab_lookup); built and run by
 * tests/prof/cfi_parse_fuzz_test.sh. A .debug_frame comes from a file on
 * disk (the object's own or a separate debug file): untrusted bytes.
 *
 * Input: one control byte (bit 0: load bias 0 or 0x7f0000000000; bits 1-2:
 * the row limit, 16, 256, 4096 or 2^20), then the section's bytes.
 * Checked for every input:
 *  - the result is 0, -E2BIG or -ENOMEM, and a table only with 0;
 *  - the table is what the walker relies on: bias as given; rows sorted,
 *    disjoint and non-empty, each naming a rule of the table; every rule's
 *    kind known, no rule twice; rows and rules within the limit; bytes and
 *    norule true to the content;
 *  - the walker's lookup finds each row's rule at the row's first and last
 *    byte, and nothing just before a row that follows a gap;
 *  - parsing the same bytes again gives the same table, byte for byte.
 * Any mismatch aborts (a crash for libFuzzer); ASan/UBSan catch the rest.
 */
#include "prof/unwind/ptp_cfi_internal.h"
#include "prof/signal/ptp_unwind.h"
#include "tests/prof/unwind/fuzz_tab_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_tab(const ptp_cfi_tab *t, uintptr_t bias, size_t max) {
  CHECK(t->bias == bias);
  CHECK(t->nrules <= PTP_CFI_RULES_MAX);
  CHECK(t->nrows + t->nrules <= max);
  CHECK(t->bytes == sizeof *t + (t->nrows + t->nrules) * 8);
  CHECK(t->map == NULL);
  for (size_t i = 0; i < t->nrules; i++)   /* the parser dedups its rules */
    for (size_t j = 0; j < i; j++) CHECK(memcmp(&t->rules[i], &t->rules[j], 8) != 0);
  fuzz_check_rows(t, bias);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uintptr_t bias = data[0] & 1 ? (uintptr_t)0x7f0000000000 : 0;
  static const size_t limits[4] = { 16, 256, 4096, (size_t)1 << 20 };
  const size_t max = limits[(data[0] >> 1) & 3];
  /* A copy of exactly the section's bytes, so ASan sees any read past it. */
  size_t n = size - 1;
  uint8_t *sec = malloc(n ? n : 1);
  CHECK(sec);
  if (n) memcpy(sec, data + 1, n);
  ptp_cfi_tab *t = NULL, *u = NULL;
  int rc = ptp_cfi_parse_debug_frame(sec, n, bias, max, &t);
  CHECK(rc == 0 || rc == -E2BIG || rc == -ENOMEM);
  CHECK((rc == 0) == (t != NULL));
  if (t) {
    check_tab(t, bias, max);
    CHECK(ptp_cfi_parse_debug_frame(sec, n, bias, max, &u) == 0);
    CHECK(u->nrows == t->nrows && u->nrules == t->nrules);
    CHECK(memcmp(u->rules, t->rules, t->nrules * 8) == 0);
    CHECK(memcmp(u->rows, t->rows, t->nrows * 8) == 0);
    free(u);   /* built tables are one allocation (ptp_cfi_tab_free's case map == NULL) */
    free(t);
  }
  free(sec);
  return 0;
}
