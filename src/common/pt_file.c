/* pt_file.c - careful file helpers. See pt_file.h. */
#include "common/pt_file.h"

#include "common/pt_write_all.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef __has_include
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define PT_HAVE_OPENAT2_H 1
#endif
#endif

int pt_mkdir_p(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n == 0) return -EINVAL;
  if (n >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    char c = buf[i];
    buf[i] = 0;
    if (mkdir(buf, mode) == 0) {
      /* The umask narrowed (or a caller's mode of 0700 kept) the mode:
       * make it exactly what was asked for. */
      if (chmod(buf, mode) != 0) return -errno;
    } else if (errno != EEXIST) {
      return -errno;
    }
    struct stat st;
    if (stat(buf, &st) != 0) return -errno;
    if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
    buf[i] = c;
  }
  return 0;
}

/* 0 when relpath is one or more plain names joined by single slashes. */
static int plain_relpath(const char *relpath) {
  if (!relpath || !*relpath || relpath[0] == '/') return -EINVAL;
  const char *p = relpath;
  while (*p) {
    const char *s = strchr(p, '/');
    size_t n = s ? (size_t)(s - p) : strlen(p);
    if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      return -EINVAL;
    if (!s) break;
    p = s + 1;
    if (!*p) return -EINVAL; /* trailing slash */
  }
  return 0;
}

