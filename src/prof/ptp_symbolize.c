/*
 * ptp_symbolize.c - see ptp_symbolize.h.
 *
 * DESIGN (why one file of ~1400 lines): one concept, turning a PC of this
 * process into its frames (function, file, line, inlined callers), with
 * one state, struct ptp_symbolizer and its per-module data. Its sections
 * (debuginfo lookup, ELF symbols, DWARF CU index, resolving, the glue to
 * the persistent cache, the object list) share the sym_module struct and
 * its lifetime rules (a module and its caches live from the refresh that
 * finds it to the one that drops it); split apart, each would need that
 * struct exposed in a header and the lifetime rules restated. What is
 * separable already is separate: the on-disk cache format and its file
 * handling (ptp_symcache.c), the address-map helpers (ptp_sym_map.h). The
 * largest section that could still move is the persistent-cache glue
 * (loading a module's cached frames and writing new ones, ~380 lines).
 *
 * Structure:
 *  - refresh: dl_iterate_phdr -> list of objects (bias, name, executable
 *    segments, build id from the in-memory PT_NOTE). Objects are matched
 *    against the previous list by (bias, name, build id) so their caches
 *    survive dlopen/dlclose of other objects.
 *  - a module is opened lazily, on the first lookup of a PC inside it: one
 *    Dwfl per module (so modules come and go independently), reported with
 *    dwfl_report_elf at its real bias. The vDSO has no file: its image is
 *    copied from memory into a memfd and reported from there.
 *  - ELF symbols: collected once per module (dwfl_module_getsym_info over
 *    .symtab/.dynsym of the file and its debug file), sorted by address;
 *    lookups are binary searches (dwfl_module_addrinfo rescans the table per
 *    call, ~80 us: too slow for 10k PCs).
 *  - DWARF: per compile unit, once, a walk of the DIE tree records every
 *    subprogram and inlined_subroutine (with the nearest enclosing one as
 *    parent) and flattens their address ranges into sorted, non-overlapping
 *    segments mapping to the innermost DIE. A PC lookup is then a binary
 *    search plus a walk up the parent links: the same chain that
 *    dwarf_getscopes + dwarf_getscopes_die would return, without walking the
 *    CU per PC (dwarf_getscopes per PC costs ~4 ms here).
 *  - a PC cache maps address -> frames, cleared when the object set changes.
 */
#include "prof/ptp_symbolize.h"
#include "prof/ptp_sym_map.h"
#include "prof/ptp_symcache.h"

#include <dwarf.h>
#include <limits.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#define SYM_MAX_SEGS 8          /* executable PT_LOADs per object we keep */
#define SYM_MAX_BUILD_ID 64     /* bytes; GNU build ids are 20 (sha1) */
#define SYM_MAX_DEPTH 256       /* DIE nesting cap for the CU walk */
#define SYM_MAX_INLINE 64       /* inline chain cap per PC */
#define SYM_VDSO_MAX (1u << 20) /* the vDSO image is a few pages */
#define SYM_PC_CACHE_MAX (1u << 20) /* cached addresses before the cache restarts */

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

typedef struct str_chunk {
  struct str_chunk *next;
  size_t used, cap;
  char data[];
} str_chunk;

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
  str_chunk *strs;     /* copies of version-stripped names */
  bool seen;           /* refresh mark */
  char *debug_path;    /* separate debug file found by sym_find_debuginfo */
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
  bool cache_dir_checked;  /* ptp_symcache_prepare_dir ran (first use) */
  size_t fill_budget;      /* CU pieces still to resolve for the cache in
                              this profile (reset by flush) */
  ptp_symbolizer_stats st;
};

static char *sym_strdup_n(sym_module *m, const char *s, size_t n) {
  if (!m->strs || m->strs->cap - m->strs->used < n + 1) {
    size_t cap = n + 1 > 4096 ? n + 1 : 4096;
    str_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = m->strs;
    c->used = 0;
    c->cap = cap;
    m->strs = c;
  }
  char *p = m->strs->data + m->strs->used;
  memcpy(p, s, n);
  p[n] = 0;
  m->strs->used += n + 1;
  return p;
}

static void cu_index_free(cu_index *c) {
  free(c->pts);
  free(c->rs);
  free(c->ents);
  free(c->segs);
}

static void module_free(sym_module *m) {
  if (!m) return;
  if (m->dwfl) dwfl_end(m->dwfl);
  free(m->syms);
  for (size_t i = 0; i < m->ncus; i++) cu_index_free(&m->cus[i]);
  free(m->cus);
  while (m->strs) {
    str_chunk *n = m->strs->next;
    free(m->strs);
    m->strs = n;
  }
  free(m->name);
  free(m->open_path);
  free(m->debug_path);
  if (m->cache) (void)ptp_symcache_save(m->cache);
  ptp_symcache_del(m->cache);
  free(m);
}

/* ---- local-only debuginfo lookup ---- */

