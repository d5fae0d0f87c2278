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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof/cache/ptp_cachefile.h"
#include "prof/unwind/ptp_cficache.h"
#include "prof/cache/ptp_crc.h"
#include "prof/symbols/ptp_symcache.h"
#include "prof/ptp_alloc.h"

#define CFC_MAGIC "PTPCFI\r\n"
#define CFC_SUFFIX ".cfi"
#define CFC_TMP_AGE_S 3600

/* Then nrules rules and nrows rows (ptp_unwind.h), 8 bytes each: the
 * rules start 8-aligned (the header is a multiple of 8), and so do the
 * rows. */
typedef struct cfc_header {
  char magic[8];
  uint32_t version;
  uint32_t rowsize;                  /* sizeof(ptp_cfi_row) == sizeof(ptp_cfi_rule) */
  uint64_t nrows;
  uint64_t key;
  uint32_t crc;                      /* CRC of the rules, then the rows (algorithm: algo) */
  uint32_t algo;                     /* ptp_crc.h id: PTP_CRC_C3 or PTP_CRC_ZLIB */
  uint64_t nrules;
  char build_id[PTP_CFICACHE_BID_MAX + 6];   /* NUL-terminated, zero-padded */
} cfc_header;
_Static_assert(sizeof(cfc_header) % 8 == 0, "rules and rows start 8-aligned");

/* ---- checksum ------------------------------------------------------------ */

/* The checksum: ptp_crc.h's best algorithm (id in the header: 2 zlib
 * crc32, 3 the three-lane CRC-32C) over the rules as one block, then the
 * rows cut into blocks of CFC_BLOCK_ROWS rows (the reader checks each
 * block's rows right after summing it, while they are in the cache). A
 * file of another algorithm (id 1, the single-chain CRC-32C of earlier
 * versions, included) is stale: rebuilt and rewritten. */
#define CFC_BLOCK_ROWS 2304                 /* 18 KiB: stays in L1/L2 */
#define CFC_BLOCK_BYTES (CFC_BLOCK_ROWS * sizeof(ptp_cfi_row))

/* The checksum of a table's rules and rows (the writer's; the reader sums
 * block by block in tab_verify, the same blocks). */
