/*
 * ptp_debugcache.c - see ptp_debugcache.h.
 *
 * DESIGN: the copy is made with libelf alone (no tool is exec'd): the source
 * is read with ELF_C_READ_MMAP, each SHF_COMPRESSED section is inflated in
 * memory with elf_compress(scn, 0, 0) (libelf's own zlib path, the one
 * libdw would use), and a new ELF (ELF_C_WRITE) gets the same ELF header,
 * the same program headers (libdwfl computes the debug file's bias from
 * them) and the same sections in the same order, laid out by libelf. The
 * directory handling (mkdir 0700, ownership checks, the size bound) is the
 * symbol cache's (ptp_cachefile.h: prepare_dir, write_with, bound); files
 * are only ever opened relative to the directory's fd with O_NOFOLLOW, so a
 * symlink planted in the directory is never followed out of it.
 * Calls only libelf/libdw and ptp_symcache's directory helpers.
 */
#include "prof/symbols/ptp_debugcache.h"
#include "prof/symbols/ptp_elffile.h"
#include "prof/cache/ptp_cachefile.h"
#include "prof/cache/ptp_fileopen.h"
#include "prof/symbols/ptp_symcache.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DC_SUFFIX ".debug"
#define DC_ID_MAX 64          /* bytes of build id */
#define DC_PENDING_MAX 8      /* requests kept between two make_pending */
#define DC_TMP_AGE_S 3600     /* a temp file this old is a dead writer's */

typedef struct dc_req {
  char *src;
  unsigned char id[DC_ID_MAX];
  int idlen;
} dc_req;

struct ptp_debugcache {
  char *dir;
  uint64_t max_bytes;
  bool checked, refused;      /* ptp_cachefile_prepare_dir ran / failed */
  dc_req pend[DC_PENDING_MAX];
  size_t npend;
  ptp_debugcache_stats st;
};

int ptp_debugcache_new(ptp_debugcache **out, const char *dir, uint64_t max_bytes) {
  ptp_debugcache *c = ptp_calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  if (!(c->dir = ptp_strdup(dir))) {
    free(c);
    return -ENOMEM;
  }
  c->max_bytes = max_bytes;
  *out = c;
  return 0;
}

void ptp_debugcache_del(ptp_debugcache *c) {
  if (!c) return;
  for (size_t i = 0; i < c->npend; i++) free(c->pend[i].src);
  free(c->dir);
  free(c);
}

void ptp_debugcache_get_stats(const ptp_debugcache *c, ptp_debugcache_stats *out) { *out = c->st; }
const char *ptp_debugcache_dir(const ptp_debugcache *c) { return c->dir; }

/* The directory's fd (O_NOFOLLOW), preparing it on first use; -EPERM once
 * it was found unusable. */
static int dc_dirfd(ptp_debugcache *c) {
  if (c->refused) return -EPERM;
  if (!c->checked) {
    c->checked = true;
    if (ptp_cachefile_prepare_subdir(c->dir) != 0) {   /* and the symbol cache's, above */
      c->refused = true;
      return -EPERM;
    }
  }
  int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  return dfd < 0 ? -errno : dfd;
}

static int dc_name(char *buf, size_t cap, const unsigned char *id, int idlen) {
  if (idlen < 2 || idlen > DC_ID_MAX || cap < (size_t)idlen * 2 + sizeof DC_SUFFIX) return -EINVAL;
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < idlen; i++) {
    buf[2 * i] = digits[id[i] >> 4];
    buf[2 * i + 1] = digits[id[i] & 15];
  }
  memcpy(buf + 2 * idlen, DC_SUFFIX, sizeof DC_SUFFIX);
  return 0;
}

bool ptp_debugcache_compressed(int fd) {
  /* pread, not a mapping: fd may be anyone's file, not yet checked */
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  if (!e) return false;
  bool comp = false;
  Elf_Scn *scn = NULL;
  while (!comp && (scn = elf_nextscn(e, scn)) != NULL) {
    GElf_Shdr sh;
    comp = gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED);
  }
  elf_end(e);
  return comp;
}

/* A copy is written whole by us (libelf fills the gaps between sections):
 * one with fewer blocks allocated than 1/DC_SPARSE_RATIO of its size is a
 * sparse file someone made (a 100 GB hole costs nothing to make and would
 * cost libdw's page faults), not ours. Generous, for file systems that
 * compress (DWARF compresses a few times over). */
#define DC_SPARSE_RATIO 16

/* The checks a copy must pass before libdw may read it (see the header):
 * what a truncated, sparse, linked or foreign file would fail. 0 or
 * -EINVAL. */
