/*
 * test_cficache.c - the persistent unwind-table cache (ptp_cficache) with
 * real files, and its identity of real loaded objects:
 *   - miss (no file), then save, then hit: the rows read back, relocated to
 *     another load bias, equal the saved ones field by field;
 *   - an object of another build id misses and leaves the file alone; the
 *     same build id with another content key is stale;
 *   - a corrupt byte, a truncated file, rows out of order or outside the
 *     object, a rule of unknown kind, a row naming a rule the file lacks,
 *     an empty row (each with a valid checksum), a file others may write
 *     and a symlink are all refused, and a save replaces the bad file;
 *   - a table read from the cache is the file mapped in place; it stays
 *     whole when another process replaces the file, and a file whose size
 *     disagrees with its header (or with a second link, or in a directory
 *     others may write) is refused, then replaced by the next save;
 *   - two processes saving the same build id at once while a third reads:
 *     every read is a whole table of one of the two writers, never torn,
 *     and no temp file is left;
 *   - files 0600 in a directory made 0700, under umask 000;
 *   - libc's build id (from its PT_NOTE in memory) and key are found and
 *     stable, and libc's real table survives a round trip;
 *   - the checksum of a known table is pinned for each algorithm (zlib:
 *     computed in Python from the fixture's definition), so files already
 *     on disk keep verifying;
 *   - a table read from the cache is a copy: the file truncated to nothing
 *     under it (in place, as `: > file` does) leaves every row readable,
 *     no SIGBUS;
 *   - the directory rule covers the symbol cache's directory above
 *     unwind/: refused when it is writable by others, a symlink, or (as
 *     root) another user's.
 */
#include "pt_test.h"
#include "cfi_tab_fixture.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/unwind/ptp_cficache.h"
#include "prof/cache/ptp_crc.h"

#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BID_A "0123456789abcdef0123456789abcdef01234567"
#define BID_B "fedcba9876543210fedcba9876543210fedcba98"

static void save(const char *dir, const char *bid, uint64_t key, uintptr_t bias,
                 const ptp_cfi_tab *t) {
  void *img;
  size_t len;
  PT_ASSERT_INT_EQ(ptp_cficache_image(bid, key, bias, t, &img, &len), 0);
  PT_ASSERT_INT_EQ(ptp_cficache_write(dir, bid, img, len), 0);
  free(img);
}

/* Loads (bid, key) at bias with the object range [bias, bias + 1 MiB). */
static int load(const char *dir, const char *bid, uint64_t key, uintptr_t bias, ptp_cfi_tab **out) {
  return ptp_cficache_load(dir, bid, key, bias, bias, bias + (1u << 20), 1u << 20, out);
}

static void same_rows(const ptp_cfi_tab *a, uintptr_t abase, const ptp_cfi_tab *b,
                      uintptr_t bbase) {
  PT_ASSERT_UINT_EQ(a->nrows, b->nrows);
  PT_ASSERT_UINT_EQ(a->nrules, b->nrules);
  PT_ASSERT_UINT_EQ(a->norule, b->norule);
  for (size_t i = 0; i < a->nrows; i++) {
    PT_ASSERT_UINT_EQ(a->rows[i].start + a->bias - abase, b->rows[i].start + b->bias - bbase);
    PT_ASSERT_UINT_EQ(a->rows[i].len, b->rows[i].len);
    PT_ASSERT(a->rows[i].rule < a->nrules && b->rows[i].rule < b->nrules);
    const ptp_cfi_rule *ra = &a->rules[a->rows[i].rule], *rb = &b->rules[b->rows[i].rule];
    PT_ASSERT_INT_EQ(ra->cfa_off, rb->cfa_off);
    PT_ASSERT_INT_EQ(ra->rbp_off, rb->rbp_off);
    PT_ASSERT_INT_EQ(ra->ra_off, rb->ra_off);
    PT_ASSERT_INT_EQ(ra->kind, rb->kind);
  }
}

static void file_of(char *buf, size_t cap, const char *dir, const char *bid) {
  int n = snprintf(buf, cap, "%s/%s.cfi", dir, bid);
  PT_ASSERT(n > 0 && (size_t)n < cap);
}

/* A fresh cache directory <tmp>/unwind in dir, BID_A's file name in path;
 * returns the temp root. */
static char *fresh_cache(const char *name, char dir[PATH_MAX], char path[PATH_MAX]) {
  char *root = pt_tmpdir(name);
  snprintf(dir, PATH_MAX, "%s/unwind", root);
  file_of(path, PATH_MAX, dir, BID_A);
  return root;
}

