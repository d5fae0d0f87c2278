/* cfi_tab_fixture.c - see cfi_tab_fixture.h. */
#include "cfi_tab_fixture.h"

#include <stdlib.h>

#include "pt_test.h"
#include "prof/signal/ptp_unwind.h"

ptp_cfi_tab *ptt_cfi_tab_make(uintptr_t base, size_t n, int variant) {
  ptp_cfi_tab *t = calloc(1, sizeof *t + n * sizeof(ptp_cfi_row));
  PT_ASSERT(t);
  ptp_cfi_row *rows = (ptp_cfi_row *)(t + 1);
  t->nrows = n;
  t->bytes = sizeof *t + n * sizeof(ptp_cfi_row);
  t->rows = rows;
  for (size_t i = 0; i < n; i++) {
    rows[i] = (ptp_cfi_row){ .start = base + 0x1000 + 16 * i, .len = 16,
                             .cfa_off = (int32_t)(8 + 8 * (i % 5) + 1000 * variant),
                             .rbp_off = (int16_t)(i % 3 ? -16 : PTP_RBP_SAME),
                             .ra_off = -8, .kind = (uint8_t)(i % 4) };
  }
  return t;
}
