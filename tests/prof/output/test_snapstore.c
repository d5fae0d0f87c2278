/*
 * test_snapstore.c - the snapshot store: names, retention (other prefixes and
 * unrelated files untouched), seq continuity, temp cleanup, atomicity under
 * a concurrent reader, and write errors (removed directory, a file in place
 * of the directory, full and read-only filesystems).
 */
#include "pt_test.h"
#include "prof/output/ptp_gzip.h"
#include "prof/output/ptp_snapstore.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char *path_join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

/* Sorted names in dir that satisfy keep(name) (or all when keep is NULL). */
static size_t list_dir(const char *dir, char names[][256], size_t max, int (*keep)(const char *)) {
  DIR *d = opendir(dir);
  PT_ASSERT_MSG(d, "opendir %s: %s", dir, strerror(errno));
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (keep && !keep(de->d_name)) continue;
    PT_ASSERT(n < max);
    snprintf(names[n++], 256, "%s", de->d_name);
  }
  closedir(d);
  qsort(names, n, 256, (int (*)(const void *, const void *))strcmp);
  return n;
}

static int is_daemon_snap(const char *n) { return ptp_snapstore_name_matches(n, "daemon-profile-"); }

static void fill(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    p[i] = (uint8_t)x;
  }
}

PT_TEST(prof_snapstore_name_pattern) {
  PT_ASSERT(ptp_snapstore_name_matches("daemon-profile-20261129T213314Z-000001.pb.gz", "daemon-profile-"));
  PT_ASSERT(ptp_snapstore_name_matches("daemon-profile-20261129T213314Z-1234567.pb.gz", "daemon-profile-"));
  PT_ASSERT(!ptp_snapstore_name_matches("tui-profile-20261129T213314Z-000001.pb.gz", "daemon-profile-"));
  PT_ASSERT(!ptp_snapstore_name_matches("daemon-profile-20261129T213314Z-000001.pb.gz.tmp", "daemon-profile-"));
  PT_ASSERT(!ptp_snapstore_name_matches("daemon-profile-20261129T213314Z-.pb.gz", "daemon-profile-"));
  PT_ASSERT(!ptp_snapstore_name_matches("daemon-profile-2026112xT213314Z-000001.pb.gz", "daemon-profile-"));
  PT_ASSERT(!ptp_snapstore_name_matches("daemon-profile-x-20261129T213314Z-000001.pb.gz", "daemon-profile-"));
  PT_ASSERT(!ptp_snapstore_name_matches("daemon-profile-notes.txt", "daemon-profile-"));
}

PT_TEST(prof_snapstore_bad_args) {
  char *dir = pt_tmpdir("store");
  ptp_snapstore *st = NULL;
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, dir, "a/b-", 8), -EINVAL);
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, dir, "", 8), -EINVAL);
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, dir, ".hidden-", 8), -EINVAL);
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, dir, "p-", 0), -EINVAL);
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, "", "p-", 8), -EINVAL);
  PT_ASSERT(st == NULL);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_snapstore_retention_touches_nothing_else) {
  char *dir = pt_tmpdir("store");
  char *sub = path_join(dir, "profiling/deeper");   /* created by new() (mkdir -p) */
  /* neighbours that must survive */
  const char *others[] = {
    "tui-profile-20200101T000000Z-000001.pb.gz",
    "daemon-profile-notes.txt",
    "daemon-profile-20200101T000000Z-000001.pb.gz.bak",
    "xdaemon-profile-20200101T000000Z-000001.pb.gz",
    "unrelated.txt",
  };
  ptp_snapstore *st;
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, sub, "daemon-profile-", 3), 0);
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    char *p = path_join(sub, others[i]);
    pt_write_file(p, others[i], strlen(others[i]));
    free(p);
  }
  char paths[5][512];
  for (int i = 0; i < 5; i++) {
    char data[32];
    int n = snprintf(data, sizeof data, "snapshot %d", i);
    PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)data, (size_t)n, paths[i], sizeof paths[i]), 0);
    PT_ASSERT(strncmp(paths[i], sub, strlen(sub)) == 0);
    PT_ASSERT(is_daemon_snap(strrchr(paths[i], '/') + 1));
  }
  char names[32][256];
  size_t n = list_dir(sub, names, 32, is_daemon_snap);
  PT_ASSERT_UINT_EQ(n, 3);
  /* the newest three, in write order when sorted by name */
  for (int i = 0; i < 3; i++) {
    PT_ASSERT_STR_EQ(names[i], strrchr(paths[i + 2], '/') + 1);
    char *got = pt_read_file(paths[i + 2], NULL);
    char want[32];
    snprintf(want, sizeof want, "snapshot %d", i + 2);
    PT_ASSERT_STR_EQ(got, want);
    free(got);
  }
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    char *p = path_join(sub, others[i]);
    char *got = pt_read_file(p, NULL);
    PT_ASSERT_MSG(got && !strcmp(got, others[i]), "%s was touched", others[i]);
    free(got);
    free(p);
  }
  /* no temp files left behind */
  size_t all = list_dir(sub, names, 32, NULL);
  PT_ASSERT_UINT_EQ(all, 3 + sizeof others / sizeof *others);
  ptp_snapstore_del(st);
  pt_rm_rf(dir);
  free(sub);
  free(dir);
}

