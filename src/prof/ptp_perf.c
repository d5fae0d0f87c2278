/*
 * ptp_perf.c - perf_event task-clock events per thread (see ptp_perf.h).
 * Not signal-safe: called by the thread registry under its mutex.
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prof/ptp_perf.h"

/* exclude_kernel is required by perf_event_paranoid > 1 (and harmless to
 * ask for when it is not: we keep it whenever the setting is unreadable). */
static int want_exclude_kernel(void) {
  FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
  if (!f) return 1;
  int v = 2;
  if (fscanf(f, "%d", &v) != 1) v = 2;
  fclose(f);
  return v > 1;
}

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

static _Atomic int exclude_kernel_cached = -1;

int ptp_perf_probe(void) {
  exclude_kernel_cached = want_exclude_kernel();
  int fd = open_event((uint32_t)gettid(), 10000000, exclude_kernel_cached);
  if (fd < 0) return fd;
  close(fd);
  return 0;
}

int ptp_perf_open(uint32_t tid, int64_t first_ns, int *fd_out) {
  if (exclude_kernel_cached < 0) exclude_kernel_cached = want_exclude_kernel();
  /* the kernel's hrtimer events never fire sooner than 10 us */
  if (first_ns < 10000) first_ns = 10000;
  int fd = open_event(tid, first_ns, exclude_kernel_cached);
  if (fd < 0) return fd == -ESRCH || fd == -EINVAL ? -ESRCH : fd;
  struct f_owner_ex own = { .type = F_OWNER_TID, .pid = (pid_t)tid };
  int rc = 0;
  if (fcntl(fd, F_SETOWN_EX, &own) != 0 || fcntl(fd, F_SETSIG, SIGPROF) != 0 ||
      fcntl(fd, F_SETFL, O_ASYNC) != 0)
    rc = -errno;
  if (rc) {
    close(fd);
    return rc;
  }
  *fd_out = fd;
  return 0;
}

int ptp_perf_enable(int fd) {
  return ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0 ? 0 : -errno;
}

int ptp_perf_excludes_kernel(void) {
  if (exclude_kernel_cached < 0) exclude_kernel_cached = want_exclude_kernel();
  return exclude_kernel_cached;
}
