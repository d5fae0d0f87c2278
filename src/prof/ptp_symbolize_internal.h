/*
 * ptp_symbolize_internal.h - the state shared by the symbolizer's units;
 * included only by them. The units, in call order (each calls only those
 * before it, never back):
 *   ptp_symbolize_module.c  one loaded object: finding its debug info
 *                           (locally only), opening it, its ELF symbol
 *                           table, its DWARF compile-unit index, and
 *                           resolving a PC inside it into frames;
 *   ptp_symbolize_cache.c   the glue to the persistent cache (ptp_symcache.h):
 *                           opening a module's cache file, filling it a
 *                           whole compile unit at a time, flushing;
 *   ptp_symbolize.c         the symbolizer: the object list (refresh), the
 *                           in-memory PC cache, lookups, new/del.
 * Lifetime rule they share: a sym_module and everything hanging off it
 * (symbols, CU indexes, strings, its cache) lives from the refresh that
 * finds the object to the one that drops it (ptp_symbolize_module_free).
 * Threads: one user at a time (ptp_symbolize.h); never in a signal handler.
 */
#ifndef PTP_SYMBOLIZE_INTERNAL_H
#define PTP_SYMBOLIZE_INTERNAL_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prof/ptp_debugcache.h"
#include "prof/ptp_strarena.h"
#include "prof/ptp_sym_map.h"
#include "prof/ptp_symbolize.h"
#include "prof/ptp_symcache.h"

#define SYM_MAX_SEGS 8          /* executable PT_LOADs per object we keep */
#define SYM_MAX_BUILD_ID 64     /* bytes; GNU build ids are 20 (sha1) */
/* Pieces resolved for the cache per profile beyond the PCs asked for: ~10 us
 * each here, so a cold dump pays at most ~40 ms more for filling whole CUs
 * (the rest is cached piece by piece, and filled by later profiles). */
#define SYM_FILL_BUDGET 4096u

/* ---- per-module data ---- */

typedef struct sym_elfsym {
  uint64_t addr;       /* absolute (biased) */
  uint64_t size;       /* 0: extends to the next symbol */
  const char *name;    /* version suffix stripped */
  int rank;            /* alias preference, higher wins (elfsym_rank) */
} sym_elfsym;

typedef struct cu_entry {
  Dwarf_Off off;       /* global DIE offset (dwarf_offdie) */
  int32_t parent;      /* enclosing subprogram/inlined entry, -1 none */
  uint8_t inlined;     /* DW_TAG_inlined_subroutine */
} cu_entry;

typedef struct cu_seg {
  uint64_t lo, hi;     /* DWARF addresses (unbiased), [lo, hi) */
  int32_t entry;
} cu_seg;

typedef struct cu_index {
  Dwarf_Off cu_off;
  cu_entry *ents;
  size_t nents;
  cu_seg *segs;
  size_t nsegs;
  bool cached;         /* written to the persistent cache (whole CU) */
  bool bounds_failed;
  uint64_t *pts;       /* piece boundaries for the cache (cu_bounds), biased */
  size_t npts;
  uint64_t *rs;        /* the CU's ranges, [rs[2i], rs[2i+1]), biased */
  size_t nrs;
} cu_index;

typedef struct sym_module {
  char *name;          /* shown as the mapping's file: path or "[vdso]" */
  char *open_path;     /* what we open ("/proc/self/exe" for the main program) */
  uint64_t bias;       /* dlpi_addr */
  char build_id[SYM_MAX_BUILD_ID * 2 + 1];
  bool is_main, is_vdso;
  const void *vdso_image;   /* in-memory ELF header of the vDSO */
  size_t vdso_size;
  uint64_t seg_start[SYM_MAX_SEGS], seg_limit[SYM_MAX_SEGS], seg_off[SYM_MAX_SEGS];
  int nsegs;

  bool loaded;         /* open attempted */
  bool has_syms, has_dwarf;
  Dwfl *dwfl;
  Dwfl_Module *mod;
  Dwarf *dw;
  Dwarf_Addr dwbias;
  sym_elfsym *syms;
  size_t nsyms;
  cu_index *cus;       /* built lazily, one per CU hit */
  size_t ncus, capcus;
  size_t last_cu;      /* index of the last CU hit (locality) */
  ptp_strarena strs;   /* copies of version-stripped names */
  bool seen;           /* refresh mark */
  char *debug_path;    /* separate debug file found by sym_find_debuginfo */
  ptp_debugcache *dc;  /* borrowed from the symbolizer while loading, or NULL */
  ptp_symcache *cache; /* persistent results for this build id, or NULL */
  bool cache_tried;
  bool syms_cached;    /* no DWARF: the symbol table went to the cache */
} sym_module;

