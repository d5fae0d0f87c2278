/*
 * ptp_symbolize.c - see ptp_symbolize.h.
 *
 * DESIGN: the symbolizer is four units around one state, struct
 * ptp_symbolizer and its per-module data (ptp_symbolize_internal.h, which
 * lists them in call order): this file (the object list, the in-memory PC
 * cache, lookups, new/del) on top of ptp_symbolize_cache.c (the persistent
 * cache glue) on top of ptp_symbolize_module.c (one object: debug info,
 * the CU of a PC, DWARF index, resolving) on top of ptp_symbolize_syms.c
 * (one object's ELF symbols). Each calls only those below it.
 * What they share is the sym_module struct and its lifetime (a module and
 * its caches live from the refresh that finds it to the one that drops it),
 * stated once in the internal header.
 *
 * This file:
 *  - refresh: dl_iterate_phdr -> list of objects (bias, name, executable
 *    segments, build id from the in-memory PT_NOTE by ptp_elfnote.h).
 *    Objects are matched against the previous list by (bias, name, build
 *    id) so their caches survive dlopen/dlclose of other objects.
 *  - lookup: the PC cache (address -> frames, cleared when the object set
 *    changes, restarted past SYM_PC_CACHE_MAX), then the module's persistent
 *    cache, then resolving from the object (which feeds the persistent
 *    cache).
 */
#include "prof/symbols/ptp_symbolize_internal.h"
#include "prof/symbols/ptp_elfnote.h"
#include "prof/ptp_alloc.h"

#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

_Static_assert(SYM_MAX_BUILD_ID * 2 + 1 >= PTP_ELFNOTE_HEX_MAX, "a build id in hex fits");

#define SYM_VDSO_MAX (1u << 20) /* the vDSO image is a few pages */
#define SYM_PC_CACHE_MAX (1u << 20) /* cached addresses before the cache restarts */

void ptp_symbolizer_get_stats(const ptp_symbolizer *s, ptp_symbolizer_stats *out) {
  *out = s->st;
  if (s->dc) {
    ptp_debugcache_stats d;
    ptp_debugcache_get_stats(s->dc, &d);
    out->debug_copies_used = d.used;
    out->debug_copies_rejected = d.rejected;
    out->debug_copies_made = d.made;
    out->debug_copy_errors = d.errors;
    out->debug_copies_removed = d.removed;
  }
}

static int find_mapping(const ptp_symbolizer *s, uint64_t addr) {
  size_t lo = 0, hi = s->nmaps;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->maps[s->by_start[mid]].start <= addr) lo = mid + 1; else hi = mid;
  }
  if (lo == 0) return -1;
  int i = (int)s->by_start[lo - 1];
  return addr < s->maps[i].limit ? i : -1;
}

static void update_flags(ptp_symbolizer *s, size_t mod_index) {
  const sym_module *m = s->mods[mod_index];
  for (size_t i = 0; i < s->nmaps; i++) {
    if ((size_t)s->map_mod[i] != mod_index) continue;
    s->maps[i].has_functions = m->has_syms || m->has_dwarf;
    s->maps[i].has_filenames = m->has_dwarf;
    s->maps[i].has_line_numbers = m->has_dwarf;
    s->maps[i].has_inline_frames = m->has_dwarf;
  }
}

static int obj_mapping(const ptp_symbolizer *s, uint64_t addr) { return find_mapping(s, addr); }

