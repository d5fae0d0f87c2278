/*
 * runner.c - runs the tests registered with PT_TEST, each in a forked child
 * with a timeout (libuv's test runner is the model). Output is one line per
 * test ("ok", "not ok", "skip") and a closing "N passed, N failed, N skipped".
 */
#include "pt_test.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  const char *name;
  const char *file;
  pt_test_fn fn;
  int timeout_ms;
} pt_test_entry;

static pt_test_entry *g_tests;
static size_t g_ntests, g_cap;

void pt_test_register(const char *name, const char *file, pt_test_fn fn, int timeout_ms) {
  if (g_ntests == g_cap) {
    g_cap = g_cap ? g_cap * 2 : 64;
    g_tests = realloc(g_tests, g_cap * sizeof *g_tests);
    if (!g_tests) abort();
  }
  g_tests[g_ntests++] = (pt_test_entry){name, file, fn, timeout_ms};
}

void pt_test_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(NULL);
  _exit(1);
}

void pt_test_skip(const char *reason) {
  fprintf(stderr, "skip: %s\n", reason);
  fflush(NULL);
  _exit(77);
}

int64_t pt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cmp_test(const void *a, const void *b) {
  const pt_test_entry *x = a, *y = b;
  int c = strcmp(x->file, y->file);
  return c ? c : strcmp(x->name, y->name);
}

/* 0 pass, 1 fail, 2 skip */
static int run_one(const pt_test_entry *t, int do_fork) {
  if (!do_fork) {
    t->fn();
    return 0;
  }
  fflush(NULL);
  int64_t start = pt_now_ms();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "fork: %s\n", strerror(errno));
    return 1;
  }
  if (pid == 0) {
    setpgid(0, 0); /* so a timeout kills the test's own children too */
    t->fn();
    fflush(NULL);
    _exit(0);
  }
  int status = 0;
  int timed_out = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) { status = 1 << 8; break; }
    if (pt_now_ms() - start > t->timeout_ms) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = 1;
      break;
    }
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  /* Reap anything the test left in its process group. */
  kill(-pid, SIGKILL);
  int64_t ms = pt_now_ms() - start;
  if (timed_out) {
    printf("not ok - %s (timeout after %d ms)\n", t->name, t->timeout_ms);
    return 1;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    printf("ok - %s (%lld ms)\n", t->name, (long long)ms);
    return 0;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("skip - %s\n", t->name);
    return 2;
  }
  if (WIFSIGNALED(status))
    printf("not ok - %s (killed by signal %d)\n", t->name, WTERMSIG(status));
  else
    printf("not ok - %s (exit %d)\n", t->name, WEXITSTATUS(status));
  return 1;
}

int main(int argc, char **argv) {
  int list = 0, do_fork = 1;
  const char *filter = NULL;
  int first_name = argc;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--list")) list = 1;
    else if (!strcmp(argv[i], "--no-fork")) do_fork = 0;
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!strcmp(argv[i], "--help")) {
      printf("usage: %s [--list] [--no-fork] [--filter SUBSTR] [NAME...]\n", argv[0]);
      return 0;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[i]);
      return 2;
    } else { first_name = i; break; }
  }
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  qsort(g_tests, g_ntests, sizeof *g_tests, cmp_test);
  if (list) {
    for (size_t i = 0; i < g_ntests; i++) printf("%s\n", g_tests[i].name);
    return 0;
  }
  int passed = 0, failed = 0, skipped = 0;
  if (first_name < argc) {
    for (int i = first_name; i < argc; i++) {
      size_t k;
      for (k = 0; k < g_ntests; k++)
        if (!strcmp(g_tests[k].name, argv[i])) break;
      if (k == g_ntests) {
        fprintf(stderr, "no test named %s\n", argv[i]);
        failed++;
        continue;
      }
      int r = run_one(&g_tests[k], do_fork);
      if (r == 0) passed++; else if (r == 2) skipped++; else failed++;
    }
  } else {
    for (size_t k = 0; k < g_ntests; k++) {
      if (filter && !strstr(g_tests[k].name, filter)) continue;
      int r = run_one(&g_tests[k], do_fork);
      if (r == 0) passed++; else if (r == 2) skipped++; else failed++;
    }
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
