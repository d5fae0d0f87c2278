/*
 * ptp_symbolize_jit.c - the symbolizer's part for addresses in no loaded
 * object: JIT code named from the runtime's perf map, and code a runtime
 * remapped (an alias of a loaded object's text) named through that object.
 *
 * DESIGN: once per dump (the first such address after a refresh) the unit
 * reads what is new in the perf map (ptp_perfmap_file.h: /tmp/perf-PID.map,
 * checked, incremental, so a sample is named by the map as of its window's
 * dump) and copies the walker's current executable ranges
 * (unwind/ptp_xranges.h), which say where JIT code and aliases are. Then an
 * address is, in order:
 *  - in an alias range: the caller (ptp_symbolize.c) looks up the same
 *    bytes in the loaded object (orig + offset) and shows the frame under
 *    a mapping of the object's file at the alias's place and file offset
 *    (how perf shows V8's remapped builtins);
 *  - named by the perf map, or in an anonymous range: one frame with the
 *    runtime's name as written (no file, no line: the runtime gives none
 *    apart from what its name says), under a mapping "[jit]" of its own
 *    (the range; or the perf map entry when the walker had no range), so
 *    no viewer pins it on an object;
 *  - else nothing (no mapping, no frame), as before.
 * Extra mappings live after the object mappings in s->maps, made on first
 * use and dropped at every refresh. Nothing here is cached by address: the
 * map may say something else at the next dump.
 */
#include "prof/symbols/ptp_symbolize_internal.h"
#include "prof/unwind/ptp_xranges.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char jit_file[] = "[jit]";

void ptp_symbolize_jit_reset(ptp_symbolizer *s) {
  s->jit.fresh = false;
  s->jit.nextra = 0;
  ptp_u64map_clear(&s->jit.extra_by_lo);
}

void ptp_symbolize_jit_free(ptp_symbolizer *s) {
  ptp_perfmap_file_del(s->jit.pmf);
  free(s->jit.xr);
  free(s->jit.extra_src);
  free(s->jit.path);
  ptp_u64map_free(&s->jit.extra_by_lo);
  memset(&s->jit, 0, sizeof s->jit);
}

/* The perf map and the ranges as of now, once per dump. */
static int prepare(ptp_symbolizer *s) {
  if (s->jit.fresh) return 0;
  if (!s->jit.pmf) {
    int rc = ptp_perfmap_file_new(&s->jit.pmf, s->jit.path);
    if (rc) return rc;
  }
  /* A map that is missing, refused or unreadable leaves the names read
   * before; its state goes into the profile's comment. Only memory ends
   * the lookup. */
  int rc = ptp_perfmap_file_update(s->jit.pmf);
  if (rc == -ENOMEM) return rc;
  free(s->jit.xr);
  s->jit.xr = NULL;
  s->jit.nxr = 0;
  rc = ptp_xranges_copy(&s->jit.xr, &s->jit.nxr);
  if (rc) return rc;
  s->jit.fresh = true;
  s->st.jit_map_reads++;
  return 0;
}

static const ptp_xrange *find_range(const ptp_symbolizer *s, uint64_t addr) {
  size_t lo = 0, hi = s->jit.nxr;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->jit.xr[mid].lo <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || addr >= s->jit.xr[lo - 1].hi) return NULL;
  return &s->jit.xr[lo - 1];
}

/* The extra mapping [lo, hi) (made on first use); src: the object mapping
 * an alias mirrors, -1 for "[jit]". Returns its index in s->maps, or
 * -ENOMEM. */
static int extra_mapping(ptp_symbolizer *s, uint64_t lo, uint64_t hi, uint64_t off, int src) {
  uint32_t idx;
  if (ptp_u64map_get(&s->jit.extra_by_lo, lo + 1, &idx)) return (int)(s->nmaps + idx);
  size_t n = s->nmaps + s->jit.nextra;
  if (s->jit.nextra == s->jit.capextra || s->jit.maps_seen != s->maps) {
    /* s->maps is sized for the objects by the refresh; grow it here (and
     * again after a refresh replaced it). */
    size_t cap = s->jit.nextra ? s->jit.nextra * 2 : 8;
    ptp_sym_mapping *g = ptp_realloc(s->maps, (s->nmaps + cap) * sizeof *g);
    if (!g) return -ENOMEM;
    s->maps = g;
    int *src_g = ptp_realloc(s->jit.extra_src, cap * sizeof *src_g);
    if (!src_g) return -ENOMEM;
    s->jit.extra_src = src_g;
    s->jit.capextra = cap;
    s->jit.maps_seen = s->maps;
  }
  if (ptp_u64map_put(&s->jit.extra_by_lo, lo + 1, (uint32_t)s->jit.nextra)) return -ENOMEM;
  ptp_sym_mapping *mp = &s->maps[n];
  memset(mp, 0, sizeof *mp);
  mp->start = lo;
  mp->limit = hi;
  if (src >= 0) {
    mp->offset = off;
    mp->file = s->maps[src].file;
    mp->build_id = s->maps[src].build_id;
  } else {
    mp->file = jit_file;
    mp->build_id = "";
  }
  s->jit.extra_src[s->jit.nextra++] = src;
  return (int)n;
}