PT_TEST(prof_snapstore_seq_continues_across_stores) {
  char *dir = pt_tmpdir("store");
  ptp_snapstore *a, *b;
  char p1[512], p2[512], p3[512];
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&a, dir, "daemon-profile-", 8), 0);
  PT_ASSERT_INT_EQ(ptp_snapstore_write(a, (const uint8_t *)"1", 1, p1, sizeof p1), 0);
  PT_ASSERT_INT_EQ(ptp_snapstore_write(a, (const uint8_t *)"2", 1, p2, sizeof p2), 0);
  ptp_snapstore_del(a);
  /* a second process (or restart) with the same prefix: never reuses a name */
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&b, dir, "daemon-profile-", 8), 0);
  PT_ASSERT_INT_EQ(ptp_snapstore_write(b, (const uint8_t *)"3", 1, p3, sizeof p3), 0);
  PT_ASSERT(strcmp(p1, p2) < 0 && strcmp(p2, p3) < 0);
  char *c1 = pt_read_file(p1, NULL), *c3 = pt_read_file(p3, NULL);
  PT_ASSERT_STR_EQ(c1, "1");
  PT_ASSERT_STR_EQ(c3, "3");
  free(c1);
  free(c3);
  /* path_out is truncated, never overflowed */
  char small[8];
  PT_ASSERT_INT_EQ(ptp_snapstore_write(b, (const uint8_t *)"4", 1, small, sizeof small), 0);
  PT_ASSERT_UINT_EQ(strlen(small), sizeof small - 1);
  ptp_snapstore_del(b);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_snapstore_cleans_own_leftover_temps) {
  char *dir = pt_tmpdir("store");
  const char *mine = ".daemon-profile-20200101T000000Z-000003.pb.gz.tmp";
  const char *keep[] = {
    ".tui-profile-20200101T000000Z-000003.pb.gz.tmp",
    ".other.tmp",
    ".daemon-profile-notes.tmp",
  };
  char *p = path_join(dir, mine);
  pt_write_file(p, "partial", 7);
  free(p);
  for (size_t i = 0; i < 3; i++) {
    p = path_join(dir, keep[i]);
    pt_write_file(p, "x", 1);
    free(p);
  }
  ptp_snapstore *st;
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, dir, "daemon-profile-", 8), 0);
  p = path_join(dir, mine);
  PT_ASSERT_MSG(access(p, F_OK) != 0, "leftover temp file not removed");
  free(p);
  for (size_t i = 0; i < 3; i++) {
    p = path_join(dir, keep[i]);
    PT_ASSERT_MSG(access(p, F_OK) == 0, "%s was removed", keep[i]);
    free(p);
  }
  /* set_dir cleans the new directory too */
  char *d2 = path_join(dir, "second");
  PT_ASSERT_INT_EQ(mkdir(d2, 0755), 0);
  p = path_join(d2, mine);
  pt_write_file(p, "partial", 7);
  PT_ASSERT_INT_EQ(ptp_snapstore_set_dir(st, d2), 0);
  PT_ASSERT(access(p, F_OK) != 0);
  char out[512];
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)"z", 1, out, sizeof out), 0);
  PT_ASSERT(strncmp(out, d2, strlen(d2)) == 0);
  free(p);
  free(d2);
  ptp_snapstore_del(st);
  pt_rm_rf(dir);
  free(dir);
}

/* ---- atomicity: a reader polling the directory never sees a partial file ---- */

