/* Unit tests for the daemon log (src/daemon/pd_log.c): lines always reach
 * the log file; the stderr mirror is off unless the daemon (or
 * POLYTOKEN_LOG_STDERR=1) turns it on, which keeps the unit-test output
 * quiet. Each test runs in its own forked child, so redirecting stderr and
 * changing the environment stay local to it. */
#include "pt_test.h"
#include "daemon/pd_log.h"

#include <fcntl.h>
#include <unistd.h>

/* Sends this process's stderr to `path`; returns the saved descriptor. */
static int stderr_to(const char *path) {
  fflush(stderr);
  int saved = dup(2);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  PT_ASSERT(saved >= 0 && fd >= 0);
  PT_ASSERT(dup2(fd, 2) == 2);
  close(fd);
  return saved;
}

static void stderr_back(int saved) {
  fflush(stderr);
  PT_ASSERT(dup2(saved, 2) == 2);
  close(saved);
}

static char *path_in(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

PT_TEST(daemon_log_quiet_on_stderr_unless_enabled) {
  unsetenv("POLYTOKEN_LOG_STDERR");
  char *dir = pt_tmpdir("log");
  char *logp = path_in(dir, "daemon.log"), *errp = path_in(dir, "stderr");
  PT_ASSERT_INT_EQ(pd_log_open(logp), 0);
  int saved = stderr_to(errp);
  pd_info("first line %d", 1);
  pd_log_set_stderr(1);
  pd_warn("second line");
  pd_log_set_stderr(0);
  pd_error("third line");
  stderr_back(saved);
  pd_log_close();
  char *log = pt_read_file(logp, NULL), *err = pt_read_file(errp, NULL);
  PT_ASSERT(log && err);
  /* the file gets every line, in the documented format */
  PT_ASSERT_MSG(strstr(log, "Z INFO first line 1\n") != NULL, "log: %s", log);
  PT_ASSERT(strstr(log, "Z WARN second line\n") != NULL);
  PT_ASSERT(strstr(log, "Z ERROR third line\n") != NULL);
  /* stderr only while the mirror was on */
  PT_ASSERT_MSG(strstr(err, "first line") == NULL, "stderr: %s", err);
  PT_ASSERT(strstr(err, "Z WARN second line\n") != NULL);
  PT_ASSERT(strstr(err, "third line") == NULL);
  free(log);
  free(err);
  free(logp);
  free(errp);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(daemon_log_stderr_forced_by_environment) {
  setenv("POLYTOKEN_LOG_STDERR", "1", 1);
  char *dir = pt_tmpdir("logenv");
  char *errp = path_in(dir, "stderr");
  int saved = stderr_to(errp);
  pd_info("no file, mirrored"); /* before pd_log_open: stderr only */
  stderr_back(saved);
  char *err = pt_read_file(errp, NULL);
  PT_ASSERT(err != NULL);
  PT_ASSERT_MSG(strstr(err, "Z INFO no file, mirrored\n") != NULL, "stderr: %s", err);
  free(err);
  free(errp);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(daemon_log_escapes_outside_text_in_file_and_stderr) {
  unsetenv("POLYTOKEN_LOG_STDERR");
  char *dir = pt_tmpdir("logesc");
  char *logp = path_in(dir, "daemon.log"), *errp = path_in(dir, "stderr");
  PT_ASSERT_INT_EQ(pd_log_open(logp), 0);
  int saved = stderr_to(errp);
  pd_log_set_stderr(1);
  pd_info("client 1: hello from %s", "evil\x1b]0;title\x07\nERROR forged");
  pd_log_set_stderr(0);
  stderr_back(saved);
  pd_log_close();
  char *log = pt_read_file(logp, NULL), *err = pt_read_file(errp, NULL);
  PT_ASSERT(log && err);
  const char *want = "Z INFO client 1: hello from evil\\x1b]0;title\\x07\\nERROR forged\n";
  PT_ASSERT_MSG(strstr(log, want) != NULL, "log: %s", log);
  PT_ASSERT_MSG(strstr(err, want) != NULL, "stderr: %s", err);
  /* one line each, no raw control byte */
  PT_ASSERT(strchr(log, '\n') == log + strlen(log) - 1);
  PT_ASSERT(strchr(err, '\n') == err + strlen(err) - 1);
  PT_ASSERT(strchr(log, 0x1b) == NULL && strchr(err, 0x1b) == NULL);
  free(log);
  free(err);
  free(logp);
  free(errp);
  pt_rm_rf(dir);
  free(dir);
}
