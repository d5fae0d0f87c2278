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
#include "prof/symbols/ptp_elffile.h"
#include "prof/cache/ptp_cachefile.h"
#include "prof/ptp_alloc.h"

#include <gelf.h>

#include <errno.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
  if (st == PTP_SYMCACHE_REJECTED) {
    s->st.cache_files_rejected++;
    m->cache_rejected = true;
  }
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
/* An object with more boundaries is filled a CU at a time (cache_fill_cu).
 * libc with libc6-dbg fits (~580k line rows: 155k intervals, 8.5 MB, ~45
 * MB more peak memory for the one fill); gcc's cc1 does not. Since a
 * process reads only the blocks of a cache file it looks up (format 4 on),
 * a big complete file costs a warm process no more than a small one. */
#define SYM_OBJ_FILL_MAX_POINTS (1u << 20)

/* The limits a whole fill is tried under, recorded with a
 * PTP_SYMCACHE_NOT_WHOLE mark when it fails: a mark recorded under lower
 * ones (by a library that had lower bounds) has expired, and the object
 * is tried whole again. Raise either bound and every such object gets one
 * more try. */
static const ptp_symcache_limits sym_fill_limits = {SYM_OBJ_FILL_MAX_POINTS, PTP_SYMCACHE_FILE_MAX};

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

/* Whether two results are the same frames (field by field). */
static bool frames_same(const ptp_sym_frame *a, size_t na, const ptp_sym_frame *b, size_t nb) {
  if (na != nb) return false;
  for (size_t i = 0; i < na; i++)
    if (a[i].start_line != b[i].start_line || a[i].line != b[i].line || a[i].column != b[i].column ||
        strcmp(a[i].name, b[i].name) != 0 || strcmp(a[i].system_name, b[i].system_name) != 0 ||
        strcmp(a[i].file, b[i].file) != 0)
      return false;
  return true;
}

/* The uncompressed size of m's .debug_line (0 none). Every line-table row
 * takes at least one byte of it (a special opcode), and this build's
 * objects take ~4 (polytokend: 295 KB, 72k rows; libc6-dbg's libc: 582k
 * rows): a cheap look at whether the object can be cut within
 * SYM_OBJ_FILL_MAX_POINTS before reading any of its line tables. */
static uint64_t debug_line_size(sym_module *m) {
  Elf *e = m->dw ? dwarf_getelf(m->dw) : NULL;
  size_t shstrndx;
  if (!e || elf_getshdrstrndx(e, &shstrndx) != 0) return 0;
  GElf_Shdr sh;
  Elf_Scn *scn = ptp_elf_find_scn(e, shstrndx, ".debug_line", &sh);
  if (!scn) return 0;
  if (!(sh.sh_flags & SHF_COMPRESSED)) return sh.sh_size;
  GElf_Chdr ch;
  return gelf_getchdr(scn, &ch) ? ch.ch_size : UINT64_MAX;
}

/* Pushes every boundary inside which ptp_symbolize_module_resolve gives
 * one answer for any address of the object (biased): the executable
 * segments, every ELF symbol's start and end, and, with DWARF, what
 * ptp_symbolize_module_addrdie's search turns on (each run's start and the
 * address after it: an address equal to a start shared by two runs
 * probes to another run than the addresses above it; the end of the last
 * run) and, for each CU a run names, what cu_bounds cuts a CU at (its
 * ranges, line rows and function/inline segments). Returns 0, -ENOTSUP
 * (DWARF this index does not serve: the per-CU path stays), -E2BIG (more
 * than SYM_OBJ_FILL_MAX_POINTS), -ENOMEM. */