static int elf_build_id_matches(int fd, const unsigned char *want, int wantlen) {
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (!e) return 0;
  const void *bits = NULL;
  ssize_t n = dwelf_elf_gnu_build_id(e, &bits);
  int ok = n == wantlen && bits && memcmp(bits, want, (size_t)n) == 0;
  elf_end(e);
  return ok;
}

static int try_open_debug(const char *path, const unsigned char *id, int idlen,
                          const char *self, char **name_out) {
  if (self && strcmp(path, self) == 0) return -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  /* A debug file found by name must carry the same build id as the object;
   * without an id we cannot tell and accept it (the .gnu_debuglink CRC check
   * would mean reading the whole file). */
  if (idlen > 0 && !elf_build_id_matches(fd, id, idlen)) {
    close(fd);
    return -1;
  }
  *name_out = strdup(path);
  return fd;
}

static void build_id_path(char *path, size_t cap, const unsigned char *id, int idlen) {
  int n = snprintf(path, cap, "/usr/lib/debug/.build-id/%02x/", id[0]);
  for (int i = 1; i < idlen && n < (int)cap - 8; i++)
    n += snprintf(path + n, cap - (size_t)n, "%02x", id[i]);
  snprintf(path + n, cap - (size_t)n, ".debug");
}

/* Reads the .gnu_debugaltlink section of the ELF file at path (a dwz
 * "multifile" reference: file name, NUL, build id). 0 or -1. */
static int read_altlink(const char *path, char *name, size_t namecap, unsigned char *id, int *idlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int r = -1;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  size_t shstrndx;
  if (e && elf_getshdrstrndx(e, &shstrndx) == 0) {
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn)) != NULL) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh)) continue;
      const char *sn = elf_strptr(e, shstrndx, sh.sh_name);
      if (!sn || strcmp(sn, ".gnu_debugaltlink") != 0) continue;
      Elf_Data *d = elf_getdata(scn, NULL);
      if (!d || !d->d_buf) break;
      const char *p = d->d_buf;
      size_t nl = strnlen(p, d->d_size);
      if (nl == d->d_size || nl + 1 >= namecap) break;
      size_t il = d->d_size - nl - 1;
      if (il == 0 || il > SYM_MAX_BUILD_ID) break;
      memcpy(name, p, nl + 1);
      memcpy(id, p + nl + 1, il);
      *idlen = (int)il;
      r = 0;
      break;
    }
  }
  if (e) elf_end(e);
  close(fd);
  return r;
}

/* The dwz alternate debug file ("multifile") the module's DWARF refers to:
 * by the build id recorded in .gnu_debugaltlink, then by the recorded name
 * (absolute, or relative to the debug file's directory). */
static int find_altfile(sym_module *m, const char *altname, char **out) {
  const char *src = m->debug_path ? m->debug_path : m->open_path ? m->open_path : m->name;
  char name[4096], path[4096];
  unsigned char id[SYM_MAX_BUILD_ID];
  int idlen = 0;
  if (read_altlink(src, name, sizeof name, id, &idlen) != 0 || strcmp(name, altname) != 0) return -2;
  if (idlen > 1) {
    build_id_path(path, sizeof path, id, idlen);
    int fd = try_open_debug(path, id, idlen, src, out);
    if (fd >= 0) return fd;
  }
  if (altname[0] == '/') return try_open_debug(altname, id, idlen, src, out);
  snprintf(path, sizeof path, "%s", src);
  char *slash = strrchr(path, '/');
  if (!slash) return -1;
  snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", altname);
  return try_open_debug(path, id, idlen, src, out);
}

/* Dwfl_Callbacks.find_debuginfo: local paths only. libdwfl calls this when
 * the object itself has no DWARF, and again (crc 0, debuglink_file = the
 * .gnu_debugaltlink name) for a dwz alternate file. Never delegates to
 * dwfl_standard_find_debuginfo, which may consult debuginfod (network).
 * *userdata is our sym_module (set in module_load). */
static int sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                              Dwarf_Addr base, const char *file_name,
                              const char *debuglink_file, GElf_Word debuglink_crc,
                              char **debuginfo_file_name) {
  (void)base;
  sym_module *m = userdata ? *userdata : NULL;
  if (m && debuglink_file && *debuglink_file && debuglink_crc == 0) {
    int fd = find_altfile(m, debuglink_file, debuginfo_file_name);
    if (fd != -2) return fd < 0 ? -1 : fd;
  }
  const unsigned char *id = NULL;
  GElf_Addr idvaddr;
  int idlen = dwfl_module_build_id(mod, &id, &idvaddr);
  char path[4096];
  if (idlen > 1) {
    build_id_path(path, sizeof path, id, idlen);
    int fd = try_open_debug(path, id, idlen, file_name, debuginfo_file_name);
    if (fd >= 0) {
      if (m && !m->debug_path) m->debug_path = strdup(path);
      return fd;
    }
  }
  /* The main program is opened as /proc/self/exe: look next to its real path. */
  const char *where = file_name && strncmp(file_name, "/proc/", 6) != 0 ? file_name : modname;
  if (debuglink_file && *debuglink_file && where && where[0] == '/' && !strchr(debuglink_file, '/')) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", where);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
    const char *fmts[] = {"%s/%s", "%s/.debug/%s", "/usr/lib/debug%s/%s"};
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
      snprintf(path, sizeof path, fmts[k], dir, debuglink_file);
      int fd = try_open_debug(path, id, idlen > 0 ? idlen : 0, where, debuginfo_file_name);
      if (fd >= 0) {
        if (m && !m->debug_path) m->debug_path = strdup(path);
        return fd;
      }
    }
  }
  return -1;
}

