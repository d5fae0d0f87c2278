/*
 * console_demo.c - a small program for the task console's integration tests:
 * runs a scripted workload of named tasks through the ptcon_* API on its own
 * loop and serves the console on a loopback port.
 *
 * Environment:
 *   PTCON_DEMO_BIND        bind address (default 127.0.0.1:0)
 *   PTCON_DEMO_PORTFILE    the bound port is written here once listening
 *   PTCON_DEMO_PROGRESS    the loop's progress counter is written here (~20/s)
 *   PTCON_DEMO_RETENTION_MS  completed-task retention (default 2000)
 *   PTCON_DEMO_MANY        extra idle tasks with long names (default 0)
 *   PTCON_DEMO_ENDED       extra tasks polled once and ended at start, kept
 *                          as retained (completed) tasks for the retention
 *                          (default 0)
 *   PTCON_DEMO_MAX_QUEUED  per-connection queue cap in bytes (default: lib's)
 *   PTCON_DEMO_STALL_MS    stall timeout of a non-reading client (default: lib's)
 *   PTCON_DEMO_IDLE_MS     idle timeout of a connection without calls (default: lib's)
 *   PTCON_DEMO_MAX_TOTAL_QUEUED  total queue budget in bytes (default: lib's)
 *   PTCON_DEMO_ALLOW_OTHER_USERS=1  serve every user (default: the demo's own)
 *
 * Script (times from start; the test asserts these numbers):
 *   demo.fixed    spawned at once with fields peer="unix:/run/demo.sock",
 *                 attempt=3; woken then polled 10 times, each poll busy for
 *                 2 ms; then stays alive, idle, with one armed waker.
 *   demo.selfwake polled 5 times; each poll wakes itself (5 self-wakes).
 *   demo.remote   woken 3 times from another thread, then polled once.
 *   demo.short    polled 3 times, then ends (completed, kind "local").
 *   demo.ticker   polled every 5 ms for ever (the progress counter).
 *   demo.late     polled once, ends after 600 loop iterations (~3 s or more).
 * Exit: SIGTERM or SIGINT -> stops the server, exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptprof_console.h"

static volatile sig_atomic_t g_stop;
static void on_sig(int sig) { (void)sig; g_stop = 1; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void busy_ns(uint64_t ns) {
  uint64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !g_stop) {
  }
}

static void logline(int level, const char *line, void *user_data) {
  (void)level;
  (void)user_data;
  fprintf(stderr, "console_demo: %s\n", line);
}

static void write_file(const char *path, const char *text) {
  if (!path) return;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
  rename(tmp, path);
}

static void *remote_waker(void *arg) {
  uint64_t id = *(uint64_t *)arg;
  for (int i = 0; i < 3; i++) {
    ptcon_task_wake(id);
    sleep_ms(5);
  }
  return NULL;
}

int main(void) {
  const char *bind = getenv("PTCON_DEMO_BIND");
  const char *portfile = getenv("PTCON_DEMO_PORTFILE");
  const char *progress = getenv("PTCON_DEMO_PROGRESS");
  const char *ret = getenv("PTCON_DEMO_RETENTION_MS");
  const char *many = getenv("PTCON_DEMO_MANY");
  const char *ended = getenv("PTCON_DEMO_ENDED");
  const char *maxq = getenv("PTCON_DEMO_MAX_QUEUED");
  const char *stall = getenv("PTCON_DEMO_STALL_MS");
  const char *idle = getenv("PTCON_DEMO_IDLE_MS");
  const char *maxtq = getenv("PTCON_DEMO_MAX_TOTAL_QUEUED");
  const char *others = getenv("PTCON_DEMO_ALLOW_OTHER_USERS");
  signal(SIGTERM, on_sig);
  signal(SIGINT, on_sig);
  signal(SIGPIPE, SIG_IGN);

  /* Spawned before the server exists: must still show up. */
  ptcon_field f[2] = {
    {.name = "peer", .type = PTCON_FIELD_STR, .v.str = "unix:/run/demo.sock"},
    {.name = "attempt", .type = PTCON_FIELD_U64, .v.u64 = 3},
  };
  uint64_t fixed = ptcon_task_spawn("demo.fixed", "task", __FILE__, __LINE__, f, 2);

  ptcon_server_options opt;
  ptcon_server_options_init(&opt);
  opt.bind = bind ? bind : "127.0.0.1:0";
  opt.retention_ms = ret ? (uint32_t)atoi(ret) : 2000;
  opt.log = logline;
  if (maxq) opt.max_queued_bytes = (size_t)strtoull(maxq, NULL, 10);
  if (stall) opt.stall_timeout_ms = (uint32_t)atoi(stall);
  if (idle) opt.idle_timeout_ms = (uint32_t)atoi(idle);
  if (maxtq) opt.max_total_queued_bytes = (size_t)strtoull(maxtq, NULL, 10);
  opt.allow_other_users = others && strcmp(others, "1") == 0;
  ptcon_server *srv = NULL;
  int rc = ptcon_server_new(&srv, &opt);
  if (rc) {
    fprintf(stderr, "console_demo: no task console on %s: %s\n", opt.bind, ptcon_strerror(rc));
    return 2;
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%u\n", (unsigned)ptcon_server_port(srv));
  write_file(portfile, buf);

  int nmany = many ? atoi(many) : 0;
  for (int i = 0; i < nmany; i++) {
    char name[PTCON_NAME_MAX];
    snprintf(name, sizeof name, "demo.many.%06d.padding-padding-padding-padding-pad", i);
    if (!ptcon_task_spawn(name, "task", __FILE__, __LINE__, NULL, 0)) break;
  }

  int nended = ended ? atoi(ended) : 0;
  for (int i = 0; i < nended; i++) {
    char name[PTCON_NAME_MAX];
    snprintf(name, sizeof name, "demo.ended.%06d.padding-padding-padding-padding", i);
    uint64_t id = ptcon_task_spawn(name, "task", __FILE__, __LINE__, NULL, 0);
    if (!id) break;
    ptcon_task_wake(id);
    ptcon_task_poll_begin(id);
    ptcon_task_poll_end(id);
    ptcon_task_end(id);
  }

  uint64_t selfw = ptcon_task_spawn("demo.selfwake", "task", __FILE__, __LINE__, NULL, 0);
  uint64_t remote = ptcon_task_spawn("demo.remote", "blocking", __FILE__, __LINE__, NULL, 0);
  uint64_t shortt = ptcon_task_spawn("demo.short", "local", __FILE__, __LINE__, NULL, 0);
  uint64_t ticker = ptcon_task_spawn("demo.ticker", "task", __FILE__, __LINE__, NULL, 0);
  uint64_t late = ptcon_task_spawn("demo.late", "task", __FILE__, __LINE__, NULL, 0);
  ptcon_task_poll_begin(late);
  ptcon_task_poll_end(late);

  for (int i = 0; i < 10; i++) {
    ptcon_task_wake(fixed);
    ptcon_task_poll_begin(fixed);
    busy_ns(2000000);
    ptcon_task_poll_end(fixed);
  }
  ptcon_task_waker_clone(fixed);   /* idle with an armed wake source */

  for (int i = 0; i < 5; i++) {
    ptcon_task_poll_begin(selfw);
    ptcon_task_wake(selfw);
    ptcon_task_poll_end(selfw);
  }

  pthread_t th;
  pthread_create(&th, NULL, remote_waker, &remote);
  pthread_join(th, NULL);
  ptcon_task_poll_begin(remote);
  ptcon_task_poll_end(remote);

  for (int i = 0; i < 3; i++) {
    ptcon_task_poll_begin(shortt);
    ptcon_task_poll_end(shortt);
  }
  ptcon_task_end(shortt);

  /* The progress file stays open: the counter must stay observable even
   * when the process runs out of descriptors (a test does that). */
  int pfd = progress ? open(progress, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
  uint64_t count = 0;
  while (!g_stop) {
    ptcon_task_wake(ticker);
    ptcon_task_poll_begin(ticker);
    count++;
    ptcon_task_poll_end(ticker);
    if (count == 600) ptcon_task_end(late);
    if (count % 10 == 0 && pfd >= 0) {
      /* fixed width, one pwrite: a reader never sees a torn number */
      int n = snprintf(buf, sizeof buf, "%020llu\n", (unsigned long long)count);
      if (pwrite(pfd, buf, (size_t)n, 0) != n) { /* best effort */ }
    }
    sleep_ms(5);
  }
  if (pfd >= 0) close(pfd);
  ptcon_server_del(srv);
  return 0;
}