PT_TEST(prof_cficache_miss_hit_bid) {
  char *root = pt_tmpdir("cficache");
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/a/unwind", root);
  mode_t old = umask(0);
  ptp_cfi_tab *got = NULL;
  PT_ASSERT_INT_EQ(load(dir, BID_A, 42, 0x10000000, &got), -ENOENT);
  ptp_cfi_tab *t = ptt_cfi_tab_make(0x10000000, 5000, 0);
  save(dir, BID_A, 42, 0x10000000, t);
  umask(old);
  /* Hit at another bias (ASLR): same rows, relocated. */
  PT_ASSERT_INT_EQ(load(dir, BID_A, 42, 0x7f0000000000, &got), 0);
  same_rows(t, 0x10000000, got, 0x7f0000000000);
  ptp_cfi_tab_free(got);
  /* Modes: file 0600, created directory 0700, though umask was 0. */
  char path[PATH_MAX];
  struct stat st;
  file_of(path, sizeof path, dir, BID_A);
  PT_ASSERT_INT_EQ(stat(path, &st), 0);
  PT_ASSERT_INT_EQ(st.st_mode & 07777, 0600);
  PT_ASSERT_INT_EQ(stat(dir, &st), 0);
  PT_ASSERT_INT_EQ(st.st_mode & 07777, 0700);
  /* Another build id misses, and the first file stays. */
  PT_ASSERT_INT_EQ(load(dir, BID_B, 42, 0x10000000, &got), -ENOENT);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 42, 0x10000000, &got), 0);
  ptp_cfi_tab_free(got);
  /* Same build id, other content (key): stale, not used. */
  PT_ASSERT_INT_EQ(load(dir, BID_A, 43, 0x10000000, &got), -ESTALE);
  PT_ASSERT(got == NULL);
  /* More rows than the caller may take: refused as too big. */
  PT_ASSERT_INT_EQ(ptp_cficache_load(dir, BID_A, 42, 0x10000000, 0x10000000, 0x10100000, 100, &got),
                   -E2BIG);
  /* Not hex: refused before any file access. */
  PT_ASSERT_INT_EQ(load(dir, "../../etc", 42, 0, &got), -EINVAL);
  free(t);
}

PT_TEST(prof_cficache_corrupt) {
  char dir[PATH_MAX], path[PATH_MAX];
  char *root = fresh_cache("cficache-bad", dir, path);
  const uintptr_t bias = 0x40000000;
  ptp_cfi_tab *t = ptt_cfi_tab_make(bias, 3000, 0), *got = NULL;
  save(dir, BID_A, 7, bias, t);
  /* One flipped byte in the rows: the checksum refuses it. */
  int fd = open(path, O_RDWR);
  PT_ASSERT(fd >= 0);
  off_t off = (off_t)lseek(fd, 0, SEEK_END) - 100;
  unsigned char c;
  PT_ASSERT_INT_EQ(pread(fd, &c, 1, off), 1);
  c ^= 0x40;
  PT_ASSERT_INT_EQ(pwrite(fd, &c, 1, off), 1);
  close(fd);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EBADMSG);
  /* A save replaces it. */
  save(dir, BID_A, 7, bias, t);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), 0);
  ptp_cfi_tab_free(got);
  /* Truncated mid-row, and cut to half the header. */
  PT_ASSERT_INT_EQ(truncate(path, 8 * 1000 + 130), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EBADMSG);
  PT_ASSERT_INT_EQ(truncate(path, 20), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EBADMSG);
  /* Rows out of order, with a valid checksum (the writer is trusted for
   * nothing): refused. */
  ptp_cfi_tab *bad = ptt_cfi_tab_make(bias, 10, 0);
  ptp_cfi_row *br = (ptp_cfi_row *)bad->rows, tmp = br[3];
  br[3] = br[4];
  br[4] = tmp;
  save(dir, BID_A, 7, bias, bad);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EBADMSG);
  /* A row outside the object's range: refused. */
  free(bad);
  bad = ptt_cfi_tab_make(bias, 10, 0);
  ((ptp_cfi_row *)bad->rows)[9].start = 2u << 20;
  save(dir, BID_A, 7, bias, bad);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EBADMSG);
  /* A bad rule kind: refused. */
  free(bad);
  bad = ptt_cfi_tab_make(bias, 10, 0);
  ((ptp_cfi_rule *)bad->rules)[2].kind = 9;
  save(dir, BID_A, 7, bias, bad);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EBADMSG);
  /* A row naming a rule the file does not have: refused (the walker
   * indexes the rules with it unchecked). */
  free(bad);
  bad = ptt_cfi_tab_make(bias, 10, 0);
  ((ptp_cfi_row *)bad->rows)[5].rule = (uint16_t)bad->nrules;
  save(dir, BID_A, 7, bias, bad);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EBADMSG);
  /* An empty row: refused. */
  free(bad);
  bad = ptt_cfi_tab_make(bias, 10, 0);
  ((ptp_cfi_row *)bad->rows)[6].len = 0;
  save(dir, BID_A, 7, bias, bad);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EBADMSG);
  /* A valid file others may write: refused (planted rows would lie). */
  save(dir, BID_A, 7, bias, t);
  PT_ASSERT_INT_EQ(chmod(path, 0622), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -EPERM);
  /* A symlink at the file's name, to a valid file: not followed. */
  char other[PATH_MAX];
  snprintf(other, sizeof other, "%s/elsewhere.cfi", root);
  PT_ASSERT_INT_EQ(rename(path, other), 0);
  PT_ASSERT_INT_EQ(chmod(other, 0600), 0);
  PT_ASSERT_INT_EQ(symlink(other, path), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), -ELOOP);
  /* A save replaces the link with a file (rename over the name). */
  save(dir, BID_A, 7, bias, t);
  struct stat st;
  PT_ASSERT_INT_EQ(lstat(path, &st), 0);
  PT_ASSERT(S_ISREG(st.st_mode));
  PT_ASSERT_INT_EQ(load(dir, BID_A, 7, bias, &got), 0);
  same_rows(t, bias, got, bias);
  ptp_cfi_tab_free(got);
  free(bad);
  free(t);
}

