/*
 * ptp_perf.c - perf_event task-clock events per thread (see ptp_perf.h).
 * Not signal-safe: called by the thread registry under its mutex.
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prof/cache/ptp_fd.h"
#include "prof/cache/ptp_fdmarks.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/signal/ptp_perffd.h"

/* exclude_kernel is required by perf_event_paranoid > 1 unless the process
 * has CAP_PERFMON (or CAP_SYS_ADMIN). Asking for it costs truth: a period
 * that ends in kernel mode then sends no signal, and that CPU shows only as
 * [lost: kernel mode]. Without it the signal is still delivered on the
 * thread's return to user mode, so the handler sees the user stack that
 * entered the kernel (a syscall or a fault), the stack the thread really
 * had, as the timer engine does for its kernel time. So the probe tries
 * without it first and keeps it only when the kernel refuses (EACCES or
 * EPERM), whatever the paranoid file says. */
static _Atomic int exclude_kernel_cached = -1;

static int open_event(uint32_t tid, int64_t period_ns, int exclude_kernel) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = (uint64_t)period_ns;
  a.disabled = 1;
  a.exclude_kernel = exclude_kernel ? 1 : 0;
  a.exclude_hv = 1;
  a.wakeup_events = 1;
  long fd = syscall(SYS_perf_event_open, &a, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  return fd < 0 ? -errno : (int)fd;
}

/* Settles exclude_kernel_cached with one event on the calling thread.
 * Returns the open's result (0 or -errno). */
static int probe_exclude_kernel(void) {
  int fd = open_event((uint32_t)gettid(), 10000000, 0);
  if (fd >= 0) {
    exclude_kernel_cached = 0;
    close(fd);
    return 0;
  }
  if (fd != -EACCES && fd != -EPERM) {
    exclude_kernel_cached = 1;
    return fd;
  }
  exclude_kernel_cached = 1;
  fd = open_event((uint32_t)gettid(), 10000000, 1);
  if (fd < 0) return fd;
  close(fd);
  return 0;
}

int ptp_perf_probe(void) {
  return probe_exclude_kernel();
}

int ptp_perf_open(uint32_t tid, int64_t first_ns, int *fd_out, ptp_perf_ident *id_out) {
  if (exclude_kernel_cached < 0) (void)probe_exclude_kernel();
  /* the kernel's hrtimer events never fire sooner than 10 us */
  if (first_ns < 10000) first_ns = 10000;
  int low = open_event(tid, first_ns, exclude_kernel_cached);
  if (low < 0) return low == -ESRCH || low == -EINVAL ? -ESRCH : low;
  /* Above the floor before O_ASYNC: the kernel records the descriptor
   * number for si_fd when O_ASYNC is set, and keeps that record until the
   * event's last descriptor is closed. */
  int fd = ptp_fd_move_high(low);
  if (fd < 0) {
    close(low);
    return -EMFILE;       /* no room above the floor: the caller takes a timer */
  }
  struct f_owner_ex own = { .type = F_OWNER_TID, .pid = (pid_t)tid };
  int rc = 0;
  ptp_fd_id fid;
  if (fcntl(fd, F_SETOWN_EX, &own) != 0 || fcntl(fd, F_SETSIG, SIGPROF) != 0 ||
      fcntl(fd, F_SETFL, O_ASYNC) != 0 || ioctl(fd, PERF_EVENT_IOC_ID, &id_out->id) != 0)
    rc = -errno;
  if (rc == 0) rc = ptp_fd_id_of(fd, &fid);
  if (rc) {
    close(fd);
    return rc;
  }
  id_out->dev = fid.dev;
  id_out->ino = fid.ino;
  ptp_fd_mark(fd);        /* the close-family interposers notice its close */
  ptp_perffd_opened(fd);  /* the handler tells its signals apart, even late ones */
  *fd_out = fd;
  return 0;
}

int ptp_perf_is(int fd, const ptp_perf_ident *id) {
  ptp_fd_id fid = { id->dev, id->ino };
  uint64_t kid;
  /* fstat first: only a file on the perf events' anonymous inode gets the
   * perf ioctl (its number means something else to other drivers). */
  return ptp_fd_is(fd, &fid) && ioctl(fd, PERF_EVENT_IOC_ID, &kid) == 0 && kid == id->id;
}

int ptp_perf_enable(int fd) {
  return ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0 ? 0 : -errno;
}

int ptp_perf_excludes_kernel(void) {
  if (exclude_kernel_cached < 0) (void)probe_exclude_kernel();
  return exclude_kernel_cached;
}
