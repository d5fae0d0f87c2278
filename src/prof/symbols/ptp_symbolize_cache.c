/*
 * ptp_symbolize_cache.c - the symbolizer's glue to its persistent cache
 * (ptp_symcache.h holds the file format and file handling; the units and
 * their order: ptp_symbolize_internal.h).
 *
 * DESIGN: a module's results are stored per build id, a whole compile unit
 * at a time where the fill budget allows (SYM_FILL_BUDGET pieces per
 * profile), so a later process that samples other PCs of the same code
 * finds them without opening the object. A CU is cut at every boundary
 * where the result of ptp_symbolize_module_resolve can change (cu_bounds),
 * and each piece is resolved once at its start; an object without DWARF is
 * cut at its ELF symbols. Everything here is best effort: a failure leaves
 * the cache smaller, never a wrong entry.
 */
#include "prof/symbols/ptp_symbolize_internal.h"
#include "prof/cache/ptp_cachefile.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ptp_symbolize_cache_open(ptp_symbolizer *s, sym_module *m) {
  m->cache_tried = true;
  if (!s->cache_dir || !m->build_id[0]) return;
  if (!s->cache_dir_checked) {
    s->cache_dir_checked = true;
    if (ptp_cachefile_prepare_dir(s->cache_dir) != 0) {
      /* not ours, writable by others, or cannot be made: no cache */
      s->st.cache_dir_refused = 1;
      free(s->cache_dir);
      s->cache_dir = NULL;
      (void)ptp_symbolize_cache_debug_reset(s);
      return;
    }
  }
  if (ptp_symcache_open(&m->cache, s->cache_dir, m->build_id) != 0) {
    m->cache = NULL;
    return;
  }
  ptp_symcache_state st = ptp_symcache_file_state(m->cache);
  if (st == PTP_SYMCACHE_LOADED) s->st.cache_files_loaded++;
  if (st == PTP_SYMCACHE_REJECTED) s->st.cache_files_rejected++;
  if (st == PTP_SYMCACHE_STALE) s->st.cache_files_stale++;
  if (st == PTP_SYMCACHE_UNUSABLE) s->st.cache_files_unusable++;
  unsigned f = ptp_symcache_flags(m->cache);
  if (!m->loaded && (f & PTP_SYMCACHE_FLAGS_SET)) {
    m->has_syms = f & PTP_SYMCACHE_HAS_SYMS;
    m->has_dwarf = f & PTP_SYMCACHE_HAS_DWARF;
  }
}

typedef struct u64vec { uint64_t *v; size_t n, cap; int err; } u64vec;

static void u64vec_push(u64vec *a, uint64_t x) {
  if (a->err) return;
  if (a->n == a->cap) {
    size_t nc = a->cap ? a->cap * 2 : 256;
    uint64_t *n = ptp_realloc(a->v, nc * sizeof *n);
    if (!n) { a->err = -ENOMEM; return; }
    a->v = n;
    a->cap = nc;
  }
  a->v[a->n++] = x;
}

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts a->v and drops repeated values. The radix sort of the symbols
 * (a CU like glibc's malloc.c has ~6k boundaries: qsort took ~0.35 ms of
 * its fill here); qsort without memory for its keys. */
static void u64vec_sort_unique(u64vec *a) {
  sym_key *keys = a->n > 1 ? ptp_malloc(2 * a->n * sizeof *keys) : NULL;
  if (keys) {
    for (size_t i = 0; i < a->n; i++) keys[i] = (sym_key){a->v[i], 0};
    ptp_symbolize_key_sort(keys, keys + a->n, a->n);
    for (size_t i = 0; i < a->n; i++) a->v[i] = keys[i].key;
    free(keys);
  } else {
    qsort(a->v, a->n, sizeof *a->v, u64_cmp);
  }
  size_t k = 0;
  for (size_t i = 0; i < a->n; i++)
    if (!k || a->v[i] != a->v[k - 1]) a->v[k++] = a->v[i];
  a->n = k;
}

/* Pushes the start, and the end where the size is known, of m's ELF
 * symbols syms[from..] that start below `below`. */
