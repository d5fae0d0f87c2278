/* pd_log.c - daemon log. See pd_log.h. */
#include "daemon/pd_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *g_file; /* guarded by g_lock */
/* Mirror lines to stderr? Off by default so code linked into the unit-test
 * binary stays quiet; polytokend's main() turns it on (docs/daemon.md: "also
 * on stderr"). POLYTOKEN_LOG_STDERR=1 forces it on (e.g. to see the daemon
 * code's log while debugging a unit test). */
static int g_stderr; /* guarded by g_lock */

void pd_time_rfc3339(char *buf, unsigned long size) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  char base[24];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, size, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

int pd_log_open(const char *path) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  FILE *f = fdopen(fd, "a");
  if (!f) {
    int e = -errno;
    close(fd);
    return e;
  }
  setvbuf(f, NULL, _IOLBF, 0);
  pthread_mutex_lock(&g_lock);
  if (g_file) fclose(g_file);
  g_file = f;
  pthread_mutex_unlock(&g_lock);
  return 0;
}

void pd_log_close(void) {
  pthread_mutex_lock(&g_lock);
  if (g_file) {
    fflush(g_file);
    fsync(fileno(g_file));
    fclose(g_file);
    g_file = NULL;
  }
  pthread_mutex_unlock(&g_lock);
}

void pd_log_set_stderr(int on) {
  pthread_mutex_lock(&g_lock);
  g_stderr = on ? 1 : 0;
  pthread_mutex_unlock(&g_lock);
}

/* Caller holds g_lock. */
static int stderr_enabled(void) {
  const char *e = getenv("POLYTOKEN_LOG_STDERR");
  if (e && *e && strcmp(e, "0") != 0) return 1;
  return g_stderr > 0;
}

static int debug_enabled(void) {
  static int v = -1; /* racy first read is harmless: every thread computes the same */
  if (v < 0) {
    const char *e = getenv("POLYTOKEN_DEBUG");
    v = e && *e && strcmp(e, "0") != 0;
  }
  return v;
}

void pd_log(pd_log_level level, const char *fmt, ...) {
  static const char *const names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  if (level == PD_LOG_DEBUG && !debug_enabled()) return;
  char ts[32], msg[2048];
  pd_time_rfc3339(ts, sizeof ts);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* one line per message, whatever the message holds */
  for (char *p = msg; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  pthread_mutex_lock(&g_lock);
  if (g_file) fprintf(g_file, "%s %s %s\n", ts, names[level], msg);
  if (stderr_enabled()) fprintf(stderr, "%s %s %s\n", ts, names[level], msg);
  pthread_mutex_unlock(&g_lock);
}
