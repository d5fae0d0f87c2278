/*
 * ptp_symbolize_internal.h - the state shared by the symbolizer's units;
 * included only by them (and their unit tests). The units, in call order
 * (each calls only those before it, never back):
 *   ptp_symbolize_syms.c    one loaded object's ELF symbol table (read,
 *                           ranked, sorted, searched); the key sort;
 *   ptp_symbolize_module.c  one loaded object: finding its debug info
 *                           (locally only), opening it, the compile unit
 *                           of a PC, a CU's DWARF index, and resolving a
 *                           PC inside it into frames;
 *   ptp_symbolize_cache.c   the glue to the persistent cache (ptp_symcache.h):
 *                           opening a module's cache file, filling it a
 *                           whole compile unit at a time, flushing;
 *   ptp_symbolize_jit.c     addresses in no loaded object: the runtime's
 *                           perf map (ptp_perfmap_file.h) and the walker's
 *                           executable ranges (JIT code, remapped text),
 *                           their "[jit]" and alias mappings;
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

#include "prof/cache/ptp_fd.h"
#include "prof/symbols/ptp_debugcache.h"
#include "prof/symbols/ptp_perfmap_file.h"
#include "prof/signal/ptp_xrange.h"
#include "prof/symbols/ptp_strarena.h"
#include "prof/symbols/ptp_sym_map.h"
#include "prof/symbols/ptp_symbolize.h"
#include "prof/symbols/ptp_symcache.h"

#define SYM_MAX_SEGS 8          /* executable PT_LOADs per object we keep */
#define SYM_MAX_BUILD_ID 64     /* bytes; GNU build ids are 20 (sha1) */
#define SYM_MAX_FDS 8           /* descriptors a module hands to libdwfl we track */
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
  uint32_t len;        /* strlen(name) (the sort's tie-break) */
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

/* What ptp_symbolize_module_resolve reads of one entry's DIE, read once
 * per entry (a CU filled into the cache resolves thousands of pieces over
 * the same few hundred DIEs). */
typedef struct cu_memo {
  Dwarf_Die die;
  const char *name;       /* DW_AT_name (integrated), NULL none */
  const char *linkage;    /* DW_AT_linkage_name, else DW_AT_MIPS_linkage_name */
  const char *decl_file;  /* dwarf_decl_file, NULL none */
  int decl_line;          /* dwarf_decl_line, 0 none */
  int8_t entry_state;     /* dwarf_entrypc: 0 not asked yet, 1 entry valid, -1 none */
  bool done;              /* the fields above are filled */
  Dwarf_Addr entry;
  int64_t call_line, call_col;   /* DW_AT_call_line/column, 0 none */
} cu_memo;

typedef struct cu_index {
  Dwarf_Off cu_off;
  cu_entry *ents;
  size_t nents;
  cu_memo *memo;       /* nents of them, allocated on first resolve, or NULL */
  cu_seg *segs;
  size_t nsegs;
  bool cached;         /* written to the persistent cache (whole CU) */
  bool bounds_failed;
  uint64_t *pts;       /* piece boundaries for the cache (cu_bounds), biased */
  size_t npts;
  uint64_t *rs;        /* the CU's ranges, [rs[2i], rs[2i+1]), biased */
  size_t nrs;
} cu_index;

/* One run of .debug_aranges entries of one CU (sorted by address; what
 * libdwfl's addrarange keeps), with its CU DIE found on first use. */
typedef struct sym_curun {
  uint64_t start;      /* DWARF address (unbiased) of the run's first range */
  Dwarf_Off cu_hdr;    /* the CU header's offset in .debug_info */
  Dwarf_Die die;       /* valid when state == 1 */
  int8_t state;        /* 0 not looked up, 1 die valid, -1 unusable */
} sym_curun;

/* What ptp_symbolize_module_addrdie knows of a module's .debug_aranges. */
enum {
  SYM_RUNS_UNBUILT = 0,  /* not looked at yet */
  SYM_RUNS_BUILT,        /* m->runs is the index */
  SYM_RUNS_NONE,         /* no section, or one libdw refuses: no CU anywhere */
  SYM_RUNS_DWFL          /* not what libdw reads (compressed, no memory): ask libdwfl */
};

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
  sym_curun *runs;     /* the CU-by-address index (ptp_symbolize_module_addrdie) */
  size_t nruns;
  uint64_t runs_end;   /* last range's end, inclusive as libdwfl has it */
  int8_t runs_state;   /* SYM_RUNS_* */
  ptp_strarena strs;   /* copies of version-stripped names */
  bool seen;           /* refresh mark */
  char *debug_path;    /* separate debug file found by sym_find_debuginfo */
  ptp_debugcache *dc;  /* borrowed from the symbolizer while loading, or NULL */
  ptp_symcache *cache; /* persistent results for this build id, or NULL */
  bool cache_tried;
  bool cache_rejected; /* counted in cache_files_rejected (at open, or when a
                          block read later failed its checks) */
  bool obj_fill_tried; /* the whole object was (tried to be) filled into the
                          cache, at its first miss (ptp_symbolize_cache_fill) */
  bool syms_direct;    /* the symbol table was read by syms_from_elf */
  bool dwfl_reference; /* read symbols and find CUs through libdwfl only
                          (ptp_symbolizer_set_dwfl_reference; for tests) */
  /* The descriptors handed to libdwfl (the object, its debug files, the
   * vDSO's memfd): libdwfl keeps them open until dwfl_end closes them, so
   * they are ours for as long as the module lives. Each sits above the
   * descriptor floor with its identity recorded (cache/ptp_fd.h); at free,
   * a number that no longer names its file (the program closed it and
   * perhaps reused it) makes us leave the Dwfl unended: libdwfl would
   * close the program's descriptor. */
  int fds[SYM_MAX_FDS];
  ptp_fd_id fd_ids[SYM_MAX_FDS];
  int nfds;
  uint32_t files_copied; /* files handed to libdw as a private copy */
} sym_module;

