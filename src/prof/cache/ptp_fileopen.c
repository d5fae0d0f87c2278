/*
 * ptp_fileopen.c - opening files the library reads (see ptp_fileopen.h).
 *
 * Threads: no state; any thread. Not for signal handlers.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof/cache/ptp_fileopen.h"

int ptp_file_open_regular(int dfd, const char *path, int flags, uint64_t max_size,
                          struct stat *st_out) {
  struct stat before, st;
  int at = (flags & PTP_OPEN_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0;
  if (fstatat(dfd, path, &before, at) != 0) return -errno;
  /* A FIFO, device or socket is never opened: opening is itself an
   * action for some of them. */
  if (!S_ISREG(before.st_mode)) return -EINVAL;
  int fd = openat(dfd, path,
                  O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
                      ((flags & PTP_OPEN_NOFOLLOW) ? O_NOFOLLOW : 0));
  if (fd < 0) return -errno;
  int r = 0;
  if (fstat(fd, &st) != 0) r = -errno;
  else if (!S_ISREG(st.st_mode)) r = -EINVAL;
  else if (st.st_dev != before.st_dev || st.st_ino != before.st_ino) r = -ESTALE;
  else if ((uint64_t)st.st_size > max_size) r = -EFBIG;
  if (r) {
    close(fd);
    return r;
  }
  if (st_out) *st_out = st;
  return fd;
}

int ptp_file_trusted(const struct stat *st) {
  return (st->st_uid == 0 || st->st_uid == geteuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

int ptp_file_private_copy(int fd, const struct stat *st) {
  if ((uint64_t)st->st_size > PTP_FILE_COPY_MAX) return -EFBIG;
  int mfd = memfd_create("ptprof-file", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mfd < 0) return -errno;
  int r = 0;
  char buf[65536];
  off_t off = 0;
  while (r == 0) {
    ssize_t n = pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { r = -errno; break; }
    if (n == 0) break;
    for (ssize_t w = 0; w < n;) {
      ssize_t k = write(mfd, buf + w, (size_t)(n - w));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) { r = k < 0 ? -errno : -EIO; break; }
      w += k;
    }
    off += n;
    if ((uint64_t)off > PTP_FILE_COPY_MAX) r = -EFBIG;
  }
  /* a file cut or grown while we read is not the one we checked */
  if (r == 0 && off != st->st_size) r = -EIO;
  if (r == 0 && fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    r = -errno;
  if (r) {
    close(mfd);
    return r;
  }
  return mfd;
}
