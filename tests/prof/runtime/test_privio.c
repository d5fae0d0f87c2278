/*
 * test_privio.c - the library's transient reads stay out of the program's
 * descriptor table (src/prof/runtime/ptp_privio.c), and range closes go
 * around the library's descriptors (runtime/ptp_fdwatch.c).
 */
#include "pt_test.h"
#include "prof/cache/ptp_fdmarks.h"
#include "prof/runtime/ptp_privio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct probe {
  int program_fd;     /* open in the caller's table */
  int saw_program_fd; /* fcntl on that number worked in fn's table */
  int opened;         /* the number open(2) gave fn */
  uint32_t tid;
} probe;

static int probe_fn(void *p) {
  probe *pr = p;
  pr->saw_program_fd = fcntl(pr->program_fd, F_GETFD) != -1;
  pr->opened = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (pr->opened >= 0) close(pr->opened);
  pr->tid = (uint32_t)syscall(SYS_gettid);
  return 42;
}

PT_TEST(prof_privio_reads_in_a_table_of_its_own) {
  probe pr = { 0 };
  pr.program_fd = fcntl(0, F_DUPFD_CLOEXEC, 300);
  PT_ASSERT(pr.program_fd >= 300);
  PT_ASSERT_INT_EQ(ptp_privio_call(probe_fn, &pr), 42);
  PT_ASSERT(ptp_privio_private());
  /* the helper's table is empty: the caller's number means nothing there,
   * and its own first open is 0, whatever the caller's table holds */
  PT_ASSERT_INT_EQ(pr.saw_program_fd, 0);
  PT_ASSERT_INT_EQ(pr.opened, 0);
  PT_ASSERT(pr.tid != (uint32_t)syscall(SYS_gettid));
  PT_ASSERT(ptp_privio_is_helper(pr.tid));
  PT_ASSERT(!ptp_privio_is_helper((uint32_t)syscall(SYS_gettid)));
  /* a second call reuses the helper */
  probe again = { .program_fd = pr.program_fd };
  PT_ASSERT_INT_EQ(ptp_privio_call(probe_fn, &again), 42);
  PT_ASSERT_UINT_EQ(again.tid, pr.tid);
  close(pr.program_fd);
}

/* Three numbers in a row, the middle one marked as the library's. */
static int three_high(int fds[3]) {
  int base = 700;
  for (; base < 900; base += 3) {
    int ok = 1;
    for (int i = 0; i < 3; i++) ok &= fcntl(base + i, F_GETFD) == -1;
    if (ok) break;
  }
  for (int i = 0; i < 3; i++) {
    fds[i] = fcntl(0, F_DUPFD_CLOEXEC, base + i);
    if (fds[i] != base + i) return -1;
  }
  ptp_fd_mark(fds[1]);
  return 0;
}

PT_TEST(prof_close_range_goes_around_ours) {
  int fds[3];
  PT_ASSERT_INT_EQ(three_high(fds), 0);
  PT_ASSERT_INT_EQ(close_range((unsigned)fds[0], (unsigned)fds[2], 0), 0);
  PT_ASSERT(fcntl(fds[0], F_GETFD) == -1 && errno == EBADF);
  PT_ASSERT(fcntl(fds[2], F_GETFD) == -1 && errno == EBADF);
  PT_ASSERT(fcntl(fds[1], F_GETFD) != -1);           /* ours, left open */
  PT_ASSERT_INT_EQ(ptp_fd_next_mark((unsigned)fds[0], (unsigned)fds[2]), fds[1]);
  PT_ASSERT_INT_EQ(ptp_fd_take_lost(), 0);           /* nothing of ours closed */
  /* close(2) on our number closes it (the program's call, libc's result),
   * and is noticed */
  PT_ASSERT_INT_EQ(close(fds[1]), 0);
  PT_ASSERT_INT_EQ(ptp_fd_next_mark((unsigned)fds[0], (unsigned)fds[2]), -1);
  PT_ASSERT_INT_EQ(ptp_fd_take_lost(), 1);
}

PT_TEST(prof_closefrom_goes_around_ours) {
  /* in a child: closefrom closes everything from its argument */
  pid_t pid = fork();
  PT_ASSERT(pid >= 0);
  if (pid == 0) {
    int fds[3];
    if (three_high(fds) != 0) _exit(10);
    closefrom(fds[0]);
    if (fcntl(fds[0], F_GETFD) != -1 || fcntl(fds[2], F_GETFD) != -1) _exit(11);
    if (fcntl(fds[1], F_GETFD) == -1) _exit(12);
    if (ptp_fd_take_lost()) _exit(13);
    _exit(0);
  }
  int st = 0;
  PT_ASSERT_INT_EQ(waitpid(pid, &st, 0), pid);
  PT_ASSERT(WIFEXITED(st));
  PT_ASSERT_INT_EQ(WEXITSTATUS(st), 0);
}
