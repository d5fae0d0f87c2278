/*
 * test_symcache_errors.c - the caches' read errors keep their meaning
 * (src/prof/symbols/ptp_symcache.c, src/prof/unwind/ptp_cficache.c,
 * src/prof/cache/ptp_cachefile.c): a file that cannot be opened keeps its
 * errno (-EACCES, -EMFILE, -ELOOP), one the cache-file rule refuses says
 * -EPERM, and only a file whose content fails a check is "rejected"
 * (corrupt); another format version is "stale". Each is counted under its
 * own symbolizer counter, and a save still replaces the file. (They all
 * used to be -EBADMSG and PTP_SYMCACHE_REJECTED.)
 */
#include "pt_test.h"
#include "../unwind/cfi_tab_fixture.h"
#include "prof/symbols/ptp_symcache.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/unwind/ptp_cficache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define BID "00112233445566778899aabbccddeeff00112233"

static void add_one(ptp_symcache *c, uint64_t lo, const char *name) {
  ptp_sym_frame f = {name, name, "err.c", 1, 2, 0};
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, lo, lo + 16, &f, 1), 0);
}

static ptp_symcache *open_state(const char *dir, ptp_symcache_state want, int want_err) {
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, BID), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), want);
  PT_ASSERT_INT_EQ(ptp_symcache_file_error(c), want_err);
  return c;
}

/* A valid file of one interval in dir. */
static void make_valid(const char *dir) {
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, BID), 0);
  add_one(c, 0x100, "f");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
}

/* The lowest free descriptor: an RLIMIT_NOFILE of it makes the next open
 * fail with EMFILE. */
static int lowest_free_fd(void) {
  int fd = dup(0);
  PT_ASSERT(fd >= 0);
  close(fd);
  return fd;
}

PT_TEST(prof_symcache_errors_keep_errno) {
  char *dir = pt_tmpdir("symcache-errors");
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s.sym", dir, BID);

  ptp_symcache *c = open_state(dir, PTP_SYMCACHE_MISSING, -ENOENT);
  ptp_symcache_del(c);
  make_valid(dir);
  c = open_state(dir, PTP_SYMCACHE_LOADED, 0);
  ptp_symcache_del(c);

  /* unreadable: EACCES, not "rejected"; a save replaces it */
  if (geteuid() != 0) {
    PT_ASSERT_INT_EQ(chmod(path, 0), 0);
    c = open_state(dir, PTP_SYMCACHE_UNUSABLE, -EACCES);
    add_one(c, 0x200, "g");
    PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
    ptp_symcache_del(c);
    c = open_state(dir, PTP_SYMCACHE_LOADED, 0);
    ptp_symcache_del(c);
  }

  /* out of descriptors: EMFILE */
  struct rlimit old;
  PT_ASSERT_INT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = (rlim_t)lowest_free_fd();
  PT_ASSERT_INT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  int rc = ptp_symcache_open(&c, dir, BID);
  PT_ASSERT_INT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  PT_ASSERT_INT_EQ(rc, 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_UNUSABLE);
  PT_ASSERT_INT_EQ(ptp_symcache_file_error(c), -EMFILE);
  ptp_symcache_del(c);

  /* a symbolic link at the name: not followed, ELOOP */
  char other[PATH_MAX];
  snprintf(other, sizeof other, "%s/elsewhere", dir);
  PT_ASSERT_INT_EQ(rename(path, other), 0);
  PT_ASSERT_INT_EQ(symlink(other, path), 0);
  c = open_state(dir, PTP_SYMCACHE_UNUSABLE, -ELOOP);
  ptp_symcache_del(c);
  PT_ASSERT_INT_EQ(unlink(path), 0);
  PT_ASSERT_INT_EQ(rename(other, path), 0);

  /* refused by the rule (others may write it): EPERM */
  PT_ASSERT_INT_EQ(chmod(path, 0606), 0);
  c = open_state(dir, PTP_SYMCACHE_UNUSABLE, -EPERM);
  ptp_symcache_del(c);
  PT_ASSERT_INT_EQ(chmod(path, 0600), 0);

  /* corrupt: the only "rejected". A byte of the strings: the header and
   * index are sound, so the open reads them and the lookup that reads
   * the strings' block finds it corrupt (blocks are read as needed) */
  size_t n;
  char *b = pt_read_file(path, &n);
  PT_ASSERT(b && n > 64);
  b[n - 9] ^= 0x11;
  pt_write_file(path, b, n);
  PT_ASSERT_INT_EQ(chmod(path, 0600), 0);
  c = open_state(dir, PTP_SYMCACHE_LOADED, 0);
  const ptp_sym_frame *got;
  uint32_t k;
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x105, &got, &k), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_REJECTED);
  PT_ASSERT_INT_EQ(ptp_symcache_file_error(c), -EBADMSG);
  ptp_symcache_del(c);
  /* a byte of the segment's header: rejected at open */
  b[152 + 4] ^= 0x11;
  pt_write_file(path, b, n);
  PT_ASSERT_INT_EQ(chmod(path, 0600), 0);
  c = open_state(dir, PTP_SYMCACHE_REJECTED, -EBADMSG);
  ptp_symcache_del(c);
  /* cut short below the header: corrupt too */
  pt_write_file(path, b, 8);
  PT_ASSERT_INT_EQ(chmod(path, 0600), 0);
  c = open_state(dir, PTP_SYMCACHE_REJECTED, -EBADMSG);
  ptp_symcache_del(c);
  free(b);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_cficache_errors_keep_errno) {
  char *root = pt_tmpdir("cficache-errors");
  char dir[PATH_MAX / 2], path[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/unwind", root);
  snprintf(path, sizeof path, "%s/%s.cfi", dir, BID);
  const uintptr_t bias = 0x30000000;
  ptp_cfi_tab *t = ptt_cfi_tab_make(bias, 50, 0), *got = NULL;
  void *img;
  size_t len;
  PT_ASSERT_INT_EQ(ptp_cficache_image(BID, 5, bias, t, &img, &len), 0);
  PT_ASSERT_INT_EQ(ptp_cficache_write(dir, BID, img, len), 0);
  free(img);
#define LOAD() ptp_cficache_load(dir, BID, 5, bias, bias, bias + (1u << 20), 1u << 20, &got)
  PT_ASSERT_INT_EQ(LOAD(), 0);
  ptp_cfi_tab_free(got);
  got = NULL;
  if (geteuid() != 0) {
    PT_ASSERT_INT_EQ(chmod(path, 0), 0);
    PT_ASSERT_INT_EQ(LOAD(), -EACCES);
    PT_ASSERT_INT_EQ(chmod(path, 0600), 0);
  }
  struct rlimit old;
  PT_ASSERT_INT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = (rlim_t)lowest_free_fd();
  PT_ASSERT_INT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  int rc = LOAD();
  PT_ASSERT_INT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  PT_ASSERT_INT_EQ(rc, -EMFILE);
  PT_ASSERT(got == NULL);
  PT_ASSERT_INT_EQ(LOAD(), 0);                 /* the file itself is fine */
  ptp_cfi_tab_free(got);
#undef LOAD
  free(t);
  pt_rm_rf(root);
  free(root);
}
