/*
 * ptp_symbolize_module.c - one loaded object of the symbolizer (see
 * ptp_symbolize_internal.h for the units and their order): local-only
 * debuginfo lookup, opening the object with libdwfl, finding a PC's
 * compile unit, the DWARF index of a compile unit, and resolving one PC
 * into frames (its ELF symbols: ptp_symbolize_syms.c).
 *
 * DESIGN:
 *  - a module is opened lazily, on the first lookup of a PC inside it: one
 *    Dwfl per module (so modules come and go independently), reported with
 *    dwfl_report_elf at its real bias. The vDSO has no file: its image is
 *    copied from memory into a memfd and reported from there.
 *  - ELF symbols: ptp_symbolize_syms.c.
 *  - the CU of a PC: our own index of .debug_aranges, parsed as libdw
 *    0.188 parses it (ptp_aranges.h) and searched as libdwfl's dwfl_module_addrdie does
 *    (so the CU is the same for every address, gaps between a CU's ranges
 *    included), but without dwarf_getaranges, which interns every CU of
 *    the object (libdw reads CU headers in order) before the first
 *    answer: only the CUs up to the one asked for are read. The line row
 *    comes from dwarf_getsrc_die on that CU (dwfl_module_getsrc's search,
 *    without its second aranges lookup). One divergence, on corrupt DWARF
 *    only: an arange pointing at no CU start makes libdw refuse the whole
 *    table, and us only that arange's run. ptp_symbolizer_set_dwfl_reference
 *    switches a symbolizer back to the libdwfl calls, for the test that
 *    compares the two (test_symreaders.c).
 *  - DWARF: per compile unit, once, a walk of the DIE tree records every
 *    subprogram and inlined_subroutine (with the nearest enclosing one as
 *    parent) and flattens their address ranges into sorted, non-overlapping
 *    segments mapping to the innermost DIE. A PC lookup is then a binary
 *    search plus a walk up the parent links: the same chain that
 *    dwarf_getscopes + dwarf_getscopes_die would return, without walking the
 *    CU per PC (dwarf_getscopes per PC costs ~4 ms here).
 *  - debug info is found only on this machine (ptp_symbolize.h): our own
 *    find_debuginfo callback never calls debuginfod.
 *  - a separate debug file with compressed sections (libc6-dbg's) is
 *    replaced by its uncompressed copy from ptp_debugcache.h when a valid
 *    one exists (libdw then maps it instead of inflating ~10 MB), else a
 *    copy is requested (made after the snapshot, ptprof.c).
 * Calls only libdw/libdwfl/libelf, ptp_symbolize_syms.c, ptp_debugcache
 * and ptp_symcache (saving a module's cache file when the module is
 * freed); nothing of the two symbolizer units above it.
 */
#include "prof/symbols/ptp_symbolize_internal.h"
#include "prof/symbols/ptp_elffile.h"
#include "prof/symbols/ptp_aranges.h"
#include "prof/ptp_alloc.h"

#include <dwarf.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof/cache/ptp_fdmarks.h"
#include "prof/cache/ptp_fileopen.h"

#define SYM_MAX_DEPTH 256       /* DIE nesting cap for the CU walk */
#define SYM_MAX_INLINE 64       /* inline chain cap per PC */

static void cu_index_free(cu_index *c) {
  free(c->memo);
  free(c->pts);
  free(c->rs);
  free(c->ents);
  free(c->segs);
}

