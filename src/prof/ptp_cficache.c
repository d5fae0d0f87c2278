/*
 * ptp_cficache.c - the persistent unwind-table cache (see ptp_cficache.h for
 * the files, the checks and the bounds; the module's units are listed in
 * ptp_cfi_internal.h).
 *
 * The directory rules (0700, ours, no symlink at the last component) and
 * the atomic write are ptp_cachefile.h's, shared with the symbol cache and
 * the debug-file copies, so the caches live under one policy. A reader trusts nothing in a file: another process of
 * the same user may be writing it (it sees the old or the new file whole,
 * rename is atomic) or may have left garbage (the CRC and the row checks
 * turn it into a miss).
 *
 * Threads: no state; any thread. Not for signal handlers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <nmmintrin.h>

#include "prof/ptp_cachefile.h"
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

int ptp_cficache_write(const char *dir, const char *bid, const void *img, size_t len) {
  if (!bid_ok(bid) || len < sizeof(cfc_header) || len > PTP_CFICACHE_FILE_MAX) return -EINVAL;
  int r = ptp_cachefile_prepare_dir(dir);
  if (r < 0) return r;
  char name[PTP_CFICACHE_BID_MAX + 8];
  snprintf(name, sizeof name, "%s" CFC_SUFFIX, bid);
  if ((r = ptp_cachefile_write(dir, name, img, len)) < 0) return r;
  ptp_cachefile_bound(dir, CFC_SUFFIX, PTP_CFICACHE_DIR_MAX, name, CFC_TMP_AGE_S);
  return 0;
}
