/*
 * pt_feedback_outbox.c - feedback bundles on disk (see pt_feedback_outbox.h
 * for the layout).
 *
 * DESIGN
 *  - Every path below the state root is reached from the root's directory
 *    fd, never through a symlink: feedback/, tmp/, outbox/ and sent/ planted
 *    as links to elsewhere are refused (-ELOOP/-ENOTDIR), and so is a link
 *    put into a bundle. The upload streams files from the fds opened here.
 *  - A bundle becomes visible in outbox/ by one rename of a complete
 *    directory from tmp/ (files and directory fsync'd first); a failure
 *    removes the temporary directory, so nothing half-written is left.
 *  - A writer that is killed leaves its tmp/ directory behind. The writer
 *    holds an flock on its directory, so the repair at a daemon start
 *    (pt_feedback_outbox_repair) takes only unlocked ones: it finishes
 *    the rename of a complete bundle (every file the manifest names, with
 *    its size and SHA-256) and moves anything else to
 *    quarantine/feedback-tmp/ (pt_quarantine.h). Nothing is deleted.
 *  - Errors keep the errno of the step that failed; err says which step.
 */
#include "pt_config.h"
#include "common/pt_feedback_outbox.h"

#include "common/pt_err.h"
#include "common/pt_file.h"
#include "common/pt_quarantine.h"
#include "common/pt_sha256.h"
#include "common/pt_version.h"
#include "common/pt_write_all.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* snprintf into an array that reports truncation (paths: ENAMETOOLONG). */
#define FMT_TRUNC(buf, ...) (snprintf((buf), sizeof(buf), __VA_ARGS__) >= (int)sizeof(buf))

static void now_rfc3339(char out[32], char compact[24]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  if (out) strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (compact) strftime(compact, 24, "%Y%m%dT%H%M%SZ", &tm);
}

/* ---------- writing a bundle ---------- */

/* Test builds only (-Dfault_injection=true; a release polytoken contains
 * neither this code nor the variable's name):
 * POLYTOKEN_FAULT_FEEDBACK_WRITE=<step> stops the writing process
 * (SIGSTOP) right after that step, so a test can kill -9 it there
 * (tests/feedback/feedback_crash_test.sh). Steps: dir (the temporary
 * directory exists and is locked), message (message.txt written),
 * manifest (every file written and fsync'd, not yet renamed). */
#if PT_FAULT_INJECTION
static void write_fault(const char *step) {
  const char *v = getenv("POLYTOKEN_FAULT_FEEDBACK_WRITE");
  if (v && strcmp(v, step) == 0) raise(SIGSTOP);
}
#else
static void write_fault(const char *step) { (void)step; }
#endif

static void sanitize_name(const char *in, char *out, size_t cap) {
  const char *base = strrchr(in, '/');
  base = base ? base + 1 : in;
  size_t k = 0;
  for (const char *p = base; *p && k + 1 < cap; p++)
    out[k++] = (isalnum((unsigned char)*p) || *p == '.' || *p == '-' || *p == '_') ? *p : '_';
  out[k] = '\0';
  if (k == 0 || out[0] == '.') snprintf(out, cap, "artifact.bin");
}

/* Creates `name` in dirfd (a fresh file: O_EXCL never follows a symlink),
 * 0600 whatever the umask, with len bytes of data, fsync'd. */
static int write_file(int dirfd, const char *name, const void *data, size_t len) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  int r = fchmod(fd, 0600) == 0 ? 0 : -errno;
  if (r == 0) r = pt_write_all(fd, data, len);
  if (r == 0 && fsync(fd) != 0) r = -errno;
  if (close(fd) != 0 && r == 0) r = -errno;
  return r;
}

/* Removes the flat bundle directory `name` in parentfd (files, then the
 * directory; never follows a link: unlinkat removes links themselves). */
static void rm_tree_at(int parentfd, const char *name) {
  int dfd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d && dfd >= 0) close(dfd);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      unlinkat(dirfd(d), de->d_name, 0); /* bundles are flat */
    }
    closedir(d);
  }
  unlinkat(parentfd, name, AT_REMOVEDIR);
}

/* The manifest of fb, whose files are written as message.txt (msha) and
 * fnames[i]. NULL on out of memory. */