typedef struct reader_ctx {
  const char *dir;
  atomic_int stop;
  long checked, bad;
  char bad_name[256];
} reader_ctx;

static void *reader(void *arg) {
  reader_ctx *c = arg;
  while (!atomic_load(&c->stop)) {
    DIR *d = opendir(c->dir);
    if (!d) continue;
    struct dirent *de;
    while ((de = readdir(d))) {
      if (!is_daemon_snap(de->d_name)) continue;
      char *p = path_join(c->dir, de->d_name);
      size_t len = 0;
      char *data = pt_read_file(p, &len);
      free(p);
      if (!data) continue;   /* rotated away between readdir and open: fine */
      uint8_t *plain;
      size_t plen;
      int r = ptp_gunzip((const uint8_t *)data, len, 64 << 20, &plain, &plen);
      if (r == 0) {
        free(plain);
        c->checked++;
      } else {
        c->bad++;
        snprintf(c->bad_name, sizeof c->bad_name, "%.200s (len %zu, %d)", de->d_name, len, r);
      }
      free(data);
    }
    closedir(d);
  }
  return NULL;
}

PT_TEST_T(prof_snapstore_atomic_under_concurrent_reader, 120000) {
  char *dir = pt_tmpdir("store");
  ptp_snapstore *st;
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, dir, "daemon-profile-", 4), 0);
  reader_ctx c = {.dir = dir};
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, reader, &c), 0);
  size_t raw_len = 1 << 20;
  uint8_t *raw = malloc(raw_len);
  for (int i = 0; i < 60; i++) {
    fill(raw, raw_len, (uint32_t)i);   /* incompressible: ~1 MiB files */
    uint8_t *gz;
    size_t gzlen;
    PT_ASSERT_INT_EQ(ptp_gzip(raw, raw_len, 1, &gz, &gzlen), 0);
    PT_ASSERT_INT_EQ(ptp_snapstore_write(st, gz, gzlen, NULL, 0), 0);
    free(gz);
  }
  atomic_store(&c.stop, 1);
  pthread_join(th, NULL);
  PT_ASSERT_MSG(c.bad == 0, "reader saw %ld partial files, e.g. %s", c.bad, c.bad_name);
  PT_ASSERT_MSG(c.checked > 0, "reader never saw a snapshot");
  char names[16][256];
  PT_ASSERT_UINT_EQ(list_dir(dir, names, 16, NULL), 4);   /* no temp files left */
  free(raw);
  ptp_snapstore_del(st);
  pt_rm_rf(dir);
  free(dir);
}

/* ---- write errors ---- */

PT_TEST(prof_snapstore_error_directory_removed) {
  char *dir = pt_tmpdir("store");
  char *sub = path_join(dir, "profiling");
  ptp_snapstore *st;
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, sub, "daemon-profile-", 8), 0);
  char p1[512];
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)"one", 3, p1, sizeof p1), 0);
  /* keep the old snapshot elsewhere, then remove the directory */
  char *moved = path_join(dir, "moved");
  PT_ASSERT_INT_EQ(rename(sub, moved), 0);
  char p2[512] = "x";
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)"two", 3, p2, sizeof p2), -ENOENT);
  PT_ASSERT_STR_EQ(p2, "");
  PT_ASSERT_MSG(access(sub, F_OK) != 0, "the store recreated the removed directory");
  char names[8][256];
  PT_ASSERT_UINT_EQ(list_dir(moved, names, 8, NULL), 1);
  /* a file in place of the directory */
  pt_write_file(sub, "not a dir", 9);
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)"three", 5, NULL, 0), -ENOTDIR);
  char *c = pt_read_file(sub, NULL);
  PT_ASSERT_STR_EQ(c, "not a dir");
  free(c);
  PT_ASSERT_UINT_EQ(list_dir(moved, names, 8, NULL), 1);
  /* back to normal once the directory is there again */
  PT_ASSERT_INT_EQ(unlink(sub), 0);
  PT_ASSERT_INT_EQ(rename(moved, sub), 0);
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)"four", 4, NULL, 0), 0);
  PT_ASSERT_UINT_EQ(list_dir(sub, names, 8, is_daemon_snap), 2);
  c = pt_read_file(p1, NULL);
  PT_ASSERT_STR_EQ(c, "one");
  free(c);
  ptp_snapstore_del(st);
  pt_rm_rf(dir);
  free(moved);
  free(sub);
  free(dir);
}