int pt_open_beneath(int dirfd, const char *relpath, int flags) {
  /* Reject every "." / ".." / empty component up front, whatever the kernel
   * would do with them: our paths are always plain names. */
  int r = plain_relpath(relpath);
  if (r < 0) return r;
  flags |= O_NOFOLLOW | O_CLOEXEC;
#if defined(PT_HAVE_OPENAT2_H) && defined(SYS_openat2)
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = (uint64_t)flags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long ofd = syscall(SYS_openat2, dirfd, relpath, &how, sizeof how);
  if (ofd >= 0) return (int)ofd;
  int e = errno;
  if (e == EXDEV) return -ELOOP; /* escaping the root: only via a link here */
  if (e == ENOTDIR && (flags & O_DIRECTORY)) {
    /* O_DIRECTORY|O_NOFOLLOW on a final symlink gives ENOTDIR: say which
     * (the lstat only classifies the error, nothing is opened) */
    struct stat lst;
    if (fstatat(dirfd, relpath, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) return -ELOOP;
  }
  if (e != ENOSYS && e != EPERM) return -e; /* EPERM: seccomp filters */
#endif
  /* Fallback: one component at a time, never following a symlink. */
  char *copy = strdup(relpath);
  if (!copy) return -ENOMEM;
  int cur = dirfd;
  char *save = NULL;
  char *comp = strtok_r(copy, "/", &save);
  while (comp) {
    char *next = strtok_r(NULL, "/", &save);
    int fl = next ? (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : flags;
    int fd = openat(cur, comp, fl);
    int oe = errno;
    struct stat lst;
    /* O_DIRECTORY|O_NOFOLLOW on a symlink gives ENOTDIR: say which */
    if (fd < 0 && oe == ENOTDIR && fstatat(cur, comp, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(lst.st_mode))
      oe = ELOOP;
    if (cur != dirfd) close(cur);
    if (fd < 0) {
      r = -oe;
      cur = -1;
      break;
    }
    cur = fd;
    comp = next;
  }
  free(copy);
  return r < 0 ? r : cur;
}

int pt_mkdir_beneath(int dirfd, const char *relpath, mode_t mode) {
  int r = plain_relpath(relpath);
  if (r < 0) return r;
  char *copy = strdup(relpath);
  if (!copy) return -ENOMEM;
  int cur = dirfd;
  char *save = NULL;
  for (char *comp = strtok_r(copy, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
    int created = mkdirat(cur, comp, mode) == 0;
    if (!created && errno != EEXIST) { r = -errno; break; }
    int fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    if (fd < 0) {
      /* O_DIRECTORY|O_NOFOLLOW on a symlink gives ENOTDIR on Linux: say
       * which it was */
      struct stat lst;
      if (e == ENOTDIR && fstatat(cur, comp, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode))
        e = ELOOP;
      r = -e;
      break;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (created && fchmod(fd, mode) != 0)) {
      r = -errno;
      close(fd);
      break;
    }
    if (cur != dirfd) close(cur);
    cur = fd;
  }
  if (r < 0 && cur != dirfd) close(cur);
  free(copy);
  return r < 0 ? r : cur;
}

int pt_rename_noreplace(int fromdir, const char *from, int todir, const char *to) {
  if (renameat2(fromdir, from, todir, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -errno;
  struct stat st;
  if (fstatat(todir, to, &st, AT_SYMLINK_NOFOLLOW) == 0) return -EEXIST;
  if (errno != ENOENT) return -errno;
  return renameat(fromdir, from, todir, to) == 0 ? 0 : -errno;
}

int pt_fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int r = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return r;
}

int pt_write_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode) {
  char tmp[NAME_MAX + 1];
  if (strchr(name, '/') || snprintf(tmp, sizeof tmp, ".%s.tmp.%ld", name, (long)getpid()) >= (int)sizeof tmp)
    return -EINVAL;
  /* O_EXCL: a leftover or planted temp (a symlink included) is never
   * written through; it is removed and the open retried once. */
  int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0 && errno == EEXIST && unlinkat(dirfd, tmp, 0) == 0)
    fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return -errno;
  int r = fchmod(fd, mode) == 0 ? 0 : -errno; /* exactly mode, whatever the umask */
  if (r == 0) r = pt_write_all(fd, data, len);
  if (r == 0 && fsync(fd) != 0) r = -errno;
  if (close(fd) != 0 && r == 0) r = -errno;
  if (r == 0 && renameat(dirfd, tmp, dirfd, name) != 0) r = -errno;
  if (r != 0) {
    unlinkat(dirfd, tmp, 0);
    return r;
  }
  return fsync(dirfd) == 0 ? 0 : -errno;
}

int pt_write_atomic(const char *path, const void *data, size_t len, mode_t mode) {
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return -ENAMETOOLONG;
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  if (!*name) return -EINVAL;
  int dfd = open(slash ? dirname(dir) : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -errno;
  int r = pt_write_atomic_at(dfd, name, data, len, mode);
  close(dfd);
  return r;
}

int pt_read_all(const char *path, size_t max, char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) != 0) { int e = -errno; close(fd); return e; }
  if (!S_ISREG(st.st_mode)) { close(fd); return -EINVAL; }
  if ((size_t)st.st_size > max) { close(fd); return -EFBIG; }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *b = malloc(cap);
  if (!b) { close(fd); return -ENOMEM; }
  for (;;) {
    if (n + 1 >= cap) {
      /* the file grew while we read it */
      if (cap > max) { free(b); close(fd); return -EFBIG; }
      char *nb = realloc(b, cap * 2);
      if (!nb) { free(b); close(fd); return -ENOMEM; }
      b = nb;
      cap *= 2;
    }
    ssize_t r = read(fd, b + n, cap - n - 1);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = -errno;
      free(b);
      close(fd);
      return e;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (n > max) { free(b); return -EFBIG; }
  b[n] = 0;
  *out = b;
  *len = n;
  return 0;
}

static pt_append_fault_fn g_fault;

void pt_append_set_fault(pt_append_fault_fn fn) { g_fault = fn; }

int pt_append_durable(int fd, const char *path, const void *data, size_t len) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  off_t before = st.st_size;
  int r;
  int fault = g_fault ? g_fault(path) : 0;
  if (fault > 0) {
    /* Simulate a device that fills up mid-line: half the bytes land, then
     * the write fails. Exercises the truncate-back path below for real. */
    (void)pt_write_all(fd, data, len / 2);
    r = -fault;
  } else {
    r = pt_write_all(fd, data, len);
    if (r == 0 && fdatasync(fd) != 0) r = -errno;
  }
  if (r == 0) return 0;
  /* Roll back to the previous length so the file never ends mid-line. */
  if (ftruncate(fd, before) != 0) return r;
  (void)fdatasync(fd);
  return r;
}
