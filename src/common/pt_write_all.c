/*
 * pt_write_all.c - see pt_write_all.h. Runs in signal handlers too: only
 * write(2), no state.
 */
#include "common/pt_write_all.h"

#include <errno.h>
#include <unistd.h>

int pt_write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (w == 0) return -EIO;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}
