/* pd_log.c - daemon log. See pd_log.h. */
#include "daemon/pd_log.h"
#include "common/pt_escape.h"
#include "common/pt_logfile.h"

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
/* Whole lines in one write(2) each, drops counted and summarised
 * (pt_logfile.h). Guarded by g_lock. */
static pt_logfile *g_file;
/* Mirror lines to stderr? Off by default so code linked into the unit-test
 * binary stays quiet; polytokend's main() turns it on (docs/daemon.md: "also
 * on stderr"). POLYTOKEN_LOG_STDERR=1 forces it on (e.g. to see the daemon
 * code's log while debugging a unit test). */
static int g_stderr; /* guarded by g_lock */

void pd_time_rfc3339(char *buf, unsigned long size) { pt_logfile_time(buf, size); }

int pd_log_open(const char *path) {
  pt_logfile *f;
  int r = pt_logfile_open(&f, path);
  if (r < 0) return r;
  pthread_mutex_lock(&g_lock);
  pt_logfile_del(g_file);
  g_file = f;
  pthread_mutex_unlock(&g_lock);
  return 0;
}

void pd_log_close(void) {
  pthread_mutex_lock(&g_lock);
  pt_logfile_del(g_file);
  g_file = NULL;
  pthread_mutex_unlock(&g_lock);
}

uint64_t pd_log_dropped(void) {
  pthread_mutex_lock(&g_lock);
  uint64_t n = g_file ? pt_logfile_dropped(g_file) : 0;
  pthread_mutex_unlock(&g_lock);
  return n;
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
  char msg[2048 + 8];
  int k = snprintf(msg, sizeof msg, "%s ", names[level]);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_lock);
  if (g_file) pt_logfile_write(g_file, msg);
  if (stderr_enabled()) {
    /* The mirror too as one write(2) of the whole line (stderr is
     * logs/daemon.stderr, on the same disk). A failure there is not
     * reported anywhere: the file log counts its own drops. The same
     * escaping as the file (pt_escape.h): stderr may be a terminal. */
    char ts[32], line[PT_LOGFILE_LINE_MAX + 40];
    pt_logfile_time(ts, sizeof ts);
    size_t n = strlen(ts);
    memcpy(line, ts, n);
    line[n++] = ' ';
    n += pt_escape_str(line + n, sizeof line - n - 1, msg, PT_ESC_BACKSLASH);
    line[n++] = '\n';
    ssize_t w = write(2, line, n);
    (void)w;
  }
  pthread_mutex_unlock(&g_lock);
}