static int dc_check(const ptp_debugcache *c, int fd, const struct stat *st,
                    const unsigned char *id, int idlen) {
  if (!S_ISREG(st->st_mode) || st->st_uid != geteuid() || (st->st_mode & (S_IWGRP | S_IWOTH)))
    return -EINVAL;
  /* One name only (a second link elsewhere could be used to rewrite it),
   * within the bound of all copies, not sparse. */
  if (st->st_nlink != 1 || (uint64_t)st->st_size > c->max_bytes ||
      (uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size / DC_SPARSE_RATIO)
    return -EINVAL;
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  if (!e) return -EINVAL;
  int r = elf_kind(e) == ELF_K_ELF && ptp_elf_build_id_is(e, id, (size_t)idlen) ? 0 : -EINVAL;
  uint64_t size = (uint64_t)st->st_size;
  /* libelf accepts a section header table past the end of the file (it
   * then sees no sections): check the table lies inside it */
  GElf_Ehdr eh;
  size_t shnum = 0, seen = 0;
  if (!r && (!gelf_getehdr(e, &eh) || elf_getshdrnum(e, &shnum) != 0 || shnum < 2 ||
             eh.e_shoff > size || (size - eh.e_shoff) / (eh.e_shentsize ? eh.e_shentsize : 1) < shnum))
    r = -EINVAL;
  Elf_Scn *scn = NULL;
  while (!r && (scn = elf_nextscn(e, scn)) != NULL) {
    seen++;
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_flags & SHF_COMPRESSED)) r = -EINVAL;
    else if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset))
      r = -EINVAL;   /* truncated: libdw would silently miss the section */
  }
  if (!r && seen + 1 != shnum) r = -EINVAL;
  elf_end(e);
  return r;
}

int ptp_debugcache_open(ptp_debugcache *c, const unsigned char *id, int idlen, char **name_out) {
  char name[DC_ID_MAX * 2 + sizeof DC_SUFFIX];
  if (dc_name(name, sizeof name, id, idlen)) return -ENOENT;
  int dfd = dc_dirfd(c);
  if (dfd < 0) return dfd;
  int r = -ENOENT;
  int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    /* ELOOP: a symlink sits there; it is not ours to follow: remove it */
    if (errno == ELOOP && unlinkat(dfd, name, 0) == 0) c->st.rejected++;
    goto fail_dir;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || dc_check(c, fd, &st, id, idlen) != 0) {
    /* corrupt, truncated, foreign or not ours: never used; the next miss
     * makes a good one in its place */
    c->st.rejected++;
    (void)unlinkat(dfd, name, 0);
    goto fail_fd;
  }
  size_t need = strlen(c->dir) + 1 + sizeof name;
  if (!(*name_out = ptp_malloc(need))) { r = -ENOMEM; goto fail_fd; }
  snprintf(*name_out, need, "%s/%s", c->dir, name);
  /* mtime = last use: the size bound removes the least recently used */
  (void)futimens(fd, NULL);
  (void)fcntl(fd, F_SETFL, 0);
  c->st.used++;
  close(dfd);
  return fd;

fail_fd:
  close(fd);
fail_dir:
  close(dfd);
  return r;
}

int ptp_debugcache_want(ptp_debugcache *c, const char *src, const unsigned char *id, int idlen) {
  if (idlen < 2 || idlen > DC_ID_MAX) return -EINVAL;
  for (size_t i = 0; i < c->npend; i++)
    if (c->pend[i].idlen == idlen && memcmp(c->pend[i].id, id, (size_t)idlen) == 0) return 0;
  if (c->npend == DC_PENDING_MAX) return -ENOSPC;
  dc_req *q = &c->pend[c->npend];
  if (!(q->src = ptp_strdup(src))) return -ENOMEM;
  memcpy(q->id, id, (size_t)idlen);
  q->idlen = idlen;
  c->npend++;
  return 0;
}

/* Copies the ELF read as in into out: same header, program headers and
 * sections, compressed ones inflated. *bytes gets the sum of the section
 * sizes (checked against max before anything is written). 0 or -errno. */