static json_t *manifest_of(const pt_feedback *fb, const char *id, const char *created,
                           const char *msha, char fnames[][256]) {
  json_t *arr = json_array();
  if (!arr) return NULL;
  for (size_t i = 0; i < pt_feedback_count(fb); i++) {
    json_t *en = pt_feedback_entry(fb, i);
    size_t len = 0;
    pt_feedback_data(fb, i, &len);
    json_t *e = json_pack(
        "{s:s, s:s, s:s?, s:s?, s:I, s:s, s:s?, s:s?, s:s}", "id",
        pt_feedback_entry_str(en, "id"), "kind", pt_feedback_entry_str(en, "kind"), "label",
        pt_feedback_entry_str(en, "label"), "source", pt_feedback_entry_str(en, "source"), "size",
        (json_int_t)len, "sha256", pt_feedback_entry_str(en, "sha256"), "created",
        pt_feedback_entry_str(en, "created"), "catalog_path", pt_feedback_entry_str(en, "path"),
        "file", fnames[i]);
    if (!e || json_array_append_new(arr, e) != 0) {
      json_decref(arr);
      return NULL;
    }
  }
  char client[64];
  snprintf(client, sizeof client, "polytoken %s", pt_version());
  json_t *man = json_pack("{s:i, s:s, s:s, s:s, s:{s:s, s:I, s:s}, s:O, s:s}", "schema", 1, "id",
                          id, "created", created, "client", client, "message", "file",
                          "message.txt", "size", (json_int_t)strlen(pt_feedback_message(fb)),
                          "sha256", msha, "attachments", arr, "policy",
                          "attachments are sent raw and unsanitized (docs/feedback.md)");
  json_decref(arr);
  return man;
}