int ptp_symbolizer_lookup(ptp_symbolizer *s, uint64_t addr, ptp_sym_result *out) {
  uint32_t idx;
  if (ptp_u64map_get(&s->pc, addr + 1, &idx)) {
    const cache_ent *c = &s->ents[idx];
    out->mapping = c->mapping;
    out->nframes = c->n;
    out->frames = c->n ? &s->frames[c->first] : NULL;
    return 0;
  }
  if (s->nents >= SYM_PC_CACHE_MAX) {
    /* Bound memory in long-running processes (a process has far fewer hot
     * PCs than this; hitting it means churn): start the cache over. */
    ptp_symbolize_pc_cache_clear(s);
  }
  int mi = find_mapping(s, addr);
  if (mi < 0) {
    /* In no object: JIT code or remapped object code (ptp_symbolize_jit.c),
     * never cached by address. */
    sym_jit_hit h;
    int r = ptp_symbolize_jit_find(s, addr, obj_mapping, &h);
    if (r) return r;
    if (h.alias) {
      r = ptp_symbolizer_lookup(s, h.orig, out);
      if (r) return r;
      out->mapping = h.mapping;
      return 0;
    }
    s->jit_frame = h.frame;
    out->mapping = h.mapping;
    out->nframes = h.named ? 1 : 0;
    out->frames = h.named ? &s->jit_frame : NULL;
    return 0;
  }
  size_t first = s->nframes;
  s->st.lookups++;
  if (mi >= 0) {
    size_t modi = (size_t)s->map_mod[mi];
    sym_module *m = s->mods[modi];
    if (!m->cache_tried) {
      ptp_symbolize_cache_open(s, m);
      update_flags(s, modi);
    }
    const ptp_sym_frame *cf;
    uint32_t cn;
    bool hit = m->cache && ptp_symcache_find(m->cache, addr - m->bias, &cf, &cn);
    if (m->cache && !m->cache_rejected &&
        ptp_symcache_file_state(m->cache) == PTP_SYMCACHE_REJECTED) {
      /* the file's blocks are read as lookups need them: one that failed
       * its checks just now rejected the file (counted once) */
      m->cache_rejected = true;
      s->st.cache_files_rejected++;
    }
    if (hit) {
      /* a hit: the object's file and debug info are never opened */
      s->st.cache_hits++;
      for (uint32_t i = 0; i < cn; i++)
        if (ptp_symbolize_push_frame(s, &cf[i])) {
          s->nframes = first;
          return -ENOMEM;
        }
    } else if (m->cache && (ptp_symcache_flags(m->cache) & PTP_SYMCACHE_COMPLETE)) {
      /* the object was cached whole: what no interval holds resolves to
       * no frames (its module+offset fallback), as opening it would say */
      s->st.cache_hits++;
      s->st.cache_complete_misses++;
    } else {
      if (!m->loaded) {
        m->dc = s->dc;   /* borrowed for sym_find_debuginfo during the load */
        m->dwfl_reference = s->dwfl_reference;
        ptp_symbolize_module_load(m);
        m->dc = NULL;
        s->st.modules_opened++;
        s->st.files_copied += m->files_copied;
        update_flags(s, modi);
      }
      if (m->mod) {
        int r = ptp_symbolize_module_resolve(s, m, addr);
        if (r) {
          s->nframes = first;
          return r;
        }
        s->st.resolved++;
        if (m->cache) ptp_symbolize_cache_fill(s, m, addr, first, s->nframes - first);
      }
    }
  }
  if (s->nents == s->capents) {
    size_t nc = s->capents ? s->capents * 2 : 1024;
    cache_ent *n = ptp_realloc(s->ents, nc * sizeof *n);
    if (!n) return -ENOMEM;
    s->ents = n;
    s->capents = nc;
  }
  cache_ent c = {mi, (uint32_t)first, (uint32_t)(s->nframes - first)};
  if (ptp_u64map_put(&s->pc, addr + 1, (uint32_t)s->nents)) {
    s->nframes = first;
    return -ENOMEM;
  }
  s->ents[s->nents++] = c;
  out->mapping = mi;
  out->nframes = c.n;
  out->frames = c.n ? &s->frames[first] : NULL;
  return 0;
}

size_t ptp_symbolizer_mappings(ptp_symbolizer *s, const ptp_sym_mapping **out) {
  ptp_symbolize_jit_sync_flags(s);
  *out = s->maps;
  return s->nmaps + s->jit.nextra;
}

/* ---- refresh: the list of loaded objects ---- */

typedef struct scan_obj {
  uint64_t bias;
  const char *name;          /* dlpi_name (valid during the callback only) */
  char *name_copy;
  char build_id[SYM_MAX_BUILD_ID * 2 + 1];
  bool is_main, is_vdso;
  const void *vdso_image;
  size_t vdso_size;
  uint64_t seg_start[SYM_MAX_SEGS], seg_limit[SYM_MAX_SEGS], seg_off[SYM_MAX_SEGS];
  int nsegs;
} scan_obj;

typedef struct scan_state {
  ptp_symbolizer *s;
  bool check_only;           /* stop at the first callback if counts unchanged */
  bool unchanged;
  unsigned long long adds, subs;
  scan_obj *objs;
  size_t nobjs, cap;
  int err;
  int index;
  uintptr_t vdso;
} scan_state;

