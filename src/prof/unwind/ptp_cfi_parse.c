/*
 * ptp_cfi_parse.c - one object's unwind table from its .eh_frame, read in
 * memory through PT_GNU_EH_FRAME (see ptp_cfi.h for what the tables are
 * for, ptp_cfi_internal.h for the module's units).
 *
 * Source of the data: each loaded object's PT_GNU_EH_FRAME segment
 * (.eh_frame_hdr), which is mapped in memory: its binary-search table lists
 * every FDE with its start address. We parse each FDE and its CIE and run
 * the DWARF call-frame instructions, keeping of each row only what the
 * x86-64 walker needs: how to get the CFA (rsp or rbp + offset), where the
 * return address is (CFA + ra_off), and where the caller's rbp is (CFA +
 * rbp_off, or unchanged). Rows with other rules (DWARF expressions: PLT
 * entries, signal trampolines) become PTP_CFI_NORULE (the walk stops there,
 * truncated); an undefined return address (the outermost frames: _start,
 * clone) becomes PTP_CFI_END.
 *
 * Every read of the object's memory is bounds-checked against that object's
 * loaded segments, so corrupt or unexpected data ends the FDE, never the
 * process.
 *
 * Threads: no state of its own; callers hold the module's mutex. Not for
 * signal handlers (allocates).
 */
#include <dwarf.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "prof/unwind/ptp_cfi_internal.h"
#include "prof/ptp_alloc.h"

/* ---- bounded reader ------------------------------------------------------ */

typedef struct rd {
  const uint8_t *p, *end;  /* current position, end of the current record */
  int err;
} rd;

int ptp_cfi_mem_ok(const ptp_cfi_objmem *m, uintptr_t a, size_t n) {
  for (int i = 0; i < m->nsegs; i++)
    if (a >= m->segs[i].lo && a <= m->segs[i].hi && n <= m->segs[i].hi - a) return 1;
  return 0;
}

static uint64_t rd_u(rd *r, int n) {
  if (r->err || r->end - r->p < n) { r->err = 1; return 0; }
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)r->p[i] << (8 * i);
  r->p += n;
  return v;
}

static uint64_t rd_uleb(rd *r) {
  uint64_t v = 0;
  for (int shift = 0; ; shift += 7) {
    if (r->err || r->p >= r->end || shift > 63) { r->err = 1; return 0; }
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}

static int64_t rd_sleb(rd *r) {
  int64_t v = 0;
  int shift = 0;
  uint8_t b;
  do {
    if (r->err || r->p >= r->end || shift > 63) { r->err = 1; return 0; }
    b = *r->p++;
    v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40)) v |= (int64_t)(~(uint64_t)0 << shift);
  return v;
}

/* v * align for a register or CFA offset: a product that does not fit
 * (only corrupt CFI has one) is an error of r, never signed overflow. */
static int64_t rd_scaled(rd *r, int64_t v, int64_t align) {
  int64_t out;
  if (__builtin_mul_overflow(v, align, &out)) { r->err = 1; return 0; }
  return out;
}

/* The same for an unsigned operand (ULEB128): above INT64_MAX is an error. */
static int64_t rd_uscaled(rd *r, uint64_t v, int64_t align) {
  if (v > INT64_MAX) { r->err = 1; return 0; }
  return rd_scaled(r, (int64_t)v, align);
}

/* Reads a DW_EH_PE_* encoded pointer. datarel is relative to data_base
 * (.eh_frame_hdr start, the only user). Indirect pointers are refused. */
static uintptr_t rd_enc(rd *r, uint8_t enc, uintptr_t data_base) {
  if (enc == DW_EH_PE_omit) return 0;
  uintptr_t field = (uintptr_t)r->p;
  uint64_t v;
  switch (enc & 0x0f) {
  case DW_EH_PE_absptr: v = rd_u(r, 8); break;
  case DW_EH_PE_uleb128: v = rd_uleb(r); break;
  case DW_EH_PE_udata2: v = rd_u(r, 2); break;
  case DW_EH_PE_udata4: v = rd_u(r, 4); break;
  case DW_EH_PE_udata8: v = rd_u(r, 8); break;
  case DW_EH_PE_sleb128: v = (uint64_t)rd_sleb(r); break;
  case DW_EH_PE_sdata2: v = (uint64_t)(int64_t)(int16_t)rd_u(r, 2); break;
  case DW_EH_PE_sdata4: v = (uint64_t)(int64_t)(int32_t)rd_u(r, 4); break;
  case DW_EH_PE_sdata8: v = rd_u(r, 8); break;
  default: r->err = 1; return 0;
  }
  switch (enc & 0x70) {
  case DW_EH_PE_absptr: break;
  case DW_EH_PE_pcrel: v += field; break;
  case DW_EH_PE_datarel: v += data_base; break;
  default: r->err = 1; return 0;     /* textrel/funcrel/aligned: unused on x86-64 Linux */
  }
  if (enc & DW_EH_PE_indirect) { r->err = 1; return 0; }
  return (uintptr_t)v;
}

