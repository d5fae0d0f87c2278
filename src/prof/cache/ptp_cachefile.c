/*
 * ptp_cachefile.c - cache-directory checks, the cache-file check and read,
 * atomic cache-file writes and cache-directory bounds (see
 * ptp_cachefile.h). Used by the symbol cache, the unwind-table cache and
 * the debug-file copies.
 *
 * Threads: a temp-name counter (atomic) only. Not for signal handlers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prof/cache/ptp_cachefile.h"
#include "prof/output/ptp_snapstore.h"
#include "prof/ptp_alloc.h"

/* One of the cache's own directories: lstat (no symlink), a directory,
 * ours, not writable by others. */
static int own_dir_ok(const char *dir) {
  struct stat st;
  if (lstat(dir, &st) != 0) return -errno;
  if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) return -EPERM;
  return 0;
}

/* A directory above the cache's: stat (symlinks followed), ours or root's,
 * not writable by others unless sticky. */
static int ancestor_ok(const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0) return -errno;
  if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
  if (st.st_uid != geteuid() && st.st_uid != 0) return -EPERM;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) return -EPERM;
  return 0;
}

int ptp_cachefile_check_dir(const char *dir, int levels) {
  char buf[PATH_MAX];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof buf) return -EINVAL;
  memcpy(buf, dir, n + 1);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;     /* trailing slashes */
  for (int level = 0;; level++) {
    int r = level < levels ? own_dir_ok(buf) : ancestor_ok(buf);
    if (r) return r;
    char *slash = strrchr(buf, '/');
    if (!slash) return 0;                /* a relative path: its start checked */
    if (slash == buf) {                  /* the next one is "/" */
      if (buf[1] == 0) return 0;
      buf[1] = 0;
    } else {
      *slash = 0;
    }
  }
}

int ptp_cachefile_prepare_dir(const char *dir) {
  int r = ptp_mkdir_p(dir);
  if (r < 0) return r;
  return ptp_cachefile_check_dir(dir, 1);
}

int ptp_cachefile_prepare_subdir(const char *dir) {
  int r = ptp_mkdir_p(dir);
  if (r < 0) return r;
  return ptp_cachefile_check_dir(dir, 2);
}

int ptp_cachefile_check(const struct stat *st, uint64_t min_size, uint64_t max_size) {
  if (!S_ISREG(st->st_mode) || st->st_uid != geteuid() || st->st_nlink > 1 ||
      (st->st_mode & (S_IWGRP | S_IWOTH)))
    return -EPERM;
  if (st->st_size <= 0 || (uint64_t)st->st_size < min_size) return -EBADMSG;
  if ((uint64_t)st->st_size > max_size) return -EFBIG;
  return 0;
}

int ptp_cachefile_mappable(const struct stat *st, uint64_t min_size, uint64_t max_size) {
  return ptp_cachefile_check(st, min_size, max_size) == 0;
}

int ptp_cachefile_read_fd(int fd, const char *dir, int levels, uint64_t min_size,
                          uint64_t max_size, void **map, struct stat *st) {
  *map = NULL;
  if (fstat(fd, st) != 0) return -errno;
  int r = ptp_cachefile_check(st, min_size, max_size);
  if (r == 0) r = ptp_cachefile_check_dir(dir, levels);
  if (r) return r;
  size_t len = (size_t)st->st_size;
  /* Populated at once: one fault-in of the whole range, then one copy. */
  uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                    -1, 0);
  if (p == MAP_FAILED) return -errno;
  size_t got = 0;
  while (got < len) {
    ssize_t n = pread(fd, p + got, len - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      r = n < 0 ? -errno : -EBADMSG;   /* 0: cut short since the fstat */
      munmap(p, len);
      return r;
    }
    got += (size_t)n;
  }
  (void)mprotect(p, len, PROT_READ);   /* read-only, as the file was */
  *map = p;
  return 0;
}