/* Writes message, attachments and manifest into the directory dfd. */
static int write_files(const pt_feedback *fb, int dfd, const char *id, const char *created,
                       char *err, size_t errlen) {
  const char *msg = pt_feedback_message(fb);
  size_t mlen = strlen(msg);
  char msha[PT_SHA256_HEX];
  int r;
  if ((r = pt_sha256_hex(msg, mlen, msha)) < 0 ||
      (r = write_file(dfd, "message.txt", msg, mlen)) < 0) {
    pt_errf(err, errlen, "writing message.txt: %s", strerror(-r));
    return r;
  }
  write_fault("message");
  char fnames[PT_FEEDBACK_MAX_ATTACHMENTS][256];
  for (size_t i = 0; i < pt_feedback_count(fb); i++) {
    json_t *en = pt_feedback_entry(fb, i);
    const char *path = pt_feedback_entry_str(en, "path");
    char base[200];
    sanitize_name(path ? path : pt_feedback_entry_str(en, "kind"), base, sizeof base);
    snprintf(fnames[i], sizeof fnames[i], "%02zu-%s", i + 1, base);
    size_t len = 0;
    const uint8_t *data = pt_feedback_data(fb, i, &len);
    if ((r = write_file(dfd, fnames[i], data, len)) < 0) {
      pt_errf(err, errlen, "writing %s: %s", fnames[i], strerror(-r));
      return r;
    }
  }
  json_t *man = manifest_of(fb, id, created, msha, fnames);
  char *mtext = man ? json_dumps(man, JSON_INDENT(2) | JSON_ENSURE_ASCII) : NULL;
  json_decref(man);
  if (!mtext) {
    pt_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  r = write_file(dfd, "manifest.json", mtext, strlen(mtext));
  free(mtext);
  if (r < 0) {
    pt_errf(err, errlen, "writing manifest.json: %s", strerror(-r));
    return r;
  }
  if (fsync(dfd) != 0) {
    r = -errno;
    pt_errf(err, errlen, "fsync of the bundle: %s", strerror(-r));
    return r;
  }
  return 0;
}

int pt_feedback_outbox_write(const pt_feedback *fb, const char *home, char *dir_out,
                             size_t dir_cap, char *err, size_t errlen) {
  char final[PATH_MAX], tmpname[96];
  int r, hfd, tmpfd = -1, outfd = -1, dfd = -1;
  /* Bundle id: creation time + 32 random bits, sortable and unique. */
  char created[32], compact[24];
  now_rfc3339(created, compact);
  uint32_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = (uint32_t)getpid() ^ (uint32_t)time(NULL);
  char id[48];
  snprintf(id, sizeof id, "%s-%08" PRIx32, compact, rnd);
  if (FMT_TRUNC(final, "%s/feedback/outbox/%s", home, id)) {
    pt_errf(err, errlen, "state root path too long");
    return -ENAMETOOLONG;
  }
  hfd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (hfd < 0) {
    r = -errno;
    pt_errf(err, errlen, "cannot open the state root %s: %s", home, strerror(-r));
    return r;
  }
  if ((tmpfd = pt_mkdir_beneath(hfd, "feedback/tmp", 0700)) < 0 ||
      (outfd = pt_mkdir_beneath(hfd, "feedback/outbox", 0700)) < 0) {
    r = tmpfd < 0 ? tmpfd : outfd;
    pt_errf(err, errlen, "cannot create %s/feedback/%s: %s", home, tmpfd < 0 ? "tmp" : "outbox",
            r == -ELOOP || r == -ENOTDIR ? "a symlink or non-directory is in the way"
                                         : strerror(-r));
    goto fail_dirs;
  }
  /* tmp/<id>.<random>: a fresh name of ours (mkdirat fails on anything that
   * exists, link or not), locked (flock) by us until it is renamed or
   * removed, so a daemon start's repair tells it from one a killed writer
   * left. It is created and locked while tmp/ is share-locked: the repair
   * holds tmp/ exclusively while it looks, so it never sees a bundle
   * between its creation and its lock. */
  if (flock(tmpfd, LOCK_SH) != 0) {
    r = -errno;
    pt_errf(err, errlen, "cannot lock %s/feedback/tmp: %s", home, strerror(-r));
    goto fail_dirs;
  }
  for (int tries = 0;; tries++) {
    uint32_t t = 0;
    if (getrandom(&t, sizeof t, 0) != sizeof t) t = (uint32_t)tries * 2654435761u ^ rnd;
    snprintf(tmpname, sizeof tmpname, "%s.%08" PRIx32, id, t);
    if (mkdirat(tmpfd, tmpname, 0700) == 0) break;
    if (errno != EEXIST || tries >= 16) {
      r = -errno;
      (void)flock(tmpfd, LOCK_UN);
      pt_errf(err, errlen, "cannot create a bundle in %s/feedback/tmp: %s", home, strerror(-r));
      goto fail_dirs;
    }
  }
  dfd = openat(tmpfd, tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0 || fchmod(dfd, 0700) != 0 || flock(dfd, LOCK_EX) != 0) {
    r = -errno;
    (void)flock(tmpfd, LOCK_UN);
    pt_errf(err, errlen, "open %s/feedback/tmp/%s: %s", home, tmpname, strerror(-r));
    goto fail;
  }
  (void)flock(tmpfd, LOCK_UN);
  write_fault("dir");
  if ((r = write_files(fb, dfd, id, created, err, errlen)) < 0) goto fail;
  write_fault("manifest");
  /* RENAME_NOREPLACE semantics are not needed: the id is fresh and a
   * directory rename never replaces a non-empty directory. */
  if (renameat(tmpfd, tmpname, outfd, id) != 0) {
    r = -errno;
    pt_errf(err, errlen, "moving the bundle into %s/feedback/outbox: %s", home, strerror(-r));
    goto fail;
  }
  (void)fsync(outfd);
  (void)fsync(tmpfd);
  close(dfd);
  close(outfd);
  close(tmpfd);
  close(hfd);
  if (dir_out) snprintf(dir_out, dir_cap, "%s", final);
  return 0;

fail:
  if (dfd >= 0) close(dfd);
  rm_tree_at(tmpfd, tmpname);
fail_dirs:
  if (outfd >= 0) close(outfd);
  if (tmpfd >= 0) close(tmpfd);
  close(hfd);
  return r;
}

/* ---------- an open bundle ---------- */

struct pt_feedback_bundle {
  int hfd;             /* the state root */
  int parentfd;        /* the bundle's parent (feedback/outbox) */
  int fd;              /* the bundle directory */
  char name[NAME_MAX + 1];
  char home[PATH_MAX];
  char path[PATH_MAX];
  json_t *manifest;
};

void pt_feedback_outbox_close(pt_feedback_bundle *b) {
  if (!b) return;
  json_decref(b->manifest);
  if (b->fd >= 0) close(b->fd);
  if (b->parentfd >= 0) close(b->parentfd);
  if (b->hfd >= 0) close(b->hfd);
  free(b);
}

json_t *pt_feedback_outbox_manifest(const pt_feedback_bundle *b) { return b->manifest; }
const char *pt_feedback_outbox_path(const pt_feedback_bundle *b) { return b->path; }

/* Opens bundle_dir's parent (relative to the state root) and the bundle
 * beneath the root's fd with no symlink on the way. */
static int open_dirs(pt_feedback_bundle *b, const char *bundle_dir) {
  size_t n = strlen(b->home);
  while (n > 1 && b->home[n - 1] == '/') n--;
  if (strncmp(bundle_dir, b->home, n) != 0 || bundle_dir[n] != '/') return -EINVAL;
  const char *rel = bundle_dir + n + 1;
  while (*rel == '/') rel++; /* "<home>/" + "/feedback/..." */
  const char *slash = strrchr(rel, '/');
  if (!slash || !slash[1]) return -EINVAL;
  char parent[PATH_MAX];
  if ((size_t)(slash - rel) >= sizeof parent || strlen(slash + 1) >= sizeof b->name)
    return -ENAMETOOLONG;
  memcpy(parent, rel, (size_t)(slash - rel));
  parent[slash - rel] = '\0';
  snprintf(b->name, sizeof b->name, "%s", slash + 1);
  b->parentfd = pt_open_beneath(b->hfd, parent, O_RDONLY | O_DIRECTORY);
  if (b->parentfd < 0) return b->parentfd;
  b->fd = pt_open_beneath(b->parentfd, b->name, O_RDONLY | O_DIRECTORY);
  return b->fd < 0 ? b->fd : 0;
}

int pt_feedback_outbox_open_file(const pt_feedback_bundle *b, const char *name, uint64_t *size) {
  if (!name || !*name || strchr(name, '/')) return -EINVAL;
  int fd = pt_open_beneath(b->fd, name, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return fd;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int r = -errno;
    close(fd);
    return r;
  }
  if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
    close(fd);
    return -EINVAL;
  }
  if (size) *size = (uint64_t)st.st_size;
  return fd;
}