/* ---- CFI interpreter -------------------------------------------------- */

enum { R_NONE = 0, R_UNDEF, R_SAME, R_OFFSET, R_OTHER };
typedef struct rule { uint8_t type; int64_t off; } rule;

typedef struct cfstate {
  int cfa_reg;          /* DWARF register number, -1 = expression */
  int64_t cfa_off;
  rule ra, rbp;
} cfstate;

#define DW_RBP 6
#define DW_RSP 7
#define DW_RA 16
#define REMEMBER_MAX 8

typedef struct cie {
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra_reg;
  uint8_t fde_enc;
  int has_z;
  uintptr_t abs_bias;    /* added to absolute (DW_EH_PE_absptr) locations:
                          * the load bias for .debug_frame, 0 for .eh_frame */
  const uint8_t *insns, *insns_end;
} cie;

/* A row as the CFI program yields it: a range of runtime addresses and
 * its rule, before finish_tab stores the table compact. */
typedef struct wrow {
  uintptr_t start;
  uint32_t len;
  ptp_cfi_rule r;
} wrow;

typedef struct rowvec {
  wrow *v;
  size_t n, cap;
  size_t max;            /* row limit (memory cap); reaching it sets oom */
  int oom;
  uintptr_t bias;        /* the object's: rows lie in [bias, bias + 4 GiB) */
} rowvec;

/* Whether the row [start, start + len) lies in the object's 4 GiB from
 * bias, as a compact row's u32 offset must (finish_tab relies on it). */
static int row_in_window(uintptr_t bias, uintptr_t start, uint64_t len) {
  return start >= bias && start - bias <= UINT32_MAX &&
         len <= (uint64_t)UINT32_MAX + 1 - (start - bias);
}

#define CFA_PLT (-2)   /* cfa_reg value: the PLT expression, cfa_off = threshold */

/* The walker's rule for a CFI state (NORULE for what it cannot follow). */
static void row_rule(const cfstate *st, ptp_cfi_rule *ru) {
  *ru = (ptp_cfi_rule){ .kind = PTP_CFI_NORULE, .rbp_off = PTP_RBP_UNKNOWN };
  if (st->ra.type == R_UNDEF) {
    ru->kind = PTP_CFI_END;
  } else if (st->ra.type == R_OFFSET && st->ra.off >= INT8_MIN && st->ra.off <= INT8_MAX &&
             (st->cfa_reg == DW_RSP || st->cfa_reg == DW_RBP) &&
             st->cfa_off >= INT32_MIN && st->cfa_off <= INT32_MAX) {
    ru->kind = st->cfa_reg == DW_RSP ? PTP_CFI_RSP : PTP_CFI_RBP;
    ru->cfa_off = (int32_t)st->cfa_off;
    ru->ra_off = (int8_t)st->ra.off;
    if (st->rbp.type == R_NONE || st->rbp.type == R_SAME)
      ru->rbp_off = PTP_RBP_SAME;
    else if (st->rbp.type == R_OFFSET && st->rbp.off > INT16_MIN && st->rbp.off < PTP_RBP_UNKNOWN)
      ru->rbp_off = (int16_t)st->rbp.off;
    else
      ru->rbp_off = PTP_RBP_UNKNOWN;
  }
}

/* Appends the row [start, end) with rule ru (end - start <= UINT32_MAX),
 * merged into the previous row when contiguous and identical. A row
 * outside the object's window (a corrupt or foreign FDE) is dropped here,
 * not kept for finish_tab to drop: it would take room under rv->max. */
