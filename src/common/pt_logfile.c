/*
 * pt_logfile.c - whole-line log files. See pt_logfile.h.
 *
 * Invariant: the file only ever grows by whole lines. A write(2) that lands
 * only part of a line (a regular file on a device that fills up mid-write
 * returns a short count, and the next write ENOSPC) is undone with
 * ftruncate back to where the line started, provided the file still ends
 * where our write ended (another process appending to the same log - two
 * TUIs share tui.log - must not lose its line to our cut).
 */
#include "common/pt_logfile.h"

#include "common/pt_escape.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct pt_logfile {
  int fd;
  uint64_t dropped;     /* since open */
  uint64_t unreported;  /* dropped since the last summary line */
  int first_err;        /* errno of the first unreported drop */
  char first_at[32];    /* when it happened */
};

void pt_logfile_time(char *buf, size_t size) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

int pt_logfile_open(pt_logfile **out, const char *path) {
  *out = NULL;
  pt_logfile *l = calloc(1, sizeof *l);
  if (!l) return -ENOMEM;
  l->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (l->fd < 0) {
    int e = -errno;
    free(l);
    return e;
  }
  /* Ours and readable by others (created by an older version, or under an
   * odd umask): narrow it. Not ours: leave it, we only append. */
  struct stat st;
  if (fstat(l->fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077))
    (void)fchmod(l->fd, 0600);
  *out = l;
  return 0;
}

void pt_logfile_del(pt_logfile *l) {
  if (!l) return;
  (void)fsync(l->fd);
  close(l->fd);
  free(l);
}

uint64_t pt_logfile_dropped(const pt_logfile *l) { return l->dropped; }

/* One write(2) of the whole line. 0, or -errno with any partial line cut
 * off again (see the invariant at the top). */
static int write_line(pt_logfile *l, const char *buf, size_t len) {
  for (;;) {
    ssize_t w = write(l->fd, buf, len);
    if (w == (ssize_t)len) return 0;
    if (w < 0 && errno == EINTR) continue;
    int e = w < 0 ? errno : ENOSPC; /* a short write: the device is full */
    if (w > 0) {
      off_t end = lseek(l->fd, 0, SEEK_CUR); /* O_APPEND: just past our bytes */
      struct stat st;
      if (end >= w && fstat(l->fd, &st) == 0 && st.st_size == end)
        (void)ftruncate(l->fd, end - w);
    }
    return -e;
  }
}

/* "<ts> <text escaped>\n" into buf (cap >= strlen(ts) + 3): one line per
 * message whatever the text holds, no control byte (pt_escape.h). */
static int format(char *buf, size_t cap, const char *ts, const char *text) {
  size_t t = strlen(ts);
  memcpy(buf, ts, t);
  buf[t++] = ' ';
  /* room for the newline: the escaper's NUL lands where it goes */
  t += pt_escape_str(buf + t, cap - t - 1, text, PT_ESC_BACKSLASH);
  buf[t++] = '\n';
  return (int)t;
}

int pt_logfile_write(pt_logfile *l, const char *text) {
  char ts[32], line[PT_LOGFILE_LINE_MAX + 40];
  pt_logfile_time(ts, sizeof ts);
  if (l->unreported) {
    char msg[200];
    snprintf(msg, sizeof msg, "WARN log: %llu line%s dropped since %s: %s",
             (unsigned long long)l->unreported, l->unreported == 1 ? "" : "s", l->first_at,
             strerror(l->first_err));
    int n = format(line, sizeof line, ts, msg);
    if (n < 0 || write_line(l, line, (size_t)n) < 0) {
      l->unreported++;
      l->dropped++;
      return -ENOSPC;
    }
    l->unreported = 0;
  }
  int n = format(line, sizeof line, ts, text);
  if (n < 0) return n;
  int r = write_line(l, line, (size_t)n);
  if (r < 0) {
    if (l->unreported++ == 0) {
      l->first_err = -r;
      memcpy(l->first_at, ts, sizeof l->first_at);
    }
    l->dropped++;
  }
  return r;
}
