/*
 * ptp_cficache.c - the persistent unwind-table cache (see ptp_cficache.h for
 * the files, the checks and the bounds; the module's units are listed in
 * ptp_cfi_internal.h).
 *
 * The directory rules (0700, ours, no symlink at the last component) are
 * the symbol cache's own (ptp_symcache_prepare_dir), so both caches live
 * under one policy. A reader trusts nothing in a file: another process of
 * the same user may be writing it (it sees the old or the new file whole,
 * rename is atomic) or may have left garbage (the CRC and the row checks
 * turn it into a miss).
 *
 * Threads: no state; any thread. Not for signal handlers.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <nmmintrin.h>

#include "prof/ptp_cficache.h"
#include "prof/ptp_symcache.h"

#define CFC_MAGIC "PTPCFI\r\n"
#define CFC_SUFFIX ".cfi"
#define CFC_TMP_AGE_S 3600

typedef struct cfc_header {
  char magic[8];
  uint32_t version;
  uint32_t rowsize;                  /* sizeof(ptp_cfi_row) */
  uint64_t nrows;
  uint64_t key;
  uint32_t crc;                      /* CRC of the rows (algorithm: algo) */
  uint32_t algo;                     /* CFC_CRC32C or CFC_CRC32 */
  char build_id[PTP_CFICACHE_BID_MAX + 6];   /* NUL-terminated, zero-padded */
} cfc_header;

/* ---- checksum ------------------------------------------------------------ */

/* The rows' checksum. CRC-32C with the SSE4.2 crc32 instruction where the
 * CPU has it: 0.27 ms for the 2.2 MB of a preloaded sqlite3's tables here,
 * against 1.0 ms for zlib's (table-driven) crc32, which is the fallback. A
 * file written with the other algorithm is a miss (rebuilt and rewritten). */
#define CFC_CRC32C 1u
#define CFC_CRC32 2u

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const uint8_t *p, size_t n) {
  uint64_t c = 0xffffffffu;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  for (; n; p++, n--) c = _mm_crc32_u8((uint32_t)c, *p);
  return ~(uint32_t)c;
}

static uint32_t crc_algo(void) {
  static _Atomic uint32_t algo;
  uint32_t a = atomic_load_explicit(&algo, memory_order_relaxed);
  if (!a) {
    __builtin_cpu_init();               /* we may run in a preload constructor */
    a = __builtin_cpu_supports("sse4.2") ? CFC_CRC32C : CFC_CRC32;
    atomic_store_explicit(&algo, a, memory_order_relaxed);
  }
  return a;
}

static uint32_t rows_crc(const void *p, size_t n) {
  if (crc_algo() == CFC_CRC32C) return crc32c_hw(p, n);
  uLong c = crc32(0, NULL, 0);
  const uint8_t *b = p;
  while (n) {                           /* zlib takes uInt lengths */
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, b, k);
    b += k;
    n -= k;
  }
  return (uint32_t)c;
}

/* ---- directory ----------------------------------------------------------- */