static void push_sym_bounds(u64vec *pts, const sym_module *m, size_t from, uint64_t below) {
  for (size_t i = from; i < m->nsyms && m->syms[i].addr < below; i++) {
    u64vec_push(pts, m->syms[i].addr);
    if (m->syms[i].size) u64vec_push(pts, m->syms[i].addr + m->syms[i].size);
  }
}

#define SYM_FILL_MAX_POINTS (1u << 18)   /* a CU with more boundaries is cached per PC */

/* Every address of [lo, hi) resolves alike when no line-table row, function
 * or inline range, ELF symbol or CU range starts or ends inside it: the
 * result of ptp_symbolize_module_resolve is a function of exactly those (the row found by
 * dwarf_getsrc_die, the segment found by cu_lookup, the symbol found by
 * module_find_sym, the CU found by ptp_symbolize_module_addrdie). The CU's sorted,
 * unique boundaries (biased) and its ranges are computed once and kept in
 * the cu_index. Returns 0 or -ENOMEM/-E2BIG (no boundaries: cache per PC). */
static int cu_bounds(sym_module *m, Dwarf_Die *cudie, Dwarf_Addr cubias, cu_index *cu) {
  if (cu->pts) return 0;
  if (cu->bounds_failed) return -E2BIG;
  cu->bounds_failed = true;
  u64vec rs = {0}, pts = {0};
  ptrdiff_t off = 0;
  Dwarf_Addr base, start, end;
  while ((off = dwarf_ranges(cudie, off, &base, &start, &end)) > 0) {
    if (end <= start) continue;
    u64vec_push(&rs, start + cubias);
    u64vec_push(&rs, end + cubias);
  }
  if (rs.err || rs.n == 0) goto fail;
  uint64_t minlo = UINT64_MAX, maxhi = 0;
  for (size_t i = 0; i < rs.n; i += 2) {
    if (rs.v[i] < minlo) minlo = rs.v[i];
    if (rs.v[i + 1] > maxhi) maxhi = rs.v[i + 1];
    u64vec_push(&pts, rs.v[i]);
    u64vec_push(&pts, rs.v[i + 1]);
  }
  Dwarf_Lines *lines = NULL;
  size_t nlines = 0;
  if (dwarf_getsrclines(cudie, &lines, &nlines) == 0) {
    for (size_t i = 0; i < nlines; i++) {
      Dwarf_Addr a;
      Dwarf_Line *l = dwarf_onesrcline(lines, i);
      if (l && dwarf_lineaddr(l, &a) == 0) u64vec_push(&pts, a + cubias);
    }
  }
  for (size_t i = 0; i < cu->nsegs; i++) {
    u64vec_push(&pts, cu->segs[i].lo + cubias);
    u64vec_push(&pts, cu->segs[i].hi + cubias);
  }
  size_t lo = 0, hi = m->nsyms;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->syms[mid].addr < minlo) lo = mid + 1; else hi = mid;
  }
  if (lo > 0) lo--;   /* a symbol starting before the CU may end inside it */
  push_sym_bounds(&pts, m, lo, maxhi);
  if (pts.err || pts.n > SYM_FILL_MAX_POINTS) goto fail;
  u64vec_sort_unique(&pts);
  cu->pts = pts.v;
  cu->npts = pts.n;
  cu->rs = rs.v;
  cu->nrs = rs.n;
  cu->bounds_failed = false;
  return 0;
fail:
  free(rs.v);
  free(pts.v);
  return -E2BIG;
}

/* First index of v[0..n) with v[i] >= x. */
static size_t u64_lower(const uint64_t *v, size_t n, uint64_t x) {
  size_t a = 0, b = n;
  while (a < b) {
    size_t mid = a + (b - a) / 2;
    if (v[mid] < x) a = mid + 1; else b = mid;
  }
  return a;
}

/* Caches the CU holding pc (frames of pc: s->frames[first..first+n)):
 * the whole CU, each piece resolved once at its start, while this profile's
 * fill budget lasts (a later run samples other PCs of the same code, and
 * that is what makes the next process cheap); otherwise only pc's own piece,
 * which needs no extra resolving. Returns true if pc is now covered. */
