/*
 * ptp_snapstore.c - see ptp_snapstore.h.
 *
 * Every operation opens the directory by path once (dfd) and then works
 * relative to that fd (openat/renameat2/unlinkat/fsync), so a write is
 * consistent even if the directory is renamed meanwhile, and a removed
 * directory is noticed (ENOENT) instead of writing into a stale one.
 */
#include "prof/output/ptp_snapstore.h"
#include "prof/ptp_alloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TS_LEN 16            /* yyyymmddThhmmssZ */
#define SUFFIX ".pb.gz"
#define TMP_SUFFIX ".tmp"
#define SEQ_WIDTH 6

struct ptp_snapstore {
  char *dir;
  char prefix[PTP_SNAPSTORE_PREFIX_MAX + 1];
  int keep;
  uint64_t seq;              /* next sequence number */
  char family[PTP_SNAPSTORE_PREFIX_MAX + 1];  /* "" = no family retention */
  int keep_total;
};

int ptp_snapstore_name_matches(const char *name, const char *prefix) {
  size_t pl = strlen(prefix);
  if (strncmp(name, prefix, pl) != 0) return 0;
  const char *p = name + pl;
  for (int i = 0; i < TS_LEN; i++) {
    char c = p[i];
    bool ok = i == 8 ? c == 'T' : i == 15 ? c == 'Z' : (c >= '0' && c <= '9');
    if (!ok) return 0;
  }
  p += TS_LEN;
  if (*p++ != '-') return 0;
  const char *d = p;
  while (*p >= '0' && *p <= '9') p++;
  if (p == d || p - d > 20) return 0;
  return strcmp(p, SUFFIX) == 0;
}

int ptp_snapstore_family_matches(const char *name, const char *base) {
  if (ptp_snapstore_name_matches(name, base)) return 1;
  size_t bl = strlen(base);
  if (strncmp(name, base, bl) != 0 || strncmp(name + bl, "pid", 3) != 0) return 0;
  const char *p = name + bl + 3, *d = p;
  while (*p >= '0' && *p <= '9') p++;
  if (p == d || p - d > 10 || *p != '-') return 0;
  /* the child's own prefix is base "pid<digits>-": the rest must be exactly
   * a snapshot name of it (a timestamp, a seq, the suffix) */
  char child[PTP_SNAPSTORE_PREFIX_MAX + 20];
  size_t cl = (size_t)(p + 1 - name);
  if (cl >= sizeof child) return 0;
  memcpy(child, name, cl);
  child[cl] = 0;
  return ptp_snapstore_name_matches(name, child);
}

static uint64_t name_seq(const char *name, size_t prefix_len) {
  return strtoull(name + prefix_len + TS_LEN + 1, NULL, 10);
}

/* Declared in ptp_snapstore.h; the symbol cache uses it too. */
int ptp_mkdir_p(const char *path) {
  size_t n = strlen(path);
  if (n == 0 || n >= PATH_MAX) return -EINVAL;
  char buf[PATH_MAX];
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    char c = buf[i];
    buf[i] = 0;
    if (mkdir(buf, 0700) == 0) {
      if (chmod(buf, 0700) != 0) return -errno;
    } else if (errno != EEXIST) {
      return -errno;
    }
    buf[i] = c;
  }
  struct stat st;
  if (stat(path, &st) != 0) return -errno;
  if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
  return 0;
}

static int open_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

/* Removes leftover temp files of this prefix and returns the next free seq
 * (one past the highest seq of this prefix's snapshots). */
static int scan_dir(int dfd, const char *prefix, uint64_t *next_seq) {
  int fd2 = dup(dfd);
  if (fd2 < 0) return -errno;
  DIR *d = fdopendir(fd2);
  if (!d) {
    int e = -errno;
    close(fd2);
    return e;
  }
  size_t pl = strlen(prefix);
  uint64_t next = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    if (ptp_snapstore_name_matches(nm, prefix)) {
      uint64_t s = name_seq(nm, pl);
      if (s + 1 > next) next = s + 1;
      continue;
    }
    /* ".<prefix><ts>-<seq>.pb.gz.tmp": a write that died before its rename */
    size_t n = strlen(nm);
    if (nm[0] == '.' && n > 1 + strlen(TMP_SUFFIX) &&
        strcmp(nm + n - strlen(TMP_SUFFIX), TMP_SUFFIX) == 0) {
      char base[NAME_MAX + 1];
      size_t bl = n - 1 - strlen(TMP_SUFFIX);
      memcpy(base, nm + 1, bl);
      base[bl] = 0;
      if (ptp_snapstore_name_matches(base, prefix)) unlinkat(dfd, nm, 0);
    }
  }
  closedir(d);
  *next_seq = next;
  return 0;
}

