/*
 * test_cachefile.c - the one "may this cache file be mapped" rule
 * (ptp_cachefile_mappable / ptp_cachefile_read_fd) as both caches
 * apply it, on real files:
 *   - the rule itself: a file of ours, 0600, one link, in a directory of
 *     ours is mapped whole; two links, group- or world-writable, another
 *     owner (chown to nobody: needs root), a size outside the bounds, a
 *     directory others may write into are not (-EBADMSG, nothing mapped);
 *   - the unwind-table cache (ptp_cficache_load) refuses a file with two
 *     links, a group-writable one and one owned by nobody, and its next
 *     save replaces it with a file that loads;
 *   - the symbol cache (ptp_symcache_open) treats the same files as
 *     rejected (finds nothing in them), its next save rewrites them, and a
 *     reopen loads; a file that turned group-writable after it was read is
 *     not appended to: the save rewrites it (one segment, 0600 again).
 */
#include "pt_test.h"
#include "../unwind/cfi_tab_fixture.h"
#include "prof/cache/ptp_cachefile.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/unwind/ptp_cficache.h"
#include "prof/symbols/ptp_symcache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BID "0123456789abcdef0123456789abcdef01234567"
#define NOBODY 65534

/* The ways a file is made unfit for mapping; each test applies them all. */
enum spoil { SP_LINK, SP_GROUPW, SP_OTHER_OWNER, SP_N };

/* Spoils path (a link of it goes to root/extra); 0, or 1 when the case
 * cannot be made here (chown needs root). */
static int spoil(int how, const char *path, const char *root) {
  char extra[PATH_MAX];
  snprintf(extra, sizeof extra, "%s/second-link", root);
  unlink(extra);
  switch (how) {
  case SP_LINK: PT_ASSERT_INT_EQ(link(path, extra), 0); return 0;
  case SP_GROUPW: PT_ASSERT_INT_EQ(chmod(path, 0620), 0); return 0;
  default:
    if (geteuid() != 0) return 1;
    PT_ASSERT_INT_EQ(chown(path, NOBODY, NOBODY), 0);
    return 0;
  }
}

/* The file a save left is fit for mapping again: one link, ours, 0600. */
static void fit_again(const char *path) {
  struct stat st;
  PT_ASSERT_INT_EQ(stat(path, &st), 0);
  PT_ASSERT_UINT_EQ(st.st_nlink, 1);
  PT_ASSERT_UINT_EQ(st.st_uid, geteuid());
  PT_ASSERT_UINT_EQ(st.st_mode & 0777, 0600);
}

static void write_file_0600(const char *path, size_t n) {
  char *b = calloc(1, n);
  PT_ASSERT(b);
  pt_write_file(path, b, n);
  free(b);
  PT_ASSERT_INT_EQ(chmod(path, 0600), 0);
}

static int map_it(const char *dir, const char *path, uint64_t lo, uint64_t hi) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  PT_ASSERT(fd >= 0);
  void *m = (void *)1;
  struct stat st;
  int r = ptp_cachefile_read_fd(fd, dir, 1, lo, hi, &m, &st);
  close(fd);
  if (r == 0) {
    PT_ASSERT(m != NULL);
    PT_ASSERT_INT_EQ(st.st_size, 4096);
    munmap(m, (size_t)st.st_size);
  } else {
    PT_ASSERT(m == NULL);
  }
  return r;
}