int ptp_symbolize_module_unload(sym_module *m) {
  /* libdwfl closes the descriptors we handed it at dwfl_end: only if each
   * number still names the file we opened (see sym_module.fds). */
  int lost = 0;
  for (int i = 0; i < m->nfds; i++) {
    ptp_fd_unmark(m->fds[i]);
    if (!ptp_fd_is(m->fds[i], &m->fd_ids[i])) lost = 1;
  }
  if (m->dwfl && !lost) dwfl_end(m->dwfl);
  m->nfds = 0;
  m->dwfl = NULL;
  m->mod = NULL;
  m->dw = NULL;
  m->dwbias = 0;
  free(m->syms);
  m->syms = NULL;
  m->nsyms = 0;
  m->syms_direct = false;
  free(m->runs);
  m->runs = NULL;
  m->nruns = 0;
  m->runs_end = 0;
  m->runs_state = SYM_RUNS_UNBUILT;
  for (size_t i = 0; i < m->ncus; i++) cu_index_free(&m->cus[i]);
  free(m->cus);
  m->cus = NULL;
  m->ncus = m->capcus = 0;
  m->last_cu = 0;
  ptp_strarena_free(&m->strs);
  free(m->debug_path);
  m->debug_path = NULL;
  m->loaded = false;
  return lost;
}

int ptp_symbolize_module_free(sym_module *m) {
  if (!m) return 0;
  int lost = ptp_symbolize_module_unload(m);
  free(m->name);
  free(m->open_path);
  if (m->cache) (void)ptp_symcache_save(m->cache);
  ptp_symcache_del(m->cache);
  free(m);
  return lost;
}

/* ---- the descriptors libdwfl keeps ---- */

/* fd, which libdwfl did not take, is not tracked any more (the caller
 * closes it). */
static void forget_fd(sym_module *m, int fd) {
  ptp_fd_unmark(fd);
  for (int i = 0; i < m->nfds; i++)
    if (m->fds[i] == fd) {
      m->fds[i] = m->fds[--m->nfds];
      m->fd_ids[i] = m->fd_ids[m->nfds];
      break;
    }
}

/* Makes fd (open on a regular file with fstat st) fit to be kept by
 * libdwfl for the module's life: a file another user could truncate under
 * libdw's mapping (not ours or root's, or writable by others) is replaced
 * by a sealed private copy; the descriptor moves above the floor (the low
 * numbers stay the program's) and its identity is recorded for the check
 * at free. Returns the descriptor to hand over (fd is consumed), or -1
 * (fd closed). */
static int keep_for_libdw(sym_module *m, int fd, const struct stat *st, bool ours) {
  if (!ours && !ptp_file_trusted(st)) {
    int copy = ptp_file_private_copy(fd, st);
    close(fd);
    if (copy < 0) return -1;
    fd = copy;
    m->files_copied++;
  }
  int high = ptp_fd_move_high(fd);
  if (high >= 0) fd = high;     /* else it stays where it is: still ours, checked */
  if (m->nfds < SYM_MAX_FDS && ptp_fd_id_of(fd, &m->fd_ids[m->nfds]) == 0) {
    m->fds[m->nfds++] = fd;
    ptp_fd_mark(fd);
  }
  return fd;
}

/* ---- local-only debuginfo lookup ---- */

/* Reads with pread (ELF_C_READ), never a mapping: the file is not checked
 * yet, and a mapped file cut short under us would fault. */
static int elf_build_id_matches(int fd, const unsigned char *want, int wantlen) {
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  if (!e) return 0;
  int ok = ptp_elf_build_id_is(e, want, (size_t)wantlen);
  elf_end(e);
  return ok;
}

/* A debug file with compressed sections (libc6-dbg's) costs libdw a full
 * inflate at dwarf_begin: hand out the uncompressed copy of ptp_debugcache
 * instead when there is a valid one, else ask for one (made after the
 * snapshot by ptp_symbolizer_make_debug_copies). Either way the result is
 * the same DWARF. Returns the fd to use (fd itself, or the copy's). */
static int use_debug_copy(ptp_debugcache *dc, int fd, const char *path, const unsigned char *id,
                          int idlen, char **name_out) {
  if (!dc || idlen < 2 || !ptp_debugcache_compressed(fd)) return fd;
  char *cname = NULL;
  int cfd = ptp_debugcache_open(dc, id, idlen, &cname);
  if (cfd >= 0) {
    free(*name_out);
    *name_out = cname;
    close(fd);
    return cfd;
  }
  (void)ptp_debugcache_want(dc, path, id, idlen);
  return fd;
}

