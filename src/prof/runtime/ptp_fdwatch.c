/*
 * ptp_fdwatch.c - the close family (close, close_range, closefrom, dup2,
 * dup3) interposed, so that the program closing one of the library's
 * long-lived descriptors is noticed at once (docs/sampler.md,
 * "Descriptors").
 *
 * The descriptor table is the program's and it may close any number.
 * The range closers (close_range without flags, closefrom: a program's
 * start, a daemon detaching) close around our marked numbers, which the
 * program never held: it sees what it sees unprofiled and our events stay
 * (reopening them would take the lowest free number for a moment, the very
 * number the program's next open counts on). The others (close, dup2 and
 * dup3 onto a number, close_range with flags) call the real function
 * first, unchanged (the program gets exactly its result, errno included),
 * then, if a number they closed was one of ours (cache/ptp_fdmarks.h: one
 * atomic load for a plain close), wake the consumer, which forgets that
 * descriptor without touching the number again and opens the thread's
 * event anew 100 ms later (ptp_threads_check_fds).
 * Async-signal-safe, as close is. The library's own closes go through
 * these too (they bind like the program's): it unmarks a number before
 * closing it.
 *
 * Binding as ptp_interpose.c's: exported with default visibility. The
 * next definitions (a sanitizer's interceptor, else libc's) are looked up
 * once, in this file's constructor (dlsym RTLD_NEXT); before it ran, close
 * and dup2 call libc's exported __close and __dup2, and close_range and
 * dup3 their system call. closefrom is close_range's (libc's closefrom is
 * never called).
 *
 * Calls: cache/ptp_fdmarks.c, the ring's producer (the futex wake); neither
 * calls close. Process-wide state (runtime/ptp_process.h): `fw`, libc's
 * functions.
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/close_range.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ptprof.h"
#include "prof/cache/ptp_fdmarks.h"
#include "prof/runtime/ptp_fdwatch.h"
#include "prof/runtime/ptp_shim.h"
#include "prof/signal/ptp_producer.h"

static struct {
  _Atomic(void *) close, dup2, close_range, dup3;
} fw;

__attribute__((constructor)) static void resolve_fw(void) {
  atomic_store(&fw.close, dlsym(RTLD_NEXT, "close"));
  atomic_store(&fw.dup2, dlsym(RTLD_NEXT, "dup2"));
  atomic_store(&fw.close_range, dlsym(RTLD_NEXT, "close_range"));
  atomic_store(&fw.dup3, dlsym(RTLD_NEXT, "dup3"));
}

void ptp_fdwatch_link(void) {}


typedef int (*close_range_fn)(unsigned, unsigned, int);
typedef int (*dup3_fn)(int, int, int);

int __close(int fd);
int __dup2(int oldfd, int newfd);

/* After the program closed [lo, hi]: if one of ours was among them, wake
 * the consumer to check (it holds no lock here; the wake is a futex on the
 * running sampler's word, read under the handler grace). errno is kept:
 * the program reads the real call's. */
static void closed_range(unsigned lo, unsigned hi) {
  if (!ptp_fd_note_closed(lo, hi)) return;
  int saved = errno;
  atomic_fetch_add(&ptp_g_inside, 1);
  ptp_shared *sh = atomic_load(&ptp_g_shared);
  if (sh) ptp_wake_now(sh);
  atomic_fetch_sub(&ptp_g_inside, 1);
  errno = saved;
}

PTPROF_API PTP_SHIM int close(int fd) {
  /* the next close (a sanitizer's interceptor, else libc's: a cancellation
   * point, as is), or libc's __close before this file's constructor ran */
  int (*real)(int) = (int (*)(int))atomic_load_explicit(&fw.close, memory_order_relaxed);
  int rc = real ? real(fd) : __close(fd);
  if (fd >= 0) closed_range((unsigned)fd, (unsigned)fd);
  return rc;
}

static PTP_SHIM int real_close_range(unsigned lo, unsigned hi, int flags) {
  close_range_fn real = (close_range_fn)atomic_load(&fw.close_range);
  return real ? real(lo, hi, flags) : (int)syscall(SYS_close_range, lo, hi, flags);
}

/* Closes [lo, hi] but our marked numbers, in the runs between them: the
 * program sees what it sees unprofiled (everything it held in the range is
 * closed; ours were never its own), and our events stay, so no descriptor
 * is opened anew while the program, having just closed everything, counts
 * on open(2) giving it the lowest numbers. A number marked between the
 * scan and a run's close is noticed as for a plain close. Returns 0, or
 * the first failing run's -1 (errno set). */
static PTP_SHIM int close_around_ours(unsigned lo, unsigned hi) {
  unsigned cur = lo;
  for (;;) {
    int m = ptp_fd_next_mark(cur, hi);
    if (m < 0 || (unsigned)m > cur) {
      unsigned end = m < 0 ? hi : (unsigned)m - 1;
      if (real_close_range(cur, end, 0) != 0) return -1;
      closed_range(cur, end);
    }
    if (m < 0 || (unsigned)m >= hi) return 0;
    cur = (unsigned)m + 1;
  }
}

PTPROF_API PTP_SHIM int close_range(unsigned lo, unsigned hi, int flags) {
  if (flags == 0 && lo <= hi) return close_around_ours(lo, hi);
  /* CLOSE_RANGE_UNSHARE: the caller's new table is its own (ours stay in
   * the shared one); CLOSE_RANGE_CLOEXEC only marks them close-on-exec
   * (ours are already). As is, noticed as a plain close. */
  int rc = real_close_range(lo, hi, flags);
  if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC)) closed_range(lo, hi);
  return rc;
}

PTPROF_API PTP_SHIM void closefrom(int lo) {
  /* glibc's closefrom: close_range(max(lo, 0), ~0U, 0), or a walk of
   * /proc/self/fd where the kernel lacks it, which runs need not */
  int saved = errno;
  (void)close_around_ours(lo < 0 ? 0u : (unsigned)lo, ~0u);
  errno = saved;
}

PTPROF_API PTP_SHIM int dup2(int oldfd, int newfd) {
  int (*real)(int, int) = (int (*)(int, int))atomic_load_explicit(&fw.dup2, memory_order_relaxed);
  int rc = real ? real(oldfd, newfd) : __dup2(oldfd, newfd);
  if (rc >= 0 && oldfd != newfd) closed_range((unsigned)newfd, (unsigned)newfd);
  return rc;
}

PTPROF_API PTP_SHIM int dup3(int oldfd, int newfd, int flags) {
  dup3_fn real = (dup3_fn)atomic_load(&fw.dup3);
  int rc = real ? real(oldfd, newfd, flags) : (int)syscall(SYS_dup3, oldfd, newfd, flags);
  if (rc >= 0) closed_range((unsigned)newfd, (unsigned)newfd);
  return rc;
}