static void push_row(rowvec *rv, uintptr_t start, uintptr_t end, const ptp_cfi_rule *ru) {
  if (end <= start || rv->oom || !row_in_window(rv->bias, start, end - start)) return;
  uint32_t len = (uint32_t)(end - start);
  if (rv->n) {
    wrow *p = &rv->v[rv->n - 1];
    if (p->start + p->len == start && memcmp(&p->r, ru, sizeof *ru) == 0 &&
        (uint64_t)p->len + len <= UINT32_MAX) {
      p->len += len;
      return;
    }
  }
  if (rv->n == rv->max) { rv->oom = 1; return; }
  if (rv->n == rv->cap) {
    size_t ncap = rv->cap ? rv->cap * 2 : 1024;
    if (ncap > rv->max) ncap = rv->max;
    wrow *nv = ptp_realloc(rv->v, ncap * sizeof *nv);
    if (!nv) { rv->oom = 1; return; }
    rv->v = nv;
    rv->cap = ncap;
  }
  rv->v[rv->n++] = (wrow){ .start = start, .len = len, .r = *ru };
}

/* The rows of [start, end) under state st. A range over 4 GiB is no
 * function's: left uncovered. */
static void emit(rowvec *rv, uintptr_t start, uintptr_t end, const cfstate *st) {
  if (end <= start || rv->oom || end - start > UINT32_MAX) return;
  if (st->cfa_reg == CFA_PLT) {
    /* CFA = rsp + 8, or rsp + 16 from byte `threshold` of each 16-byte PLT
     * entry on (after its push): exactly what the expression computes.
     * The loop must add rows to end: rv->max is what bounds it. So when
     * the other registers' rules make both the same row (the return
     * address not at an offset the walker follows), the range is one row
     * (stepping its entries would merge each into the last row, up to
     * 2^28 steps: a fuzzer's input ran for minutes), and it steps only
     * over the entries inside the object's window (push_row drops the
     * others, as many steps again that add nothing). Each step then adds
     * two rows, but at the window's two edges. */
    cfstate s8 = *st, s16 = *st;
    s8.cfa_reg = s16.cfa_reg = DW_RSP;
    s8.cfa_off = 8;
    s16.cfa_off = 16;
    ptp_cfi_rule r8, r16;
    row_rule(&s8, &r8);
    row_rule(&s16, &r16);
    /* (cfa_off is the parser's own 10 or 11; the other cases only keep
     * the loop's bound true whatever state reaches here.) */
    if (memcmp(&r8, &r16, sizeof r8) == 0 || st->cfa_off <= 0 || st->cfa_off >= 16) {
      push_row(rv, start, end, st->cfa_off <= 0 ? &r16 : &r8);
      return;
    }
    uintptr_t wend = rv->bias + ((uintptr_t)1 << 32);
    if (wend < rv->bias || wend > UINTPTR_MAX - 32) wend = UINTPTR_MAX - 32;   /* no b + 16 wraps */
    uintptr_t lo = start > rv->bias ? start : rv->bias, hi = end < wend ? end : wend;
    for (uintptr_t b = lo & ~(uintptr_t)15; b < hi && !rv->oom; b += 16) {
      uintptr_t cut = b + (uintptr_t)st->cfa_off;
      uintptr_t a0 = b < start ? start : b, a1 = cut < end ? cut : end;
      if (a1 > a0) push_row(rv, a0, a1, &r8);
      uintptr_t c0 = cut < start ? start : cut, c1 = b + 16 < end ? b + 16 : end;
      if (c1 > c0) push_row(rv, c0, c1, &r16);
    }
    return;
  }
  ptp_cfi_rule ru;
  row_rule(st, &ru);
  push_row(rv, start, end, &ru);
}

/* A register number read from the section as a cfa_reg: never negative,
 * so no number aliases the expression values (-1, CFA_PLT); a number no
 * x86-64 register has stays one the walker does not follow. */
static int cfa_reg_of(uint64_t reg) {
  return reg > 0xffff ? 0xffff : (int)reg;
}

static rule *rule_of(cfstate *st, uint64_t reg) {
  if (reg == DW_RA) return &st->ra;
  if (reg == DW_RBP) return &st->rbp;
  return NULL;              /* registers the walker does not track */
}

/* Runs instructions [p, end). With rv == NULL it only sets up the initial
 * state (CIE instructions: no rows). Returns 0, or -1 when it met something
 * it cannot follow (the rest of the FDE is then left uncovered). */