/* A private mount namespace: the tmpfs disappears with this test process. */
static char *tiny_tmpfs(const char *size) {
  if (unshare(CLONE_NEWNS) != 0) PT_SKIP("unshare(CLONE_NEWNS) not permitted here");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) PT_SKIP("cannot make mounts private");
  char *dir = pt_tmpdir("store-tmpfs");
  char opt[64];
  snprintf(opt, sizeof opt, "size=%s", size);
  if (mount("tmpfs", dir, "tmpfs", 0, opt) != 0) PT_SKIP("mount -t tmpfs not permitted here");
  return dir;
}

PT_TEST(prof_snapstore_error_full_disk) {
  char *dir = tiny_tmpfs("64k");
  ptp_snapstore *st;
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, dir, "daemon-profile-", 8), 0);
  uint8_t buf[40000];
  fill(buf, sizeof buf, 1);
  char p1[512];
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, buf, sizeof buf, p1, sizeof p1), 0);
  uint8_t buf2[40000];
  fill(buf2, sizeof buf2, 2);
  int r = ptp_snapstore_write(st, buf2, sizeof buf2, NULL, 0);
  PT_ASSERT_MSG(r == -ENOSPC, "expected -ENOSPC, got %d", r);
  char names[8][256];
  PT_ASSERT_UINT_EQ(list_dir(dir, names, 8, NULL), 1);   /* no partial/temp file */
  size_t len;
  char *c = pt_read_file(p1, &len);
  PT_ASSERT_UINT_EQ(len, sizeof buf);
  PT_ASSERT_MEM_EQ(c, buf, sizeof buf);
  free(c);
  /* space again: writes work again */
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, buf2, 100, NULL, 0), 0);
  ptp_snapstore_del(st);
  umount2(dir, MNT_DETACH);
  rmdir(dir);
  free(dir);
}

PT_TEST(prof_snapstore_error_read_only) {
  char *dir = tiny_tmpfs("1m");
  ptp_snapstore *st;
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&st, dir, "daemon-profile-", 8), 0);
  char p1[512];
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)"one", 3, p1, sizeof p1), 0);
  PT_ASSERT_INT_EQ(mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
  PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)"two", 3, NULL, 0), -EROFS);
  char names[8][256];
  PT_ASSERT_UINT_EQ(list_dir(dir, names, 8, NULL), 1);
  char *c = pt_read_file(p1, NULL);
  PT_ASSERT_STR_EQ(c, "one");
  free(c);
  ptp_snapstore_del(st);
  umount2(dir, MNT_DETACH);
  rmdir(dir);
  free(dir);
}

/* ---- family retention (preload exec churn) and private files ---- */

static int is_fam(const char *n) { return ptp_snapstore_family_matches(n, "profile-"); }

PT_TEST(prof_snapstore_family_pattern) {
  PT_ASSERT(ptp_snapstore_family_matches("profile-20261129T213314Z-000001.pb.gz", "profile-"));
  PT_ASSERT(ptp_snapstore_family_matches("profile-pid42-20261129T213314Z-000001.pb.gz", "profile-"));
  /* a prefix that merely starts with ours is another family */
  PT_ASSERT(!ptp_snapstore_family_matches("profile-x-20261129T213314Z-000001.pb.gz", "profile-"));
  PT_ASSERT(!ptp_snapstore_family_matches("profile-pidx-20261129T213314Z-000001.pb.gz", "profile-"));
  PT_ASSERT(!ptp_snapstore_family_matches("profile-pid-20261129T213314Z-000001.pb.gz", "profile-"));
  PT_ASSERT(!ptp_snapstore_family_matches("profile-pid42-x-20261129T213314Z-000001.pb.gz", "profile-"));
  PT_ASSERT(!ptp_snapstore_family_matches(".profile-pid42-20261129T213314Z-000001.pb.gz.tmp", "profile-"));
  PT_ASSERT(!ptp_snapstore_family_matches("profile-pid42-20261129T213314Z-000001.pb.gz.tmp", "profile-"));
  PT_ASSERT(!ptp_snapstore_family_matches("xprofile-pid42-20261129T213314Z-000001.pb.gz", "profile-"));
}