/* Only dwfl_report_elf is used, so find_elf is never needed: say "not found". */
static int sym_find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
                        Dwarf_Addr base, char **file_name, Elf **elfp) {
  (void)mod; (void)userdata; (void)modname; (void)base; (void)file_name; (void)elfp;
  return -1;
}

static const Dwfl_Callbacks sym_callbacks = {
  .find_elf = sym_find_elf,
  .find_debuginfo = sym_find_debuginfo,
  .section_address = dwfl_offline_section_address,
  .debuginfo_path = NULL,
};

/* ---- ELF symbols ---- */

/* Which of several aliases at one address names it: a default-versioned or
 * unversioned symbol over a compat one ("cfree@GLIBC_2.2.5" is an old
 * alias of free), a name without leading '_' over an internal one
 * (__libc_malloc), GLOBAL over WEAK over LOCAL, a sized symbol over an
 * unsized one. Remaining ties: shorter name, then alphabetical. */
static int elfsym_rank(const char *raw, const GElf_Sym *sym) {
  const char *at = strchr(raw, '@');
  bool compat = at && at[1] != '@';
  int bind = GELF_ST_BIND(sym->st_info);
  return (compat ? 0 : 16) + (raw[0] != '_' ? 8 : 0) +
         (bind == STB_GLOBAL ? 4 : bind == STB_WEAK ? 2 : 0) + (sym->st_size ? 1 : 0);
}

static int elfsym_cmp(const void *a, const void *b) {
  const sym_elfsym *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  /* at one address: the preferred alias first */
  if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
  size_t lx = strlen(x->name), ly = strlen(y->name);
  if (lx != ly) return lx < ly ? -1 : 1;
  return strcmp(x->name, y->name);
}

static void module_load_syms(sym_module *m) {
  int n = dwfl_module_getsymtab(m->mod);
  if (n <= 0) return;
  sym_elfsym *v = malloc((size_t)n * sizeof *v);
  if (!v) return;
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    Elf *elf;
    Dwarf_Addr bias;
    const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx, &elf, &bias);
    if (!name || !*name) continue;
    int type = GELF_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    if (shndx == SHN_UNDEF || addr == 0) continue;
    int rank = elfsym_rank(name, &sym);
    /* "memcpy@@GLIBC_2.14" -> "memcpy": the viewer shows the plain name. */
    const char *at = strchr(name, '@');
    if (at) {
      name = sym_strdup_n(m, name, (size_t)(at - name));
      if (!name) continue;
    }
    v[k].addr = addr;
    v[k].size = sym.st_size;
    v[k].name = name;
    v[k].rank = rank;
    k++;
  }
  qsort(v, k, sizeof *v, elfsym_cmp);
  /* One symbol per address (aliases like __libc_malloc/malloc share one):
   * the first after sorting is the preferred one; a sized alias lends its
   * size when the preferred one has none. */
  size_t w = 0;
  for (size_t i = 0; i < k; i++) {
    if (w && v[w - 1].addr == v[i].addr) {
      if (!v[w - 1].size) v[w - 1].size = v[i].size;
      continue;
    }
    v[w++] = v[i];
  }
  m->syms = v;
  m->nsyms = w;
  m->has_syms = w > 0;
}

static const sym_elfsym *module_find_sym(const sym_module *m, uint64_t addr) {
  size_t lo = 0, hi = m->nsyms;
  while (lo < hi) {   /* first symbol with addr > target */
    size_t mid = lo + (hi - lo) / 2;
    if (m->syms[mid].addr <= addr) lo = mid + 1; else hi = mid;
  }
  if (lo == 0) return NULL;
  const sym_elfsym *c = &m->syms[lo - 1];
  if (c->size && addr >= c->addr + c->size) return NULL;
  return c;
}

/* ---- opening a module ---- */