static int run_cfi(const cie *c, const uint8_t *p, const uint8_t *end, cfstate *st,
                   const cfstate *init, uintptr_t *loc, uintptr_t loc_end, rowvec *rv) {
  cfstate stack[REMEMBER_MAX];
  int depth = 0;
  rd r = { .p = p, .end = end };
  while (r.p < r.end && !r.err) {
    uint8_t op = *r.p++;
    uint8_t hi = op & 0xc0, low = op & 0x3f;
    uint64_t reg = 0, adv = 0;
    int64_t off = 0;
    rule *ru;
    if (hi == DW_CFA_advance_loc) {
      adv = low * c->code_align;
      goto advance;
    } else if (hi == DW_CFA_offset) {
      off = rd_uscaled(&r, rd_uleb(&r), c->data_align);
      if ((ru = rule_of(st, low))) { ru->type = R_OFFSET; ru->off = off; }
      continue;
    } else if (hi == DW_CFA_restore) {
      if (!init) return -1;
      if ((ru = rule_of(st, low))) *ru = *rule_of((cfstate *)init, low);
      continue;
    }
    switch (op) {
    case DW_CFA_nop: break;
    case DW_CFA_set_loc: {
      uintptr_t nl = rd_enc(&r, c->fde_enc, 0);
      if ((c->fde_enc & 0x70) == DW_EH_PE_absptr) nl += c->abs_bias;
      if (r.err || nl < *loc) return -1;
      if (rv) emit(rv, *loc, nl < loc_end ? nl : loc_end, st);
      *loc = nl;
      break;
    }
    case DW_CFA_advance_loc1: adv = rd_u(&r, 1) * c->code_align; goto advance;
    case DW_CFA_advance_loc2: adv = rd_u(&r, 2) * c->code_align; goto advance;
    case DW_CFA_advance_loc4: adv = rd_u(&r, 4) * c->code_align; goto advance;
    case DW_CFA_offset_extended:
      reg = rd_uleb(&r); off = rd_uscaled(&r, rd_uleb(&r), c->data_align);
      if ((ru = rule_of(st, reg))) { ru->type = R_OFFSET; ru->off = off; }
      break;
    case DW_CFA_offset_extended_sf:
      reg = rd_uleb(&r); off = rd_scaled(&r, rd_sleb(&r), c->data_align);
      if ((ru = rule_of(st, reg))) { ru->type = R_OFFSET; ru->off = off; }
      break;
    case DW_CFA_GNU_negative_offset_extended:
      reg = rd_uleb(&r); off = rd_uscaled(&r, rd_uleb(&r), c->data_align);
      if (off == INT64_MIN) r.err = 1;
      off = off == INT64_MIN ? 0 : -off;
      if ((ru = rule_of(st, reg))) { ru->type = R_OFFSET; ru->off = off; }
      break;
    case DW_CFA_restore_extended:
      reg = rd_uleb(&r);
      if (!init) return -1;
      if ((ru = rule_of(st, reg))) *ru = *rule_of((cfstate *)init, reg);
      break;
    case DW_CFA_undefined:
      reg = rd_uleb(&r);
      if ((ru = rule_of(st, reg))) ru->type = R_UNDEF;
      break;
    case DW_CFA_same_value:
      reg = rd_uleb(&r);
      if ((ru = rule_of(st, reg))) ru->type = R_SAME;
      break;
    case DW_CFA_register:
      reg = rd_uleb(&r); (void)rd_uleb(&r);
      if ((ru = rule_of(st, reg))) ru->type = R_OTHER;
      break;
    case DW_CFA_remember_state:
      if (depth == REMEMBER_MAX) return -1;
      stack[depth++] = *st;
      break;
    case DW_CFA_restore_state:
      if (depth == 0) return -1;
      /* Pops every rule, the CFA rule included (what GCC's epilogue
       * annotations rely on, and what libgcc's unwinder does). */
      *st = stack[--depth];
      break;
    case DW_CFA_def_cfa:
      st->cfa_reg = cfa_reg_of(rd_uleb(&r)); st->cfa_off = (int64_t)rd_uleb(&r);
      break;
    case DW_CFA_def_cfa_sf:
      st->cfa_reg = cfa_reg_of(rd_uleb(&r));
      st->cfa_off = rd_scaled(&r, rd_sleb(&r), c->data_align);
      break;
    case DW_CFA_def_cfa_register:
      st->cfa_reg = cfa_reg_of(rd_uleb(&r));
      break;
    case DW_CFA_def_cfa_offset:
      st->cfa_off = (int64_t)rd_uleb(&r);
      if (st->cfa_reg < 0) st->cfa_reg = -1;         /* offset of an expression */
      break;
    case DW_CFA_def_cfa_offset_sf:
      st->cfa_off = rd_scaled(&r, rd_sleb(&r), c->data_align);
      if (st->cfa_reg < 0) st->cfa_reg = -1;
      break;
    case DW_CFA_def_cfa_expression: {
      uint64_t len = rd_uleb(&r);
      if (r.err || (uint64_t)(r.end - r.p) < len) return -1;
      /* The one expression we understand: the lazy-binding PLT's
       * "rsp + 8 + ((rip & 15) >= N) * 8" (GNU ld, N = 11 or 10). */
      static const uint8_t plt[] = { DW_OP_breg7, 8, DW_OP_breg16, 0, DW_OP_lit15, DW_OP_and,
                                     0, DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus };
      st->cfa_reg = -1;
      if (len == sizeof plt && memcmp(r.p, plt, 6) == 0 && memcmp(r.p + 7, plt + 7, 4) == 0 &&
          (r.p[6] == DW_OP_lit11 || r.p[6] == DW_OP_lit10)) {
        st->cfa_reg = CFA_PLT;
        st->cfa_off = r.p[6] - DW_OP_lit0;
      }
      r.p += len;
      break;
    }
    case DW_CFA_expression:
    case DW_CFA_val_expression: {
      reg = rd_uleb(&r);
      uint64_t len = rd_uleb(&r);
      if (r.err || (uint64_t)(r.end - r.p) < len) return -1;
      r.p += len;
      if ((ru = rule_of(st, reg))) ru->type = R_OTHER;
      break;
    }
    case DW_CFA_val_offset:
      reg = rd_uleb(&r); (void)rd_uleb(&r);
      if ((ru = rule_of(st, reg))) ru->type = R_OTHER;
      break;
    case DW_CFA_val_offset_sf:
      reg = rd_uleb(&r); (void)rd_sleb(&r);
      if ((ru = rule_of(st, reg))) ru->type = R_OTHER;
      break;
    case DW_CFA_GNU_args_size:
      (void)rd_uleb(&r);
      break;
    default:
      return -1;                 /* unknown opcode: cannot continue safely */
    }
    continue;
  advance:
    if (r.err) return -1;
    if (rv) {
      uintptr_t nl = *loc + adv;
      if (nl < *loc) return -1;  /* wrapped: corrupt */
      emit(rv, *loc, nl < loc_end ? nl : loc_end, st);
      *loc = nl;
    } else {
      return -1;                 /* CIE instructions never advance */
    }
  }
  return r.err ? -1 : 0;
}