PT_TEST(prof_snapstore_family_keeps_total_oldest_first) {
  char *dir = pt_tmpdir("storefam");
  const char *others[] = {
    "profile-x-20200101T000000Z-000001.pb.gz",       /* another family */
    "other-20200101T000000Z-000001.pb.gz",
    ".profile-pid7-20200101T000000Z-000001.pb.gz.tmp", /* being written */
  };
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    char *p = path_join(dir, others[i]);
    pt_write_file(p, others[i], strlen(others[i]));
    free(p);
  }
  /* a dead child's old snapshot: oldest by mtime, removed first */
  char *old = path_join(dir, "profile-pid9-20300101T000000Z-000001.pb.gz");
  pt_write_file(old, "old", 3);
  struct timespec tv[2] = {{1000000000, 0}, {1000000000, 0}};
  PT_ASSERT_INT_EQ(utimensat(AT_FDCWD, old, tv, 0), 0);
  ptp_snapstore *a, *b;
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&a, dir, "profile-", 8), 0);
  PT_ASSERT_INT_EQ(ptp_snapstore_new(&b, dir, "profile-pid123-", 8), 0);
  PT_ASSERT_INT_EQ(ptp_snapstore_set_family(a, "profile-x", 4), -EINVAL);   /* not our base */
  PT_ASSERT_INT_EQ(ptp_snapstore_set_family(a, "profile-", 0), -EINVAL);
  PT_ASSERT_INT_EQ(ptp_snapstore_set_family(a, "profile-", 4), 0);
  PT_ASSERT_INT_EQ(ptp_snapstore_set_family(b, "profile-", 4), 0);
  char last[2][512];
  for (int i = 0; i < 6; i++) {
    ptp_snapstore *st = i % 2 ? b : a;
    PT_ASSERT_INT_EQ(ptp_snapstore_write(st, (const uint8_t *)"x", 1, last[i % 2], sizeof last[0]), 0);
  }
  char names[32][256];
  PT_ASSERT_UINT_EQ(list_dir(dir, names, 32, is_fam), 4);
  struct stat sb;
  PT_ASSERT_MSG(stat(old, &sb) != 0, "the oldest family file survived");
  PT_ASSERT_INT_EQ(stat(last[0], &sb), 0);
  PT_ASSERT_INT_EQ(stat(last[1], &sb), 0);
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    char *p = path_join(dir, others[i]);
    char *got = pt_read_file(p, NULL);
    PT_ASSERT_MSG(got && !strcmp(got, others[i]), "%s was touched", others[i]);
    free(got);
    free(p);
  }
  ptp_snapstore_del(a);
  ptp_snapstore_del(b);
  pt_rm_rf(dir);
  free(old);
  free(dir);
}

/* Files 0600, created directories 0700, whatever the umask. */
PT_TEST(prof_snapstore_private_modes_any_umask) {
  static const mode_t masks[] = {022, 000, 0777};
  for (size_t k = 0; k < sizeof masks / sizeof *masks; k++) {
    char *dir = pt_tmpdir("storemode");
    char *sub = path_join(dir, "a/b");
    mode_t old = umask(masks[k]);
    ptp_snapstore *st;
    int rc = ptp_snapstore_new(&st, sub, "p-", 2);
    char path[512] = "";
    if (rc == 0) rc = ptp_snapstore_write(st, (const uint8_t *)"x", 1, path, sizeof path);
    umask(old);
    PT_ASSERT_INT_EQ(rc, 0);
    struct stat sb;
    PT_ASSERT_INT_EQ(stat(path, &sb), 0);
    PT_ASSERT_MSG((sb.st_mode & 07777) == 0600, "umask %03o: file mode %04o", (unsigned)masks[k],
                  (unsigned)(sb.st_mode & 07777));
    char *a = path_join(dir, "a");
    const char *dirs[] = {a, sub};
    for (int i = 0; i < 2; i++) {
      PT_ASSERT_INT_EQ(stat(dirs[i], &sb), 0);
      PT_ASSERT_MSG((sb.st_mode & 07777) == 0700, "umask %03o: %s mode %04o", (unsigned)masks[k],
                    dirs[i], (unsigned)(sb.st_mode & 07777));
    }
    unsigned m = 0;
    PT_ASSERT_INT_EQ(ptp_snapstore_dir_mode(st, &m), 0);
    PT_ASSERT_UINT_EQ(m, 0700);
    ptp_snapstore_del(st);
    pt_rm_rf(dir);
    free(a);
    free(sub);
    free(dir);
  }
}