/* Reads and parses manifest.json (capped). */
static int read_manifest(pt_feedback_bundle *b, char *err, size_t errlen) {
  uint64_t size = 0;
  int fd = pt_feedback_outbox_open_file(b, "manifest.json", &size);
  if (fd < 0) {
    pt_errf(err, errlen, "%s is not a feedback bundle: manifest.json: %s", b->path,
            fd == -ELOOP ? "a symlink" : fd == -EINVAL ? "not a regular file of its own"
                                                       : strerror(-fd));
    return fd;
  }
  if (size > PT_FEEDBACK_MANIFEST_MAX) {
    close(fd);
    pt_errf(err, errlen, "%s: manifest.json is larger than %zu bytes", b->path,
            PT_FEEDBACK_MANIFEST_MAX);
    return -EFBIG;
  }
  char *text = malloc((size_t)size + 1);
  if (!text) {
    close(fd);
    pt_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  size_t got = 0;
  int r = 0;
  while (got < size) {
    ssize_t k = pread(fd, text + got, (size_t)size - got, (off_t)got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) { r = -errno; break; }
    if (k == 0) break; /* shrank: parse what is there */
    got += (size_t)k;
  }
  close(fd);
  if (r < 0) {
    free(text);
    pt_errf(err, errlen, "reading %s/manifest.json: %s", b->path, strerror(-r));
    return r;
  }
  json_error_t je;
  b->manifest = json_loadb(text, got, 0, &je);
  free(text);
  if (!b->manifest && json_error_code(&je) == json_error_out_of_memory) {
    pt_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  if (!json_is_object(b->manifest) ||
      !json_is_array(json_object_get(b->manifest, "attachments"))) {
    pt_errf(err, errlen, "%s: manifest.json is not a bundle manifest%s%s", b->path,
            b->manifest ? "" : ": ", b->manifest ? "" : je.text);
    return -EBADMSG;
  }
  return 0;
}

int pt_feedback_outbox_open(const char *home, const char *bundle_dir, pt_feedback_bundle **out,
                            char *err, size_t errlen) {
  *out = NULL;
  pt_feedback_bundle *b = calloc(1, sizeof *b);
  if (!b) {
    pt_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  b->hfd = b->parentfd = b->fd = -1;
  if (FMT_TRUNC(b->home, "%s", home) || FMT_TRUNC(b->path, "%s", bundle_dir)) {
    pt_errf(err, errlen, "path too long");
    pt_feedback_outbox_close(b);
    return -ENAMETOOLONG;
  }
  int r = 0;
  b->hfd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (b->hfd < 0) r = -errno;
  if (r == 0) r = open_dirs(b, bundle_dir);
  if (r < 0) {
    pt_errf(err, errlen, "%s is not a bundle below %s: %s", bundle_dir, home,
            r == -ELOOP    ? "a symlink is on the path"
            : r == -EINVAL ? "not a directory below the state root"
                           : strerror(-r));
    pt_feedback_outbox_close(b);
    return r;
  }
  if ((r = read_manifest(b, err, errlen)) < 0) {
    pt_feedback_outbox_close(b);
    return r;
  }
  *out = b;
  return 0;
}

/* ---------- recording an upload ---------- */

int pt_feedback_outbox_record(pt_feedback_bundle *b, const pt_feedback_status *st, char *err,
                              size_t errlen) {
  char when[32];
  now_rfc3339(when, NULL);
  json_t *o = json_pack("{s:s, s:i, s:I, s:s, s:s, s:s}", "state", st->sent ? "sent" : "failed",
                        "attempts", st->attempts, "http_status", (json_int_t)st->http_status,
                        "error", st->error ? st->error : "", "url", st->url ? st->url : "",
                        "at", when);
  char *s = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
  json_decref(o);
  if (!s) {
    pt_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  int r = pt_write_atomic_at(b->fd, "status.json", s, strlen(s), 0600);
  free(s);
  if (r < 0) pt_errf(err, errlen, "writing %s/status.json: %s", b->path, strerror(-r));
  return r;
}

int pt_feedback_outbox_move_sent(pt_feedback_bundle *b, char *err, size_t errlen) {
  const char *bid = pt_feedback_entry_str(b->manifest, "id");
  if (!bid || !*bid || strchr(bid, '/') || bid[0] == '.') bid = b->name; /* only a plain name */
  char dst[PATH_MAX];
  if (FMT_TRUNC(dst, "%s/feedback/sent/%s", b->home, bid)) {
    pt_errf(err, errlen, "state root path too long");
    return -ENAMETOOLONG;
  }
  int sentfd = pt_mkdir_beneath(b->hfd, "feedback/sent", 0700);
  if (sentfd < 0) {
    pt_errf(err, errlen, "cannot create %s/feedback/sent: %s", b->home,
            sentfd == -ELOOP || sentfd == -ENOTDIR ? "a symlink or non-directory is in the way"
                                                   : strerror(-sentfd));
    return sentfd;
  }
  if (renameat(b->parentfd, b->name, sentfd, bid) != 0) {
    int r = -errno;
    close(sentfd);
    pt_errf(err, errlen, "moving %s to %s: %s", b->path, dst, strerror(-r));
    return r;
  }
  (void)fsync(sentfd);
  (void)fsync(b->parentfd);
  close(sentfd);
  snprintf(b->path, sizeof b->path, "%s", dst);
  return 0;
}

/* ---------- repair after a crash ---------- */

/* Reads the whole file `name` of b and checks its size and SHA-256. */
static int verify_file(const pt_feedback_bundle *b, const char *name, json_t *size,
                       json_t *sha) {
  if (!name || !json_is_integer(size) || !json_is_string(sha)) return -EBADMSG;
  uint64_t have = 0;
  int fd = pt_feedback_outbox_open_file(b, name, &have);
  if (fd < 0) return fd;
  char hex[PT_SHA256_HEX];
  size_t n = 0;
  int r = have == (uint64_t)json_integer_value(size) ? pt_sha256_fd(fd, SIZE_MAX, hex, &n) : -EBADMSG;
  close(fd);
  if (r == 0 && (n != have || strcmp(hex, json_string_value(sha)) != 0)) r = -EBADMSG;
  return r;
}

/* 0 when the bundle tmp/<name> is complete: a manifest whose id is the
 * name's prefix, and every file it names with its size and SHA-256. The
 * id goes to id (NAME_MAX + 1). -ENOMEM, or another negative code when it
 * is not complete. */
static int verify_tmp_bundle(const char *home, const char *name, char *id) {
  char dir[PATH_MAX];
  if (FMT_TRUNC(dir, "%s/feedback/tmp/%s", home, name)) return -ENAMETOOLONG;
  const char *dot = strrchr(name, '.');
  if (!dot || dot == name || (size_t)(dot - name) > NAME_MAX) return -EINVAL;
  memcpy(id, name, (size_t)(dot - name));
  id[dot - name] = '\0';
  pt_feedback_bundle *b = NULL;
  int r = pt_feedback_outbox_open(home, dir, &b, NULL, 0);
  if (r < 0) return r;
  json_t *man = pt_feedback_outbox_manifest(b);
  json_t *msg = json_object_get(man, "message");
  const char *mid = pt_feedback_entry_str(man, "id");
  r = mid && strcmp(mid, id) == 0 ? 0 : -EBADMSG;
  if (r == 0)
    r = verify_file(b, pt_feedback_entry_str(msg, "file"), json_object_get(msg, "size"),
                    json_object_get(msg, "sha256"));
  size_t i;
  json_t *a;
  json_array_foreach(json_object_get(man, "attachments"), i, a) {
    if (r < 0) break;
    r = verify_file(b, pt_feedback_entry_str(a, "file"), json_object_get(a, "size"),
                    json_object_get(a, "sha256"));
  }
  pt_feedback_outbox_close(b);
  return r;
}

/* Takes tmp/ exclusively (writers hold it shared only while they create
 * and lock a bundle): a few tries, 10 ms apart. */
static int lock_tmp(int tmpfd) {
  for (int i = 0; i < 200; i++) {
    if (flock(tmpfd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EWOULDBLOCK && errno != EINTR) return -errno;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return -EWOULDBLOCK;
}

int pt_feedback_outbox_repair(const char *home, pt_feedback_repair *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  int hfd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (hfd < 0) {
    int r = -errno;
    pt_errf(err, errlen, "cannot open the state root %s: %s", home, strerror(-r));
    return r;
  }
  int tmpfd = pt_open_beneath(hfd, "feedback/tmp", O_RDONLY | O_DIRECTORY);
  if (tmpfd == -ENOENT) { /* no bundle was ever written */
    close(hfd);
    return 0;
  }
  int r = tmpfd < 0 ? tmpfd : lock_tmp(tmpfd);
  if (r < 0) {
    pt_errf(err, errlen, "cannot %s %s/feedback/tmp: %s", tmpfd < 0 ? "open" : "lock", home,
            r == -ELOOP ? "a symlink is in the way" : strerror(-r));
    if (tmpfd >= 0) close(tmpfd);
    close(hfd);
    return r;
  }
  /* Under tmp/'s lock: every entry whose writer is gone, locked by us
   * (names and fds; dirfd -1 for a non-directory). */
  typedef struct { char name[NAME_MAX + 1]; int fd; } left;
  left *v = NULL;
  size_t n = 0, cap = 0;
  int dfd = dup(tmpfd);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d && dfd >= 0) close(dfd);
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    int fd = openat(tmpfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
      close(fd);
      out->busy++; /* its writer runs */
      continue;
    }
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 8;
      left *nv = realloc(v, nc * sizeof *nv);
      if (!nv) {
        if (fd >= 0) close(fd);
        break;
      }
      v = nv;
      cap = nc;
    }
    snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
    v[n++].fd = fd;
  }
  if (d) closedir(d);
  (void)flock(tmpfd, LOCK_UN);
  int outfd = pt_mkdir_beneath(hfd, "feedback/outbox", 0700);
  for (size_t i = 0; i < n; i++) {
    char id[NAME_MAX + 1];
    int ok = v[i].fd >= 0 && outfd >= 0 && verify_tmp_bundle(home, v[i].name, id) == 0 &&
             pt_rename_noreplace(tmpfd, v[i].name, outfd, id) == 0;
    if (ok) {
      (void)fsync(outfd);
      (void)fsync(tmpfd);
      out->completed++;
    } else {
      int q = pt_quarantine_move(hfd, "feedback-tmp", tmpfd, v[i].name, NULL, 0);
      if (q == 0) {
        out->quarantined++;
      } else {
        if (out->failed++ == 0)
          pt_errf(err, errlen, "cannot move %s/feedback/tmp/%s to quarantine/feedback-tmp: %s", home,
                  v[i].name, strerror(-q));
      }
    }
    if (v[i].fd >= 0) close(v[i].fd);
  }
  free(v);
  if (outfd >= 0) close(outfd);
  close(tmpfd);
  close(hfd);
  return 0;
}