static int scan_cb(struct dl_phdr_info *info, size_t size, void *data) {
  scan_state *st = data;
  int index = st->index++;
  if (index == 0) {
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
      st->adds = info->dlpi_adds;
      st->subs = info->dlpi_subs;
      if (st->check_only && st->s->have_counts && st->adds == st->s->adds &&
          st->subs == st->s->subs) {
        st->unchanged = true;
        return 1;
      }
    }
    if (st->check_only) return 1;  /* caller rescans in full */
  }
  scan_obj o;
  memset(&o, 0, sizeof o);
  o.bias = info->dlpi_addr;
  o.name = info->dlpi_name ? info->dlpi_name : "";
  o.is_main = index == 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (st->vdso && (uintptr_t)ph >= st->vdso && (uintptr_t)ph < st->vdso + 4096) o.is_vdso = true;
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || o.nsegs == SYM_MAX_SEGS) continue;
    uint64_t page = 4096;
    uint64_t start = info->dlpi_addr + ph->p_vaddr;
    o.seg_start[o.nsegs] = start & ~(page - 1);
    o.seg_limit[o.nsegs] = (start + ph->p_memsz + page - 1) & ~(page - 1);
    o.seg_off[o.nsegs] = ph->p_offset & ~(page - 1);
    o.nsegs++;
  }
  if (!o.nsegs) return 0;
  if (o.is_vdso) {
    /* The whole vDSO ELF file is mapped: its size is the PT_LOAD extent. */
    uint64_t end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
      const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
      if (ph->p_type == PT_LOAD && ph->p_offset + ph->p_filesz > end) end = ph->p_offset + ph->p_filesz;
    }
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)st->vdso;
    uint64_t sh_end = eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
    if (sh_end > end && sh_end <= SYM_VDSO_MAX) end = sh_end;
    o.vdso_image = (const void *)st->vdso;
    o.vdso_size = end <= SYM_VDSO_MAX ? (size_t)end : 0;
  }
  (void)ptp_elfnote_build_id_hex(info, o.build_id);   /* "" when none */
  o.name_copy = ptp_strdup(o.name);
  if (!o.name_copy) { st->err = -ENOMEM; return 1; }
  if (st->nobjs == st->cap) {
    size_t nc = st->cap ? st->cap * 2 : 32;
    scan_obj *n = ptp_realloc(st->objs, nc * sizeof *n);
    if (!n) { free(o.name_copy); st->err = -ENOMEM; return 1; }
    st->objs = n;
    st->cap = nc;
  }
  st->objs[st->nobjs++] = o;
  return 0;
}

static bool module_matches(const sym_module *m, const scan_obj *o, const char *name) {
  return m->bias == o->bias && m->is_vdso == o->is_vdso && strcmp(m->name, name) == 0 &&
         strcmp(m->build_id, o->build_id) == 0;
}

static const char *obj_display_name(ptp_symbolizer *s, const scan_obj *o) {
  if (o->is_vdso) return "[vdso]";
  if (o->is_main && !o->name_copy[0]) return s->exe_path ? s->exe_path : "";
  return o->name_copy;
}

static int by_start_cmp_ctx(const void *a, const void *b, void *ctx) {
  const ptp_sym_mapping *maps = ctx;
  uint64_t x = maps[*(const uint32_t *)a].start, y = maps[*(const uint32_t *)b].start;
  return x < y ? -1 : x > y;
}

static int rescan(ptp_symbolizer *s, scan_state *st) {
  if (!s->exe_path) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
      buf[n] = 0;
      s->exe_path = ptp_strdup(buf);
      if (!s->exe_path) return -ENOMEM;
    }
  }
  int r = 0;
  size_t nm = 0;
  sym_module **mods = ptp_calloc(st->nobjs ? st->nobjs : 1, sizeof *mods);
  size_t nsegs = 0;
  for (size_t i = 0; i < st->nobjs; i++) nsegs += (size_t)st->objs[i].nsegs;
  ptp_sym_mapping *maps = ptp_calloc(nsegs ? nsegs : 1, sizeof *maps);
  int *map_mod = ptp_calloc(nsegs ? nsegs : 1, sizeof *map_mod);
  uint32_t *by_start = ptp_calloc(nsegs ? nsegs : 1, sizeof *by_start);
  if (!mods || !maps || !map_mod || !by_start) { r = -ENOMEM; goto fail; }
  for (size_t i = 0; i < s->nmods; i++) s->mods[i]->seen = false;
  for (size_t i = 0; i < st->nobjs; i++) {
    const scan_obj *o = &st->objs[i];
    const char *name = obj_display_name(s, o);
    sym_module *m = NULL;
    for (size_t k = 0; k < s->nmods; k++)
      if (!s->mods[k]->seen && module_matches(s->mods[k], o, name)) { m = s->mods[k]; break; }
    if (!m) {
      m = ptp_calloc(1, sizeof *m);
      if (!m) { r = -ENOMEM; goto fail; }
      m->name = ptp_strdup(name);
      if (o->is_main) m->open_path = ptp_strdup("/proc/self/exe");
      if (!m->name || (o->is_main && !m->open_path)) { ptp_symbolize_module_free(m); r = -ENOMEM; goto fail; }
      m->bias = o->bias;
      memcpy(m->build_id, o->build_id, sizeof m->build_id);
      m->is_main = o->is_main;
      m->is_vdso = o->is_vdso;
      m->vdso_image = o->vdso_image;
      m->vdso_size = o->vdso_size;
      if (m->is_vdso && !m->vdso_size) m->loaded = true;  /* nothing to open */
      memcpy(m->seg_start, o->seg_start, sizeof m->seg_start);
      memcpy(m->seg_limit, o->seg_limit, sizeof m->seg_limit);
      memcpy(m->seg_off, o->seg_off, sizeof m->seg_off);
      m->nsegs = o->nsegs;
    }
    m->seen = true;
    mods[nm++] = m;
  }
  /* Mappings: main executable first (dl_iterate_phdr reports it first). */
  size_t nmaps = 0;
  for (size_t i = 0; i < nm; i++) {
    sym_module *m = mods[i];
    for (int k = 0; k < m->nsegs; k++) {
      ptp_sym_mapping *mp = &maps[nmaps];
      mp->start = m->seg_start[k];
      mp->limit = m->seg_limit[k];
      mp->offset = m->seg_off[k];
      mp->file = m->name;
      mp->build_id = m->build_id;
      mp->is_main = m->is_main;
      map_mod[nmaps] = (int)i;
      by_start[nmaps] = (uint32_t)nmaps;
      nmaps++;
    }
  }
  qsort_r(by_start, nmaps, sizeof *by_start, by_start_cmp_ctx, maps);
  /* Commit: free modules that are gone, swap in the new arrays. */
  for (size_t i = 0; i < s->nmods; i++)
    if (!s->mods[i]->seen) s->st.fds_lost += (uint64_t)ptp_symbolize_module_free(s->mods[i]);
  free(s->mods);
  free(s->maps);
  free(s->map_mod);
  free(s->by_start);
  s->mods = mods;
  s->nmods = nm;
  s->maps = maps;
  s->map_mod = map_mod;
  s->by_start = by_start;
  s->nmaps = nmaps;
  for (size_t i = 0; i < nm; i++) update_flags(s, i);
  /* Mapping indexes changed and new objects may cover cached "unknown" PCs. */
  ptp_symbolize_pc_cache_clear(s);
  s->adds = st->adds;
  s->subs = st->subs;
  s->have_counts = true;
  return 0;
