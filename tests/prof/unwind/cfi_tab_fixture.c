/* cfi_tab_fixture.c - see cfi_tab_fixture.h. */
#include "cfi_tab_fixture.h"

#include <stdlib.h>

#include "pt_test.h"
#include "prof/signal/ptp_unwind.h"

/* Row i's rule depends on i % 5 (cfa_off), i % 3 (rbp_off) and i % 4
 * (kind): rule k serves every row i with i % 60 == k. */
#define FIX_RULES 60

ptp_cfi_tab *ptt_cfi_tab_make(uintptr_t base, size_t n, int variant) {
  size_t nrules = n < FIX_RULES ? n : FIX_RULES;
  size_t bytes = sizeof(ptp_cfi_tab) + nrules * sizeof(ptp_cfi_rule) + n * sizeof(ptp_cfi_row);
  ptp_cfi_tab *t = calloc(1, bytes);
  PT_ASSERT(t);
  ptp_cfi_rule *rules = (ptp_cfi_rule *)(t + 1);
  ptp_cfi_row *rows = (ptp_cfi_row *)(rules + nrules);
  for (size_t k = 0; k < nrules; k++)
    rules[k] = (ptp_cfi_rule){ .cfa_off = (int32_t)(8 + 8 * (k % 5) + 1000 * variant),
                               .rbp_off = (int16_t)(k % 3 ? -16 : PTP_RBP_SAME),
                               .ra_off = -8, .kind = (uint8_t)(k % 4) };
  for (size_t i = 0; i < n; i++) {
    rows[i] = (ptp_cfi_row){ .start = (uint32_t)(0x1000 + 16 * i), .len = 16,
                             .rule = (uint16_t)(i % FIX_RULES) };
    t->norule += rules[i % FIX_RULES].kind == PTP_CFI_NORULE;
  }
  t->nrows = n;
  t->nrules = nrules;
  t->bytes = bytes;
  t->bias = base;
  t->rows = rows;
  t->rules = rules;
  return t;
}