static void module_load(sym_module *m) {
  m->loaded = true;
  m->has_syms = m->has_dwarf = false;   /* may have come from the cache */
  m->dwfl = dwfl_begin(&sym_callbacks);
  if (!m->dwfl) return;
  int fd = -1;
  if (m->is_vdso) {
    /* libdwfl reads objects from files: hand it a memfd holding the image. */
    fd = memfd_create("ptprof-vdso", MFD_CLOEXEC);
    if (fd < 0) return;
    const char *p = m->vdso_image;
    size_t left = m->vdso_size;
    while (left) {
      ssize_t wr = write(fd, p, left);
      if (wr <= 0) { close(fd); return; }
      p += wr;
      left -= (size_t)wr;
    }
  }
  dwfl_report_begin(m->dwfl);
  m->mod = dwfl_report_elf(m->dwfl, m->name, m->open_path ? m->open_path : m->name, fd,
                           m->bias, false);
  dwfl_report_end(m->dwfl, NULL, NULL);
  if (!m->mod) {
    if (fd >= 0) close(fd);   /* dwfl_report_elf consumes fd only on success */
    return;
  }
  void **ud = NULL;
  dwfl_module_info(m->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
  if (ud) *ud = m;   /* for sym_find_debuginfo */
  /* The file on disk may have been replaced since it was loaded: trust it
   * only if its build id is the one in memory. */
  if (m->build_id[0]) {
    const unsigned char *bits;
    GElf_Addr vaddr;
    int n = dwfl_module_build_id(m->mod, &bits, &vaddr);
    char hex[SYM_MAX_BUILD_ID * 2 + 1] = "";
    for (int i = 0; i < n && i < SYM_MAX_BUILD_ID; i++) snprintf(hex + 2 * i, 3, "%02x", bits[i]);
    if (strcmp(hex, m->build_id) != 0) {
      m->mod = NULL;
      return;
    }
  }
  module_load_syms(m);
  Dwarf_Addr bias = 0;
  m->dw = dwfl_module_getdwarf(m->mod, &bias);
  if (m->dw) {
    m->dwbias = bias;
    m->has_dwarf = true;
  }
}

/* ---- DWARF compile-unit index ---- */

typedef struct cu_range {
  uint64_t lo, hi;
  int32_t entry;
  int32_t depth;
} cu_range;

typedef struct cu_build {
  cu_entry *ents;
  size_t nents, capents;
  cu_range *rs;
  size_t nrs, caprs;
  int err;
} cu_build;

static int32_t cu_add_entry(cu_build *b, Dwarf_Die *die, int32_t parent, bool inlined) {
  if (b->nents == b->capents) {
    size_t nc = b->capents ? b->capents * 2 : 64;
    cu_entry *n = realloc(b->ents, nc * sizeof *n);
    if (!n) { b->err = -ENOMEM; return -1; }
    b->ents = n;
    b->capents = nc;
  }
  b->ents[b->nents] = (cu_entry){dwarf_dieoffset(die), parent, inlined};
  return (int32_t)b->nents++;
}

static void cu_add_range(cu_build *b, uint64_t lo, uint64_t hi, int32_t entry, int32_t depth) {
  if (b->nrs == b->caprs) {
    size_t nc = b->caprs ? b->caprs * 2 : 64;
    cu_range *n = realloc(b->rs, nc * sizeof *n);
    if (!n) { b->err = -ENOMEM; return; }
    b->rs = n;
    b->caprs = nc;
  }
  b->rs[b->nrs++] = (cu_range){lo, hi, entry, depth};
}

static bool tag_descend(int tag) {
  switch (tag) {
    case DW_TAG_subprogram: case DW_TAG_inlined_subroutine: case DW_TAG_lexical_block:
    case DW_TAG_namespace: case DW_TAG_module: case DW_TAG_class_type:
    case DW_TAG_structure_type: case DW_TAG_union_type: case DW_TAG_try_block:
    case DW_TAG_catch_block: case DW_TAG_compile_unit: case DW_TAG_partial_unit:
    case DW_TAG_entry_point:
      return true;
    default:
      return false;
  }
}

static void cu_walk(cu_build *b, Dwarf_Die *parent_die, int32_t enclosing, int depth) {
  if (depth > SYM_MAX_DEPTH || b->err) return;
  Dwarf_Die child;
  if (dwarf_child(parent_die, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    int32_t encl = enclosing;
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
      Dwarf_Addr base, start, end;
      ptrdiff_t off = 0;
      int32_t e = -1;
      while ((off = dwarf_ranges(&child, off, &base, &start, &end)) > 0) {
        if (end <= start) continue;
        if (e < 0) e = cu_add_entry(b, &child, enclosing, tag == DW_TAG_inlined_subroutine);
        if (e < 0) return;
        cu_add_range(b, start, end, e, depth);
      }
      if (e >= 0) encl = e;
    }
    if (tag_descend(tag) && dwarf_haschildren(&child)) cu_walk(b, &child, encl, depth + 1);
  } while (!b->err && dwarf_siblingof(&child, &child) == 0);
}

static int cu_range_cmp(const void *a, const void *c) {
  const cu_range *x = a, *y = c;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  if (x->hi != y->hi) return x->hi > y->hi ? -1 : 1;   /* outer first */
  return x->depth < y->depth ? -1 : x->depth > y->depth;
}

static int seg_push(cu_seg **segs, size_t *n, size_t *cap, uint64_t lo, uint64_t hi, int32_t e) {
  if (lo >= hi) return 0;
  if (*n && (*segs)[*n - 1].hi == lo && (*segs)[*n - 1].entry == e) {
    (*segs)[*n - 1].hi = hi;
    return 0;
  }
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 64;
    cu_seg *s = realloc(*segs, nc * sizeof *s);
    if (!s) return -ENOMEM;
    *segs = s;
    *cap = nc;
  }
  (*segs)[(*n)++] = (cu_seg){lo, hi, e};
  return 0;
}