static int prepare_dir(const char *dir, const char *prefix, uint64_t *next_seq) {
  int r = ptp_mkdir_p(dir);
  if (r) return r;
  int dfd = open_dir(dir);
  if (dfd < 0) return dfd;
  r = scan_dir(dfd, prefix, next_seq);
  close(dfd);
  return r;
}

static bool prefix_ok(const char *prefix) {
  size_t n = prefix ? strlen(prefix) : 0;
  return n >= 1 && n <= PTP_SNAPSTORE_PREFIX_MAX && !strchr(prefix, '/') && prefix[0] != '.';
}

int ptp_snapstore_new(ptp_snapstore **out, const char *dir, const char *prefix, int keep) {
  if (!out || !dir || !*dir || !prefix_ok(prefix) || keep < 1) return -EINVAL;
  ptp_snapstore *st = ptp_calloc(1, sizeof *st);
  if (!st) return -ENOMEM;
  st->dir = ptp_strdup(dir);
  if (!st->dir) {
    free(st);
    return -ENOMEM;
  }
  snprintf(st->prefix, sizeof st->prefix, "%s", prefix);
  st->keep = keep;
  int r = prepare_dir(dir, prefix, &st->seq);
  if (r) {
    ptp_snapstore_del(st);
    return r;
  }
  *out = st;
  return 0;
}

int ptp_snapstore_set_dir(ptp_snapstore *st, const char *dir) {
  if (!st || !dir || !*dir) return -EINVAL;
  char *nd = ptp_strdup(dir);
  if (!nd) return -ENOMEM;
  uint64_t next = 0;
  int r = prepare_dir(dir, st->prefix, &next);
  if (r) {
    free(nd);
    return r;
  }
  free(st->dir);
  st->dir = nd;
  if (next > st->seq) st->seq = next;
  return 0;
}

const char *ptp_snapstore_dir(const ptp_snapstore *st) { return st->dir; }
const char *ptp_snapstore_prefix(const ptp_snapstore *st) { return st->prefix; }

void ptp_snapstore_del(ptp_snapstore *st) {
  if (!st) return;
  free(st->dir);
  free(st);
}

typedef struct snap { char *name; uint64_t seq; } snap;

/* Keeps the newest st->keep snapshots of st->prefix. Best effort. */
static void retention(ptp_snapstore *st, int dfd) {
  int fd2 = dup(dfd);
  if (fd2 < 0) return;
  DIR *d = fdopendir(fd2);
  if (!d) {
    close(fd2);
    return;
  }
  rewinddir(d);   /* the dup shares its offset with dfd */
  size_t pl = strlen(st->prefix);
  snap *v = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!ptp_snapstore_name_matches(de->d_name, st->prefix)) continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 16;
      snap *nv = ptp_realloc(v, nc * sizeof *nv);
      if (!nv) break;
      v = nv;
      cap = nc;
    }
    v[n].name = ptp_strdup(de->d_name);
    if (!v[n].name) break;
    v[n].seq = name_seq(de->d_name, pl);
    n++;
  }
  closedir(d);
  /* Order: timestamp, then seq numerically (seq may outgrow its padding). */
  for (size_t i = 1; i < n; i++) {
    snap x = v[i];
    size_t j = i;
    while (j > 0) {
      int c = strncmp(v[j - 1].name + pl, x.name + pl, TS_LEN);
      if (c < 0 || (c == 0 && v[j - 1].seq <= x.seq)) break;
      v[j] = v[j - 1];
      j--;
    }
    v[j] = x;
  }
  for (size_t i = 0; n > (size_t)st->keep && i < n - (size_t)st->keep; i++) unlinkat(dfd, v[i].name, 0);
  for (size_t i = 0; i < n; i++) free(v[i].name);
  free(v);
}

typedef struct fam_file { char *name; int64_t mtime_ns; } fam_file;