/* Parses the CIE at address a; dbg: a .debug_frame CIE (id 0xffffffff,
 * versions 1, 3 and 4, absolute addresses relocated by bias). */
static int parse_cie(const ptp_cfi_objmem *m, uintptr_t a, cie *c, cfstate *init, int dbg,
                     uintptr_t bias) {
  if (!ptp_cfi_mem_ok(m, a, 4)) return -1;
  rd r = { .p = (const uint8_t *)a, .end = (const uint8_t *)a + 4 };
  uint64_t len = rd_u(&r, 4);
  if (len == 0xffffffffu || len == 0) return -1;   /* 64-bit DWARF not produced on x86-64 Linux */
  if (!ptp_cfi_mem_ok(m, a + 4, len)) return -1;
  r.end = r.p + len;
  if (rd_u(&r, 4) != (dbg ? 0xffffffffu : 0)) return -1;   /* the CIE id */
  uint8_t version = (uint8_t)rd_u(&r, 1);
  if (version != 1 && version != 3 && !(dbg && version == 4)) return -1;
  const char *aug = (const char *)r.p;
  size_t auglen = strnlen(aug, (size_t)(r.end - r.p));
  if (auglen == (size_t)(r.end - r.p)) return -1;
  r.p += auglen + 1;
  if (strstr(aug, "eh")) return -1;                  /* ancient GCC layout */
  if (version == 4) {                                /* address and segment sizes */
    if (rd_u(&r, 1) != sizeof(uintptr_t) || rd_u(&r, 1) != 0) return -1;
  }
  c->code_align = rd_uleb(&r);
  c->data_align = rd_sleb(&r);
  c->ra_reg = version == 1 ? rd_u(&r, 1) : rd_uleb(&r);
  c->fde_enc = DW_EH_PE_absptr;
  c->abs_bias = dbg ? bias : 0;
  c->has_z = aug[0] == 'z';
  if (c->has_z) {
    uint64_t alen = rd_uleb(&r);
    if (r.err || (uint64_t)(r.end - r.p) < alen) return -1;
    const uint8_t *aend = r.p + alen;
    for (const char *s = aug + 1; *s; s++) {
      if (*s == 'R') c->fde_enc = (uint8_t)rd_u(&r, 1);
      else if (*s == 'L') (void)rd_u(&r, 1);
      else if (*s == 'P') { uint8_t pe = (uint8_t)rd_u(&r, 1); (void)rd_enc(&r, pe & 0x7f, 0); }
      else if (*s == 'S' || *s == 'B') continue;
      else break;                                    /* unknown: skip via aug length */
    }
    r.p = aend;
  }
  if (r.err || c->ra_reg != DW_RA || c->code_align == 0) return -1;
  c->insns = r.p;
  c->insns_end = r.end;
  memset(init, 0, sizeof *init);
  init->cfa_reg = DW_RSP;
  init->cfa_off = 8;
  uintptr_t loc = 0;
  if (run_cfi(c, c->insns, c->insns_end, init, NULL, &loc, 0, NULL) < 0) return -1;
  return 0;
}