fail:
  /* Modules created in this call are not in s->mods yet: free them; the
   * matched old ones stay owned by s->mods. */
  for (size_t i = 0; i < nm; i++) {
    bool old = false;
    for (size_t k = 0; k < s->nmods && !old; k++) old = s->mods[k] == mods[i];
    if (!old) ptp_symbolize_module_free(mods[i]);
  }
  free(mods);
  free(maps);
  free(map_mod);
  free(by_start);
  return r;
}

void ptp_symbolizer_set_dwfl_reference(ptp_symbolizer *s, bool on) { s->dwfl_reference = on; }

int ptp_symbolizer_refresh(ptp_symbolizer *s) {
  ptp_symbolize_jit_reset(s);    /* a new dump: the perf map may say more */
  scan_state st = {.s = s, .check_only = true, .vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR)};
  dl_iterate_phdr(scan_cb, &st);
  if (st.unchanged) return 0;
  memset(&st, 0, sizeof st);
  st.s = s;
  st.vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  dl_iterate_phdr(scan_cb, &st);
  int r = st.err ? st.err : rescan(s, &st);
  for (size_t i = 0; i < st.nobjs; i++) free(st.objs[i].name_copy);
  free(st.objs);
  return r;
}

int ptp_symbolizer_new(ptp_symbolizer **out) {
  ptp_symbolizer *s = ptp_calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  /* The persistent cache: only a path here; directories and files are
   * touched at the first lookup/flush (no eager symbol work at start). */
  s->fill_budget = SYM_FILL_BUDGET;
  s->dc_max = PTP_DEBUGCACHE_MAX;
  s->held_max = PTP_SYMBOLIZER_HELD_MAX;
  char dir[PATH_MAX];
  if ((ptp_symcache_default_dir(dir, sizeof dir) == 0 && !(s->cache_dir = ptp_strdup(dir))) ||
      ptp_symbolize_cache_debug_reset(s) != 0) {
    free(s->cache_dir);
    free(s);
    return -ENOMEM;
  }
  /* libelf needs its version handshake before any elf_begin of our own. */
  elf_version(EV_CURRENT);
  int r = ptp_symbolizer_refresh(s);
  if (r) {
    ptp_symbolizer_del(s);
    return r;
  }
  *out = s;
  return 0;
}

void ptp_symbolizer_del(ptp_symbolizer *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nmods; i++) ptp_symbolize_module_free(s->mods[i]);
  free(s->mods);
  free(s->maps);
  free(s->map_mod);
  free(s->by_start);
  free(s->exe_path);
  free(s->cache_dir);
  ptp_debugcache_del(s->dc);
  ptp_symbolize_jit_free(s);
  ptp_symbolize_pc_cache_free(s);
  free(s);
}
