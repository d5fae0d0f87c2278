/*
 * ptp_procfs.c - /proc parsing for the thread registry (see ptp_procfs.h).
 *
 * Every file is opened O_NONBLOCK | O_CLOEXEC (the library's rule for
 * whatever it opens, docs/sampler.md "Files") and closed in the same
 * call: no descriptor of ours outlives a call here. Each read runs on the
 * ptprof-io helper (ptp_privio.h), in a descriptor table of its own: the
 * sweep reads these files every second, while the program may be opening
 * its own and counting on the lowest numbers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "prof/runtime/ptp_privio.h"
#include "prof/runtime/ptp_procfs.h"
#include "prof/signal/ptp_thread_sig.h"
#include "prof/ptp_alloc.h"

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static int tasks_read(uint32_t **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
  if (dfd < 0) return -errno;
  DIR *d = fdopendir(dfd);
  if (!d) {
    int e = -errno;
    close(dfd);
    return e;
  }
  size_t n = 0, cap = 64;
  uint32_t *tids = ptp_malloc(cap * sizeof *tids);
  struct dirent *e;
  while (tids && (e = readdir(d))) {
    char *end;
    unsigned long v = strtoul(e->d_name, &end, 10);
    if (*end || v == 0 || v >= PTP_TID_LIMIT) continue;
    if (n == cap) {
      uint32_t *nt = ptp_realloc(tids, cap * 2 * sizeof *nt);
      if (!nt) { free(tids); tids = NULL; break; }
      tids = nt;
      cap *= 2;
    }
    tids[n++] = (uint32_t)v;
  }
  closedir(d);
  if (!tids) return -ENOMEM;
  qsort(tids, n, sizeof *tids, cmp_u32);
  *out = tids;
  *n_out = n;
  return 0;
}

static uint64_t start_ticks_read(uint32_t tid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/self/task/%u/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');            /* comm may contain spaces */
  if (!p) return 0;
  int field = 2;
  for (p++; *p && field < 22; p++)
    if (*p == ' ') field++;
  return field == 22 ? strtoull(p, NULL, 10) : 0;
}

static int comm_read(uint32_t tid, char name[16]) {
  name[0] = 0;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -errno;
  ssize_t n = read(fd, name, 15);
  int e = errno;
  close(fd);
  if (n <= 0) {
    name[0] = 0;
    return n < 0 ? -e : -ENOENT;
  }
  name[n] = 0;
  char *nl = strchr(name, '\n');
  if (nl) *nl = 0;
  return 0;
}

static void main_stack_read(uintptr_t *lo, uintptr_t *hi) {
  *lo = *hi = 0;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return;
  }
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (!strstr(line, "[stack]")) continue;
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx", &a, &b) == 2) {
      struct rlimit rl;
      uintptr_t size = 8u << 20;
      if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) size = rl.rlim_cur;
      else size = (uintptr_t)1 << 30;
      if (size < b - a) size = b - a;
      *hi = b;
      *lo = b > size ? b - size : 0;
    }
    break;
  }
  fclose(f);
}

/* ---- the public calls: each read on the helper ---- */

typedef struct procfs_job {
  uint32_t tid;
  const uint32_t *many;     /* comms_job: n tids, names out */
  size_t n;
  char (*names)[16];
  uint32_t **tids;
  size_t *nout;
  char *name;
  uint64_t ticks;
  uintptr_t *lo, *hi;
} procfs_job;

static int tasks_job(void *p) {
  procfs_job *j = p;
  return tasks_read(j->tids, j->nout);
}

int ptp_procfs_tasks(uint32_t **out, size_t *n) {
  procfs_job j = { .tids = out, .nout = n };
  return ptp_privio_call(tasks_job, &j);
}

static int start_ticks_job(void *p) {
  procfs_job *j = p;
  j->ticks = start_ticks_read(j->tid);
  return 0;
}

uint64_t ptp_procfs_start_ticks(uint32_t tid) {
  procfs_job j = { .tid = tid };
  (void)ptp_privio_call(start_ticks_job, &j);
  return j.ticks;
}

static int comm_job(void *p) {
  procfs_job *j = p;
  return comm_read(j->tid, j->name);
}

int ptp_procfs_comm(uint32_t tid, char name[16]) {
  procfs_job j = { .tid = tid, .name = name };
  return ptp_privio_call(comm_job, &j);
}

static int comms_job(void *p) {
  procfs_job *j = p;
  int missing = 0;
  for (size_t i = 0; i < j->n; i++)
    if (comm_read(j->many[i], j->names[i]) != 0) missing++;
  return missing;
}

size_t ptp_procfs_comms(const uint32_t *tids, size_t n, char (*names)[16]) {
  if (n == 0) return 0;
  procfs_job j = { .many = tids, .n = n, .names = names };
  return (size_t)ptp_privio_call(comms_job, &j);
}

static int main_stack_job(void *p) {
  procfs_job *j = p;
  main_stack_read(j->lo, j->hi);
  return 0;
}

void ptp_procfs_main_stack(uintptr_t *lo, uintptr_t *hi) {
  procfs_job j = { .lo = lo, .hi = hi };
  (void)ptp_privio_call(main_stack_job, &j);
}