/* The last CIE parsed: consecutive FDEs almost always share one. */
typedef struct cie_cache {
  uintptr_t addr;         /* 0 = empty */
  int ok;
  cie c;
  cfstate init;
} cie_cache;

/* One FDE at address a: appends its rows. dbg: in a .debug_frame section
 * starting at sec (its CIE pointer is an offset from there; the CIE id
 * 0xffffffff marks a CIE), absolute addresses relocated by bias. */
static void parse_fde(const ptp_cfi_objmem *m, uintptr_t a, rowvec *rv, cie_cache *cc, int dbg,
                      uintptr_t sec, uintptr_t bias) {
  if (!ptp_cfi_mem_ok(m, a, 8)) return;
  rd r = { .p = (const uint8_t *)a, .end = (const uint8_t *)a + 4 };
  uint64_t len = rd_u(&r, 4);
  if (len == 0xffffffffu || len < 4 || !ptp_cfi_mem_ok(m, a + 4, len)) return;
  r.end = r.p + len;
  uintptr_t idfield = (uintptr_t)r.p;
  uint64_t cie_off = rd_u(&r, 4);
  uintptr_t cie_addr;
  if (dbg) {
    if (cie_off == 0xffffffffu) return;               /* a CIE, not an FDE */
    cie_addr = sec + cie_off;
  } else {
    if (cie_off == 0 || cie_off > idfield) return;   /* 0 = a CIE, not an FDE */
    cie_addr = idfield - cie_off;
  }
  if (cc->addr != cie_addr) {
    cc->addr = cie_addr;
    cc->ok = parse_cie(m, cie_addr, &cc->c, &cc->init, dbg, bias) == 0;
  }
  if (!cc->ok) return;
  const cie c = cc->c;
  const cfstate init = cc->init;
  uintptr_t pc_begin = rd_enc(&r, c.fde_enc, 0);
  if ((c.fde_enc & 0x70) == DW_EH_PE_absptr) pc_begin += c.abs_bias;
  uintptr_t pc_range = rd_enc(&r, c.fde_enc & 0x0f, 0);
  if (c.has_z) {
    uint64_t alen = rd_uleb(&r);
    if (r.err || (uint64_t)(r.end - r.p) < alen) return;
    r.p += alen;
  }
  if (r.err || pc_range == 0 || pc_begin + pc_range < pc_begin) return;
  cfstate st = init;
  uintptr_t loc = pc_begin, end = pc_begin + pc_range;
  if (run_cfi(&c, r.p, r.end, &st, &init, &loc, end, rv) < 0) return;
  if (loc < end) emit(rv, loc, end, &st);
}


