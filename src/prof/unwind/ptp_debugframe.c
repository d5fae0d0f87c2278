/*
 * ptp_debugframe.c - unwind tables for objects that have no .eh_frame_hdr
 * (built with -fno-asynchronous-unwind-tables -fno-unwind-tables, or
 * linked without --eh-frame-hdr) but do have .debug_frame, which is not
 * mapped: it is read from the object's file or from its separate debug
 * file with libelf (already linked for the symbolizer; it also inflates
 * SHF_COMPRESSED sections) and handed to ptp_cfi_parse_debug_frame (see
 * ptp_cfi_internal.h for where the files are looked for).
 *
 * Truth: the bytes on disk must be those of the loaded object. A candidate
 * file is used only when its NT_GNU_BUILD_ID equals the one in the loaded
 * object's memory; an object without a build id gets no table (its samples
 * are walked with frame pointers or stay truncated, as before).
 *
 * Bounds: a .debug_frame section larger than DF_MAX is not read. Files are
 * opened by ptp_file_open_regular (cache/ptp_fileopen.h): only a regular
 * file of a sane size is opened at all, without blocking (a FIFO named by
 * a .gnu_debuglink, or put where the object was, must not hang the
 * program before main), and never through a symlink at the last component
 * of the debug-file names we build beside the object (O_NOFOLLOW does not
 * apply to the object's own path, which the loader already opened). They
 * are read with pread (ELF_C_READ), never mapped: a file cut short while
 * we read it is an error, not a SIGBUS.
 *
 * Threads: no state; called under the table module's mutex (ptp_cfi.c).
 * Not for signal handlers (I/O, allocation).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof/cache/ptp_fileopen.h"
#include "prof/symbols/ptp_elffile.h"
#include "prof/unwind/ptp_cfi_internal.h"

#define DF_MAX ((size_t)64 << 20)

/* Tries one file. Returns 0 (table built), -ENOENT (not this file: absent,
 * another build id, no .debug_frame), -E2BIG, -ENOMEM. With link != NULL
 * (the object's own file) the .gnu_debuglink name is copied there. */
static int try_file(const char *path, int nofollow, const char *want_bid, uintptr_t bias,
                    size_t max_rows, ptp_cfi_tab **out, char *link, size_t linkcap) {
  int fd = ptp_file_open_regular(AT_FDCWD, path, nofollow ? PTP_OPEN_NOFOLLOW : 0, PTP_FILE_ELF_MAX,
                                 NULL);
  if (fd < 0) return -ENOENT;
  int rc = -ENOENT;
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  if (!e || elf_kind(e) != ELF_K_ELF) goto fail_elf;
  size_t shstrndx;
  if (!ptp_elf_build_id_is_hex(e, want_bid) || elf_getshdrstrndx(e, &shstrndx) != 0) goto fail_elf;
  if (link) {
    link[0] = 0;
    Elf_Scn *ls = ptp_elf_find_scn(e, shstrndx, ".gnu_debuglink", NULL);
    Elf_Data *ld = ls ? elf_getdata(ls, NULL) : NULL;
    if (ld && ld->d_size > 1 && memchr(ld->d_buf, 0, ld->d_size)) {
      const char *nm = ld->d_buf;
      if (!strchr(nm, '/') && strlen(nm) < linkcap) snprintf(link, linkcap, "%s", nm);
    }
  }
  GElf_Shdr sh;
  Elf_Scn *scn = ptp_elf_find_scn(e, shstrndx, ".debug_frame", &sh);
  if (!scn || sh.sh_type == SHT_NOBITS) goto fail_elf;
  /* A compressed section (SHF_COMPRESSED) is inflated by libelf first; its
   * size bound is checked on the result. */
  if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) goto fail_elf;
  Elf_Data *d = elf_getdata(scn, NULL);
  if (!d || !d->d_buf || d->d_size == 0 || d->d_size > DF_MAX) goto fail_elf;
  rc = ptp_cfi_parse_debug_frame(d->d_buf, d->d_size, bias, max_rows, out);
  if (rc == 0 && (*out)->nrows == 0) {     /* nothing we can use: not a table */
    free(*out);
    *out = NULL;
    rc = -ENOENT;
  }
fail_elf:
  if (e) elf_end(e);
  close(fd);
  return rc;
}

int ptp_cfi_debugframe(const struct dl_phdr_info *info, const ptp_cfi_objinfo *o,
                       size_t max_rows, ptp_cfi_tab **out) {
  *out = NULL;
  char bid[PTP_CFI_BID_MAX];
  if (ptp_elfnote_build_id_hex(info, bid) < 0) return -ENOENT;
  /* linux-vdso and friends have no file; the main program is named "". */
  const char *self = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe";
  elf_version(EV_CURRENT);
  char link[NAME_MAX + 1] = "";
  int rc = try_file(self, 0, bid, info->dlpi_addr, max_rows, out, link, sizeof link);
  if (rc != -ENOENT) return rc;
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%.2s/%s.debug", bid, bid + 2);
  if (n > 0 && (size_t)n < sizeof path) {
    rc = try_file(path, 1, bid, info->dlpi_addr, max_rows, out, NULL, 0);
    if (rc != -ENOENT) return rc;
  }
  if (!link[0]) return -ENOENT;
  /* .gnu_debuglink: next to the object, in its .debug/, under /usr/lib/debug
   * (GDB's order). For the main program, the directory of its real path. */
  char objpath[PATH_MAX];
  if (!realpath(self, objpath)) return -ENOENT;
  char *slash = strrchr(objpath, '/');
  if (!slash) return -ENOENT;
  *slash = 0;
  static const char *const fmts[] = { "%s/%s", "%s/.debug/%s", "/usr/lib/debug%s/%s" };
  for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
    n = snprintf(path, sizeof path, fmts[i], objpath, link);
    if (n <= 0 || (size_t)n >= sizeof path) continue;
    rc = try_file(path, 1, bid, info->dlpi_addr, max_rows, out, NULL, 0);
    if (rc != -ENOENT) return rc;
  }
  return -ENOENT;
}