/* A table read from the cache is a mapping of the file, used in place: the
 * walker's lookup relocates by the table's bias. Another process replacing
 * the file (rename over the name, what every writer does) leaves the
 * mapped table whole and unchanged, and a new load sees the new file. A
 * file whose size disagrees with its header (cut at a row boundary, cut
 * inside the header, one row appended) is refused without a fault, and a
 * save (what the builder does after a miss) makes it a hit again. */
PT_TEST(prof_cficache_mapped_replace_truncate) {
  char dir[PATH_MAX], path[PATH_MAX];
  char *root = fresh_cache("cficache-map", dir, path);
  const uintptr_t bias = 0x60000000;
  ptp_cfi_tab *t1 = ptt_cfi_tab_make(bias, 4000, 1), *t2 = ptt_cfi_tab_make(bias, 3000, 2);
  save(dir, BID_A, 11, bias, t1);
  ptp_cfi_tab *m1 = NULL, *m2 = NULL;
  const uintptr_t bias2 = 0x7f1234560000;          /* loaded elsewhere (ASLR) */
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), 0);
  PT_ASSERT(m1->map != NULL);
  PT_ASSERT((const uint8_t *)m1->rows > (const uint8_t *)m1->map &&
            (const uint8_t *)(m1->rows + m1->nrows) <= (const uint8_t *)m1->map + m1->maplen);
  PT_ASSERT_UINT_EQ(m1->bias, bias2);
  same_rows(t1, bias, m1, bias2);
  /* The walker's lookup on the mapped rows: runtime PCs of bias2. */
  const ptp_cfi_rule *rule = ptp_cfi_tab_lookup(m1, bias2 + 0x1000 + 16 * 7 + 3);
  PT_ASSERT(rule && rule == &m1->rules[m1->rows[7].rule]);
  PT_ASSERT_INT_EQ(rule->cfa_off, t1->rules[t1->rows[7].rule].cfa_off);
  PT_ASSERT(ptp_cfi_tab_lookup(m1, bias2 + 0xfff) == NULL);
  PT_ASSERT(ptp_cfi_tab_lookup(m1, bias + 0x1000) == NULL);      /* the saver's address */
  /* Another process replaces the file. */
  pid_t kid = fork();
  PT_ASSERT(kid >= 0);
  if (kid == 0) {
    void *img;
    size_t len;
    if (ptp_cficache_image(BID_A, 11, bias, t2, &img, &len) != 0) _exit(2);
    _exit(ptp_cficache_write(dir, BID_A, img, len) != 0 ? 3 : 0);
  }
  int st = 0;
  PT_ASSERT_INT_EQ(waitpid(kid, &st, 0), kid);
  PT_ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer: status %#x", st);
  /* The mapped table still holds the first file's rows, every one. */
  same_rows(t1, bias, m1, bias2);
  PT_ASSERT(ptp_cfi_tab_lookup(m1, bias2 + 0x1000 + 16 * 3500) != NULL);   /* beyond t2's */
  /* A new load maps the new file; both tables live side by side. */
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m2), 0);
  same_rows(t2, bias, m2, bias2);
  ptp_cfi_tab_free(m1);
  same_rows(t2, bias, m2, bias2);
  ptp_cfi_tab_free(m2);
  /* Sizes that disagree with the header: refused, no fault. */
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(path, &sb), 0);
  PT_ASSERT_INT_EQ(truncate(path, sb.st_size - (off_t)sizeof(ptp_cfi_row)), 0);   /* one row short */
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), -EBADMSG);
  PT_ASSERT(m1 == NULL);
  PT_ASSERT_INT_EQ(truncate(path, sb.st_size + (off_t)sizeof(ptp_cfi_row)), 0);   /* one row long */
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), -EBADMSG);
  PT_ASSERT_INT_EQ(truncate(path, 40), 0);                                        /* inside the header */
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), -EBADMSG);
  PT_ASSERT_INT_EQ(truncate(path, 0), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), -EBADMSG);
  /* The rebuild's save replaces it: a hit again. */
  save(dir, BID_A, 11, bias, t2);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), 0);
  same_rows(t2, bias, m1, bias2);
  ptp_cfi_tab_free(m1);
  /* A second name for the file (a hard link) could be written through:
   * not mapped. */
  char link2[PATH_MAX];
  snprintf(link2, sizeof link2, "%s/other-name", root);
  PT_ASSERT_INT_EQ(link(path, link2), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), -EPERM);
  PT_ASSERT_INT_EQ(unlink(link2), 0);
  /* A directory others may write into: not mapped from. */
  PT_ASSERT_INT_EQ(chmod(dir, 0770), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), -EPERM);
  PT_ASSERT_INT_EQ(chmod(dir, 0700), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 11, bias2, &m1), 0);
  ptp_cfi_tab_free(m1);
  free(t1);
  free(t2);
}