static int object_bounds(sym_module *m, u64vec *pts) {
  if (m->dw && debug_line_size(m) / 3 > SYM_OBJ_FILL_MAX_POINTS) return -E2BIG;
  for (int i = 0; i < m->nsegs; i++) {
    u64vec_push(pts, m->seg_start[i]);
    u64vec_push(pts, m->seg_limit[i]);
  }
  push_sym_bounds(pts, m, 0, UINT64_MAX);
  if (!m->dw) return pts->err;
  if (m->dwfl_reference) return -ENOTSUP;
  if (m->runs_state == SYM_RUNS_UNBUILT) {
    Dwarf_Addr b0;
    (void)ptp_symbolize_module_addrdie(m, m->seg_start[0], &b0);   /* builds the index */
  }
  if (m->runs_state == SYM_RUNS_DWFL) return -ENOTSUP;
  if (m->runs_state != SYM_RUNS_BUILT) return pts->err;   /* no CU anywhere: ELF symbols */
  uint64_t db = m->dwbias;
  for (size_t i = 0; i < m->nruns; i++) {
    u64vec_push(pts, m->runs[i].start + db);
    u64vec_push(pts, m->runs[i].start + 1 + db);
  }
  u64vec_push(pts, m->runs_end + 1 + db);
  /* each CU once (a CU has several runs when another's ranges lie between
   * its own): the runs ordered by CU, stably */
  sym_key *keys = ptp_malloc(2 * m->nruns * sizeof *keys);
  if (!keys) return -ENOMEM;
  for (size_t i = 0; i < m->nruns; i++) keys[i] = (sym_key){m->runs[i].cu_hdr, i};
  ptp_symbolize_key_sort(keys, keys + m->nruns, m->nruns);
  int r = 0;
  for (size_t k = 0; k < m->nruns && !r; k++) {
    if (k && keys[k].key == keys[k - 1].key) continue;
    if (pts->err || pts->n > SYM_OBJ_FILL_MAX_POINTS) break;
    Dwarf_Die *d = ptp_symbolize_module_run_cu(m, (size_t)keys[k].idx);
    if (!d) continue;   /* no usable CU DIE: its run's addresses resolve by ELF symbol */
    Dwarf_Die cudie = *d;
    ptrdiff_t off = 0;
    Dwarf_Addr base, start, end;
    while ((off = dwarf_ranges(&cudie, off, &base, &start, &end)) > 0) {
      u64vec_push(pts, start + db);
      u64vec_push(pts, end + db);
    }
    Dwarf_Lines *lines = NULL;
    size_t nlines = 0;
    if (dwarf_getsrclines(&cudie, &lines, &nlines) == 0)
      for (size_t l = 0; l < nlines; l++) {
        Dwarf_Addr la;
        Dwarf_Line *ln = dwarf_onesrcline(lines, l);
        if (ln && dwarf_lineaddr(ln, &la) == 0) u64vec_push(pts, la + db);
      }
    cu_index *cu = ptp_symbolize_module_cu(m, &cudie);
    if (!cu) { r = -ENOMEM; break; }
    for (size_t g = 0; g < cu->nsegs; g++) {
      u64vec_push(pts, cu->segs[g].lo + db);
      u64vec_push(pts, cu->segs[g].hi + db);
    }
  }
  free(keys);
  if (r || (r = pts->err)) return r;
  return pts->n > SYM_OBJ_FILL_MAX_POINTS ? -E2BIG : 0;
}

/* Fills m's cache for every address of its executable segments, once per
 * process (the object is open now; the point is that no later run of this
 * build opens it again): the segments are cut at object_bounds, each piece
 * resolved once at its start, runs of pieces with the same answer stored
 * as one interval, pieces without frames not stored. When every piece went
 * in, the cache is marked complete (PTP_SYMCACHE_COMPLETE): a later
 * lookup that finds no interval then knows the answer is "no frames",
 * which is what resolving gives there. Runs before anything else is added
 * to the cache in this process (the first miss), so no interval added
 * earlier can make sc_sort drop one of these; intervals the file holds
 * already (filled CU by CU under an expired PTP_SYMCACHE_NOT_WHOLE mark)
 * answer first where they overlap, and each is right for every address
 * in it, so the set of addresses held covers every piece all the same.
 * Clears that mark on success. Returns 0 (complete), -E2BIG
 * (too many boundaries), -ENOSPC (the file bound), -ENOTSUP, -ENOMEM. */
