/*
 * test_cfi_compact.c - the compact table the CFI parser makes (ptp_unwind.h:
 * 8-byte rows relative to the object's bias, naming 8-byte rules kept once
 * per table), from .debug_frame bytes written here entry by entry, so each
 * boundary is reached exactly:
 *   - a range longer than a row's 16-bit length is several rows, and every
 *     PC of it (first, last, both sides of each cut) finds its rule; the
 *     PC after it finds none;
 *   - rows with the same rule share one rule (two rules for 1000 rows);
 *   - PTP_CFI_RULES_MAX distinct rules fit, one more is refused (-E2BIG);
 *   - rows and rules count together against the caller's limit;
 *   - a row beyond 4 GiB from the bias (no code of the object can be
 *     there) is dropped, the others kept;
 *   - libc's real table: few rules, every row naming one of them.
 */
#include "pt_test.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/unwind/ptp_cfi_internal.h"

#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

/* ---- a .debug_frame writer (DWARF 2 CFI, version 1, 8-byte addresses) ---- */

typedef struct dfw {
  uint8_t *b;
  size_t n, cap;
} dfw;

static void put(dfw *w, const void *p, size_t n) {
  if (w->n + n > w->cap) {
    w->cap = (w->n + n) * 2;
    w->b = realloc(w->b, w->cap);
    PT_ASSERT(w->b);
  }
  memcpy(w->b + w->n, p, n);
  w->n += n;
}

static void put_u8(dfw *w, uint8_t v) { put(w, &v, 1); }
static void put_u32(dfw *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(dfw *w, uint64_t v) { put(w, &v, 8); }

static void put_uleb(dfw *w, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    put_u8(w, (uint8_t)(b | (v ? 0x80 : 0)));
  } while (v);
}

/* Pads the entry that started at `at` (its length word) to a multiple of
 * 4 with DW_CFA_nop and writes its length. */
static void close_entry(dfw *w, size_t at) {
  while ((w->n - at) % 4) put_u8(w, 0);
  uint32_t len = (uint32_t)(w->n - at - 4);
  memcpy(w->b + at, &len, 4);
}

/* The CIE at offset 0: CFA = rsp + 8, return address at CFA - 8. */
static void cie(dfw *w) {
  size_t at = w->n;
  put_u32(w, 0);             /* length, set by close_entry */
  put_u32(w, 0xffffffffu);   /* CIE id */
  put_u8(w, 1);              /* version */
  put_u8(w, 0);              /* augmentation "" */
  put_uleb(w, 1);            /* code alignment */
  put_u8(w, 0x78);           /* data alignment: SLEB -8 */
  put_u8(w, 16);             /* return address register (rip) */
  const uint8_t init[] = { 0x0c, 7, 8,     /* DW_CFA_def_cfa rsp, 8 */
                           0x90, 1 };      /* DW_CFA_offset r16, 1 * -8 */
  put(w, init, sizeof init);
  close_entry(w, at);
}

/* An FDE of the CIE for [pc, pc + range), with CFA = rsp + cfa_off over
 * all of it (cfa_off 8: the CIE's rule, no instruction). */
static void fde(dfw *w, uint64_t pc, uint64_t range, uint64_t cfa_off) {
  size_t at = w->n;
  put_u32(w, 0);
  put_u32(w, 0);             /* CIE pointer: offset 0 */
  put_u64(w, pc);
  put_u64(w, range);
  if (cfa_off != 8) {
    put_u8(w, 0x0e);         /* DW_CFA_def_cfa_offset */
    put_uleb(w, cfa_off);
  }
  close_entry(w, at);
}

static const uintptr_t BIAS = 0x7f0000000000;

static int parse(const dfw *w, size_t max, ptp_cfi_tab **t) {
  return ptp_cfi_parse_debug_frame(w->b, w->n, BIAS, max, t);
}

/* ---- tests --------------------------------------------------------------- */