/* ---- the symbolizer ---- */

typedef struct cache_ent {
  int32_t mapping;
  uint32_t first, n;   /* into s->frames */
} cache_ent;

struct ptp_symbolizer {
  sym_module **mods;
  size_t nmods;
  ptp_sym_mapping *maps;   /* main first */
  int *map_mod;            /* mapping index -> module index */
  size_t nmaps;
  uint32_t *by_start;      /* mapping indexes sorted by start */
  unsigned long long adds, subs;
  bool have_counts;
  char *exe_path;          /* readlink /proc/self/exe, once */

  ptp_u64map pc;           /* addr + 1 -> cache_ent index */
  cache_ent *ents;
  size_t nents, capents;
  ptp_sym_frame *frames;
  size_t nframes, capframes;

  char *cache_dir;         /* persistent symbol cache, NULL = off */
  bool cache_dir_checked;  /* ptp_cachefile_prepare_dir ran (first use) */
  size_t fill_budget;      /* CU pieces still to resolve for the cache in
                              this profile (reset by flush) */
  ptp_debugcache *dc;      /* uncompressed debug-file copies, NULL = off */
  uint64_t dc_max;         /* their size bound */
  ptp_symbolizer_stats st;
};

/* ---- ptp_symbolize_module.c ---- */

/* Frees m and everything it owns; saves its cache file first if dirty
 * (best effort). NULL is fine. */
void ptp_symbolize_module_free(sym_module *m);
/* Opens m's file (once: sets m->loaded), its symbols and DWARF. Failures
 * leave m->mod NULL (nothing known) or m->dw NULL (symbols only). */
void ptp_symbolize_module_load(sym_module *m);
/* The index of the compile unit cudie of m, built on first use; NULL when
 * out of memory. Owned by m. */
cu_index *ptp_symbolize_module_cu(sym_module *m, Dwarf_Die *cudie);
/* Appends the frames for pc (inside loaded module m) to s->frames.
 * Returns 0 or -ENOMEM (s->frames may then hold a partial result: the
 * caller truncates). */
int ptp_symbolize_module_resolve(ptp_symbolizer *s, sym_module *m, uint64_t pc);
/* Appends one frame to s->frames. 0 or -ENOMEM. */
int ptp_symbolize_push_frame(ptp_symbolizer *s, const ptp_sym_frame *f);

/* ---- ptp_symbolize_cache.c ---- */

/* (Re)creates s->dc for s->cache_dir (NULL when the cache is off), with
 * the bound s->dc_max; modules being loaded borrow it. 0 or -ENOMEM. */
int ptp_symbolize_cache_debug_reset(ptp_symbolizer *s);

/* Opens m's persistent cache (once: sets m->cache_tried); with no usable
 * directory or build id m->cache stays NULL. A module not yet loaded takes
 * its has_syms/has_dwarf from the file. */
void ptp_symbolize_cache_open(ptp_symbolizer *s, sym_module *m);
/* Stores what pc (just resolved into s->frames[first..first+n)) and, the
 * first time, its whole CU resolve to, in m->cache (non-NULL). Best effort:
 * the cache is an optimization, failures leave it smaller. */
void ptp_symbolize_cache_fill(ptp_symbolizer *s, sym_module *m, uint64_t pc, size_t first,
                              size_t n);

#endif