static int cache_fill_object(ptp_symbolizer *s, sym_module *m) {
  u64vec pts = {0};
  int r;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if ((r = object_bounds(m, &pts)) != 0) goto out;
  u64vec_sort_unique(&pts);
  size_t pieces = 0;
  for (int sg = 0; sg < m->nsegs; sg++) {
    uint64_t slo = m->seg_start[sg], shi = m->seg_limit[sg];
    /* the pending interval [plo, phi) -> s->frames[pf0..) */
    size_t pf0 = s->nframes, pn = 0;
    uint64_t plo = 0, phi = 0;
    for (size_t i = u64_lower(pts.v, pts.n, slo); i <= pts.n; i++) {
      bool last = i == pts.n || pts.v[i] >= shi;
      uint64_t p = last ? shi : pts.v[i], q = 0;
      size_t f0 = s->nframes, n = 0;
      if (!last) {
        q = i + 1 < pts.n && pts.v[i + 1] < shi ? pts.v[i + 1] : shi;
        if ((r = ptp_symbolize_module_resolve(s, m, p)) != 0) { s->nframes = pf0; goto out; }
        n = s->nframes - f0;
        pieces++;
        if (phi == p && frames_same(&s->frames[pf0], pn, &s->frames[f0], n)) {
          phi = q;   /* same answer: one interval */
          s->nframes = f0;
          continue;
        }
      }
      if (pn) {   /* store the pending interval */
        r = ptp_symcache_add(m->cache, plo - m->bias, phi - m->bias, &s->frames[pf0], (uint32_t)pn);
        if (r) { s->nframes = pf0; goto out; }
      }
      if (last) { s->nframes = pf0; break; }
      /* the new piece becomes the pending one */
      memmove(&s->frames[pf0], &s->frames[f0], n * sizeof *s->frames);
      s->nframes = pf0 + n;
      pn = n;
      plo = p;
      phi = q;
    }
  }
  ptp_symcache_set_flags(m->cache, (ptp_symcache_flags(m->cache) & ~PTP_SYMCACHE_NOT_WHOLE) |
                                       PTP_SYMCACHE_COMPLETE);
  s->st.objects_filled++;
  s->st.fill_pieces += pieces;
out:
  clock_gettime(CLOCK_MONOTONIC, &t1);
  s->st.fill_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
  free(pts.v);
  return r;
}

/* See ptp_symbolize_internal.h. */
void ptp_symbolize_cache_fill(ptp_symbolizer *s, sym_module *m, uint64_t pc, size_t first, size_t n) {
  unsigned keep = ptp_symcache_flags(m->cache) & (PTP_SYMCACHE_COMPLETE | PTP_SYMCACHE_NOT_WHOLE);
  ptp_symcache_set_flags(m->cache, keep | (m->has_syms ? PTP_SYMCACHE_HAS_SYMS : 0) |
                                   (m->has_dwarf ? PTP_SYMCACHE_HAS_DWARF : 0));
  const ptp_sym_frame *f;
  uint32_t k;
  if (!m->obj_fill_tried && !ptp_symcache_not_whole(m->cache, &sym_fill_limits)) {
    /* the first miss of this object in this process, and no standing
     * verdict that it is too big (none, or one decided under lower limits
     * than ours): fill all of it */
    m->obj_fill_tried = true;
    int r = cache_fill_object(s, m);
    if (r == 0) {
      /* no frames: nothing stored, the complete mark answers it. Frames
       * that no interval holds (not expected: every piece went in) are
       * stored for the address alone, below. */
      if (n == 0 || ptp_symcache_find(m->cache, pc - m->bias, &f, &k) == 1) return;
      goto alone;
    }
    /* too big for one go, past the file bound, or a piece the file cannot
     * hold (-EINVAL: deeper than its frame cap): later processes go
     * straight to filling CU by CU, as long as their limits are not higher
     * than ours (recorded with the mark, replacing an expired mark's). Not
     * after -ENOMEM (this process's state) or -ENOTSUP (DWARF read through
     * libdwfl here, perhaps not in the next process): a mark that was
     * there stays as it was. */
    if (r != -ENOMEM && r != -ENOTSUP) ptp_symcache_set_not_whole(m->cache, &sym_fill_limits);
  }
  Dwarf_Addr cubias = 0;
  Dwarf_Die *cudie = m->dw ? ptp_symbolize_module_addrdie(m, pc, &cubias) : NULL;
  cu_index *cu = cudie ? ptp_symbolize_module_cu(m, cudie) : NULL;
  if (cu && !cu->cached && cache_fill_cu(s, m, cudie, cubias, cu, pc, first, n)) return;
  /* outside any CU with DWARF present, a piece a walk skipped, or an
   * object too big to fill whole */
alone:
  (void)ptp_symcache_add(m->cache, pc - m->bias, pc - m->bias + 1, &s->frames[first], (uint32_t)n);
}