PT_TEST_T(prof_cficache_two_writers, 60000) {
  char *root = pt_tmpdir("cficache-two");
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/unwind", root);
  const uintptr_t bias = 0x50000000;
  ptp_cfi_tab *t[2] = { ptt_cfi_tab_make(bias, 20000, 1), ptt_cfi_tab_make(bias, 20000, 2) };
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    PT_ASSERT(kids[k] >= 0);
    if (kids[k] == 0) {
      for (int i = 0; i < 60; i++) {
        void *img;
        size_t len;
        if (ptp_cficache_image(BID_A, 9, bias, t[k], &img, &len) != 0) _exit(2);
        if (ptp_cficache_write(dir, BID_A, img, len) != 0) _exit(3);
        free(img);
      }
      _exit(0);
    }
  }
  /* Read while both write (and at least 200 times): a miss only before the
   * first rename, else a whole table. */
  int hits = 0, misses = 0, alive = 2;
  int st[2] = { 0, 0 };
  for (int i = 0; alive > 0 || i < 200; i++) {
    ptp_cfi_tab *got = NULL;
    int rc = load(dir, BID_A, 9, bias, &got);
    PT_ASSERT_MSG(rc == 0 || (rc == -ENOENT && hits == 0), "read %d: %d", i, rc);
    if (rc == 0) {
      hits++;
      /* Whole, and one writer's: variant 1 or 2 in every row alike. */
      int v = got->rules[got->rows[0].rule].cfa_off / 1000;
      PT_ASSERT(v == 1 || v == 2);
      same_rows(t[v - 1], bias, got, bias);
      ptp_cfi_tab_free(got);
    } else {
      misses++;
    }
    for (int k = 0; k < 2; k++)
      if (kids[k] > 0 && waitpid(kids[k], &st[k], WNOHANG) == kids[k]) {
        kids[k] = 0;
        alive--;
      }
  }
  for (int k = 0; k < 2; k++)
    PT_ASSERT_MSG(WIFEXITED(st[k]) && WEXITSTATUS(st[k]) == 0, "writer %d: status %#x", k, st[k]);
  ptp_cfi_tab *got = NULL;
  PT_ASSERT_INT_EQ(load(dir, BID_A, 9, bias, &got), 0);
  ptp_cfi_tab_free(got);
  PT_ASSERT_MSG(hits > 0, "%d hits, %d misses", hits, misses);
  /* No temp file left, one cache file. */
  DIR *d = opendir(dir);
  PT_ASSERT(d);
  int files = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, ".."))) continue;
    PT_ASSERT_MSG(de->d_name[0] != '.', "temp file left: %s", de->d_name);
    files++;
  }
  closedir(d);
  PT_ASSERT_INT_EQ(files, 1);
  free(t[0]);
  free(t[1]);
}