/* A candidate debug file: opened only if it is a regular file of a sane
 * size (ptp_file_open_regular: never a FIFO or a device, no blocking
 * open), not through a symbolic link at its last component when nofollow
 * (the names next to the object, which whoever may write there controls).
 * Returns the descriptor for libdwfl (kept_for_libdw) or -1. */
static int try_open_debug(sym_module *m, const char *path, int nofollow, const unsigned char *id,
                          int idlen, const char *self, ptp_debugcache *dc, char **name_out) {
  if (self && strcmp(path, self) == 0) return -1;
  struct stat st;
  int fd = ptp_file_open_regular(AT_FDCWD, path, nofollow ? PTP_OPEN_NOFOLLOW : 0,
                                 PTP_FILE_ELF_MAX, &st);
  if (fd < 0) return -1;
  /* A debug file found by name must carry the same build id as the object;
   * without an id we cannot tell and accept it (the .gnu_debuglink CRC check
   * would mean reading the whole file). */
  if (idlen > 0 && !elf_build_id_matches(fd, id, idlen)) {
    close(fd);
    return -1;
  }
  if (!(*name_out = ptp_strdup(path))) {
    close(fd);
    return -1;
  }
  fd = use_debug_copy(dc, fd, path, id, idlen, name_out);
  if (fstat(fd, &st) != 0) {
    close(fd);
    return -1;
  }
  fd = m ? keep_for_libdw(m, fd, &st, false) : fd;
  if (fd < 0) {
    free(*name_out);
    *name_out = NULL;
  }
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
  int fd = ptp_file_open_regular(AT_FDCWD, path, 0, PTP_FILE_ELF_MAX, NULL);
  if (fd < 0) return -1;
  int r = -1;
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  size_t shstrndx;
  Elf_Scn *scn = e && elf_getshdrstrndx(e, &shstrndx) == 0
                     ? ptp_elf_find_scn(e, shstrndx, ".gnu_debugaltlink", NULL)
                     : NULL;
  Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
  if (d && d->d_buf) {
    const char *p = d->d_buf;
    size_t nl = strnlen(p, d->d_size);
    size_t il = nl < d->d_size ? d->d_size - nl - 1 : 0;
    if (nl < d->d_size && nl + 1 < namecap && il > 0 && il <= SYM_MAX_BUILD_ID) {
      memcpy(name, p, nl + 1);
      memcpy(id, p + nl + 1, il);
      *idlen = (int)il;
      r = 0;
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
    int fd = try_open_debug(m, path, 0, id, idlen, src, m->dc, out);
    if (fd >= 0) return fd;
  }
  if (altname[0] == '/') return try_open_debug(m, altname, 0, id, idlen, src, m->dc, out);
  snprintf(path, sizeof path, "%s", src);
  char *slash = strrchr(path, '/');
  if (!slash) return -1;
  snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", altname);
  return try_open_debug(m, path, 1, id, idlen, src, m->dc, out);
}

/* Dwfl_Callbacks.find_debuginfo: local paths only. libdwfl calls this when
 * the object itself has no DWARF, and again (crc 0, debuglink_file = the
 * .gnu_debugaltlink name) for a dwz alternate file. Never delegates to
 * dwfl_standard_find_debuginfo, which may consult debuginfod (network).
 * *userdata is our sym_module (set in ptp_symbolize_module_load). */
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
    int fd = try_open_debug(m, path, 0, id, idlen, file_name, m ? m->dc : NULL, debuginfo_file_name);
    if (fd >= 0) {
      if (m && !m->debug_path) m->debug_path = ptp_strdup(path);
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
      /* the debug link names a file beside the object: whoever may write
       * there chose it, so no symbolic link is followed to it */
      int fd = try_open_debug(m, path, k < 2, id, idlen > 0 ? idlen : 0, where, m ? m->dc : NULL,
                              debuginfo_file_name);
      if (fd >= 0) {
        if (m && !m->debug_path) m->debug_path = ptp_strdup(path);
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

/* ---- opening a module ---- */

void ptp_symbolize_module_load(sym_module *m) {
  m->loaded = true;
  m->has_syms = m->has_dwarf = false;   /* may have come from the cache */
  m->dwfl = dwfl_begin(&sym_callbacks);
  if (!m->dwfl) return;
  int fd = -1;
  struct stat st;
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
  } else {
    /* Opened here, not by libdwfl: the path is the loader's name of the
     * object, and what sits there now (replaced since the load: a FIFO, a
     * device, a huge file) must not hang or fault us. */
    fd = ptp_file_open_regular(AT_FDCWD, m->open_path ? m->open_path : m->name, 0,
                               PTP_FILE_ELF_MAX, &st);
    if (fd < 0) return;
  }
  /* the vDSO's memfd is our own copy already */
  if (fstat(fd, &st) != 0 || (fd = keep_for_libdw(m, fd, &st, m->is_vdso)) < 0) {
    if (fd >= 0) close(fd);
    return;
  }
  dwfl_report_begin(m->dwfl);
  m->mod = dwfl_report_elf(m->dwfl, m->name, m->open_path ? m->open_path : m->name, fd,
                           m->bias, false);
  dwfl_report_end(m->dwfl, NULL, NULL);
  if (!m->mod) {
    /* dwfl_report_elf consumes fd only on success */
    forget_fd(m, fd);
    close(fd);
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
  ptp_symbolize_syms_load(m);
  Dwarf_Addr bias = 0;
  m->dw = dwfl_module_getdwarf(m->mod, &bias);
  if (m->dw) {
    m->dwbias = bias;
    m->has_dwarf = true;
  }
}

/* ---- compile unit by address ---- */

static int arange_cmp(const void *a, const void *b) {
  const ptp_arange *x = a, *y = b;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  return x->ord < y->ord ? -1 : x->ord > y->ord;
}

/* The section of e named name, or NULL; *compressed when it is still
 * compressed (libdw inflates compressed debug sections in place at
 * dwarf_begin, so one still compressed is not what libdw reads). */
static Elf_Scn *find_scn(Elf *e, size_t shstrndx, const char *name, bool *compressed) {
  GElf_Shdr sh;
  Elf_Scn *scn = ptp_elf_find_scn(e, shstrndx, name, &sh);
  if (scn) *compressed = (sh.sh_flags & SHF_COMPRESSED) != 0;
  return scn;
}

/* The .debug_aranges entries of dw's file (ptp_aranges.h) into *out
 * (caller frees) and *n. Returns 0, 1 (no section: no CU holds any
 * address), -EINVAL (libdw would refuse the table: no CU for any address
 * either), -ENOTSUP (not what libdw reads: leave it to libdwfl) or
 * -ENOMEM. */
static int aranges_read(Dwarf *dw, ptp_arange **out, size_t *n) {
  Elf *e = dwarf_getelf(dw);
  size_t shstrndx;
  GElf_Ehdr eh;
  if (!e || !gelf_getehdr(e, &eh) || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      elf_getshdrstrndx(e, &shstrndx) != 0)
    return -ENOTSUP;
  bool zi = false, za = false, zz = false;
  Elf_Scn *info = find_scn(e, shstrndx, ".debug_info", &zi);
  Elf_Scn *scn = find_scn(e, shstrndx, ".debug_aranges", &za);
  if (!info || zi || za || find_scn(e, shstrndx, ".zdebug_aranges", &zz)) return -ENOTSUP;
  if (!scn) return 1;
  Elf_Data *d = elf_getdata(scn, NULL), *di = elf_getdata(info, NULL);
  if (!d || !di) return -ENOTSUP;
  if (!d->d_buf) return d->d_size ? -EINVAL : 1;
  int r = ptp_aranges_parse(d->d_buf, d->d_size, di->d_size, out, n);
  return r == -E2BIG ? -ENOTSUP : r;
}

/* Builds m->runs: libdwfl's one record per run of consecutive (by address)
 * ranges of one CU. */
static void aranges_build(sym_module *m) {
  ptp_arange *v = NULL;
  size_t n = 0;
  int r = aranges_read(m->dw, &v, &n);
  if (r == -ENOTSUP || r == -ENOMEM) {
    m->runs_state = SYM_RUNS_DWFL;
    return;
  }
  if (r != 0 || n == 0) {
    m->runs_state = SYM_RUNS_NONE;
    free(v);
    return;
  }
  /* libdw sorts by address with qsort (glibc's merge sort: stable), from
   * the section's order: the same order as ptp_symbolize_key_sort's */
  sym_key *keys = ptp_malloc(2 * n * sizeof *keys);
  ptp_arange *sorted = ptp_malloc(n * sizeof *sorted);
  if (keys && sorted) {
    for (size_t i = 0; i < n; i++) keys[i] = (sym_key){v[i].lo, i};
    ptp_symbolize_key_sort(keys, keys + n, n);
    for (size_t i = 0; i < n; i++) sorted[i] = v[keys[i].idx];
    free(v);
    v = sorted;
    sorted = NULL;
  } else {
    qsort(v, n, sizeof *v, arange_cmp);
  }
  free(keys);
  free(sorted);
  size_t nr = 0;
  for (size_t i = 0; i < n; i++)
    if (i == 0 || v[i].cu != v[i - 1].cu) nr++;
  sym_curun *runs = ptp_calloc(nr, sizeof *runs);
  if (!runs) {
    free(v);
    m->runs_state = SYM_RUNS_DWFL;
    return;
  }
  nr = 0;
  for (size_t i = 0; i < n; i++)
    if (i == 0 || v[i].cu != v[i - 1].cu) runs[nr++] = (sym_curun){.start = v[i].lo, .cu_hdr = v[i].cu};
  m->runs_end = v[n - 1].lo + v[n - 1].len;
  free(v);
  m->runs = runs;
  m->nruns = nr;
  m->runs_state = SYM_RUNS_BUILT;
}

/* The CU DIE of run u: the DIE after the header at u->cu_hdr, checked to
 * be that CU's own DIE. Only the CUs before it in .debug_info are read
 * (libdw interns CU headers in order), where dwarf_getaranges reads all
 * of them. */
static Dwarf_Die *run_die(sym_module *m, sym_curun *u) {
  if (u->state == 0) {
    u->state = -1;
    Dwarf_Off next;
    size_t hsize;
    Dwarf_Die cu;
    if (dwarf_next_unit(m->dw, u->cu_hdr, &next, &hsize, NULL, NULL, NULL, NULL, NULL, NULL) == 0 &&
        dwarf_offdie(m->dw, u->cu_hdr + hsize, &u->die) &&
        dwarf_diecu(&u->die, &cu, NULL, NULL) && dwarf_dieoffset(&cu) == u->cu_hdr + hsize)
      u->state = 1;
  }
  return u->state == 1 ? &u->die : NULL;
}

Dwarf_Die *ptp_symbolize_module_run_cu(sym_module *m, size_t i) {
  return m->runs_state == SYM_RUNS_BUILT && i < m->nruns ? run_die(m, &m->runs[i]) : NULL;
}

Dwarf_Die *ptp_symbolize_module_addrdie(sym_module *m, uint64_t pc, Dwarf_Addr *bias) {
  if (m->dwfl_reference) return dwfl_module_addrdie(m->mod, pc, bias);
  if (m->runs_state == SYM_RUNS_UNBUILT) aranges_build(m);
  if (m->runs_state == SYM_RUNS_DWFL) return dwfl_module_addrdie(m->mod, pc, bias);
  *bias = m->dwbias;
  if (m->runs_state != SYM_RUNS_BUILT) return NULL;
  /* libdwfl's addrarange search, probe for probe (so ties between runs
   * starting at one address resolve alike): an address belongs to the
   * run starting at or below it, the last run up to the last range's end */
  uint64_t a = pc - m->dwbias;
  size_t l = 0, u = m->nruns;
  while (l < u) {
    size_t idx = (l + u) / 2;
    uint64_t start = m->runs[idx].start;
    if (a < start) {
      u = idx;
      continue;
    }
    if (a > start) {
      if (idx + 1 < m->nruns) {
        if (a >= m->runs[idx + 1].start) {
          l = idx + 1;
          continue;
        }
      } else if (a > m->runs_end) {
        break;
      }
    }
    return run_die(m, &m->runs[idx]);
  }
  return NULL;
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
    cu_entry *n = ptp_realloc(b->ents, nc * sizeof *n);
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
    cu_range *n = ptp_realloc(b->rs, nc * sizeof *n);
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
    cu_seg *s = ptp_realloc(*segs, nc * sizeof *s);
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
  /* a CU without ranges has b->rs NULL, which qsort may not be given */
  if (b->nrs) qsort(b->rs, b->nrs, sizeof *b->rs, cu_range_cmp);
  cu_range *stack = ptp_malloc((b->nrs + 1) * sizeof *stack);
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

cu_index *ptp_symbolize_module_cu(sym_module *m, Dwarf_Die *cudie) {
  Dwarf_Off off = dwarf_dieoffset(cudie);
  if (m->ncus && m->last_cu < m->ncus && m->cus[m->last_cu].cu_off == off) return &m->cus[m->last_cu];
  for (size_t i = 0; i < m->ncus; i++)
    if (m->cus[i].cu_off == off) {
      m->last_cu = i;
      return &m->cus[i];
    }
  if (m->ncus == m->capcus) {
    size_t nc = m->capcus ? m->capcus * 2 : 16;
    cu_index *n = ptp_realloc(m->cus, nc * sizeof *n);
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

/* The DIE facts of entry e of cu, read on first use and kept (scratch when
 * the reference mode asks for none kept, or without memory). NULL when
 * the DIE cannot be read. */
static cu_memo *entry_memo(sym_module *m, cu_index *cu, int32_t e, cu_memo *scratch) {
  cu_memo *mm = scratch;
  if (!m->dwfl_reference) {
    if (!cu->memo) cu->memo = ptp_calloc(cu->nents, sizeof *cu->memo);
    if (cu->memo) mm = &cu->memo[e];
  }
  if (mm != scratch && mm->done) return mm;
  memset(mm, 0, sizeof *mm);
  if (!dwarf_offdie(m->dw, cu->ents[e].off, &mm->die)) return NULL;
  mm->name = die_str(&mm->die, DW_AT_name);
  mm->linkage = die_str(&mm->die, DW_AT_linkage_name);
  if (!mm->linkage) mm->linkage = die_str(&mm->die, DW_AT_MIPS_linkage_name);
  mm->decl_file = dwarf_decl_file(&mm->die);
  int dline = 0;
  if (dwarf_decl_line(&mm->die, &dline) == 0) mm->decl_line = dline;
  if (cu->ents[e].inlined) {
    mm->call_line = die_udata(&mm->die, DW_AT_call_line);
    mm->call_col = die_udata(&mm->die, DW_AT_call_column);
  }
  mm->done = true;
  return mm;
}

/* dwarf_entrypc of the memo's DIE, asked once. */
static bool memo_entry(cu_memo *mm, Dwarf_Addr *entry) {
  if (!mm->entry_state) mm->entry_state = dwarf_entrypc(&mm->die, &mm->entry) == 0 ? 1 : -1;
  *entry = mm->entry;
  return mm->entry_state == 1;
}

int ptp_symbolize_push_frame(ptp_symbolizer *s, const ptp_sym_frame *f) {
  if (s->nframes == s->capframes) {
    size_t nc = s->capframes ? s->capframes * 2 : 1024;
    ptp_sym_frame *n = ptp_realloc(s->frames, nc * sizeof *n);
    if (!n) return -ENOMEM;
    s->frames = n;
    s->capframes = nc;
  }
  s->frames[s->nframes++] = *f;
  return 0;
}

/* Appends the frames for pc (in module m) to s->frames. */
int ptp_symbolize_module_resolve(ptp_symbolizer *s, sym_module *m, uint64_t pc) {
  const sym_elfsym *es = m->nsyms ? ptp_symbolize_syms_find(m, pc) : NULL;
  if (m->dw) {
    Dwarf_Addr cubias = 0;
    Dwarf_Die *cudie = ptp_symbolize_module_addrdie(m, pc, &cubias);
    if (cudie) {
      int64_t line = 0, col = 0;
      const char *lfile = NULL;
      if (m->dwfl_reference) {
        Dwfl_Line *dl = dwfl_module_getsrc(m->mod, pc);
        if (dl) {
          int li = 0, ci = 0;
          lfile = dwfl_lineinfo(dl, NULL, &li, &ci, NULL, NULL);
          line = li;
          col = ci;
        }
      } else {
        /* dwfl_module_getsrc's lookup (the same binary search over the
         * CU's line table) without its second walk of the aranges */
        Dwarf_Line *dl = dwarf_getsrc_die(cudie, pc - cubias);
        if (dl) {
          int li = 0, ci = 0;
          (void)dwarf_lineno(dl, &li);
          (void)dwarf_linecol(dl, &ci);
          lfile = dwarf_linesrc(dl, NULL, NULL);
          line = li;
          col = ci;
        }
      }
      cu_index *cu = ptp_symbolize_module_cu(m, cudie);
      int32_t e = cu ? cu_lookup(cu, pc - cubias) : -1;
      size_t first = s->nframes;
      for (int depth = 0; e >= 0 && depth < SYM_MAX_INLINE; depth++) {
        cu_memo scratch;
        const cu_entry *ce = &cu->ents[e];
        cu_memo *mm = entry_memo(m, cu, e, &scratch);
        if (!mm) break;
        ptp_sym_frame f = {0};
        f.name = mm->name;
        f.system_name = mm->linkage;
        if (!ce->inlined && es) {
          /* Prefer the public ELF alias at the function's entry when DWARF
           * names the internal one: glibc's __libc_malloc is exported as
           * malloc, and malloc is what users look for. */
          Dwarf_Addr entry;
          if (!f.name || (f.name[0] == '_' && es->name[0] != '_' &&
                          memo_entry(mm, &entry) && entry + m->dwbias == es->addr))
          {
            if (!f.system_name) f.system_name = f.name;   /* keep the DWARF name */
            f.name = es->name;
          }
        }
        if (!f.name) f.name = f.system_name;
        if (!f.name) f.name = "[unknown]";
        if (!f.system_name) f.system_name = f.name;
        f.file = mm->decl_file ? mm->decl_file : lfile ? lfile : "";
        f.start_line = mm->decl_line;
        f.line = line;
        f.column = col;
        if (ptp_symbolize_push_frame(s, &f)) return -ENOMEM;
        if (!ce->inlined) break;
        /* the caller's position is where this inline instance was called */
        line = mm->call_line;
        col = mm->call_col;
        e = ce->parent;
        if (e < 0) {
          /* inline chain without a physical subprogram: name it by ELF symbol */
          ptp_sym_frame p = {es ? es->name : "[unknown]", es ? es->name : "[unknown]", "", 0, line, col};
          if (ptp_symbolize_push_frame(s, &p)) return -ENOMEM;
        }
      }
      if (s->nframes > first) return 0;
      if (es || lfile) {
        /* DWARF line info but no subprogram DIE: ELF name plus the line */
        const char *n = es ? es->name : "[unknown]";
        ptp_sym_frame f = {n, n, lfile ? lfile : "", 0, line, col};
        return ptp_symbolize_push_frame(s, &f);
      }
    }
  }
  if (es) {
    ptp_sym_frame f = {es->name, es->name, "", 0, 0, 0};
    return ptp_symbolize_push_frame(s, &f);
  }
  return 0;
}