/* ---- the symbolizer ---- */

/* ptp_symbolize_jit.c's state: the perf map, the ranges copied for this
 * dump, and the extra mappings after the object mappings in s->maps. */
typedef struct sym_jit {
  char *path;                  /* the perf map; NULL: /tmp/perf-<pid>.map */
  ptp_perfmap_file *pmf;       /* made at the first address in no object */
  bool fresh;                  /* pmf and xr read since the last refresh */
  ptp_xrange *xr;              /* the walker's ranges (copy), sorted */
  size_t nxr;
  size_t nextra, capextra;     /* mappings s->maps[nmaps ..] */
  int *extra_src;              /* per extra: the object mapping an alias
                                  mirrors, -1 for "[jit]" */
  const ptp_sym_mapping *maps_seen;   /* s->maps the capacity is for */
  ptp_u64map extra_by_lo;      /* start + 1 -> extra index */
} sym_jit;

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
  size_t held_max;         /* ptp_symbolizer_trim's bound */

  char *cache_dir;         /* persistent symbol cache, NULL = off */
  bool cache_dir_checked;  /* ptp_cachefile_prepare_dir ran (first use) */
  size_t fill_budget;      /* CU pieces still to resolve for the cache in
                              this profile (reset by flush) */
  ptp_debugcache *dc;      /* uncompressed debug-file copies, NULL = off */
  uint64_t dc_max;         /* their size bound */
  ptp_symbolizer_stats st;
  bool dwfl_reference;     /* modules loaded from now on read through libdwfl only */
  sym_jit jit;
  ptp_sym_frame jit_frame;       /* the result of the last JIT lookup */
};

/* ---- ptp_symbolize_jit.c ---- */

/* What an address in no loaded object is. */
typedef struct sym_jit_hit {
  int mapping;          /* index into s->maps (an extra mapping), -1: none */
  bool alias;           /* remapped object code: look orig up in the object */
  uint64_t orig;
  bool named;           /* frame holds the runtime's name */
  ptp_sym_frame frame;  /* name owned by the perf map until the next refresh */
} sym_jit_hit;

/* At every refresh: the next address in no object re-reads the map and
 * the ranges; the extra mappings go. */
void ptp_symbolize_jit_reset(ptp_symbolizer *s);
/* Frees the unit's state (at del). */
void ptp_symbolize_jit_free(ptp_symbolizer *s);
/* Classifies addr, which lies in no object mapping; obj_mapping finds the
 * object mapping of an address (-1 none). Returns 0 or -ENOMEM. */
int ptp_symbolize_jit_find(ptp_symbolizer *s, uint64_t addr,
                           int (*obj_mapping)(const ptp_symbolizer *, uint64_t), sym_jit_hit *hit);
/* Copies the has_* flags of each alias mapping's object mapping (they grow
 * as lookups load objects). */
void ptp_symbolize_jit_sync_flags(ptp_symbolizer *s);

/* ---- ptp_symbolize.c ---- */

/* For tests: modules loaded after this call read their symbol table with
 * dwfl_module_getsym_info and find CUs and lines with
 * dwfl_module_addrdie/dwfl_module_getsrc (the libdwfl paths our own
 * readers replace, which must give the same results). Same thread rules
 * as the rest of ptp_symbolizer. */
void ptp_symbolizer_set_dwfl_reference(ptp_symbolizer *s, bool on);

/* ---- ptp_symbolize_syms.c ---- */

typedef struct sym_key {
  uint64_t key;
  uint64_t idx;        /* the element's index before the sort */
} sym_key;

/* Sorts v[0..n) by key, stable (equal keys keep their order); tmp is
 * scratch room for n keys; n < 2^32. No allocation. */