int ptp_symbolizer_flush(ptp_symbolizer *s) {
  int first_err = 0;
  s->fill_budget = SYM_FILL_BUDGET;
  for (size_t i = 0; i < s->nmods; i++) {
    ptp_symcache *c = s->mods[i]->cache;
    /* no descriptor of ours stays open in the program between dumps */
    ptp_symcache_release(c);
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

/* See ptp_symbolize.h. A module is closed only when its cache answers
 * every address without it: marked complete, saved (not dirty: what the
 * fill added is on disk, so a block read back later holds it), not
 * rejected. */
size_t ptp_symbolizer_release_filled(ptp_symbolizer *s) {
  if (!s) return 0;
  size_t n = 0;
  for (size_t i = 0; i < s->nmods; i++) {
    sym_module *m = s->mods[i];
    if (!m->loaded || !m->cache || m->cache_rejected || ptp_symcache_dirty(m->cache) ||
        !(ptp_symcache_flags(m->cache) & PTP_SYMCACHE_COMPLETE))
      continue;
    s->st.fds_lost += (uint64_t)ptp_symbolize_module_unload(m);
    /* and the cache's copy of what the fill added (all of it on disk):
     * reopened at the next lookup, which reads only the blocks it needs */
    ptp_symcache_del(m->cache);
    m->cache = NULL;
    m->cache_tried = false;
    s->st.modules_released++;
    n++;
  }
  if (n) {
    /* the PC cache's frames may point into what the modules held */
    ptp_symbolize_pc_cache_clear(s);
#ifdef __GLIBC__
    /* Freed is not given back: glibc keeps an arena's free chunks below
     * its top. Tens of MB, once per object build in a process, so hand
     * them back now (malloc_trim only releases free pages, the program's
     * arenas included: nothing it holds moves). */
    (void)malloc_trim(0);
#endif
  }
  return n;
}

size_t ptp_symbolizer_held(const ptp_symbolizer *s) {
  if (!s) return 0;
  size_t n = s->capents * sizeof *s->ents + s->capframes * sizeof *s->frames +
             s->pc.cap * (sizeof *s->pc.keys + sizeof *s->pc.vals);
  for (size_t i = 0; i < s->nmods; i++) n += ptp_symcache_resident(s->mods[i]->cache);
  return n;
}

void ptp_symbolizer_set_held_max(ptp_symbolizer *s, size_t bytes) {
  if (s) s->held_max = bytes;
}

size_t ptp_symbolizer_held_max(const ptp_symbolizer *s) { return s ? s->held_max : 0; }

size_t ptp_symbolizer_trim(ptp_symbolizer *s) {
  size_t before = ptp_symbolizer_held(s);
  if (!s || before <= s->held_max) return 0;
  /* Start over: what a long run keeps grows with every address it ever
   * sampled (the PC cache) and every block of a symbol cache those
   * addresses read. The next snapshots read again only what they use:
   * a hit on a block read again costs a pread and a checksum. */
  for (size_t i = 0; i < s->nmods; i++) {
    ptp_symcache *c = s->mods[i]->cache;
    (void)ptp_symcache_evict(c);
    ptp_symcache_release(c);   /* evict may have opened it again */
  }
  ptp_symbolize_pc_cache_free(s);
  s->st.held_resets++;
  size_t after = ptp_symbolizer_held(s);
  return before > after ? before - after : 0;
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