int ptp_cachefile_hex_name_ok(const char *s, size_t max_len) {
  size_t n = strnlen(s, max_len + 1);
  if (n < 2 || n > max_len) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

int ptp_cachefile_write_all(int fd, const void *p, size_t n) {
  const unsigned char *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? -errno : -EIO;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

int ptp_cachefile_write_with(const char *dir, const char *name, ptp_cachefile_fill_fn fill,
                             void *arg) {
  if (!name[0] || strchr(name, '/') || strlen(name) > NAME_MAX - 32) return -EINVAL;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0) return -errno;
  static _Atomic unsigned seq;
  char tmp[NAME_MAX + 1];
  int r = 0, fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    snprintf(tmp, sizeof tmp, ".%s.%d.%u.tmp", name, (int)getpid(), (unsigned)seq++);
    fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) { r = -errno; goto fail_dfd; }
  /* 0600 whatever the umask (it can only remove bits, but say it). */
  if (fchmod(fd, 0600) != 0) { r = -errno; goto fail_tmp; }
  if ((r = fill(fd, arg)) != 0) goto fail_tmp;
  /* No fsync of the file or the directory: a cache file is derived data.
   * After a crash it may be missing, empty or cut short (its data not yet
   * on disk when the rename was), and every reader checks size, magic and
   * checksum and rebuilds it; rename alone keeps a running reader from
   * ever seeing a partial file. User data (snapshots, ptp_snapstore.c) keeps
   * its fsyncs. */
  if (close(fd) != 0) { fd = -1; r = -errno; goto fail_tmp; }
  fd = -1;
  if (renameat(dfd, tmp, dfd, name) != 0) { r = -errno; goto fail_tmp; }
  close(dfd);
  return 0;

fail_tmp:
  if (fd >= 0) close(fd);
  unlinkat(dfd, tmp, 0);
fail_dfd:
  close(dfd);
  return r;
}

typedef struct iov_arg { const struct iovec *iov; int n; } iov_arg;

static int fill_iov(int fd, void *arg) {
  const iov_arg *a = arg;
  int r = 0;
  for (int i = 0; i < a->n && !r; i++) r = ptp_cachefile_write_all(fd, a->iov[i].iov_base, a->iov[i].iov_len);
  return r;
}

int ptp_cachefile_writev(const char *dir, const char *name, const struct iovec *iov, int n) {
  iov_arg a = { iov, n };
  return ptp_cachefile_write_with(dir, name, fill_iov, &a);
}

int ptp_cachefile_write(const char *dir, const char *name, const void *buf, size_t len) {
  struct iovec v = { (void *)buf, len };
  return ptp_cachefile_writev(dir, name, &v, 1);
}

typedef struct ent { char name[NAME_MAX + 1]; int64_t mt; uint64_t size; } ent;

size_t ptp_cachefile_bound(const char *dir, const char *suffix, uint64_t max_bytes,
                           const char *keep, int tmp_age_s) {
  size_t removed = 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  int dfd = dirfd(d);
  ent *v = NULL;
  size_t n = 0, cap = 0, sl = strlen(suffix);
  uint64_t total = 0;
  time_t now = time(NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    size_t l = strlen(nm);
    struct stat st;
    if (fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (nm[0] == '.' && l > 4 && !strcmp(nm + l - 4, ".tmp")) {
      if (now - st.st_mtime > tmp_age_s) unlinkat(dfd, nm, 0);
      continue;
    }
    if (l <= sl || strcmp(nm + l - sl, suffix) != 0) continue;
    total += (uint64_t)st.st_size;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      ent *nv = ptp_realloc(v, nc * sizeof *nv);
      if (!nv) break;
      v = nv;
      cap = nc;
    }
    snprintf(v[n].name, sizeof v[n].name, "%s", nm);
    v[n].mt = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    v[n].size = (uint64_t)st.st_size;
    n++;
  }
  /* Oldest first, one scan per removal: directories hold few files. */
  while (total > max_bytes) {
    size_t oldest = n;
    for (size_t i = 0; i < n; i++)
      if (v[i].size && (!keep || strcmp(v[i].name, keep) != 0) &&
          (oldest == n || v[i].mt < v[oldest].mt))
        oldest = i;
    if (oldest == n) break;
    if (unlinkat(dfd, v[oldest].name, 0) == 0) removed++;
    total -= v[oldest].size;
    v[oldest].size = 0;
  }
  free(v);
  closedir(d);
  return removed;
}