void ptp_symbolize_key_sort(sym_key *v, sym_key *tmp, size_t n);
/* Reads loaded module m's ELF function symbols into m->syms/m->nsyms
 * (sorted by address, one per address) and sets m->has_syms and
 * m->syms_direct; m->mod must be open. Out of memory: no symbols. */
void ptp_symbolize_syms_load(sym_module *m);
/* The symbol naming addr (biased) in m, or NULL: the last one at or
 * below it, unless it has a size that addr is past. */
const sym_elfsym *ptp_symbolize_syms_find(const sym_module *m, uint64_t addr);

/* ---- ptp_symbolize_module.c ---- */

/* Frees m and everything it owns; saves its cache file first if dirty
 * (best effort). NULL is fine. Returns 1 when the program had closed a
 * descriptor m handed to libdwfl (its Dwfl is then left unended, so no
 * number that is now the program's gets closed: its memory is kept), else
 * 0. */
int ptp_symbolize_module_free(sym_module *m);
/* Closes what ptp_symbolize_module_load opened and frees what lookups built
 * from it (the Dwfl, symbol table, CU indexes, name copies), keeping the
 * module itself (name, bias, segments, cache, has_syms/has_dwarf): loaded
 * is false again, and a later miss loads it anew. Frames made from the
 * module point into what this frees: the caller drops them first (the PC
 * cache). Returns 1 when a descriptor had been closed by the program (the
 * Dwfl is then left unended, as at free), else 0. */
int ptp_symbolize_module_unload(sym_module *m);
/* Opens m's file (once: sets m->loaded), its symbols and DWARF. Failures
 * leave m->mod NULL (nothing known) or m->dw NULL (symbols only). */
void ptp_symbolize_module_load(sym_module *m);
/* The CU DIE holding pc (biased) in loaded module m with DWARF, and the
 * bias of its DWARF addresses: the answer dwfl_module_addrdie gives, from
 * our own index of .debug_aranges (built on first use; see the DESIGN
 * comment of ptp_symbolize_module.c). NULL when no CU holds pc. The DIE
 * is owned by m. */
Dwarf_Die *ptp_symbolize_module_addrdie(sym_module *m, uint64_t pc, Dwarf_Addr *bias);
/* The CU DIE of m->runs[i] (the DIE ptp_symbolize_module_addrdie returns
 * for the addresses that search finds in run i), or NULL: unusable, or no
 * run index built (m->runs_state != SYM_RUNS_BUILT). Owned by m. */
Dwarf_Die *ptp_symbolize_module_run_cu(sym_module *m, size_t i);
/* The index of the compile unit cudie of m, built on first use; NULL when
 * out of memory. Owned by m. */
cu_index *ptp_symbolize_module_cu(sym_module *m, Dwarf_Die *cudie);
/* Appends the frames for pc (inside loaded module m) to s->frames.
 * Returns 0 or -ENOMEM (s->frames may then hold a partial result: the
 * caller truncates). */
int ptp_symbolize_module_resolve(ptp_symbolizer *s, sym_module *m, uint64_t pc);
/* Appends one frame to s->frames. 0 or -ENOMEM. */
int ptp_symbolize_push_frame(ptp_symbolizer *s, const ptp_sym_frame *f);

/* Empties the PC -> frames cache (its frames too), keeping its memory. For
 * when its answers may be wrong (objects came or went) or may point into
 * freed module data, or it is full. */
static inline void ptp_symbolize_pc_cache_clear(ptp_symbolizer *s) {
  ptp_u64map_clear(&s->pc);
  s->nents = 0;
  s->nframes = 0;
}

/* Empties the PC cache and frees its memory (trim, del). */
static inline void ptp_symbolize_pc_cache_free(ptp_symbolizer *s) {
  ptp_u64map_free(&s->pc);
  free(s->ents);
  free(s->frames);
  s->ents = NULL;
  s->frames = NULL;
  s->nents = s->capents = s->nframes = s->capframes = 0;
}

/* ---- ptp_symbolize_cache.c ---- */

/* (Re)creates s->dc for s->cache_dir (NULL when the cache is off), with
 * the bound s->dc_max; modules being loaded borrow it. 0 or -ENOMEM. */
int ptp_symbolize_cache_debug_reset(ptp_symbolizer *s);

/* Opens m's persistent cache (once: sets m->cache_tried); with no usable
 * directory or build id m->cache stays NULL. A module not yet loaded takes
 * its has_syms/has_dwarf from the file. */
void ptp_symbolize_cache_open(ptp_symbolizer *s, sym_module *m);
/* Stores what pc (just resolved into s->frames[first..first+n)) resolves
 * to in m->cache (non-NULL): at the object's first miss in this process
 * the whole object (marked complete when every piece went in), else, when
 * that is too big, pc's whole CU. Best effort: the cache is an
 * optimization, failures leave it smaller. */
void ptp_symbolize_cache_fill(ptp_symbolizer *s, sym_module *m, uint64_t pc, size_t first,
                              size_t n);

#endif