typedef struct find_libc { int done; int rc; char bid[PTP_CFICACHE_BID_MAX]; uint64_t key;
                           uintptr_t bias; ptp_cfi_tab *tab; } find_libc;

static int libc_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_libc *f = arg;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "libc.so.6")) return 0;
  ptp_cfi_objinfo o;
  ptp_cfi_obj_scan(info, &o);
  f->rc = ptp_cficache_ident(info, &o, f->bid, &f->key);
  f->bias = info->dlpi_addr;
  if (f->rc == 0 && ptp_cfi_parse_eh(&o, 1u << 22, &f->tab) != 0) f->tab = NULL;
  f->done = 1;
  return 1;
}

PT_TEST(prof_cficache_libc_roundtrip) {
  find_libc a = { 0 }, b = { 0 };
  dl_iterate_phdr(libc_cb, &a);
  if (!a.done) PT_SKIP("libc.so.6 not found among the loaded objects");
  PT_ASSERT_INT_EQ(a.rc, 0);
  PT_ASSERT_INT_EQ(strlen(a.bid), 40);             /* a SHA-1 build id, as Debian links */
  PT_ASSERT(a.tab && a.tab->nrows > 1000);
  dl_iterate_phdr(libc_cb, &b);
  PT_ASSERT_STR_EQ(a.bid, b.bid);
  PT_ASSERT_UINT_EQ(a.key, b.key);
  char *root = pt_tmpdir("cficache-libc");
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/unwind", root);
  save(dir, a.bid, a.key, a.bias, a.tab);
  ptp_cfi_tab *got = NULL;
  PT_ASSERT_UINT_EQ(a.tab->bias, a.bias);          /* built relative to the object's bias */
  uintptr_t lo = a.bias + a.tab->rows[0].start,
            hi = a.bias + a.tab->rows[a.tab->nrows - 1].start + a.tab->rows[a.tab->nrows - 1].len;
  PT_ASSERT_INT_EQ(ptp_cficache_load(dir, a.bid, a.key, a.bias, lo, hi, 1u << 22, &got), 0);
  same_rows(a.tab, a.bias, got, a.bias);
  ptp_cfi_tab_free(got);
  free(a.tab);
  free(b.tab);
}

/* The header's checksum and algorithm of a known table's image. The zlib
 * value is Python's zlib.crc32 over the body rebuilt in Python from the
 * fixture's definition (60 rules of <ihbB>, then 5000 rows of <IHH>), so
 * it pins the layout too; the CRC-32C value is what this code writes (the
 * rules as one block, the rows in blocks of 2304), so a change of the
 * algorithm or of the blocks fails here and files on disk keep verifying. */
PT_TEST(prof_cficache_crc_pinned) {
  ptp_cfi_tab *t = ptt_cfi_tab_make(0x10000000, 5000, 0);
  void *img;
  size_t len;
  PT_ASSERT_INT_EQ(ptp_cficache_image(BID_A, 42, 0x10000000, t, &img, &len), 0);
  PT_ASSERT_UINT_EQ(len, 40600);
  uint32_t crc, algo;
  memcpy(&crc, (const uint8_t *)img + 32, 4);
  memcpy(&algo, (const uint8_t *)img + 36, 4);
  PT_ASSERT_UINT_EQ(algo, ptp_crc_algo());
  PT_ASSERT_UINT_EQ(crc, algo == PTP_CRC_C3 ? 0x342a66fau : 0xb41f3987u);
  /* the zlib value holds on every CPU */
  PT_ASSERT_UINT_EQ(ptp_crc_blocks(PTP_CRC_ZLIB, 0, (const uint8_t *)img + 120, len - 120, 0),
                    0xb41f3987u);
  /* and the image loads */
  char *root = pt_tmpdir("cficache-pin");
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/unwind", root);
  PT_ASSERT_INT_EQ(ptp_cficache_write(dir, BID_A, img, len), 0);
  ptp_cfi_tab *got = NULL;
  PT_ASSERT_INT_EQ(load(dir, BID_A, 42, 0x10000000, &got), 0);
  same_rows(t, 0x10000000, got, 0x10000000);
  ptp_cfi_tab_free(got);
  free(img);
  free(t);
  pt_rm_rf(root);
  free(root);
}