PT_TEST(prof_cfi_compact_long_range_split) {
  dfw w = { 0 };
  cie(&w);
  const uint64_t pc = 0x1000, range = 200000;
  fde(&w, pc, range, 24);
  ptp_cfi_tab *t = NULL;
  PT_ASSERT_INT_EQ(parse(&w, 1u << 20, &t), 0);
  PT_ASSERT_UINT_EQ(t->bias, BIAS);
  PT_ASSERT_UINT_EQ(t->nrules, 1);
  PT_ASSERT_UINT_EQ(t->nrows, (range + PTP_CFI_ROW_LEN_MAX - 1) / PTP_CFI_ROW_LEN_MAX);
  uint64_t covered = 0;
  for (size_t i = 0; i < t->nrows; i++) {
    PT_ASSERT_UINT_EQ(t->rows[i].start, pc + covered);   /* contiguous, bias-relative */
    covered += t->rows[i].len;
  }
  PT_ASSERT_UINT_EQ(covered, range);
  const uint64_t probes[] = { 0, 1, PTP_CFI_ROW_LEN_MAX - 1, PTP_CFI_ROW_LEN_MAX,
                              PTP_CFI_ROW_LEN_MAX + 1, 2 * (uint64_t)PTP_CFI_ROW_LEN_MAX,
                              range - 1 };
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    const ptp_cfi_rule *r = ptp_cfi_tab_lookup(t, BIAS + pc + probes[i]);
    PT_ASSERT_MSG(r != NULL, "no rule at +%llu", (unsigned long long)probes[i]);
    PT_ASSERT_INT_EQ(r->kind, PTP_CFI_RSP);
    PT_ASSERT_INT_EQ(r->cfa_off, 24);
    PT_ASSERT_INT_EQ(r->ra_off, -8);
  }
  PT_ASSERT(ptp_cfi_tab_lookup(t, BIAS + pc + range) == NULL);
  PT_ASSERT(ptp_cfi_tab_lookup(t, BIAS + pc - 1) == NULL);
  PT_ASSERT(ptp_cfi_tab_lookup(t, pc) == NULL);           /* below the bias */
  ptp_cfi_tab_free(t);
  free(w.b);
}

PT_TEST(prof_cfi_compact_rules_shared) {
  dfw w = { 0 };
  cie(&w);
  /* 1000 functions with a gap after each (no merging), two rules. */
  for (int i = 0; i < 1000; i++) fde(&w, 0x1000 + 32 * (uint64_t)i, 16, i % 2 ? 16 : 8);
  ptp_cfi_tab *t = NULL;
  PT_ASSERT_INT_EQ(parse(&w, 1u << 20, &t), 0);
  PT_ASSERT_UINT_EQ(t->nrows, 1000);
  PT_ASSERT_UINT_EQ(t->nrules, 2);
  PT_ASSERT_UINT_EQ(t->bytes, sizeof *t + (1000 + 2) * 8);
  for (int i = 0; i < 1000; i++) {
    const ptp_cfi_rule *r = ptp_cfi_tab_lookup(t, BIAS + 0x1000 + 32 * (uint64_t)i + 15);
    PT_ASSERT(r);
    PT_ASSERT_INT_EQ(r->cfa_off, i % 2 ? 16 : 8);
    PT_ASSERT(ptp_cfi_tab_lookup(t, BIAS + 0x1000 + 32 * (uint64_t)i + 16) == NULL);
  }
  /* Rows and rules count together against the limit. */
  ptp_cfi_tab_free(t);
  t = NULL;
  PT_ASSERT_INT_EQ(parse(&w, 1001, &t), -E2BIG);
  PT_ASSERT(t == NULL);
  PT_ASSERT_INT_EQ(parse(&w, 1002, &t), 0);
  ptp_cfi_tab_free(t);
  free(w.b);
}