/* Flattens properly nested ranges into non-overlapping segments, each
 * mapping to its innermost range's entry. Invariant of the stack: every
 * element's hi is <= the one below it (a range overhanging its container,
 * which only broken DWARF produces, is clipped to the container). */
static int cu_flatten(cu_build *b, cu_index *ci) {
  qsort(b->rs, b->nrs, sizeof *b->rs, cu_range_cmp);
  cu_range *stack = malloc((b->nrs + 1) * sizeof *stack);
  if (!stack) return -ENOMEM;
  size_t sp = 0, cap = 0;
  uint64_t cur = 0;
  int r = 0;
  for (size_t i = 0; i < b->nrs && !r; i++) {
    cu_range x = b->rs[i];
    while (sp && stack[sp - 1].hi <= x.lo && !r) {
      r = seg_push(&ci->segs, &ci->nsegs, &cap, cur, stack[sp - 1].hi, stack[sp - 1].entry);
      if (stack[sp - 1].hi > cur) cur = stack[sp - 1].hi;
      sp--;
    }
    if (sp) {
      if (!r) r = seg_push(&ci->segs, &ci->nsegs, &cap, cur, x.lo, stack[sp - 1].entry);
      if (x.hi > stack[sp - 1].hi) x.hi = stack[sp - 1].hi;
    }
    cur = x.lo;
    stack[sp++] = x;
  }
  while (sp && !r) {
    r = seg_push(&ci->segs, &ci->nsegs, &cap, cur, stack[sp - 1].hi, stack[sp - 1].entry);
    if (stack[sp - 1].hi > cur) cur = stack[sp - 1].hi;
    sp--;
  }
  free(stack);
  return r;
}

static cu_index *module_cu(sym_module *m, Dwarf_Die *cudie) {
  Dwarf_Off off = dwarf_dieoffset(cudie);
  if (m->ncus && m->last_cu < m->ncus && m->cus[m->last_cu].cu_off == off) return &m->cus[m->last_cu];
  for (size_t i = 0; i < m->ncus; i++)
    if (m->cus[i].cu_off == off) {
      m->last_cu = i;
      return &m->cus[i];
    }
  if (m->ncus == m->capcus) {
    size_t nc = m->capcus ? m->capcus * 2 : 16;
    cu_index *n = realloc(m->cus, nc * sizeof *n);
    if (!n) return NULL;
    m->cus = n;
    m->capcus = nc;
  }
  cu_build b = {0};
  cu_walk(&b, cudie, -1, 0);
  cu_index ci = {.cu_off = off};
  if (!b.err) b.err = cu_flatten(&b, &ci);
  free(b.rs);
  if (b.err) {
    free(b.ents);
    free(ci.segs);
    return NULL;
  }
  ci.ents = b.ents;
  ci.nents = b.nents;
  m->cus[m->ncus] = ci;
  m->last_cu = m->ncus;
  return &m->cus[m->ncus++];
}

static int32_t cu_lookup(const cu_index *ci, uint64_t a) {
  size_t lo = 0, hi = ci->nsegs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ci->segs[mid].lo <= a) lo = mid + 1; else hi = mid;
  }
  if (lo == 0) return -1;
  const cu_seg *s = &ci->segs[lo - 1];
  return a < s->hi ? s->entry : -1;
}

/* ---- resolving one address ---- */

static const char *die_str(Dwarf_Die *die, int at) {
  Dwarf_Attribute attr;
  if (!dwarf_attr_integrate(die, at, &attr)) return NULL;
  const char *s = dwarf_formstring(&attr);
  return s && *s ? s : NULL;
}

static int64_t die_udata(Dwarf_Die *die, int at) {
  Dwarf_Attribute attr;
  Dwarf_Word w;
  if (!dwarf_attr(die, at, &attr) || dwarf_formudata(&attr, &w) != 0) return 0;
  return (int64_t)w;
}

static int push_frame(ptp_symbolizer *s, const ptp_sym_frame *f) {
  if (s->nframes == s->capframes) {
    size_t nc = s->capframes ? s->capframes * 2 : 1024;
    ptp_sym_frame *n = realloc(s->frames, nc * sizeof *n);
    if (!n) return -ENOMEM;
    s->frames = n;
    s->capframes = nc;
  }
  s->frames[s->nframes++] = *f;
  return 0;
}