static uint32_t tab_crc(unsigned algo, const ptp_cfi_rule *rules, size_t nrules,
                        const ptp_cfi_row *rows, size_t nrows) {
  uint32_t crc = ptp_crc_blocks(algo, 0, rules, nrules * sizeof *rules, 0);
  return ptp_crc_blocks(algo, crc, rows, nrows * sizeof *rows, CFC_BLOCK_BYTES);
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

uint64_t ptp_cfi_hash(uint64_t h, const void *p, size_t n) {
  /* Eight bytes per step: (h ^ w) * odd constant, then a shift to bring the
   * high bits down (a multiply only carries upward). The byte-wise FNV-1a
   * it replaces took a multiply per byte over every .eh_frame_hdr, three
   * times per object at each ptprof_start (the set's identity, the lazy
   * build's check, the cache key). */
  const uint8_t *b = p;
  for (; n >= 8; b += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, b, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
  }
  for (; n; b++, n--) {
    h = (h ^ *b) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
  }
  return h;
}

int ptp_cficache_ident(const struct dl_phdr_info *info, const ptp_cfi_objinfo *o,
                       char bid[PTP_CFICACHE_BID_MAX], uint64_t *key) {
  if (ptp_elfnote_build_id_hex(info, bid) < 0) return -ENOENT;
  uint64_t h = 0xcbf29ce484222325ull ^ PTP_CFICACHE_VERSION;
  for (int i = 0; i < o->ntext; i++) {
    uint64_t rel[2] = { o->text[i].lo - info->dlpi_addr, o->text[i].hi - info->dlpi_addr };
    h = ptp_cfi_hash(h, rel, sizeof rel);
  }
  if (o->hdr) {
    uint64_t hrel = o->hdr - info->dlpi_addr;
    h = ptp_cfi_hash(h, &hrel, sizeof hrel);
    h = ptp_cfi_hash(h, (const void *)o->hdr, o->hdrsz);
  }
  *key = h;
  return 0;
}

/* ---- reading ------------------------------------------------------------- */

static int bid_ok(const char *b) { return ptp_cachefile_hex_name_ok(b, PTP_CFICACHE_BID_MAX - 1); }

static int file_path(char *buf, size_t cap, const char *dir, const char *bid) {
  int n = snprintf(buf, cap, "%s/%s" CFC_SUFFIX, dir, bid);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* The checksum and the checks in one pass over the copy, a block at a
 * time, so the checks read what the checksum has just brought into the
 * cache (no page is read twice from memory). The checks: every rule's kind
 * is known; the walker's binary search needs sorted, disjoint rows, each
 * naming a rule of the table; a row outside the object would claim PCs the
 * object does not have. Rows are bias-relative, so is the object's range
 * [rlo, rhi). The conditions are or-ed without branches (a valid file, the
 * common case, takes none). Counts the rows whose rule is NORULE into
 * *norule. Returns 0 or -EBADMSG. */
static int tab_verify(unsigned algo, const ptp_cfi_rule *rules, size_t nrules,
                      const ptp_cfi_row *rows, size_t n, uintptr_t rlo, uintptr_t rhi,
                      uint32_t want, size_t *norule) {
  uint32_t crc = ptp_crc_block(algo, 0, rules, nrules * sizeof *rules);
  unsigned bad = 0;
  for (size_t i = 0; i < nrules; i++) bad |= (unsigned)(rules[i].kind > PTP_CFI_END);
  if (bad) return -EBADMSG;
  uintptr_t prev_end = rlo;
  size_t nr = 0;
  for (size_t b = 0; b < n; b += CFC_BLOCK_ROWS) {
    size_t e = n - b < CFC_BLOCK_ROWS ? n : b + CFC_BLOCK_ROWS;
    crc = ptp_crc_block(algo, crc, rows + b, (e - b) * sizeof *rows);
    for (size_t i = b; i < e; i++) {
      const uintptr_t st = rows[i].start, end = st + rows[i].len;
      const size_t ru = rows[i].rule;
      bad |= (unsigned)(st < prev_end) | (unsigned)(rows[i].len == 0) | (unsigned)(ru >= nrules);
      prev_end = end;
      nr += ru < nrules && rules[ru].kind == PTP_CFI_NORULE;
    }
    if (bad) return -EBADMSG;
  }
  /* Sorted, disjoint, non-empty, the first at or above rlo: every row lies
   * in [rlo, rhi) if the last one ends by rhi. */
  if (prev_end > rhi || crc != want) return -EBADMSG;
  *norule = nr;
  return 0;
}

int ptp_cficache_parse(const void *img, size_t len, const char *bid, uint64_t key, uintptr_t bias,
                       uintptr_t lo, uintptr_t hi, size_t max_rows, ptp_cfi_tab *out) {
  if (!bid_ok(bid) || lo < bias || hi < lo || ((uintptr_t)img & 7)) return -EINVAL;
  if (len < sizeof(cfc_header)) return -EBADMSG;
  cfc_header h;
  memcpy(&h, img, sizeof h);
  if (memcmp(h.magic, CFC_MAGIC, 8) != 0 || h.rowsize != sizeof(ptp_cfi_row)) return -EBADMSG;
  if (h.version != PTP_CFICACHE_VERSION || h.key != key || h.algo != ptp_crc_algo()) return -ESTALE;
  if (memchr(h.build_id, 0, sizeof h.build_id) == NULL || strcmp(h.build_id, bid) != 0)
    return -EBADMSG;
  /* The header's counts must be the image's size exactly: the rules and
   * rows read below lie inside it. */
  const size_t body = len - sizeof h;
  if (body % sizeof(ptp_cfi_row) || h.nrules > PTP_CFI_RULES_MAX ||
      h.nrows > body / sizeof(ptp_cfi_row) || h.nrules != body / sizeof(ptp_cfi_row) - h.nrows)
    return -EBADMSG;
  if (h.nrows + h.nrules > max_rows) return -E2BIG;
  const ptp_cfi_rule *rules = (const ptp_cfi_rule *)((const uint8_t *)img + sizeof h);
  const ptp_cfi_row *rows = (const ptp_cfi_row *)(rules + h.nrules);
  size_t norule = 0;
  int r = tab_verify(h.algo, rules, (size_t)h.nrules, rows, (size_t)h.nrows, lo - bias, hi - bias,
                     h.crc, &norule);
  if (r < 0) return r;
  *out = (ptp_cfi_tab){ .nrows = (size_t)h.nrows, .nrules = (size_t)h.nrules,
                        .bytes = sizeof *out + len, .bias = bias, .rows = rows, .rules = rules,
                        .norule = norule, .map = NULL, .maplen = 0 };
  return 0;
}

int ptp_cficache_load(const char *dir, const char *bid, uint64_t key, uintptr_t bias,
                      uintptr_t lo, uintptr_t hi, size_t max_rows, ptp_cfi_tab **out) {
  *out = NULL;
  if (!bid_ok(bid) || lo < bias || hi < lo) return -EINVAL;
  char path[PATH_MAX];
  if (file_path(path, sizeof path, dir, bid)) return -ENAMETOOLONG;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -errno;
  struct stat st;
  /* ptp_cachefile_read_fd's rules (regular, ours, one link, not writable
   * by others, in a directory of ours, within the bounds), and a copy in
   * memory of its own, read-only: the signal handler reads the rows in
   * place, and a copy cannot be truncated under it (a mapping of the file
   * could: SIGBUS in the handler). The rows are used where they were read
   * (bias-relative, see ptp_cfi_tab): no relocation, no second copy. */
  void *map;
  int r = ptp_cachefile_read_fd(fd, dir, 2, sizeof(cfc_header), PTP_CFICACHE_FILE_MAX, &map, &st);
  close(fd);
  if (r < 0) return r;
  size_t maplen = (size_t)st.st_size;
  ptp_cfi_tab tab, *t;
  if ((r = ptp_cficache_parse(map, maplen, bid, key, bias, lo, hi, max_rows, &tab)) < 0)
    goto fail_map;
  if (!(t = ptp_malloc(sizeof *t))) { r = -ENOMEM; goto fail_map; }
  tab.map = map;
  tab.maplen = maplen;
  *t = tab;
  *out = t;
  return 0;

fail_map:
  munmap(map, maplen);
  return r;
}

/* ---- writing ------------------------------------------------------------- */

int ptp_cficache_image(const char *bid, uint64_t key, uintptr_t bias, const ptp_cfi_tab *t,
                       void **img, size_t *len) {
  *img = NULL;
  *len = 0;
  if (!bid_ok(bid)) return -EINVAL;
  /* The table's rows are relative to its bias, and the file's to the
   * object's: the same number for every table this module makes. */
  if (t->bias != bias) return -EINVAL;
  if (t->nrows + t->nrules > (PTP_CFICACHE_FILE_MAX - sizeof(cfc_header)) / sizeof(ptp_cfi_row))
    return -E2BIG;
  size_t n = sizeof(cfc_header) + t->nrules * sizeof(ptp_cfi_rule) + t->nrows * sizeof(ptp_cfi_row);
  uint8_t *b = ptp_calloc(1, n);
  if (!b) return -ENOMEM;
  ptp_cfi_rule *rules = (ptp_cfi_rule *)(b + sizeof(cfc_header));
  ptp_cfi_row *rows = (ptp_cfi_row *)(rules + t->nrules);
  /* Neither struct has padding (ptp_cfi_parse.c asserts their sizes), so
   * a copy carries no stray bytes of the process into the file, and
   * identical tables give identical files. */
  if (t->nrules) memcpy(rules, t->rules, t->nrules * sizeof *rules);
  if (t->nrows) memcpy(rows, t->rows, t->nrows * sizeof *rows);
  cfc_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CFC_MAGIC, 8);
  h.version = PTP_CFICACHE_VERSION;
  h.rowsize = sizeof(ptp_cfi_row);
  h.nrows = t->nrows;
  h.nrules = t->nrules;
  h.key = key;
  h.algo = ptp_crc_algo();
  h.crc = tab_crc(h.algo, rules, t->nrules, rows, t->nrows);
  snprintf(h.build_id, sizeof h.build_id, "%s", bid);
  memcpy(b, &h, sizeof h);
  *img = b;
  *len = n;
  return 0;
}

int ptp_cficache_write(const char *dir, const char *bid, const void *img, size_t len) {
  if (!bid_ok(bid) || len < sizeof(cfc_header) || len > PTP_CFICACHE_FILE_MAX) return -EINVAL;
  int r = ptp_cachefile_prepare_subdir(dir);   /* and its parent, the symbol cache's */
  if (r < 0) return r;
  char name[PTP_CFICACHE_BID_MAX + 8];
  snprintf(name, sizeof name, "%s" CFC_SUFFIX, bid);
  if ((r = ptp_cachefile_write(dir, name, img, len)) < 0) return r;
  ptp_cachefile_bound(dir, CFC_SUFFIX, PTP_CFICACHE_DIR_MAX, name, CFC_TMP_AGE_S);
  return 0;
}
