/*
 * ptp_fdmarks.c - the marks of our long-lived descriptor numbers (see
 * ptp_fdmarks.h). Calls nothing.
 *
 * Process-wide state (runtime/ptp_process.h): `marks`.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "prof/cache/ptp_fdmarks.h"

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

int ptp_fd_next_mark(unsigned lo, unsigned hi) {
  if (lo >= PTP_FD_MARK_MAX || hi < lo) return -1;
  if (hi >= PTP_FD_MARK_MAX) hi = PTP_FD_MARK_MAX - 1;
  for (unsigned w = lo / 64; w <= hi / 64; w++) {
    uint64_t m = ~0ull;
    if (w == lo / 64) m &= ~0ull << (lo % 64);
    if (w == hi / 64 && hi % 64 != 63) m &= (1ull << (hi % 64 + 1)) - 1;
    uint64_t hit = atomic_load_explicit(&marks.bits[w], memory_order_relaxed) & m;
    if (hit) return (int)(w * 64 + (unsigned)__builtin_ctzll(hit));
  }
  return -1;
}

int ptp_fd_take_lost(void) {
  return atomic_load_explicit(&marks.lost, memory_order_relaxed) && atomic_exchange(&marks.lost, 0);
}