/* The table read from the cache is a copy of the file's bytes: truncating
 * the file in place to nothing (any process of our uid can) leaves every
 * row readable. With the file mapped in place this read raised SIGBUS (the
 * signal handler reads these rows). */
PT_TEST(prof_cficache_truncated_under_reader) {
  char dir[PATH_MAX], path[PATH_MAX];
  char *root = fresh_cache("cficache-trunc", dir, path);
  const uintptr_t bias = 0x60000000;
  ptp_cfi_tab *t = ptt_cfi_tab_make(bias, 20000, 1);     /* 160 KB: many pages */
  save(dir, BID_A, 5, bias, t);
  ptp_cfi_tab *got = NULL;
  PT_ASSERT_INT_EQ(load(dir, BID_A, 5, bias, &got), 0);
  PT_ASSERT_INT_EQ(truncate(path, 0), 0);
  same_rows(t, bias, got, bias);                        /* every row, every page */
  PT_ASSERT(ptp_cfi_tab_lookup(got, bias + 0x1000 + 16 * 19999) ==
            &got->rules[got->rows[19999].rule]);
  ptp_cfi_tab_free(got);
  free(t);
  pt_rm_rf(root);
  free(root);
}

/* The unwind cache lives in <symbol cache dir>/unwind; the symbol cache
 * refuses its directory when others may write it, when it is a symlink
 * or another user's: so must the unwind cache (reading and writing). */
PT_TEST(prof_cficache_parent_dir_rule) {
  char *root = pt_tmpdir("cficache-parent");
  char sym[PATH_MAX / 2], dir[PATH_MAX], real[PATH_MAX];
  snprintf(sym, sizeof sym, "%s/symbols", root);
  snprintf(dir, sizeof dir, "%s/unwind", sym);
  const uintptr_t bias = 0x30000000;
  ptp_cfi_tab *t = ptt_cfi_tab_make(bias, 100, 0), *got = NULL;
  save(dir, BID_A, 3, bias, t);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 3, bias, &got), 0);
  ptp_cfi_tab_free(got);
  void *img;
  size_t len;
  PT_ASSERT_INT_EQ(ptp_cficache_image(BID_A, 3, bias, t, &img, &len), 0);
  /* symbols/ writable by others (unwind/ itself 0700 and ours) */
  PT_ASSERT_INT_EQ(chmod(sym, 0777), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 3, bias, &got), -EPERM);
  PT_ASSERT_INT_EQ(ptp_cficache_write(dir, BID_A, img, len), -EPERM);
  PT_ASSERT_INT_EQ(chmod(sym, 0700), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 3, bias, &got), 0);
  ptp_cfi_tab_free(got);
  /* symbols/ a symlink to a directory of ours holding a valid cache */
  snprintf(real, sizeof real, "%s/real", root);
  PT_ASSERT_INT_EQ(rename(sym, real), 0);
  PT_ASSERT_INT_EQ(symlink(real, sym), 0);
  PT_ASSERT_INT_EQ(load(dir, BID_A, 3, bias, &got), -ENOTDIR);
  PT_ASSERT_INT_EQ(ptp_cficache_write(dir, BID_A, img, len), -ENOTDIR);
  PT_ASSERT_INT_EQ(unlink(sym), 0);
  PT_ASSERT_INT_EQ(rename(real, sym), 0);
  /* symbols/ another user's (root only: chown) */
  if (geteuid() == 0) {
    PT_ASSERT_INT_EQ(chown(sym, 65534, 65534), 0);
    PT_ASSERT_INT_EQ(load(dir, BID_A, 3, bias, &got), -EPERM);
    PT_ASSERT_INT_EQ(ptp_cficache_write(dir, BID_A, img, len), -EPERM);
    PT_ASSERT_INT_EQ(chown(sym, 0, 0), 0);
  } else {
    printf("# not root: the foreign-owner case is not run\n");
  }
  PT_ASSERT_INT_EQ(load(dir, BID_A, 3, bias, &got), 0);
  ptp_cfi_tab_free(got);
  free(img);
  free(t);
  pt_rm_rf(root);
  free(root);
}
