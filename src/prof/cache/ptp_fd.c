/*
 * ptp_fd.c - placement and identity of the library's long-lived descriptors
 * (see ptp_fd.h).
 *
 * Process-wide state (runtime/ptp_process.h): `marks`, the bitmap of our
 * long-lived descriptor numbers and the "one of ours was closed" flag
 * (atomics; never reset: a fork child's copy is right for its copy of the
 * descriptor table until its engine forgets the events).
 * Threads: any thread. Not for signal handlers but the note/take calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdatomic.h>

#include "prof/cache/ptp_fd.h"

static struct {
  _Atomic uint64_t bits[PTP_FD_MARK_MAX / 64];
  _Atomic int lost;
} marks;

void ptp_fd_mark(int fd) {
  if (fd < 0 || fd >= PTP_FD_MARK_MAX) return;
  atomic_fetch_or(&marks.bits[fd / 64], 1ull << (fd % 64));
}

void ptp_fd_unmark(int fd) {
  if (fd < 0 || fd >= PTP_FD_MARK_MAX) return;
  atomic_fetch_and(&marks.bits[fd / 64], ~(1ull << (fd % 64)));
}

int ptp_fd_note_closed(unsigned lo, unsigned hi) {
  if (lo >= PTP_FD_MARK_MAX || hi < lo) return 0;
  if (hi >= PTP_FD_MARK_MAX) hi = PTP_FD_MARK_MAX - 1;
  int hit = 0;
  for (unsigned w = lo / 64; w <= hi / 64; w++) {
    uint64_t m = ~0ull;
    if (w == lo / 64) m &= ~0ull << (lo % 64);
    if (w == hi / 64 && hi % 64 != 63) m &= (1ull << (hi % 64 + 1)) - 1;
    if (atomic_load_explicit(&marks.bits[w], memory_order_relaxed) & m) {
      atomic_fetch_and(&marks.bits[w], ~m);
      hit = 1;
    }
  }
  if (hit) atomic_store(&marks.lost, 1);
  return hit;
}

int ptp_fd_take_lost(void) {
  return atomic_load_explicit(&marks.lost, memory_order_relaxed) && atomic_exchange(&marks.lost, 0);
}

uint64_t ptp_fd_soft_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

int ptp_fd_floor(void) {
  uint64_t soft = ptp_fd_soft_limit();
  uint64_t floor = soft - soft / 4;
  if (floor > PTP_FD_FLOOR_MAX) floor = PTP_FD_FLOOR_MAX;
  if (floor < 3) floor = 3;
  return (int)floor;
}

int ptp_fd_move_high(int fd) {
  int nfd = fcntl(fd, F_DUPFD_CLOEXEC, ptp_fd_floor());
  if (nfd < 0) return -errno;
  close(fd);
  return nfd;
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