/* Appends the frames for pc (in module m) to s->frames. */
static int module_resolve(ptp_symbolizer *s, sym_module *m, uint64_t pc) {
  const sym_elfsym *es = m->nsyms ? module_find_sym(m, pc) : NULL;
  if (m->dw) {
    Dwarf_Addr cubias = 0;
    Dwarf_Die *cudie = dwfl_module_addrdie(m->mod, pc, &cubias);
    if (cudie) {
      int64_t line = 0, col = 0;
      const char *lfile = NULL;
      Dwfl_Line *dl = dwfl_module_getsrc(m->mod, pc);
      if (dl) {
        int li = 0, ci = 0;
        lfile = dwfl_lineinfo(dl, NULL, &li, &ci, NULL, NULL);
        line = li;
        col = ci;
      }
      cu_index *cu = module_cu(m, cudie);
      int32_t e = cu ? cu_lookup(cu, pc - cubias) : -1;
      size_t first = s->nframes;
      for (int depth = 0; e >= 0 && depth < SYM_MAX_INLINE; depth++) {
        Dwarf_Die die;
        const cu_entry *ce = &cu->ents[e];
        if (!dwarf_offdie(m->dw, ce->off, &die)) break;
        ptp_sym_frame f = {0};
        f.name = die_str(&die, DW_AT_name);
        f.system_name = die_str(&die, DW_AT_linkage_name);
        if (!f.system_name) f.system_name = die_str(&die, DW_AT_MIPS_linkage_name);
        if (!ce->inlined && es) {
          /* Prefer the public ELF alias at the function's entry when DWARF
           * names the internal one: glibc's __libc_malloc is exported as
           * malloc, and malloc is what users look for. */
          Dwarf_Addr entry;
          if (!f.name || (f.name[0] == '_' && es->name[0] != '_' &&
                          dwarf_entrypc(&die, &entry) == 0 && entry + m->dwbias == es->addr))
          {
            if (!f.system_name) f.system_name = f.name;   /* keep the DWARF name */
            f.name = es->name;
          }
        }
        if (!f.name) f.name = f.system_name;
        if (!f.name) f.name = "[unknown]";
        if (!f.system_name) f.system_name = f.name;
        const char *df = dwarf_decl_file(&die);
        f.file = df ? df : lfile ? lfile : "";
        int dline = 0;
        if (dwarf_decl_line(&die, &dline) == 0) f.start_line = dline;
        f.line = line;
        f.column = col;
        if (push_frame(s, &f)) return -ENOMEM;
        if (!ce->inlined) break;
        /* the caller's position is where this inline instance was called */
        line = die_udata(&die, DW_AT_call_line);
        col = die_udata(&die, DW_AT_call_column);
        e = ce->parent;
        if (e < 0) {
          /* inline chain without a physical subprogram: name it by ELF symbol */
          ptp_sym_frame p = {es ? es->name : "[unknown]", es ? es->name : "[unknown]", "", 0, line, col};
          if (push_frame(s, &p)) return -ENOMEM;
        }
      }
      if (s->nframes > first) return 0;
      if (es || lfile) {
        /* DWARF line info but no subprogram DIE: ELF name plus the line */
        const char *n = es ? es->name : "[unknown]";
        ptp_sym_frame f = {n, n, lfile ? lfile : "", 0, line, col};
        return push_frame(s, &f);
      }
    }
  }
  if (es) {
    ptp_sym_frame f = {es->name, es->name, "", 0, 0, 0};
    return push_frame(s, &f);
  }
  return 0;
}

/* ---- the persistent cache (ptp_symcache.h) ---- */

