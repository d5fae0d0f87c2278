/*
 * ptp_perfmap_file.c - the perf map file's driver (see ptp_perfmap_file.h):
 * the checks, the incremental reads and the rewrite detection around the
 * reader's core (ptp_perfmap.c).
 */
#include "prof/symbols/ptp_perfmap_file.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUF_SIZE ((size_t)64 << 10)     /* a read's bytes plus a partial line */
#define TAIL_MAX 64u                     /* bytes before the resume point kept */

_Static_assert(BUF_SIZE > 2 * PTP_PERFMAP_LINE_MAX, "a partial line leaves room to read");

struct ptp_perfmap_file {
  char *path;
  ptp_perfmap *pm;
  dev_t dev;
  ino_t ino;
  int have_id;
  uint64_t pos;                 /* next byte to read: the start of a line */
  char tail[TAIL_MAX];          /* the bytes before pos */
  unsigned ntail;
  int state, err;
  uint64_t updates, bytes, restarts, capped;
};

int ptp_perfmap_file_new(ptp_perfmap_file **out, const char *path) {
  ptp_perfmap_file *f = ptp_calloc(1, sizeof *f);
  if (!f) return -ENOMEM;
  if (path) {
    f->path = ptp_strdup(path);
  } else if (ptp_asprintf(&f->path, "/tmp/perf-%ld.map", (long)getpid()) < 0) {
    f->path = NULL;
  }
  if (!f->path || ptp_perfmap_new(&f->pm) != 0) {
    free(f->path);
    free(f);
    return -ENOMEM;
  }
  *out = f;
  return 0;
}

void ptp_perfmap_file_del(ptp_perfmap_file *f) {
  if (!f) return;
  ptp_perfmap_del(f->pm);
  free(f->path);
  free(f);
}

static ssize_t pread_all(int fd, char *buf, size_t n, uint64_t off) {
  for (;;) {
    ssize_t k = pread(fd, buf, n, (off_t)off);
    if (k >= 0 || errno != EINTR) return k < 0 ? -errno : k;
  }
}

/* Whether the file still holds what was read before pos (same inode, not
 * shorter, the same bytes just before pos). */
static int same_file(ptp_perfmap_file *f, int fd, const struct stat *st) {
  if (!f->have_id || st->st_dev != f->dev || st->st_ino != f->ino) return 0;
  if ((uint64_t)st->st_size < f->pos) return 0;
  if (!f->ntail) return f->pos == 0;
  char now[TAIL_MAX];
  ssize_t k = pread_all(fd, now, f->ntail, f->pos - f->ntail);
  return k == (ssize_t)f->ntail && memcmp(now, f->tail, f->ntail) == 0;
}

static int fail(ptp_perfmap_file *f, int state, int err) {
  f->state = state;
  f->err = err;
  return err;
}

int ptp_perfmap_file_update(ptp_perfmap_file *f) {
  f->updates++;
  int fd = open(f->path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int e = -errno;
    return fail(f, e == -ENOENT ? PTP_PERFMAP_MISSING : e == -ELOOP ? PTP_PERFMAP_REFUSED
                                                                    : PTP_PERFMAP_FAILED, e);
  }
  struct stat st;
  int rc = 0;
  char *buf = NULL;
  if (fstat(fd, &st) != 0) { rc = fail(f, PTP_PERFMAP_FAILED, -errno); goto out; }
  if (!S_ISREG(st.st_mode)) { rc = fail(f, PTP_PERFMAP_REFUSED, -EINVAL); goto out; }
  if (st.st_uid != geteuid()) { rc = fail(f, PTP_PERFMAP_REFUSED, -EPERM); goto out; }
  if ((uint64_t)st.st_size > PTP_PERFMAP_FILE_MAX) { rc = fail(f, PTP_PERFMAP_REFUSED, -EFBIG); goto out; }
  if (!same_file(f, fd, &st)) {
    /* Replaced or rewritten (or the first read): from its start. The
     * ranges stay; what is read again wins over them where it overlaps. */
    if (f->have_id) f->restarts++;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->have_id = 1;
    f->pos = 0;
    f->ntail = 0;
    ptp_perfmap_restart(f->pm);
  }
  buf = ptp_malloc(BUF_SIZE);
  if (!buf) { rc = fail(f, PTP_PERFMAP_FAILED, -ENOMEM); goto out; }
  /* From pos (a line's start) to the end of what exists, what the core did
   * not use (a partial line) carried into the next read. */
  size_t nc = 0;
  uint64_t off = f->pos, read_now = 0;
  int capped = 0;
  for (;;) {
    if (read_now >= PTP_PERFMAP_READ_MAX || off >= PTP_PERFMAP_FILE_MAX) { capped = 1; break; }
    ssize_t k = pread_all(fd, buf + nc, BUF_SIZE - nc, off);
    if (k < 0) { rc = fail(f, PTP_PERFMAP_FAILED, (int)k); break; }
    if (k == 0) break;
    off += (uint64_t)k;
    read_now += (uint64_t)k;
    nc += (size_t)k;
    size_t used = 0;
    int frc = ptp_perfmap_feed(f->pm, buf, nc, &used);
    if (used) {
      /* Remember the bytes before the new resume point. */
      unsigned keep = used >= TAIL_MAX ? TAIL_MAX : (unsigned)used;
      if (keep < TAIL_MAX && f->ntail) {
        unsigned old = f->ntail + keep > TAIL_MAX ? TAIL_MAX - keep : f->ntail;
        memmove(f->tail, f->tail + f->ntail - old, old);
        f->ntail = old;
      } else {
        f->ntail = 0;
      }
      memcpy(f->tail + f->ntail, buf + used - keep, keep);
      f->ntail += keep;
      f->pos += used;
      f->bytes += used;
    }
    memmove(buf, buf + used, nc - used);
    nc -= used;
    if (frc) { rc = fail(f, PTP_PERFMAP_FAILED, frc); break; }
  }
  if (capped) f->capped++;
  int crc = ptp_perfmap_commit(f->pm);
  if (rc == 0 && crc) rc = fail(f, PTP_PERFMAP_FAILED, crc);
  if (rc == 0) {
    f->state = PTP_PERFMAP_READ;
    f->err = 0;
  }
out:
  free(buf);
  close(fd);
  return rc;
}

const char *ptp_perfmap_file_lookup(const ptp_perfmap_file *f, uint64_t addr, uint64_t *lo,
                                    uint64_t *hi) {
  return ptp_perfmap_lookup(f->pm, addr, lo, hi);
}

void ptp_perfmap_file_get_info(const ptp_perfmap_file *f, ptp_perfmap_file_info *out) {
  memset(out, 0, sizeof *out);
  out->path = f->path;
  out->state = f->state;
  out->err = f->err;
  out->updates = f->updates;
  out->bytes = f->bytes;
  out->restarts = f->restarts;
  out->capped = f->capped;
  ptp_perfmap_get_stats(f->pm, &out->map);
}

const char *ptp_perfmap_file_state_name(int state, int err) {
  switch (state) {
  case PTP_PERFMAP_UNREAD: return "not read";
  case PTP_PERFMAP_MISSING: return "not found";
  case PTP_PERFMAP_READ: return "read";
  case PTP_PERFMAP_REFUSED:
    switch (err) {
    case -ELOOP: return "refused: a symlink";
    case -EPERM: return "refused: owned by another user";
    case -EINVAL: return "refused: not a regular file";
    case -EFBIG: return "refused: larger than 256 MiB";
    default: return "refused";
    }
  default: return err == -ENOMEM ? "failed: out of memory" : "failed: cannot be read";
  }
}