void ptp_cfi_obj_scan(const struct dl_phdr_info *info, ptp_cfi_objinfo *o) {
  memset(o, 0, sizeof *o);
  o->bias = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && o->m.nsegs < 16)
      o->m.segs[o->m.nsegs++] = (ptp_cfi_seg){ lo, hi };
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && hi > lo && o->ntext < 8) {
      o->text[o->ntext++] = (ptp_cfi_seg){ lo, hi };
      if (!o->text_lo || lo < o->text_lo) o->text_lo = lo;
    }
    if (ph->p_type == PT_GNU_EH_FRAME) { o->hdr = lo; o->hdrsz = ph->p_memsz; }
  }
  if (o->hdr && (o->hdrsz < 4 || !ptp_cfi_mem_ok(&o->m, o->hdr, o->hdrsz))) o->hdr = 0;
}
static int cmp_row(const void *a, const void *b) {
  const wrow *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

static int finish_tab(rowvec *rvp, ptp_cfi_tab **out);

int ptp_cfi_parse_eh(const ptp_cfi_objinfo *o, size_t max_rows, ptp_cfi_tab **out) {
  *out = NULL;
  if (!o->hdr) return -ENOENT;
  const uint8_t *h = (const uint8_t *)o->hdr;
  if (h[0] != 1) return -ENOENT;
  rd r = { .p = h + 4, .end = h + o->hdrsz };
  (void)rd_enc(&r, h[1], o->hdr);                     /* eh_frame_ptr: unused */
  uint64_t count = rd_enc(&r, h[2], o->hdr);
  uint8_t tenc = h[3];
  if (r.err || tenc == DW_EH_PE_omit) return -ENOENT;
  rowvec rv = { .max = max_rows, .bias = o->bias };
  cie_cache cc = { .addr = 0 };
  for (uint64_t i = 0; i < count && !r.err && !rv.oom; i++) {
    (void)rd_enc(&r, tenc, o->hdr);                   /* initial location */
    uintptr_t fde = rd_enc(&r, tenc, o->hdr);
    if (r.err) break;
    parse_fde(&o->m, fde, &rv, &cc, 0, 0, 0);
  }
  return finish_tab(&rv, out);
}

int ptp_cfi_parse_debug_frame(const uint8_t *sec, size_t len, uintptr_t bias, size_t max_rows,
                              ptp_cfi_tab **out) {
  *out = NULL;
  ptp_cfi_objmem m = { .segs = { { (uintptr_t)sec, (uintptr_t)sec + len } }, .nsegs = 1 };
  rowvec rv = { .max = max_rows, .bias = bias };
  cie_cache cc = { .addr = 0 };
  /* No index: walk every entry in order (CIEs are skipped by parse_fde). */
  uintptr_t a = (uintptr_t)sec, end = (uintptr_t)sec + len;
  while (end - a >= 4 && !rv.oom) {
    uint32_t elen;
    memcpy(&elen, (const void *)a, 4);
    if (elen == 0xffffffffu || elen > end - a - 4) break;  /* 64-bit DWARF, or cut */
    if (elen >= 4) parse_fde(&m, a, &rv, &cc, 1, (uintptr_t)sec, bias);
    a += 4 + (uintptr_t)elen;
  }
  return finish_tab(&rv, out);
}

/* The distinct rules of a table being finished: an open-addressing set of
 * rule indexes (0 = empty, else index + 1), keyed by the rule's 8 bytes
 * (no padding, every field set by emit). */
typedef struct ruleset {
  ptp_cfi_rule *v;
  size_t n, cap;
  uint32_t *slot;
  size_t nslots;           /* a power of two, > 2n */
} ruleset;

static uint64_t rule_key(const ptp_cfi_rule *r) {
  uint64_t k;
  memcpy(&k, r, sizeof k);
  return k;
}

static int ruleset_grow(ruleset *rs) {
  size_t ns = rs->nslots ? rs->nslots * 2 : 256;
  uint32_t *sl = ptp_calloc(ns, sizeof *sl);
  if (!sl) return -ENOMEM;
  for (size_t i = 0; i < rs->n; i++) {
    size_t h = (size_t)((rule_key(&rs->v[i]) * 0x9e3779b97f4a7c15ull) >> 32) & (ns - 1);
    while (sl[h]) h = (h + 1) & (ns - 1);
    sl[h] = (uint32_t)i + 1;
  }
  free(rs->slot);
  rs->slot = sl;
  rs->nslots = ns;
  return 0;
}

/* The index of r in rs, added if new. -E2BIG past PTP_CFI_RULES_MAX
 * distinct rules (none of the objects measured has more than 342), or
 * -ENOMEM. */
static long ruleset_index(ruleset *rs, const ptp_cfi_rule *r) {
  if (2 * (rs->n + 1) > rs->nslots && ruleset_grow(rs) < 0) return -ENOMEM;
  const uint64_t k = rule_key(r);
  size_t h = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 32) & (rs->nslots - 1);
  for (; rs->slot[h]; h = (h + 1) & (rs->nslots - 1))
    if (rule_key(&rs->v[rs->slot[h] - 1]) == k) return (long)rs->slot[h] - 1;
  if (rs->n == PTP_CFI_RULES_MAX) return -E2BIG;
  if (rs->n == rs->cap) {
    size_t nc = rs->cap ? rs->cap * 2 : 64;
    ptp_cfi_rule *nv = ptp_realloc(rs->v, nc * sizeof *nv);
    if (!nv) return -ENOMEM;
    rs->v = nv;
    rs->cap = nc;
  }
  rs->v[rs->n] = *r;
  rs->slot[h] = (uint32_t)rs->n + 1;
  return (long)rs->n++;
}

