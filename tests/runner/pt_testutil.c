/* pt_testutil.c - small helpers shared by the unit tests (see pt_test.h). */
#include "pt_test.h"
#include "pt_config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *pt_tmpdir(const char *tag) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  size_t n = strlen(base) + strlen(tag) + 32;
  char *p = malloc(n);
  if (!p) pt_test_fail(__FILE__, __LINE__, "oom");
  snprintf(p, n, "%s/pt-%s-XXXXXX", base, tag);
  if (!mkdtemp(p)) pt_test_fail(__FILE__, __LINE__, "mkdtemp %s: %s", p, strerror(errno));
  return p;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  remove(path);
  return 0;
}

void pt_rm_rf(const char *path) {
  if (path) nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int pt_run(char *const argv[], char **out, int timeout_ms) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) { close(fds[0]); close(fds[1]); return -1; }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  int64_t start = pt_now_ms();
  int status = 0, done = 0, eof = 0;
  while (!done || !eof) {
    if (!eof) {
      if (cap - len < 4096) { cap *= 2; buf = realloc(buf, cap); }
      ssize_t r = read(fds[0], buf + len, cap - len - 1);
      if (r > 0) { len += (size_t)r; continue; }
      if (r == 0) eof = 1;
      else if (errno != EAGAIN && errno != EINTR) eof = 1;
    }
    if (!done) {
      pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid) done = 1;
      else if (pt_now_ms() - start > timeout_ms) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        done = 1;
      }
    }
    if (done && !eof && pt_now_ms() - start > timeout_ms + 2000) break;
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  close(fds[0]);
  buf[len] = 0;
  if (out) *out = buf; else free(buf);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

char *pt_read_file(const char *path, size_t *lenp) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  for (;;) {
    if (cap - len < 2) { cap *= 2; buf = realloc(buf, cap); }
    ssize_t r = read(fd, buf + len, cap - len - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(fd);
  buf[len] = 0;
  if (lenp) *lenp = len;
  return buf;
}

void pt_write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) pt_test_fail(__FILE__, __LINE__, "open %s: %s", path, strerror(errno));
  const char *p = data;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) pt_test_fail(__FILE__, __LINE__, "write %s: %s", path, strerror(errno));
    p += w; len -= (size_t)w;
  }
  close(fd);
}

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

char *pt_build_path(const char *rel) { return join(PT_BUILD_DIR, rel); }
char *pt_source_path(const char *rel) { return join(PT_SOURCE_DIR, rel); }
