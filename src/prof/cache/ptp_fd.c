/*
 * ptp_fd.c - placement and identity of the library's long-lived descriptors
 * (see ptp_fd.h).
 *
 * The marks of our numbers are ptp_fdmarks.c's (a unit that calls no
 * close(2): the close-family interposers use it).
 * Process-wide state (runtime/ptp_process.h): `place`, the next number to
 * try (an atomic hint; any value is safe, F_DUPFD decides).
 * Threads: any thread. Not for signal handlers.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdatomic.h>

#include "prof/cache/ptp_fd.h"
#include "prof/cache/ptp_fdmarks.h"

static struct {
  _Atomic int next;              /* the number below the last one placed */
} place;

uint64_t ptp_fd_soft_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

/* The top of our range: the soft limit, at most PTP_FD_TOP_MAX. */
static int fd_top(void) {
  uint64_t soft = ptp_fd_soft_limit();
  if (soft > PTP_FD_TOP_MAX) soft = PTP_FD_TOP_MAX;
  return (int)soft;
}

int ptp_fd_floor(void) {
  int top = fd_top();
  int floor = top - top / 4;
  return floor < 3 ? 3 : floor;
}

int ptp_fd_move_high(int fd) {
  int top = fd_top(), floor = ptp_fd_floor();
  /* From the top down: F_DUPFD gives the lowest free number at or above
   * its argument, so start at the frontier of what we placed (the hint),
   * step down while everything above is taken (ours, or the program's near
   * its limit), and never go below the floor. */
  int start = atomic_load(&place.next);
  if (start <= 0 || start >= top) start = top - 1;
  for (int pass = 0; pass < 2; pass++) {
    /* the second pass from the very top: numbers we closed since are free */
    int want = pass ? top - 1 : start;
    for (int step = 1; want >= floor; want -= step, step *= 2) {
      int nfd = fcntl(fd, F_DUPFD_CLOEXEC, want);
      if (nfd >= 0) {
        close(fd);
        atomic_store(&place.next, nfd - 1);
        return nfd;
      }
      if (errno != EMFILE && errno != EINVAL) return -errno;
    }
    if (start == top - 1) break;
  }
  return -EMFILE;
}

int ptp_fd_id_of(int fd, ptp_fd_id *out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  out->dev = (uint64_t)st.st_dev;
  out->ino = (uint64_t)st.st_ino;
  return 0;
}

int ptp_fd_is(int fd, const ptp_fd_id *id) {
  ptp_fd_id now;
  return fd >= 0 && ptp_fd_id_of(fd, &now) == 0 && now.dev == id->dev && now.ino == id->ino;
}

int ptp_fd_close_if(int fd, const ptp_fd_id *id) {
  ptp_fd_unmark(fd);
  if (!ptp_fd_is(fd, id)) return -ESTALE;
  close(fd);
  return 0;
}