static int fam_cmp(const void *a, const void *b) {
  const fam_file *x = a, *y = b;
  if (x->mtime_ns != y->mtime_ns) return x->mtime_ns < y->mtime_ns ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Keeps the newest st->keep_total snapshots of the whole family (the base
 * prefix and every "<base>pid<N>-" child), oldest (by mtime, then name)
 * removed first. Several processes of one family prune the same directory:
 * an exclusive flock on the directory serializes them, so each one lists
 * and removes under the lock and none removes more than the excess it saw.
 * Temp files (".<name>.tmp", being written) never match. Best effort. */
static void family_retention(ptp_snapstore *st, int dfd) {
  if (flock(dfd, LOCK_EX) != 0) return;
  int fd2 = dup(dfd);
  DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
  if (!d) {
    if (fd2 >= 0) close(fd2);
    flock(dfd, LOCK_UN);
    return;
  }
  /* the dup shares the directory offset with dfd, which the per-prefix
   * retention just read to the end */
  rewinddir(d);
  fam_file *v = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!ptp_snapstore_family_matches(de->d_name, st->family)) continue;
    struct stat sb;
    if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      fam_file *nv = ptp_realloc(v, nc * sizeof *nv);
      if (!nv) break;
      v = nv;
      cap = nc;
    }
    if (!(v[n].name = ptp_strdup(de->d_name))) break;
    v[n].mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    n++;
  }
  closedir(d);
  if (n) qsort(v, n, sizeof *v, fam_cmp);
  for (size_t i = 0; n > (size_t)st->keep_total && i < n - (size_t)st->keep_total; i++)
    unlinkat(dfd, v[i].name, 0);
  flock(dfd, LOCK_UN);
  for (size_t i = 0; i < n; i++) free(v[i].name);
  free(v);
}

int ptp_snapstore_set_family(ptp_snapstore *st, const char *base, int keep_total) {
  if (!st || !base || !*base || strlen(base) > PTP_SNAPSTORE_PREFIX_MAX || strchr(base, '/') ||
      keep_total < 1 || strncmp(st->prefix, base, strlen(base)) != 0)
    return -EINVAL;
  snprintf(st->family, sizeof st->family, "%s", base);
  st->keep_total = keep_total;
  return 0;
}

int ptp_snapstore_dir_mode(const ptp_snapstore *st, unsigned *mode_out) {
  struct stat sb;
  if (stat(st->dir, &sb) != 0) return -errno;
  *mode_out = (unsigned)(sb.st_mode & 07777);
  return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (w == 0) return -EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* rename without replacing: renameat2(RENAME_NOREPLACE), or link+unlink
 * where the filesystem lacks it. -EEXIST if the name is taken. */
static int rename_noreplace(int dfd, const char *from, const char *to) {
  if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -errno;
  if (linkat(dfd, from, dfd, to, 0) != 0) return -errno;
  unlinkat(dfd, from, 0);
  return 0;
}

int ptp_snapstore_write(ptp_snapstore *st, const uint8_t *data, size_t len, char *path_out, size_t path_cap) {
  if (!st || (!data && len)) return -EINVAL;
  if (path_out && path_cap) path_out[0] = 0;
  int dfd = open_dir(st->dir);
  if (dfd < 0) return dfd;

  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct tm tm;
  gmtime_r(&now.tv_sec, &tm);
  char ts[TS_LEN + 1];
  strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);

  char name[160], tmp[160 + 8];   /* prefix <= 64: names stay far below */
  int r = 0, fd = -1;
  bool have_tmp = false;
  /* temp name: unique per attempt (O_EXCL); bumps seq on collision */
  for (int attempt = 0; attempt < 1000; attempt++) {
    snprintf(name, sizeof name, "%s%s-%0*llu%s", st->prefix, ts, SEQ_WIDTH,
             (unsigned long long)st->seq, SUFFIX);
    snprintf(tmp, sizeof tmp, ".%s%s", name, TMP_SUFFIX);
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) break;
    r = -errno;
    if (r != -EEXIST) goto fail;
    st->seq++;
  }
  if (fd < 0) goto fail;
  have_tmp = true;
  /* 0600 whatever the umask: profiles hold symbol names and paths. */
  if (fchmod(fd, 0600) != 0) { r = -errno; goto fail; }
  r = write_all(fd, data, len);
  if (r) goto fail;
  if (fsync(fd) != 0) { r = -errno; goto fail; }
  if (close(fd) != 0) { fd = -1; r = -errno; goto fail; }
  fd = -1;
  for (int attempt = 0; attempt < 1000; attempt++) {
    r = rename_noreplace(dfd, tmp, name);
    if (r != -EEXIST) break;
    /* someone (an earlier process, same second) holds this name: next seq */
    st->seq++;
    snprintf(name, sizeof name, "%s%s-%0*llu%s", st->prefix, ts, SEQ_WIDTH,
             (unsigned long long)st->seq, SUFFIX);
  }
  if (r) goto fail;
  have_tmp = false;
  st->seq++;
  /* Make the rename durable. A failure here is not fatal (some filesystems
   * refuse fsync on a directory): the file is complete, synced, visible. */
  (void)fsync(dfd);
  retention(st, dfd);
  if (st->family[0]) family_retention(st, dfd);
  if (path_out && path_cap) snprintf(path_out, path_cap, "%s/%s", st->dir, name);
  close(dfd);
  return 0;

fail:
  if (fd >= 0) close(fd);
  if (have_tmp) unlinkat(dfd, tmp, 0);
  close(dfd);
  return r ? r : -EIO;
}