int ptp_cficache_dir(char *buf, size_t cap) {
  char sym[PATH_MAX];
  int r = ptp_symcache_default_dir(sym, sizeof sym);
  if (r < 0) return r;
  int n = snprintf(buf, cap, "%s/unwind", sym);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* ---- identity ------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

int ptp_cficache_ident(const struct dl_phdr_info *info, const ptp_cfi_objinfo *o,
                       char bid[PTP_CFICACHE_BID_MAX], uint64_t *key) {
  if (ptp_cfi_build_id(info, o, bid) < 0) return -ENOENT;
  uint64_t h = 0xcbf29ce484222325ull ^ PTP_CFICACHE_VERSION;
  for (int i = 0; i < o->ntext; i++) {
    uint64_t rel[2] = { o->text[i].lo - info->dlpi_addr, o->text[i].hi - info->dlpi_addr };
    h = fnv(h, rel, sizeof rel);
  }
  if (o->hdr) {
    uint64_t hrel = o->hdr - info->dlpi_addr;
    h = fnv(h, &hrel, sizeof hrel);
    h = fnv(h, (const void *)o->hdr, o->hdrsz);
  }
  *key = h;
  return 0;
}

/* ---- reading ------------------------------------------------------------- */

static int bid_ok(const char *b) {
  size_t n = strnlen(b, PTP_CFICACHE_BID_MAX);
  if (n < 2 || n >= PTP_CFICACHE_BID_MAX) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f'))) return 0;
  return 1;
}

static int file_path(char *buf, size_t cap, const char *dir, const char *bid) {
  int n = snprintf(buf, cap, "%s/%s" CFC_SUFFIX, dir, bid);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Reads exactly n bytes at the current offset. */
static int read_all(int fd, void *p, size_t n) {
  uint8_t *b = p;
  while (n) {
    ssize_t k = read(fd, b, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -EBADMSG;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

int ptp_cficache_load(const char *dir, const char *bid, uint64_t key, uintptr_t bias,
                      uintptr_t lo, uintptr_t hi, size_t max_rows, ptp_cfi_tab **out) {
  *out = NULL;
  if (!bid_ok(bid)) return -EINVAL;
  char path[PATH_MAX];
  if (file_path(path, sizeof path, dir, bid)) return -ENAMETOOLONG;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT ? -ENOENT : -EBADMSG;
  int r = -EBADMSG;
  ptp_cfi_tab *t = NULL;
  struct stat st;
  cfc_header h;
  /* Only a regular file of ours that nobody else may write, within bounds. */
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) || st.st_size < (off_t)sizeof h ||
      (uint64_t)st.st_size > PTP_CFICACHE_FILE_MAX)
    goto fail_fd;
  if (read_all(fd, &h, sizeof h)) goto fail_fd;
  if (memcmp(h.magic, CFC_MAGIC, 8) != 0 || h.rowsize != sizeof(ptp_cfi_row)) goto fail_fd;
  if (h.version != PTP_CFICACHE_VERSION || h.key != key || h.algo != crc_algo()) {
    r = -ESTALE;
    goto fail_fd;
  }
  if (memchr(h.build_id, 0, sizeof h.build_id) == NULL || strcmp(h.build_id, bid) != 0)
    goto fail_fd;
  if (h.nrows != ((uint64_t)st.st_size - sizeof h) / sizeof(ptp_cfi_row) ||
      ((uint64_t)st.st_size - sizeof h) % sizeof(ptp_cfi_row))
    goto fail_fd;
  if (h.nrows > max_rows) { r = -E2BIG; goto fail_fd; }
  size_t bytes = sizeof *t + (size_t)h.nrows * sizeof(ptp_cfi_row);
  if (!(t = malloc(bytes))) { r = -ENOMEM; goto fail_fd; }
  t->nrows = (size_t)h.nrows;
  t->bytes = bytes;
  if (read_all(fd, t->rows, t->nrows * sizeof(ptp_cfi_row))) goto fail_tab;
  if (rows_crc(t->rows, t->nrows * sizeof(ptp_cfi_row)) != h.crc) goto fail_tab;
  /* Relocate and check: the walker's binary search needs sorted, disjoint
   * rows, and a row outside the object would claim another object's PCs. */
  uintptr_t prev_end = lo;
  for (size_t i = 0; i < t->nrows; i++) {
    ptp_cfi_row *row = &t->rows[i];
    if (row->kind > PTP_CFI_END || row->len == 0 || row->start > UINTPTR_MAX - bias) goto fail_tab;
    row->start += bias;
    if (row->start < prev_end || row->start > hi || row->len > hi - row->start) goto fail_tab;
    prev_end = row->start + row->len;
  }
  close(fd);
  *out = t;
  return 0;

fail_tab:
  free(t);
fail_fd:
  close(fd);
  return r;
}

/* ---- writing ------------------------------------------------------------- */

int ptp_cficache_image(const char *bid, uint64_t key, uintptr_t bias, const ptp_cfi_tab *t,
                       void **img, size_t *len) {
  *img = NULL;
  *len = 0;
  if (!bid_ok(bid)) return -EINVAL;
  if (t->nrows > (PTP_CFICACHE_FILE_MAX - sizeof(cfc_header)) / sizeof(ptp_cfi_row)) return -E2BIG;
  size_t n = sizeof(cfc_header) + t->nrows * sizeof(ptp_cfi_row);
  uint8_t *b = calloc(1, n);
  if (!b) return -ENOMEM;
  ptp_cfi_row *rows = (ptp_cfi_row *)(b + sizeof(cfc_header));
  for (size_t i = 0; i < t->nrows; i++) {
    if (t->rows[i].start < bias) { free(b); return -EINVAL; }
    rows[i] = t->rows[i];
    rows[i].start -= bias;
  }
  cfc_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CFC_MAGIC, 8);
  h.version = PTP_CFICACHE_VERSION;
  h.rowsize = sizeof(ptp_cfi_row);
  h.nrows = t->nrows;
  h.key = key;
  h.algo = crc_algo();
  h.crc = rows_crc(rows, t->nrows * sizeof(ptp_cfi_row));
  snprintf(h.build_id, sizeof h.build_id, "%s", bid);
  memcpy(b, &h, sizeof h);
  *img = b;
  *len = n;
  return 0;
}

static int write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? -errno : -EIO;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Removes stale temp files, then the oldest .cfi files (never keep) while
 * the directory holds more than PTP_CFICACHE_DIR_MAX bytes of them. Best
 * effort: what cannot be listed or removed stays. */
static void bound_dir(int dfd, const char *keep) {
  int fd2 = dup(dfd);
  DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
  if (!d) {
    if (fd2 >= 0) close(fd2);
    return;
  }
  typedef struct ent { char name[NAME_MAX + 1]; int64_t mt; uint64_t size; } ent;
  ent *v = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  time_t now = time(NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    size_t l = strlen(nm);
    struct stat st;
    if (fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (nm[0] == '.' && l > 4 && !strcmp(nm + l - 4, ".tmp")) {
      if (now - st.st_mtime > CFC_TMP_AGE_S) unlinkat(dfd, nm, 0);
      continue;
    }
    if (l <= strlen(CFC_SUFFIX) || strcmp(nm + l - strlen(CFC_SUFFIX), CFC_SUFFIX) != 0) continue;
    total += (uint64_t)st.st_size;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      ent *nv = realloc(v, nc * sizeof *nv);
      if (!nv) break;
      v = nv;
      cap = nc;
    }
    snprintf(v[n].name, sizeof v[n].name, "%s", nm);
    v[n].mt = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    v[n].size = (uint64_t)st.st_size;
    n++;
  }
  while (total > PTP_CFICACHE_DIR_MAX) {
    size_t oldest = n;
    for (size_t i = 0; i < n; i++)
      if (v[i].size && strcmp(v[i].name, keep) != 0 && (oldest == n || v[i].mt < v[oldest].mt))
        oldest = i;
    if (oldest == n) break;
    unlinkat(dfd, v[oldest].name, 0);
    total -= v[oldest].size;
    v[oldest].size = 0;
  }
  free(v);
  closedir(d);
}

int ptp_cficache_write(const char *dir, const char *bid, const void *img, size_t len) {
  if (!bid_ok(bid) || len < sizeof(cfc_header) || len > PTP_CFICACHE_FILE_MAX) return -EINVAL;
  int r = ptp_symcache_prepare_dir(dir);
  if (r < 0) return r;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0) return -errno;
  char name[PTP_CFICACHE_BID_MAX + 8], tmp[PTP_CFICACHE_BID_MAX + 64];
  snprintf(name, sizeof name, "%s" CFC_SUFFIX, bid);
  static _Atomic unsigned seq;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    snprintf(tmp, sizeof tmp, ".%s.%d.%u.tmp", bid, (int)getpid(), (unsigned)seq++);
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) { r = -errno; goto fail_dfd; }
  /* 0600 whatever the umask (it can only remove bits, but say it). */
  if (fchmod(fd, 0600) != 0 || (r = write_all(fd, img, len)) != 0 || fsync(fd) != 0) {
    if (!r) r = -errno;
    goto fail_tmp;
  }
  if (close(fd) != 0) { fd = -1; r = -errno; goto fail_tmp; }
  fd = -1;
  if (renameat(dfd, tmp, dfd, name) != 0) { r = -errno; goto fail_tmp; }
  (void)fsync(dfd);
  bound_dir(dfd, name);
  close(dfd);
  return 0;

fail_tmp:
  if (fd >= 0) close(fd);
  unlinkat(dfd, tmp, 0);
fail_dfd:
  close(dfd);
  return r;
}