static void module_cache_open(ptp_symbolizer *s, sym_module *m) {
  m->cache_tried = true;
  if (!s->cache_dir || !m->build_id[0]) return;
  if (!s->cache_dir_checked) {
    s->cache_dir_checked = true;
    if (ptp_symcache_prepare_dir(s->cache_dir) != 0) {
      /* not ours, writable by others, or cannot be made: no cache */
      s->st.cache_dir_refused = 1;
      free(s->cache_dir);
      s->cache_dir = NULL;
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
    uint64_t *n = realloc(a->v, nc * sizeof *n);
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

#define SYM_FILL_MAX_POINTS (1u << 18)   /* a CU with more boundaries is cached per PC */
/* Pieces resolved for the cache per profile beyond the PCs asked for: ~10 us
 * each here, so a cold dump pays at most ~40 ms more for filling whole CUs
 * (the rest is cached piece by piece, and filled by later profiles). */
#define SYM_FILL_BUDGET 4096u

/* Every address of [lo, hi) resolves alike when no line-table row, function
 * or inline range, ELF symbol or CU range starts or ends inside it: the
 * result of module_resolve is a function of exactly those (the row found by
 * dwfl_module_getsrc, the segment found by cu_lookup, the symbol found by
 * module_find_sym, the CU found by dwfl_module_addrdie). The CU's sorted,
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
  for (size_t i = lo; i < m->nsyms && m->syms[i].addr < maxhi; i++) {
    u64vec_push(&pts, m->syms[i].addr);
    if (m->syms[i].size) u64vec_push(&pts, m->syms[i].addr + m->syms[i].size);
  }
  if (pts.err || pts.n > SYM_FILL_MAX_POINTS) goto fail;
  qsort(pts.v, pts.n, sizeof *pts.v, u64_cmp);
  size_t k = 0;
  for (size_t i = 0; i < pts.n; i++)
    if (!k || pts.v[i] != pts.v[k - 1]) pts.v[k++] = pts.v[i];
  cu->pts = pts.v;
  cu->npts = k;
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
      Dwarf_Die *d2 = dwfl_module_addrdie(m->mod, p, &b2);
      if (!d2 || dwarf_dieoffset(d2) != cuoff) continue;   /* another CU's: not ours to cut */
      size_t f0 = s->nframes;
      if (module_resolve(s, m, p)) { s->nframes = f0; return false; }
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
  for (size_t i = 0; i < m->nsyms; i++) {
    u64vec_push(&pts, m->syms[i].addr);
    if (m->syms[i].size) u64vec_push(&pts, m->syms[i].addr + m->syms[i].size);
  }
  if (pts.err || pts.n > SYM_FILL_MAX_POINTS) goto out;
  qsort(pts.v, pts.n, sizeof *pts.v, u64_cmp);
  size_t k = 0;
  for (size_t i = 0; i < pts.n; i++)
    if (!k || pts.v[i] != pts.v[k - 1]) pts.v[k++] = pts.v[i];
  pts.n = k;
  for (int sg = 0; sg < m->nsegs; sg++) {
    uint64_t slo = m->seg_start[sg], shi = m->seg_limit[sg];
    size_t a = 0, b = pts.n;
    while (a < b) {
      size_t mid = a + (b - a) / 2;
      if (pts.v[mid] < slo) a = mid + 1; else b = mid;
    }
    for (size_t i = a; i < pts.n && pts.v[i] < shi; i++) {
      uint64_t p = pts.v[i], q = i + 1 < pts.n && pts.v[i + 1] < shi ? pts.v[i + 1] : shi;
      size_t f0 = s->nframes;
      if (module_resolve(s, m, p)) { s->nframes = f0; goto out; }
      int e = ptp_symcache_add(m->cache, p - m->bias, q - m->bias, &s->frames[f0],
                               (uint32_t)(s->nframes - f0));
      s->nframes = f0;
      if (e == -ENOSPC || e == -ENOMEM) goto out;
    }
  }
out:
  free(pts.v);
}

/* Stores what pc (just resolved into s->frames[first..first+n)) and, the
 * first time, its whole CU resolve to. Best effort: the cache is an
 * optimization, failures leave it smaller. */
static void cache_fill(ptp_symbolizer *s, sym_module *m, uint64_t pc, size_t first, size_t n) {
  ptp_symcache_set_flags(m->cache, (m->has_syms ? PTP_SYMCACHE_HAS_SYMS : 0) |
                                   (m->has_dwarf ? PTP_SYMCACHE_HAS_DWARF : 0));
  Dwarf_Addr cubias = 0;
  Dwarf_Die *cudie = m->dw ? dwfl_module_addrdie(m->mod, pc, &cubias) : NULL;
  cu_index *cu = cudie ? module_cu(m, cudie) : NULL;
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
  if (!dir) return 0;
  int r = ptp_symcache_prepare_dir(dir);
  if (r) return r;
  if (!(s->cache_dir = strdup(dir))) return -ENOMEM;
  s->cache_dir_checked = true;
  return 0;
}

const char *ptp_symbolizer_cache_dir(const ptp_symbolizer *s) { return s->cache_dir; }

void ptp_symbolizer_get_stats(const ptp_symbolizer *s, ptp_symbolizer_stats *out) { *out = s->st; }

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
    ptp_u64map_clear(&s->pc);
    s->nents = 0;
    s->nframes = 0;
  }
  int mi = find_mapping(s, addr);
  size_t first = s->nframes;
  s->st.lookups++;
  if (mi >= 0) {
    size_t modi = (size_t)s->map_mod[mi];
    sym_module *m = s->mods[modi];
    if (!m->cache_tried) {
      module_cache_open(s, m);
      update_flags(s, modi);
    }
    const ptp_sym_frame *cf;
    uint32_t cn;
    if (m->cache && ptp_symcache_find(m->cache, addr - m->bias, &cf, &cn)) {
      /* a hit: the object's file and debug info are never opened */
      s->st.cache_hits++;
      for (uint32_t i = 0; i < cn; i++)
        if (push_frame(s, &cf[i])) {
          s->nframes = first;
          return -ENOMEM;
        }
    } else {
      if (!m->loaded) {
        module_load(m);
        s->st.modules_opened++;
        update_flags(s, modi);
      }
      if (m->mod) {
        int r = module_resolve(s, m, addr);
        if (r) {
          s->nframes = first;
          return r;
        }
        s->st.resolved++;
        if (m->cache) cache_fill(s, m, addr, first, s->nframes - first);
      }
    }
  }
  if (s->nents == s->capents) {
    size_t nc = s->capents ? s->capents * 2 : 1024;
    cache_ent *n = realloc(s->ents, nc * sizeof *n);
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
  *out = s->maps;
  return s->nmaps;
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

static void read_build_id(const struct dl_phdr_info *info, char *hex) {
  hex[0] = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    /* Notes are in memory (PT_NOTE lies inside a PT_LOAD): walk them. */
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    size_t left = ph->p_memsz;
    size_t align = ph->p_align == 8 ? 8 : 4;
    while (left >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
      size_t namesz = (nh->n_namesz + align - 1) & ~(align - 1);
      size_t descsz = (nh->n_descsz + align - 1) & ~(align - 1);
      size_t total = sizeof *nh + namesz + descsz;
      if (total > left) break;
      const char *name = (const char *)(p + sizeof *nh);
      const unsigned char *desc = p + sizeof *nh + namesz;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        size_t n = nh->n_descsz > SYM_MAX_BUILD_ID ? SYM_MAX_BUILD_ID : nh->n_descsz;
        static const char digits[] = "0123456789abcdef";
        for (size_t k = 0; k < n; k++) {
          hex[2 * k] = digits[desc[k] >> 4];
          hex[2 * k + 1] = digits[desc[k] & 15];
        }
        hex[2 * n] = 0;
        return;
      }
      p += total;
      left -= total;
    }
  }
}

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
  read_build_id(info, o.build_id);
  o.name_copy = strdup(o.name);
  if (!o.name_copy) { st->err = -ENOMEM; return 1; }
  if (st->nobjs == st->cap) {
    size_t nc = st->cap ? st->cap * 2 : 32;
    scan_obj *n = realloc(st->objs, nc * sizeof *n);
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
      s->exe_path = strdup(buf);
      if (!s->exe_path) return -ENOMEM;
    }
  }
  int r = 0;
  size_t nm = 0;
  sym_module **mods = calloc(st->nobjs ? st->nobjs : 1, sizeof *mods);
  size_t nsegs = 0;
  for (size_t i = 0; i < st->nobjs; i++) nsegs += (size_t)st->objs[i].nsegs;
  ptp_sym_mapping *maps = calloc(nsegs ? nsegs : 1, sizeof *maps);
  int *map_mod = calloc(nsegs ? nsegs : 1, sizeof *map_mod);
  uint32_t *by_start = calloc(nsegs ? nsegs : 1, sizeof *by_start);
  if (!mods || !maps || !map_mod || !by_start) { r = -ENOMEM; goto fail; }
  for (size_t i = 0; i < s->nmods; i++) s->mods[i]->seen = false;
  for (size_t i = 0; i < st->nobjs; i++) {
    const scan_obj *o = &st->objs[i];
    const char *name = obj_display_name(s, o);
    sym_module *m = NULL;
    for (size_t k = 0; k < s->nmods; k++)
      if (!s->mods[k]->seen && module_matches(s->mods[k], o, name)) { m = s->mods[k]; break; }
    if (!m) {
      m = calloc(1, sizeof *m);
      if (!m) { r = -ENOMEM; goto fail; }
      m->name = strdup(name);
      if (o->is_main) m->open_path = strdup("/proc/self/exe");
      if (!m->name || (o->is_main && !m->open_path)) { module_free(m); r = -ENOMEM; goto fail; }
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
    if (!s->mods[i]->seen) module_free(s->mods[i]);
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
  ptp_u64map_clear(&s->pc);
  s->nents = 0;
  s->nframes = 0;
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
    if (!old) module_free(mods[i]);
  }
  free(mods);
  free(maps);
  free(map_mod);
  free(by_start);
  return r;
}

int ptp_symbolizer_refresh(ptp_symbolizer *s) {
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
  ptp_symbolizer *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  /* The persistent cache: only a path here; directories and files are
   * touched at the first lookup/flush (no eager symbol work at start). */
  s->fill_budget = SYM_FILL_BUDGET;
  char dir[PATH_MAX];
  if (ptp_symcache_default_dir(dir, sizeof dir) == 0 && !(s->cache_dir = strdup(dir))) {
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
  for (size_t i = 0; i < s->nmods; i++) module_free(s->mods[i]);
  free(s->mods);
  free(s->maps);
  free(s->map_mod);
  free(s->by_start);
  free(s->exe_path);
  free(s->cache_dir);
  ptp_u64map_free(&s->pc);
  free(s->ents);
  free(s->frames);
  free(s);
}