PT_TEST(prof_cachefile_map_rule) {
  char *root = pt_tmpdir("cachefile-map");
  char dir[PATH_MAX / 2], path[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/c", root);
  snprintf(path, sizeof path, "%s/f.sym", dir);
  PT_ASSERT_INT_EQ(ptp_cachefile_prepare_dir(dir), 0);
  for (int how = 0; how < SP_N; how++) {
    unlink(path);
    write_file_0600(path, 4096);
    PT_ASSERT_INT_EQ(map_it(dir, path, 1, 1 << 20), 0);
    struct stat st;
    PT_ASSERT_INT_EQ(stat(path, &st), 0);
    PT_ASSERT(ptp_cachefile_mappable(&st, 1, 1 << 20));
    if (spoil(how, path, root)) continue;
    PT_ASSERT_INT_EQ(stat(path, &st), 0);
    PT_ASSERT(!ptp_cachefile_mappable(&st, 1, 1 << 20));
    PT_ASSERT_INT_EQ(map_it(dir, path, 1, 1 << 20), -EPERM);   /* refused, not corrupt */
  }
  unlink(path);
  write_file_0600(path, 4096);
  PT_ASSERT_INT_EQ(map_it(dir, path, 4097, 1 << 20), -EBADMSG);   /* too small */
  PT_ASSERT_INT_EQ(map_it(dir, path, 1, 4095), -EFBIG);           /* too big */
  PT_ASSERT_INT_EQ(chmod(path, 0602), 0);                         /* world-writable */
  PT_ASSERT_INT_EQ(map_it(dir, path, 1, 1 << 20), -EPERM);
  PT_ASSERT_INT_EQ(chmod(path, 0600), 0);
  PT_ASSERT_INT_EQ(chmod(dir, 0770), 0);                          /* the directory */
  PT_ASSERT_INT_EQ(map_it(dir, path, 1, 1 << 20), -EPERM);
  PT_ASSERT_INT_EQ(chmod(dir, 0700), 0);
  PT_ASSERT_INT_EQ(map_it(dir, path, 1, 1 << 20), 0);
  pt_rm_rf(root);
  free(root);
}

static void cfi_save(const char *dir, const ptp_cfi_tab *t, uintptr_t bias) {
  void *img;
  size_t len;
  PT_ASSERT_INT_EQ(ptp_cficache_image(BID, 7, bias, t, &img, &len), 0);
  PT_ASSERT_INT_EQ(ptp_cficache_write(dir, BID, img, len), 0);
  free(img);
}

static int cfi_load(const char *dir, uintptr_t bias, ptp_cfi_tab **out) {
  return ptp_cficache_load(dir, BID, 7, bias, bias, bias + (1u << 20), 1u << 20, out);
}

PT_TEST(prof_cachefile_cficache_refuses_unfit) {
  char *root = pt_tmpdir("cachefile-cfi");
  char dir[PATH_MAX / 2], path[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/unwind", root);
  snprintf(path, sizeof path, "%s/%s.cfi", dir, BID);
  const uintptr_t bias = 0x20000000;
  ptp_cfi_tab *t = ptt_cfi_tab_make(bias, 300, 0), *got = NULL;
  for (int how = 0; how < SP_N; how++) {
    unlink(path);
    cfi_save(dir, t, bias);
    PT_ASSERT_INT_EQ(cfi_load(dir, bias, &got), 0);
    PT_ASSERT_UINT_EQ(got->nrows, 300);
    ptp_cfi_tab_free(got);
    got = NULL;
    if (spoil(how, path, root)) continue;
    PT_ASSERT_INT_EQ(cfi_load(dir, bias, &got), -EPERM);
    PT_ASSERT(got == NULL);
    /* the cache still works: the next save replaces the file */
    cfi_save(dir, t, bias);
    PT_ASSERT_INT_EQ(cfi_load(dir, bias, &got), 0);
    PT_ASSERT_UINT_EQ(got->nrows, 300);
    ptp_cfi_tab_free(got);
    got = NULL;
    fit_again(path);
  }
  free(t);
  pt_rm_rf(root);
  free(root);
}

static void sym_add(ptp_symcache *c, uint64_t lo, const char *name) {
  ptp_sym_frame f = {name, name, "cf.c", 1, 2, 0};
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, lo, lo + 16, &f, 1), 0);
}

static int sym_has(ptp_symcache *c, uint64_t rel, const char *name) {
  const ptp_sym_frame *f;
  uint32_t n;
  return ptp_symcache_find(c, rel, &f, &n) == 1 && n == 1 && strcmp(f[0].name, name) == 0;
}

static ptp_symcache *sym_open(const char *dir, ptp_symcache_state want) {
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, BID), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), want);
  return c;
}

PT_TEST(prof_cachefile_symcache_refuses_unfit) {
  char *root = pt_tmpdir("cachefile-sym");
  char dir[PATH_MAX / 2], path[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/symbols", root);
  snprintf(path, sizeof path, "%s/%s.sym", dir, BID);
  for (int how = 0; how < SP_N; how++) {
    unlink(path);
    ptp_symcache *c = sym_open(dir, PTP_SYMCACHE_MISSING);
    sym_add(c, 0x100, "old");
    PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
    ptp_symcache_del(c);
    c = sym_open(dir, PTP_SYMCACHE_LOADED);
    PT_ASSERT(sym_has(c, 0x104, "old"));
    ptp_symcache_del(c);
    if (spoil(how, path, root)) continue;
    c = sym_open(dir, PTP_SYMCACHE_UNUSABLE);      /* refused by the rule, not corrupt */
    PT_ASSERT_INT_EQ(ptp_symcache_file_error(c), -EPERM);
    PT_ASSERT(!sym_has(c, 0x104, "old"));   /* nothing read from it */
    sym_add(c, 0x200, "new");
    PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
    PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 1);
    ptp_symcache_del(c);
    c = sym_open(dir, PTP_SYMCACHE_LOADED);
    PT_ASSERT(sym_has(c, 0x204, "new"));
    PT_ASSERT(!sym_has(c, 0x104, "old"));   /* not merged from the unfit file either */
    ptp_symcache_del(c);
    fit_again(path);
  }

  /* read while fit, group-writable by the time of the save: no append */
  unlink(path);
  ptp_symcache *c = sym_open(dir, PTP_SYMCACHE_MISSING);
  sym_add(c, 0x100, "a");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  c = sym_open(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_INT_EQ(chmod(path, 0620), 0);
  sym_add(c, 0x300, "b");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 1);   /* rewritten, not appended */
  ptp_symcache_del(c);
  struct stat st;
  PT_ASSERT_INT_EQ(stat(path, &st), 0);
  PT_ASSERT_UINT_EQ(st.st_mode & 0777, 0600);
  c = sym_open(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(sym_has(c, 0x104, "a") && sym_has(c, 0x304, "b"));
  ptp_symcache_del(c);
  pt_rm_rf(root);
  free(root);
}
