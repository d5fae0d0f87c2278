/* test_write_all.c - the one write-all loop (src/common/pt_write_all.c):
 * short writes and writes interrupted by a signal (no SA_RESTART) still
 * deliver every byte in order; a closed reader gives -EPIPE, a full
 * non-blocking pipe -EAGAIN. */
#include "pt_test.h"
#include "common/pt_write_all.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define BIG ((size_t)4 << 20) /* far more than a pipe holds: many short writes */

typedef struct reader {
  int fd;
  uint8_t *got;
  size_t n;
} reader;

static volatile sig_atomic_t ticks, writer_done;

static void *read_all(void *p) {
  reader *r = p;
  /* Start reading only after a few signals hit the writer, which by then
   * has filled the pipe and is blocked in a write that has written nothing
   * (so it fails with EINTR, not short). */
  while (ticks < 3 && !writer_done) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  for (;;) {
    ssize_t k = read(r->fd, r->got + r->n, 4096 < BIG - r->n ? 4096 : BIG - r->n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    r->n += (size_t)k;
  }
  return NULL;
}

static void on_alarm(int sig) {
  (void)sig;
  ticks++;
}

PT_TEST(common_write_all_short_and_interrupted_writes) {
  int fds[2];
  PT_ASSERT_INT_EQ(pipe(fds), 0);
  uint8_t *data = malloc(BIG), *got = malloc(BIG);
  PT_ASSERT(data && got);
  for (size_t i = 0; i < BIG; i++) data[i] = (uint8_t)(i * 2654435761u >> 24);
  /* SIGALRM every 100 us, without SA_RESTART: blocked writes return EINTR
   * or short. The reader thread blocks it so the writer takes them. */
  sigset_t alrm;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alrm, NULL);
  reader r = {fds[0], got, 0};
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, read_all, &r), 0);
  pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  PT_ASSERT_INT_EQ(sigaction(SIGALRM, &sa, NULL), 0);
  struct itimerval it = {{0, 100}, {0, 100}};
  PT_ASSERT_INT_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
  int rc = pt_write_all(fds[1], data, BIG);
  writer_done = 1;
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  close(fds[1]);
  pthread_join(th, NULL);
  PT_ASSERT_INT_EQ(rc, 0);
  PT_ASSERT_UINT_EQ(r.n, BIG);
  PT_ASSERT_MEM_EQ(got, data, BIG);
  PT_ASSERT(ticks > 0);
  close(fds[0]);
  free(data);
  free(got);
}

PT_TEST(common_write_all_errors) {
  int fds[2];
  signal(SIGPIPE, SIG_IGN);
  PT_ASSERT_INT_EQ(pipe(fds), 0);
  close(fds[0]);
  PT_ASSERT_INT_EQ(pt_write_all(fds[1], "x", 1), -EPIPE);
  close(fds[1]);
  PT_ASSERT_INT_EQ(pipe2(fds, O_NONBLOCK), 0);
  static uint8_t block[1 << 20];
  PT_ASSERT_INT_EQ(pt_write_all(fds[1], block, sizeof block), -EAGAIN);
  PT_ASSERT_INT_EQ(pt_write_all(fds[1], block, 0), 0);
  PT_ASSERT_INT_EQ(pt_write_all(-1, "x", 1), -EBADF);
  close(fds[0]);
  close(fds[1]);
}