static bool cache_fill_cu(ptp_symbolizer *s, sym_module *m, Dwarf_Die *cudie_in, Dwarf_Addr cubias,
                          cu_index *cu, uint64_t pc, size_t first, size_t n) {
  Dwarf_Die cudie = *cudie_in;
  if (cu_bounds(m, &cudie, cubias, cu)) return false;
  size_t r = 0;
  while (r < cu->nrs && !(pc >= cu->rs[r] && pc < cu->rs[r + 1])) r += 2;
  if (r >= cu->nrs) return false;   /* aranges and the CU's ranges disagree */
  /* the first CU of a profile is filled whatever its size (up to
   * SYM_FILL_MAX_POINTS): a big hot one like glibc's malloc.c would
   * otherwise never be whole and miss in every later run */
  if (cu->npts > s->fill_budget && s->fill_budget < SYM_FILL_BUDGET) {
    size_t i = u64_lower(cu->pts, cu->npts, pc + 1);   /* first boundary > pc */
    uint64_t p = i > 0 ? cu->pts[i - 1] : cu->rs[r], q = i < cu->npts ? cu->pts[i] : cu->rs[r + 1];
    if (p < cu->rs[r]) p = cu->rs[r];
    if (q > cu->rs[r + 1]) q = cu->rs[r + 1];
    return ptp_symcache_add(m->cache, p - m->bias, q - m->bias, &s->frames[first], (uint32_t)n) == 0;
  }
  s->fill_budget -= cu->npts < s->fill_budget ? cu->npts : s->fill_budget;
  cu->cached = true;
  Dwarf_Off cuoff = dwarf_dieoffset(&cudie);
  for (size_t rr = 0; rr < cu->nrs; rr += 2) {
    uint64_t rlo = cu->rs[rr], rhi = cu->rs[rr + 1];
    for (size_t i = u64_lower(cu->pts, cu->npts, rlo); i < cu->npts && cu->pts[i] < rhi; i++) {
      uint64_t p = cu->pts[i], q = i + 1 < cu->npts && cu->pts[i + 1] < rhi ? cu->pts[i + 1] : rhi;
      Dwarf_Addr b2 = 0;
      Dwarf_Die *d2 = ptp_symbolize_module_addrdie(m, p, &b2);
      if (!d2 || dwarf_dieoffset(d2) != cuoff) continue;   /* another CU's: not ours to cut */
      size_t f0 = s->nframes;
      if (ptp_symbolize_module_resolve(s, m, p)) { s->nframes = f0; return false; }
      int e = ptp_symcache_add(m->cache, p - m->bias, q - m->bias, &s->frames[f0],
                               (uint32_t)(s->nframes - f0));
      s->nframes = f0;
      if (e == -ENOSPC || e == -ENOMEM) return false;
    }
  }
  const ptp_sym_frame *f;
  uint32_t k;
  return ptp_symcache_find(m->cache, pc - m->bias, &f, &k) == 1;
}

/* An object without DWARF: the result is a function of the ELF symbol
 * module_find_sym finds (the last one at or below the address, none past its
 * size), so its executable segments are cut at every symbol start and end
 * and each piece resolved once: the whole table in one go (cheap: no debug
 * info), since the next run will sample other functions. */
static void cache_fill_syms(ptp_symbolizer *s, sym_module *m) {
  u64vec pts = {0};
  for (int i = 0; i < m->nsegs; i++) {
    u64vec_push(&pts, m->seg_start[i]);
    u64vec_push(&pts, m->seg_limit[i]);
  }
  push_sym_bounds(&pts, m, 0, UINT64_MAX);
  if (pts.err || pts.n > SYM_FILL_MAX_POINTS) goto out;
  u64vec_sort_unique(&pts);
  for (int sg = 0; sg < m->nsegs; sg++) {
    uint64_t slo = m->seg_start[sg], shi = m->seg_limit[sg];
    for (size_t i = u64_lower(pts.v, pts.n, slo); i < pts.n && pts.v[i] < shi; i++) {
      uint64_t p = pts.v[i], q = i + 1 < pts.n && pts.v[i + 1] < shi ? pts.v[i + 1] : shi;
      size_t f0 = s->nframes;
      if (ptp_symbolize_module_resolve(s, m, p)) { s->nframes = f0; goto out; }
      int e = ptp_symcache_add(m->cache, p - m->bias, q - m->bias, &s->frames[f0],
                               (uint32_t)(s->nframes - f0));
      s->nframes = f0;
      if (e == -ENOSPC || e == -ENOMEM) goto out;
    }
  }
out:
  free(pts.v);
}