/* Sorts and clips the rows of rv, then stores them as one compact table
 * (ptp_unwind.h): each distinct rule once, rows relative to rv's bias and
 * at most PTP_CFI_ROW_LEN_MAX long. Every row lies in the object's 4 GiB
 * window already (push_row dropped the others: no code of the object lies
 * there, they came from a corrupt or foreign FDE). Rows and rules together
 * are at most rv's max (both are 8 bytes: the memory cap counts them
 * alike), else -E2BIG. Frees rv. */
static int finish_tab(rowvec *rvp, ptp_cfi_tab **out) {
  _Static_assert(sizeof(ptp_cfi_row) == 8 && sizeof(ptp_cfi_rule) == 8,
                 "rows and rules are 8 bytes (file format, memory cap)");
  rowvec rv = *rvp;
  const uintptr_t bias = rv.bias;
  if (rv.oom) {
    int big = rv.n == rv.max;
    free(rv.v);
    return big ? -E2BIG : -ENOMEM;
  }
  /* The .eh_frame_hdr table lists FDEs by start address, so its rows come
   * out sorted already (checked: sorting 500k rows was most of cc1's
   * build time); sort only when they are not (.debug_frame has no index). */
  int sorted = 1;
  for (size_t i = 1; i < rv.n && sorted; i++) sorted = rv.v[i - 1].start <= rv.v[i].start;
  if (!sorted) qsort(rv.v, rv.n, sizeof *rv.v, cmp_row);
  /* Overlapping FDEs should not exist; if they do, clip so binary search
   * stays correct. */
  size_t w = 0;
  for (size_t i = 0; i < rv.n; i++) {
    wrow row = rv.v[i];
    if (w) {
      wrow *p = &rv.v[w - 1];
      if (p->start + p->len > row.start) p->len = (uint32_t)(row.start - p->start);
      if (p->len == 0) w--;
    }
    rv.v[w++] = row;
  }
  /* Each row's rule index, and the count of compact rows. */
  ruleset rs = { 0 };
  uint16_t *idx = w ? ptp_malloc(w * sizeof *idx) : NULL;
  size_t nrows = 0;
  int rc = w && !idx ? -ENOMEM : 0;
  for (size_t i = 0; i < w && rc == 0; i++) {
    long k = ruleset_index(&rs, &rv.v[i].r);
    if (k < 0) { rc = (int)k; break; }
    idx[i] = (uint16_t)k;
    nrows += (rv.v[i].len + (size_t)PTP_CFI_ROW_LEN_MAX - 1) / PTP_CFI_ROW_LEN_MAX;
  }
  if (rc == 0 && nrows + rs.n > rv.max) rc = -E2BIG;
  ptp_cfi_tab *t = NULL;
  size_t bytes = sizeof(ptp_cfi_tab) + rs.n * sizeof(ptp_cfi_rule) + nrows * sizeof(ptp_cfi_row);
  if (rc == 0 && !(t = ptp_malloc(bytes))) rc = -ENOMEM;
  if (rc == 0) {
    ptp_cfi_rule *rules = (ptp_cfi_rule *)(t + 1);   /* 8-aligned: the struct is */
    ptp_cfi_row *rows = (ptp_cfi_row *)(rules + rs.n);
    if (rs.n) memcpy(rules, rs.v, rs.n * sizeof *rules);
    size_t n = 0, norule = 0;
    for (size_t i = 0; i < w; i++) {
      uint32_t at = (uint32_t)(rv.v[i].start - bias), left = rv.v[i].len;
      while (left) {
        uint16_t len = left > PTP_CFI_ROW_LEN_MAX ? PTP_CFI_ROW_LEN_MAX : (uint16_t)left;
        rows[n++] = (ptp_cfi_row){ .start = at, .len = len, .rule = idx[i] };
        norule += rules[idx[i]].kind == PTP_CFI_NORULE;
        at += len;
        left -= len;
      }
    }
    *t = (ptp_cfi_tab){ .nrows = n, .nrules = rs.n, .bytes = bytes, .bias = bias, .rows = rows,
                        .rules = rules, .norule = norule };
    *out = t;
  }
  free(idx);
  free(rs.v);
  free(rs.slot);
  free(rv.v);
  return rc;
}
