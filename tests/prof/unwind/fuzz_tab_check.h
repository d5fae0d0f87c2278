/*
 * fuzz_tab_check.h - what the signal handler's walker relies on in a
 * compact CFI table (src/prof/signal/ptp_unwind.h), checked on a table a
 * fuzz target got from untrusted bytes: the CFI parser's (fuzz_cfi_parse.c)
 * or the unwind-table cache's (fuzz_cficache.c). Header-only: each harness
 * is one program built from a source list (tests/fuzz_lib.sh).
 */
#ifndef FUZZ_TAB_CHECK_H
#define FUZZ_TAB_CHECK_H

#include "prof/signal/ptp_unwind.h"
#include "tests/fuzz_check.h"

#include <stdio.h>
#include <stdlib.h>

/* Every rule's kind known; every row non-empty, naming a rule of the
 * table, after the previous one (sorted, disjoint); norule true to the
 * rows; the walker's lookup finds each row's rule at the row's first and
 * last byte and nothing just before a row that follows a gap. */
static inline void fuzz_check_rows(const ptp_cfi_tab *t, uintptr_t bias) {
  for (size_t i = 0; i < t->nrules; i++) CHECK(t->rules[i].kind <= PTP_CFI_END);
  size_t norule = 0;
  for (size_t i = 0; i < t->nrows; i++) {
    const ptp_cfi_row *r = &t->rows[i];
    CHECK(r->len > 0 && r->rule < t->nrules);
    if (i) CHECK((uint64_t)t->rows[i - 1].start + t->rows[i - 1].len <= r->start);
    norule += t->rules[r->rule].kind == PTP_CFI_NORULE;
    const ptp_cfi_rule *want = &t->rules[r->rule];
    CHECK(ptp_cfi_tab_lookup(t, bias + r->start) == want);
    CHECK(ptp_cfi_tab_lookup(t, bias + r->start + r->len - 1) == want);
    int gap_before = i == 0 || (uint64_t)t->rows[i - 1].start + t->rows[i - 1].len < r->start;
    if (gap_before && r->start > 0) CHECK(ptp_cfi_tab_lookup(t, bias + r->start - 1) == NULL);
  }
  CHECK(norule == t->norule);
}

#endif