/* See ptp_symbolize_internal.h. */
void ptp_symbolize_cache_fill(ptp_symbolizer *s, sym_module *m, uint64_t pc, size_t first, size_t n) {
  ptp_symcache_set_flags(m->cache, (m->has_syms ? PTP_SYMCACHE_HAS_SYMS : 0) |
                                   (m->has_dwarf ? PTP_SYMCACHE_HAS_DWARF : 0));
  Dwarf_Addr cubias = 0;
  Dwarf_Die *cudie = m->dw ? ptp_symbolize_module_addrdie(m, pc, &cubias) : NULL;
  cu_index *cu = cudie ? ptp_symbolize_module_cu(m, cudie) : NULL;
  if (cu && !cu->cached && cache_fill_cu(s, m, cudie, cubias, cu, pc, first, n)) return;
  if (!m->dw && !m->syms_cached) {
    m->syms_cached = true;
    cache_fill_syms(s, m);
    const ptp_sym_frame *f;
    uint32_t k;
    if (ptp_symcache_find(m->cache, pc - m->bias, &f, &k)) return;
  }
  /* outside any CU with DWARF present, or a piece a walk skipped */
  (void)ptp_symcache_add(m->cache, pc - m->bias, pc - m->bias + 1, &s->frames[first], (uint32_t)n);
}

int ptp_symbolizer_flush(ptp_symbolizer *s) {
  int first_err = 0;
  s->fill_budget = SYM_FILL_BUDGET;
  for (size_t i = 0; i < s->nmods; i++) {
    ptp_symcache *c = s->mods[i]->cache;
    if (!c || !ptp_symcache_dirty(c)) continue;
    int r = ptp_symcache_save(c);
    if (r) {
      s->st.cache_save_errors++;
      if (!first_err) first_err = r;
    } else {
      s->st.cache_saves++;
    }
  }
  return first_err;
}

int ptp_symbolize_cache_debug_reset(ptp_symbolizer *s) {
  ptp_debugcache_del(s->dc);
  s->dc = NULL;
  for (size_t i = 0; i < s->nmods; i++) s->mods[i]->dc = NULL;
  if (!s->cache_dir) return 0;
  size_t n = strlen(s->cache_dir) + sizeof "/debug";
  char *d = ptp_malloc(n);
  if (!d) return -ENOMEM;
  snprintf(d, n, "%s/debug", s->cache_dir);
  int r = ptp_debugcache_new(&s->dc, d, s->dc_max);
  free(d);
  return r;
}

int ptp_symbolizer_make_debug_copies(ptp_symbolizer *s) {
  return s && s->dc ? ptp_debugcache_make_pending(s->dc) : 0;
}

int ptp_symbolizer_set_cache_dir(ptp_symbolizer *s, const char *dir) {
  (void)ptp_symbolizer_flush(s);
  for (size_t i = 0; i < s->nmods; i++) {
    ptp_symcache_del(s->mods[i]->cache);
    s->mods[i]->cache = NULL;
    s->mods[i]->cache_tried = false;
  }
  free(s->cache_dir);
  s->cache_dir = NULL;
  /* results already in the PC cache were made with the old setting: fine,
   * they are the same names; only persistence changes */
  if (!dir) return ptp_symbolize_cache_debug_reset(s);
  int r = ptp_cachefile_prepare_dir(dir);
  if (r) {
    (void)ptp_symbolize_cache_debug_reset(s);
    return r;
  }
  if (!(s->cache_dir = ptp_strdup(dir))) return -ENOMEM;
  s->cache_dir_checked = true;
  return ptp_symbolize_cache_debug_reset(s);
}

const char *ptp_symbolizer_cache_dir(const ptp_symbolizer *s) { return s->cache_dir; }