PT_TEST(prof_cfi_compact_rules_max) {
  /* PTP_CFI_RULES_MAX distinct CFA offsets: accepted; one more: -E2BIG
   * (rule indexes are 16 bits; never a wrapped index). */
  for (int extra = 0; extra <= 1; extra++) {
    dfw w = { 0 };
    cie(&w);
    const size_t n = PTP_CFI_RULES_MAX + (size_t)extra;
    for (size_t i = 0; i < n; i++) fde(&w, 0x1000 + 32 * (uint64_t)i, 16, 8 + 8 * (uint64_t)i);
    ptp_cfi_tab *t = NULL;
    int rc = parse(&w, 1u << 20, &t);
    if (extra) {
      PT_ASSERT_INT_EQ(rc, -E2BIG);
      PT_ASSERT(t == NULL);
    } else {
      PT_ASSERT_INT_EQ(rc, 0);
      PT_ASSERT_UINT_EQ(t->nrules, PTP_CFI_RULES_MAX);
      const ptp_cfi_rule *r = ptp_cfi_tab_lookup(t, BIAS + 0x1000 + 32 * (uint64_t)(n - 1));
      PT_ASSERT(r);
      PT_ASSERT_INT_EQ(r->cfa_off, (int)(8 + 8 * (n - 1)));
      ptp_cfi_tab_free(t);
    }
    free(w.b);
  }
}

PT_TEST(prof_cfi_compact_beyond_4g_dropped) {
  dfw w = { 0 };
  cie(&w);
  fde(&w, 0x2000, 64, 16);
  fde(&w, ((uint64_t)1 << 32) + 0x1000, 64, 24);        /* 4 GiB past the bias */
  fde(&w, ((uint64_t)1 << 32) - 32, 64, 32);            /* straddles the 4 GiB line */
  ptp_cfi_tab *t = NULL;
  PT_ASSERT_INT_EQ(parse(&w, 1u << 20, &t), 0);
  PT_ASSERT_UINT_EQ(t->nrows, 1);
  const ptp_cfi_rule *r = ptp_cfi_tab_lookup(t, BIAS + 0x2000);
  PT_ASSERT(r && r->cfa_off == 16);
  PT_ASSERT(ptp_cfi_tab_lookup(t, BIAS + ((uint64_t)1 << 32) + 0x1000) == NULL);
  ptp_cfi_tab_free(t);
  free(w.b);
}

typedef struct libc_tab { int done; int rc; ptp_cfi_tab *tab; } libc_tab;

static int libc_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  libc_tab *x = arg;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "libc.so.6")) return 0;
  ptp_cfi_objinfo o;
  ptp_cfi_obj_scan(info, &o);
  x->rc = ptp_cfi_parse_eh(&o, (size_t)1 << 22, &x->tab);
  x->done = 1;
  return 1;
}

PT_TEST(prof_cfi_compact_libc) {
  libc_tab x = { 0 };
  dl_iterate_phdr(libc_cb, &x);
  if (!x.done) PT_SKIP("libc.so.6 not found among the loaded objects");
  PT_ASSERT_INT_EQ(x.rc, 0);
  const ptp_cfi_tab *t = x.tab;
  PT_ASSERT(t->nrows > 1000);
  PT_ASSERT_MSG(t->nrules > 1 && t->nrules * 20 < t->nrows, "%zu rules for %zu rows", t->nrules,
                t->nrows);
  PT_ASSERT_UINT_EQ(t->bytes, sizeof *t + (t->nrows + t->nrules) * 8);
  size_t norule = 0;
  for (size_t i = 0; i < t->nrows; i++) {
    PT_ASSERT(t->rows[i].rule < t->nrules && t->rows[i].len > 0);
    if (i) PT_ASSERT(t->rows[i - 1].start + t->rows[i - 1].len <= t->rows[i].start);
    norule += t->rules[t->rows[i].rule].kind == PTP_CFI_NORULE;
  }
  PT_ASSERT_UINT_EQ(norule, t->norule);
  ptp_cfi_tab_free(t);
}