static int dc_copy_elf(Elf *in, Elf *out, uint64_t max, uint64_t *bytes) {
  GElf_Ehdr eh;
  size_t shstrndx, phnum;
  if (!gelf_getehdr(in, &eh) || elf_getshdrstrndx(in, &shstrndx) != 0 ||
      elf_getphdrnum(in, &phnum) != 0)
    return -EINVAL;
  if (shstrndx >= SHN_LORESERVE) return -E2BIG;   /* extended numbering: not in debug files */
  if (!gelf_newehdr(out, gelf_getclass(in))) return -ENOMEM;
  if (phnum) {
    if (!gelf_newphdr(out, phnum)) return -ENOMEM;
    for (size_t i = 0; i < phnum; i++) {
      GElf_Phdr ph;
      if (!gelf_getphdr(in, (int)i, &ph) || !gelf_update_phdr(out, (int)i, &ph)) return -EINVAL;
    }
  }
  uint64_t total = 0;
  Elf_Scn *scn = NULL;
  while ((scn = elf_nextscn(in, scn)) != NULL) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) return -EINVAL;
    if (sh.sh_flags & SHF_COMPRESSED) {
      if (elf_compress(scn, 0, 0) < 0 || !gelf_getshdr(scn, &sh)) return -EINVAL;
    }
    if (sh.sh_type != SHT_NOBITS) total += sh.sh_size;
    if (total > max) return -EFBIG;
    Elf_Scn *os = elf_newscn(out);
    if (!os) return -ENOMEM;
    Elf_Data *d = NULL;
    while ((d = elf_getdata(scn, d)) != NULL) {
      Elf_Data *od = elf_newdata(os);
      if (!od) return -ENOMEM;
      od->d_buf = d->d_buf;   /* owned by in, which outlives elf_update */
      od->d_type = d->d_type;
      od->d_size = d->d_size;
      od->d_off = d->d_off;
      od->d_align = d->d_align;
      od->d_version = d->d_version;
    }
    if (!gelf_update_shdr(os, &sh)) return -EINVAL;
  }
  GElf_Ehdr oh;
  if (!gelf_getehdr(out, &oh)) return -EINVAL;
  memcpy(oh.e_ident, eh.e_ident, EI_NIDENT);
  oh.e_type = eh.e_type;
  oh.e_machine = eh.e_machine;
  oh.e_version = eh.e_version;
  oh.e_entry = eh.e_entry;
  oh.e_flags = eh.e_flags;
  oh.e_shstrndx = (GElf_Half)shstrndx;
  if (!gelf_update_ehdr(out, &oh)) return -EINVAL;
  *bytes = total;
  return 0;
}

/* What ptp_cachefile_write_with's fill needs to write the copy. */
typedef struct dc_fill { Elf *in; uint64_t max_bytes; } dc_fill;

static int dc_fill_copy(int fd, void *arg) {
  const dc_fill *f = arg;
  Elf *oe = elf_begin(fd, ELF_C_WRITE, NULL);
  if (!oe) return -ENOMEM;
  uint64_t bytes = 0;
  int r = dc_copy_elf(f->in, oe, f->max_bytes, &bytes);
  if (!r && elf_update(oe, ELF_C_WRITE) < 0) r = -EIO;
  elf_end(oe);
  /* Unlike the other caches' files, a copy has no checksum of its own
   * (libdw reads it in place): its data must be on disk before the rename
   * publishes it, or a crash could leave a whole-sized file with blocks
   * never written, whose DWARF would name frames wrongly. Made once per
   * debug file, after the snapshot is written. */
  if (!r && fsync(fd) != 0) r = -errno;
  return r;
}

int ptp_debugcache_make(ptp_debugcache *c, const char *src, const unsigned char *id, int idlen) {
  char name[DC_ID_MAX * 2 + sizeof DC_SUFFIX];
  int r = dc_name(name, sizeof name, id, idlen);
  if (r) return r;
  struct stat sst;
  int in = ptp_file_open_regular(AT_FDCWD, src, 0, PTP_FILE_ELF_MAX, &sst);
  if (in < 0) return in;
  /* Mapped only when nobody else can truncate it under us (root's
   * /usr/lib/debug, or ours); anyone else's is read with pread. */
  Elf *ie = elf_begin(in, ptp_file_trusted(&sst) ? ELF_C_READ_MMAP : ELF_C_READ, NULL);
  r = -EINVAL;
  if (!ie || elf_kind(ie) != ELF_K_ELF || !ptp_elf_build_id_is(ie, id, (size_t)idlen)) goto fail_in;
  int dfd = dc_dirfd(c);   /* the directory's safety check */
  if (dfd < 0) { r = dfd; goto fail_in; }
  close(dfd);
  /* A concurrent writer may rename its copy first: ours replaces it whole
   * (rename is atomic), both are complete files. */
  dc_fill f = { ie, c->max_bytes };
  if ((r = ptp_cachefile_write_with(c->dir, name, dc_fill_copy, &f)) != 0) goto fail_in;
  elf_end(ie);
  close(in);
  c->st.made++;
  c->st.removed += ptp_cachefile_bound(c->dir, DC_SUFFIX, c->max_bytes, name, DC_TMP_AGE_S);
  return 0;

fail_in:
  if (ie) elf_end(ie);
  close(in);
  return r;
}

int ptp_debugcache_make_pending(ptp_debugcache *c) {
  int first = 0;
  for (size_t i = 0; i < c->npend; i++) {
    int r = ptp_debugcache_make(c, c->pend[i].src, c->pend[i].id, c->pend[i].idlen);
    if (r) {
      c->st.errors++;
      if (!first) first = r;
    }
    free(c->pend[i].src);
  }
  c->npend = 0;
  return first;
}