int ptp_symbolize_jit_find(ptp_symbolizer *s, uint64_t addr, int (*obj_mapping)(const ptp_symbolizer *, uint64_t),
                           sym_jit_hit *hit) {
  memset(hit, 0, sizeof *hit);
  hit->mapping = -1;
  int rc = prepare(s);
  if (rc) return rc;
  s->st.jit_lookups++;
  const ptp_xrange *x = find_range(s, addr);
  if (x && (x->flags & PTP_XR_ALIAS)) {
    uint64_t orig = x->orig + (addr - x->lo);
    int src = obj_mapping(s, orig);
    if (src >= 0) {
      int mi = extra_mapping(s, x->lo, x->hi, x->off, src);
      if (mi < 0) return mi;
      hit->alias = true;
      hit->orig = orig;
      hit->mapping = mi;
      s->st.jit_alias++;
      return 0;
    }
    x = NULL;   /* the object is gone: name it as JIT code, if the map can */
  }
  uint64_t lo = 0, hi = 0;
  const char *name = ptp_perfmap_file_lookup(s->jit.pmf, addr, &lo, &hi);
  if (!x && !name) return 0;
  int mi = x ? extra_mapping(s, x->lo, x->hi, 0, -1) : extra_mapping(s, lo, hi, 0, -1);
  if (mi < 0) return mi;
  hit->mapping = mi;
  if (name) {
    s->maps[mi].has_functions = true;
    hit->frame = (ptp_sym_frame){ name, name, "", 0, 0, 0 };
    hit->named = true;
    s->st.jit_named++;
  }
  return 0;
}

void ptp_symbolize_jit_sync_flags(ptp_symbolizer *s) {
  for (size_t i = 0; i < s->jit.nextra; i++) {
    int src = s->jit.extra_src[i];
    if (src < 0) continue;
    ptp_sym_mapping *mp = &s->maps[s->nmaps + i];
    const ptp_sym_mapping *o = &s->maps[src];
    mp->has_functions = o->has_functions;
    mp->has_filenames = o->has_filenames;
    mp->has_line_numbers = o->has_line_numbers;
    mp->has_inline_frames = o->has_inline_frames;
  }
}

void ptp_symbolizer_set_perfmap_path(ptp_symbolizer *s, const char *path) {
  ptp_perfmap_file_del(s->jit.pmf);
  s->jit.pmf = NULL;
  free(s->jit.path);
  s->jit.path = path ? ptp_strdup(path) : NULL;
  s->jit.fresh = false;
}

void ptp_symbolizer_get_jit_info(const ptp_symbolizer *s, ptp_symbolizer_jit_info *out) {
  memset(out, 0, sizeof *out);
  if (!s->jit.pmf) return;
  ptp_perfmap_file_info in;
  ptp_perfmap_file_get_info(s->jit.pmf, &in);
  out->perfmap_path = in.path;
  out->perfmap_state = ptp_perfmap_file_state_name(in.state, in.err);
  out->perfmap_read = in.state == PTP_PERFMAP_READ;
  out->lines = in.map.lines;
  out->entries = in.map.entries;
  out->bad = in.map.bad + in.map.too_long;
  out->dropped = in.map.dropped + in.map.unnamed;
  out->ranges = in.map.ranges;
  out->restarts = in.restarts;
  out->capped = in.capped;
  out->exec_ranges = s->jit.nxr;
  ptp_xranges_info xi;
  ptp_xranges_get_info(&xi);
  out->range_reads = xi.refreshes;
  out->range_read_ns = xi.cpu_ns;
}
