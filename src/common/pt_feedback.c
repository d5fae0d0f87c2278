/*
 * pt_feedback.c - feedback bundles: assembly, outbox writing, upload (see
 * pt_feedback.h for the on-disk layout and the upload policy).
 */
#include "common/pt_feedback.h"

#include "common/pt_env.h"
#include "common/pt_file.h"
#include "common/pt_sha256.h"
#include "common/pt_version.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct attachment {
  json_t *entry; /* copy of the catalog entry (own reference) */
  uint8_t *data;
  size_t len;
} attachment;

struct pt_feedback {
  char *message;
  attachment att[PT_FEEDBACK_MAX_ATTACHMENTS];
  size_t n;
};

/* snprintf into an array that reports truncation (paths: ENAMETOOLONG). */
#define FMT_TRUNC(buf, ...) (snprintf((buf), sizeof(buf), __VA_ARGS__) >= (int)sizeof(buf))

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---------- init ---------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_init_rc;
static void do_curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == 0 ? 0 : -EIO; }

int pt_feedback_global_init(void) {
  pthread_once(&curl_once, do_curl_init);
  return curl_init_rc;
}

/* ---------- bundle assembly ---------- */

int pt_feedback_new(pt_feedback **out, const char *message) {
  *out = NULL;
  if (!message) message = "";
  if (strlen(message) > PT_FEEDBACK_MAX_MESSAGE) return -EINVAL;
  pt_feedback *fb = calloc(1, sizeof *fb);
  if (!fb) return -ENOMEM;
  fb->message = strdup(message);
  if (!fb->message) { free(fb); return -ENOMEM; }
  *out = fb;
  return 0;
}

void pt_feedback_del(pt_feedback *fb) {
  if (!fb) return;
  for (size_t i = 0; i < fb->n; i++) {
    json_decref(fb->att[i].entry);
    free(fb->att[i].data);
  }
  free(fb->message);
  free(fb);
}

size_t pt_feedback_count(const pt_feedback *fb) { return fb->n; }

const uint8_t *pt_feedback_data(const pt_feedback *fb, size_t i, size_t *len) {
  if (i >= fb->n) return NULL;
  if (len) *len = fb->att[i].len;
  return fb->att[i].data;
}

json_t *pt_feedback_entry(const pt_feedback *fb, size_t i) {
  return i < fb->n ? fb->att[i].entry : NULL;
}

static const char *jstr(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

int pt_feedback_add(pt_feedback *fb, json_t *entry, const uint8_t *data, size_t len, char *err,
                    size_t errlen) {
  const char *id = jstr(entry, "id"), *sha = jstr(entry, "sha256");
  json_t *size = json_object_get(entry, "size");
  if (!json_is_object(entry) || !id || !sha || !jstr(entry, "kind") || !json_is_integer(size)) {
    seterr(err, errlen, "catalog entry lacks id, kind, size or sha256");
    return -EINVAL;
  }
  if (fb->n == PT_FEEDBACK_MAX_ATTACHMENTS) {
    seterr(err, errlen, "at most %d attachments", PT_FEEDBACK_MAX_ATTACHMENTS);
    return -E2BIG;
  }
  for (size_t i = 0; i < fb->n; i++)
    if (strcmp(jstr(fb->att[i].entry, "id"), id) == 0) {
      seterr(err, errlen, "artifact %s is attached already", id);
      return -EEXIST;
    }
  if ((json_int_t)len != json_integer_value(size)) {
    seterr(err, errlen, "artifact %s: received %zu bytes, catalog says %" JSON_INTEGER_FORMAT, id,
           len, json_integer_value(size));
    return -EBADMSG;
  }
  char hex[PT_SHA256_HEX];
  int r = pt_sha256_hex(data, len, hex);
  if (r < 0) { seterr(err, errlen, "sha256 failed"); return r; }
  if (strcmp(hex, sha) != 0) {
    seterr(err, errlen, "artifact %s: SHA-256 of the received bytes does not match the catalog", id);
    return -EBADMSG;
  }
  attachment *a = &fb->att[fb->n];
  a->entry = json_deep_copy(entry);
  a->data = malloc(len ? len : 1);
  if (!a->entry || !a->data) {
    json_decref(a->entry);
    free(a->data);
    a->entry = NULL;
    a->data = NULL;
    seterr(err, errlen, "out of memory");
    return -ENOMEM;
  }
  memcpy(a->data, data, len);
  a->len = len;
  fb->n++;
  return 0;
}

/* ---------- base64 ---------- */

static int b64val(int ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

int pt_feedback_b64decode(const char *s, size_t n, uint8_t **out, size_t *outlen) {
  *out = NULL;
  *outlen = 0;
  if (n % 4) return -EINVAL;
  uint8_t *o = malloc(n / 4 * 3 + 1);
  if (!o) return -ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < n; i += 4) {
    int last = i + 4 == n;
    int a = b64val(s[i]), b = b64val(s[i + 1]);
    int c = (last && s[i + 2] == '=') ? -2 : b64val(s[i + 2]);
    int d = (last && s[i + 3] == '=') ? -2 : b64val(s[i + 3]);
    if (a < 0 || b < 0 || c == -1 || d == -1 || (c == -2 && d != -2)) { free(o); return -EINVAL; }
    o[k++] = (uint8_t)(a << 2 | b >> 4);
    if (c >= 0) o[k++] = (uint8_t)((b & 15) << 4 | c >> 2);
    if (d >= 0) o[k++] = (uint8_t)((c & 3) << 6 | d);
  }
  *out = o;
  *outlen = k;
  return 0;
}

/* ---------- fetching from the daemon ---------- */

int pt_feedback_fetch(pt_client *c, json_t *entry, uint8_t **data, size_t *len,
                      pt_client_error *err) {
  *data = NULL;
  *len = 0;
  const char *id = jstr(entry, "id"), *sha = jstr(entry, "sha256");
  json_t *jsize = json_object_get(entry, "size");
  if (!id || !sha || !json_is_integer(jsize) || json_integer_value(jsize) < 0) {
    pt_client_error_set(err, "bad_request", "catalog entry lacks id, size or sha256");
    return -EINVAL;
  }
  uint64_t size = (uint64_t)json_integer_value(jsize);
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) { pt_client_error_set(err, "no_memory", "out of memory for %" PRIu64 " bytes", size); return -ENOMEM; }
  uint64_t off = 0;
  for (;;) {
    json_t *params = json_pack("{s:s, s:I}", "id", id, "offset", (json_int_t)off);
    json_t *res = NULL;
    int r = pt_client_call(c, "artifacts.fetch", params, 60000, &res, err);
    if (r < 0) { free(buf); return r; }
    const char *b64 = jstr(res, "data_base64");
    json_t *jl = json_object_get(res, "length");
    json_t *js = json_object_get(res, "size");
    const char *rsha = jstr(res, "sha256");
    uint8_t *chunk = NULL;
    size_t clen = 0;
    int bad = !b64 || !json_is_integer(jl) || !json_is_integer(js) || !rsha ||
              (uint64_t)json_integer_value(js) != size || strcmp(rsha, sha) != 0 ||
              pt_feedback_b64decode(b64, strlen(b64), &chunk, &clen) < 0 ||
              (json_int_t)clen != json_integer_value(jl) || off + clen > size;
    int eof = json_is_true(json_object_get(res, "eof"));
    json_decref(res);
    if (bad) {
      free(chunk);
      free(buf);
      pt_client_error_set(err, "bad_reply", "artifact %s: the daemon's fetch reply does not match the listing", id);
      return -EPROTO;
    }
    memcpy(buf + off, chunk, clen);
    free(chunk);
    off += clen;
    if (eof || off >= size) break;
    if (clen == 0) {
      free(buf);
      pt_client_error_set(err, "bad_reply", "artifact %s: empty chunk before the end", id);
      return -EPROTO;
    }
  }
  if (off != size) {
    free(buf);
    pt_client_error_set(err, "bad_reply", "artifact %s: got %" PRIu64 " of %" PRIu64 " bytes", id, off, size);
    return -EPROTO;
  }
  char hex[PT_SHA256_HEX];
  if (pt_sha256_hex(buf, size, hex) < 0 || strcmp(hex, sha) != 0) {
    free(buf);
    pt_client_error_set(err, "bad_reply", "artifact %s: SHA-256 of the received bytes does not match the catalog",
         id);
    return -EBADMSG;
  }
  *data = buf;
  *len = size;
  return 0;
}

int pt_feedback_fetch_add(pt_feedback *fb, pt_client *c, json_t *entry, pt_client_error *err) {
  uint8_t *data = NULL;
  size_t len = 0;
  int r = pt_feedback_fetch(c, entry, &data, &len, err);
  if (r < 0) return r;
  char msg[256];
  r = pt_feedback_add(fb, entry, data, len, msg, sizeof msg);
  free(data);
  if (r < 0) pt_client_error_set(err, "bad_request", "%s", msg);
  return r;
}

/* ---------- writing ---------- */

static void sanitize_name(const char *in, char *out, size_t cap) {
  const char *base = strrchr(in, '/');
  base = base ? base + 1 : in;
  size_t k = 0;
  for (const char *p = base; *p && k + 1 < cap; p++)
    out[k++] = (isalnum((unsigned char)*p) || *p == '.' || *p == '-' || *p == '_') ? *p : '_';
  out[k] = '\0';
  if (k == 0 || out[0] == '.') snprintf(out, cap, "artifact.bin");
}

static int write_file(int dirfd, const char *name, const void *data, size_t len) {
  /* O_EXCL never follows a symlink; 0600 whatever the umask */
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  const uint8_t *p = data;
  size_t off = 0;
  int r = fchmod(fd, 0600) == 0 ? 0 : -errno;
  while (r == 0 && off < len) {
    ssize_t n = write(fd, p + off, len - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      r = -errno;
      break;
    }
    off += (size_t)n;
  }
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

static void now_rfc3339(char out[32], char compact[24]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  if (out) strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (compact) strftime(compact, 24, "%Y%m%dT%H%M%SZ", &tm);
}

int pt_feedback_write(pt_feedback *fb, const char *home, char *dir_out, size_t dir_cap, char *err,
                      size_t errlen) {
  char final[PATH_MAX], tmpname[96];
  int r, hfd = -1, tmpfd = -1, outfd = -1, dfd = -1;
  json_t *man = NULL, *arr = NULL;
  char *mtext = NULL;
  /* Bundle id: creation time + 32 random bits, sortable and unique. */
  char created[32], compact[24];
  now_rfc3339(created, compact);
  uint32_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = (uint32_t)getpid() ^ (uint32_t)time(NULL);
  char id[48];
  snprintf(id, sizeof id, "%s-%08" PRIx32, compact, rnd);
  if (FMT_TRUNC(final, "%s/feedback/outbox/%s", home, id)) {
    seterr(err, errlen, "state root path too long");
    return -ENAMETOOLONG;
  }
  /* Everything below the state root is reached from its fd, never through
   * a symlink (feedback/, tmp/, outbox/ planted as links to elsewhere are
   * refused), and created 0700 whatever the umask. */
  hfd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (hfd < 0) {
    r = -errno;
    seterr(err, errlen, "cannot open the state root %s: %s", home, strerror(errno));
    return r;
  }
  if ((tmpfd = pt_mkdir_beneath(hfd, "feedback/tmp", 0700)) < 0 ||
      (outfd = pt_mkdir_beneath(hfd, "feedback/outbox", 0700)) < 0) {
    r = tmpfd < 0 ? tmpfd : outfd;
    seterr(err, errlen, "cannot create %s/feedback/%s: %s", home, tmpfd < 0 ? "tmp" : "outbox",
           r == -ELOOP || r == -ENOTDIR ? "a symlink or non-directory is in the way"
                                        : strerror(-r));
    goto fail_dirs;
  }
  /* tmp/<id>.<random>: a fresh name of ours (mkdirat fails on anything that
   * exists, link or not). */
  for (int tries = 0;; tries++) {
    uint32_t t = 0;
    if (getrandom(&t, sizeof t, 0) != sizeof t) t = (uint32_t)tries * 2654435761u ^ rnd;
    snprintf(tmpname, sizeof tmpname, "%s.%08" PRIx32, id, t);
    if (mkdirat(tmpfd, tmpname, 0700) == 0) break;
    if (errno != EEXIST || tries >= 16) {
      r = -errno;
      seterr(err, errlen, "cannot create a bundle in %s/feedback/tmp: %s", home, strerror(errno));
      goto fail_dirs;
    }
  }
  dfd = openat(tmpfd, tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0 || fchmod(dfd, 0700) != 0) {
    r = -errno;
    seterr(err, errlen, "open %s/feedback/tmp/%s: %s", home, tmpname, strerror(errno));
    goto fail;
  }

  size_t mlen = strlen(fb->message);
  char msha[PT_SHA256_HEX];
  if ((r = pt_sha256_hex(fb->message, mlen, msha)) < 0 ||
      (r = write_file(dfd, "message.txt", fb->message, mlen)) < 0) {
    seterr(err, errlen, "writing message.txt: %s", strerror(-r));
    goto fail;
  }
  arr = json_array();
  if (!arr) goto fail_oom;
  for (size_t i = 0; i < fb->n; i++) {
    attachment *a = &fb->att[i];
    const char *path = jstr(a->entry, "path");
    char base[200], fname[256];
    sanitize_name(path ? path : jstr(a->entry, "kind"), base, sizeof base);
    snprintf(fname, sizeof fname, "%02zu-%s", i + 1, base);
    if ((r = write_file(dfd, fname, a->data, a->len)) < 0) {
      seterr(err, errlen, "writing %s: %s", fname, strerror(-r));
      goto fail;
    }
    json_t *e = json_pack("{s:s, s:s, s:s?, s:s?, s:I, s:s, s:s?, s:s?, s:s}", "id",
                          jstr(a->entry, "id"), "kind", jstr(a->entry, "kind"), "label",
                          jstr(a->entry, "label"), "source", jstr(a->entry, "source"), "size",
                          (json_int_t)a->len, "sha256", jstr(a->entry, "sha256"), "created",
                          jstr(a->entry, "created"), "catalog_path", path, "file", fname);
    if (!e || json_array_append_new(arr, e) != 0) goto fail_oom;
  }
  char client[64];
  snprintf(client, sizeof client, "polytoken %s", pt_version());
  man = json_pack("{s:i, s:s, s:s, s:s, s:{s:s, s:I, s:s}, s:O, s:s}", "schema", 1, "id", id,
                  "created", created, "client", client, "message", "file", "message.txt", "size",
                  (json_int_t)mlen, "sha256", msha, "attachments", arr, "policy",
                  "attachments are sent raw and unsanitized (docs/feedback.md)");
  if (!man) goto fail_oom;
  mtext = json_dumps(man, JSON_INDENT(2) | JSON_ENSURE_ASCII);
  if (!mtext) goto fail_oom;
  if ((r = write_file(dfd, "manifest.json", mtext, strlen(mtext))) < 0) {
    seterr(err, errlen, "writing manifest.json: %s", strerror(-r));
    goto fail;
  }
  if (fsync(dfd) != 0) { r = -errno; seterr(err, errlen, "fsync: %s", strerror(errno)); goto fail; }
  /* RENAME_NOREPLACE semantics are not needed: the id is fresh and a
   * directory rename never replaces a non-empty directory. */
  if (renameat(tmpfd, tmpname, outfd, id) != 0) {
    r = -errno;
    seterr(err, errlen, "moving the bundle into %s/feedback/outbox: %s", home, strerror(errno));
    goto fail;
  }
  (void)fsync(outfd);
  (void)fsync(tmpfd);
  close(dfd);
  close(outfd);
  close(tmpfd);
  close(hfd);
  free(mtext);
  json_decref(man);
  json_decref(arr);
  if (dir_out) snprintf(dir_out, dir_cap, "%s", final);
  return 0;

fail_oom:
  r = -ENOMEM;
  seterr(err, errlen, "out of memory");
fail:
  if (dfd >= 0) close(dfd);
  rm_tree_at(tmpfd, tmpname);
fail_dirs:
  if (outfd >= 0) close(outfd);
  if (tmpfd >= 0) close(tmpfd);
  close(hfd);
  free(mtext);
  json_decref(man);
  json_decref(arr);
  return r;
}

/* ---------- upload ---------- */


void pt_feedback_upload_opts_from_env(pt_feedback_upload_opts *o) {
  o->url = getenv("POLYTOKEN_FEEDBACK_URL");
  if (o->url && !*o->url) o->url = NULL;
  /* Strict (pt_env.h); a bad value falls back to the default. */
  o->tries = (int)pt_env_int("POLYTOKEN_FEEDBACK_TRIES", 4, 1, 1000, NULL, 0);
  o->base_delay_ms = (int)pt_env_int("POLYTOKEN_FEEDBACK_BACKOFF_MS", 200, 0, 3600 * 1000, NULL, 0);
  o->timeout_ms = pt_env_int("POLYTOKEN_FEEDBACK_TIMEOUT_MS", 30000, 1, 24L * 3600 * 1000, NULL, 0);
  o->cancel = NULL;
}

static int write_status(int bfd, const pt_feedback_upload_result *res, const char *url) {
  char when[32];
  now_rfc3339(when, NULL);
  json_t *o = json_pack("{s:s, s:i, s:I, s:s, s:s, s:s}", "state", res->sent ? "sent" : "failed",
                        "attempts", res->attempts, "http_status", (json_int_t)res->http_status,
                        "error", res->error, "url", url, "at", when);
  if (!o) return -ENOMEM;
  char *s = json_dumps(o, JSON_INDENT(2));
  json_decref(o);
  if (!s) return -ENOMEM;
  int r = pt_write_atomic_at(bfd, "status.json", s, strlen(s), 0600);
  free(s);
  return r;
}

/* A bundle file handed to libcurl as a stream over an fd we opened with
 * O_NOFOLLOW (curl_mime_filedata would open the path itself and follow a
 * symlink planted in the bundle). */
typedef struct part_src {
  int fd;
  curl_off_t off, size;
} part_src;

static size_t part_read(char *buf, size_t size, size_t n, void *arg) {
  part_src *p = arg;
  size_t want = size * n;
  if ((curl_off_t)want > p->size - p->off) want = (size_t)(p->size - p->off);
  if (want == 0) return 0;
  ssize_t r;
  do r = pread(p->fd, buf, want, (off_t)p->off); while (r < 0 && errno == EINTR);
  if (r <= 0) return CURL_READFUNC_ABORT; /* shrank or failed: never send less silently */
  p->off += r;
  return (size_t)r;
}

static int part_seek(void *arg, curl_off_t offset, int origin) {
  part_src *p = arg;
  if (origin != SEEK_SET || offset < 0 || offset > p->size) return CURL_SEEKFUNC_FAIL;
  p->off = offset; /* curl rewinds for every retry */
  return CURL_SEEKFUNC_OK;
}

static void part_free(void *arg) {
  part_src *p = arg;
  close(p->fd);
  free(p);
}

/* Opens `name` in the bundle (a regular file with one link, never through
 * a symlink) and adds it as a part. 0 or a negative errno. */
static int add_part(curl_mime *mime, int bfd, const char *field, const char *name,
                    const char *type) {
  int fd = pt_open_beneath(bfd, name, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return fd;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    close(fd);
    return -EINVAL;
  }
  part_src *p = malloc(sizeof *p);
  curl_mimepart *part = p ? curl_mime_addpart(mime) : NULL;
  if (!part) {
    free(p);
    close(fd);
    return -ENOMEM;
  }
  p->fd = fd;
  p->off = 0;
  p->size = (curl_off_t)st.st_size;
  curl_mime_name(part, field);
  /* on success the part owns p (part_free); on failure free it here */
  if (curl_mime_data_cb(part, p->size, part_read, part_seek, part_free, p) != CURLE_OK) {
    part_free(p);
    return -ENOMEM;
  }
  curl_mime_filename(part, name);
  curl_mime_type(part, type);
  return 0;
}

/* Splits bundle_dir into the parent ("feedback/outbox") relative to the
 * state root and the bundle's own name, and opens both beneath the root's
 * fd with no symlink on the way. Returns 0 with *parentfd, *bfd and *base
 * (pointing into bundle_dir), or a negative errno. */
static int open_bundle(int hfd, const char *home, const char *bundle_dir, int *parentfd, int *bfd,
                       const char **base) {
  size_t n = strlen(home);
  while (n > 1 && home[n - 1] == '/') n--;
  if (strncmp(bundle_dir, home, n) != 0 || bundle_dir[n] != '/') return -EXDEV;
  const char *rel = bundle_dir + n + 1;
  while (*rel == '/') rel++; /* "<home>/" + "/feedback/..." */
  const char *slash = strrchr(rel, '/');
  if (!slash || !slash[1]) return -EINVAL;
  char parent[PATH_MAX];
  if ((size_t)(slash - rel) >= sizeof parent) return -ENAMETOOLONG;
  memcpy(parent, rel, (size_t)(slash - rel));
  parent[slash - rel] = '\0';
  *parentfd = pt_open_beneath(hfd, parent, O_RDONLY | O_DIRECTORY);
  if (*parentfd < 0) return *parentfd;
  *bfd = pt_open_beneath(*parentfd, slash + 1, O_RDONLY | O_DIRECTORY);
  if (*bfd < 0) {
    int r = *bfd;
    close(*parentfd);
    *parentfd = -1;
    return r;
  }
  *base = slash + 1;
  return 0;
}

static int retryable(CURLcode cc, long status) {
  if (cc != CURLE_OK) return 1; /* connection refused, reset, timeout... */
  return status == 408 || status == 429 || status >= 500;
}

static size_t discard_body(char *p, size_t sz, size_t n, void *ud) {
  (void)p; (void)ud;
  return sz * n;
}

static int cancelled(atomic_int *cancel) { return cancel && atomic_load(cancel) != 0; }

/* Sleeps ms, in slices of at most 50 ms so a cancel flag set meanwhile ends
 * the wait early. */
static void sleep_ms(long ms, atomic_int *cancel) {
  while (ms > 0 && !cancelled(cancel)) {
    long slice = ms < 50 ? ms : 50;
    struct timespec ts = {0, slice * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    ms -= slice;
  }
}

/* libcurl progress callback (worker thread): non-zero aborts the transfer
 * with CURLE_ABORTED_BY_CALLBACK. */
static int xfer_check_cancel(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                             curl_off_t ulnow) {
  (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
  return cancelled(ud);
}

int pt_feedback_upload(const char *home, const char *bundle_dir, const pt_feedback_upload_opts *o,
                       pt_feedback_upload_result *res) {
  memset(res, 0, sizeof *res);
  snprintf(res->dir, sizeof res->dir, "%s", bundle_dir);
  if (!o || !o->url || !*o->url) {
    snprintf(res->error, sizeof res->error, "no upload URL (POLYTOKEN_FEEDBACK_URL)");
    return -EINVAL;
  }
  int r = pt_feedback_global_init();
  if (r < 0) { snprintf(res->error, sizeof res->error, "libcurl failed to initialise"); return r; }
  /* The bundle is reached from the state root's fd and every file in it is
   * opened with no symlink followed (a link planted into the outbox must
   * not make us upload what it points to). */
  int hfd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC), parentfd = -1, bfd = -1;
  const char *bname = NULL;
  r = hfd < 0 ? -errno : open_bundle(hfd, home, bundle_dir, &parentfd, &bfd, &bname);
  if (r < 0) {
    if (hfd >= 0) close(hfd);
    snprintf(res->error, sizeof res->error, "%s is not a bundle below %s/feedback (%s)", bundle_dir,
             home, r == -ELOOP ? "a symlink is on the path" : strerror(-r));
    return -EINVAL;
  }
  json_t *man = NULL;
  int mfd = pt_open_beneath(bfd, "manifest.json", O_RDONLY | O_NONBLOCK);
  if (mfd >= 0) {
    man = json_loadfd(mfd, 0, NULL);
    close(mfd);
  }
  if (!man || !json_is_array(json_object_get(man, "attachments"))) {
    json_decref(man);
    close(bfd);
    close(parentfd);
    close(hfd);
    snprintf(res->error, sizeof res->error, "%s is not a feedback bundle (no manifest)", bundle_dir);
    return -EINVAL;
  }
  const char *bid = jstr(man, "id");
  if (bid && (!*bid || strchr(bid, '/') || bid[0] == '.')) bid = NULL; /* only a plain name */
  CURL *h = curl_easy_init();
  curl_mime *mime = h ? curl_mime_init(h) : NULL;
  if (!h || !mime) { r = -ENOMEM; snprintf(res->error, sizeof res->error, "out of memory"); goto out; }
  if ((r = add_part(mime, bfd, "manifest", "manifest.json", "application/json")) < 0 ||
      (r = add_part(mime, bfd, "message", "message.txt", "text/plain; charset=utf-8")) < 0) {
    snprintf(res->error, sizeof res->error, "cannot read the bundle's %s: %s",
             r == -EINVAL ? "files (not regular files)" : "files", strerror(-r));
    r = r == -ENOMEM ? r : -EINVAL;
    goto out;
  }
  size_t i;
  json_t *a;
  json_array_foreach(json_object_get(man, "attachments"), i, a) {
    const char *f = jstr(a, "file");
    if (!f || strchr(f, '/') || f[0] == '.') {
      r = -EINVAL;
      snprintf(res->error, sizeof res->error, "manifest names a bad attachment file");
      goto out;
    }
    if ((r = add_part(mime, bfd, "attachment", f, "application/octet-stream")) < 0) {
      snprintf(res->error, sizeof res->error, "cannot read attachment %s of the bundle: %s", f,
               r == -ELOOP ? "it is a symlink" : r == -EINVAL ? "not a regular file of its own"
                                                              : strerror(-r));
      r = r == -ENOMEM ? r : -EINVAL;
      goto out;
    }
  }
  curl_easy_setopt(h, CURLOPT_URL, o->url);
  curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* safe on worker threads */
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o->timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, o->timeout_ms);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_body);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "polytoken-feedback");
  char errbuf[CURL_ERROR_SIZE];
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  if (o->cancel) {
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xfer_check_cancel);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, o->cancel);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  }
  int tries = o->tries > 0 ? o->tries : 1;
  long delay = o->base_delay_ms;
  int was_cancelled = 0;
  for (int t = 0; t < tries; t++) {
    if (t > 0) {
      sleep_ms(delay, o->cancel);
      delay *= 2;
    }
    if (cancelled(o->cancel)) {
      was_cancelled = 1;
      snprintf(res->error, sizeof res->error, "upload cancelled");
      break;
    }
    errbuf[0] = '\0';
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    res->attempts = t + 1;
    res->http_status = status;
    if (cc == CURLE_OK && status >= 200 && status < 300) {
      res->sent = 1;
      res->error[0] = '\0';
      break;
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
      was_cancelled = 1;
      snprintf(res->error, sizeof res->error, "upload cancelled");
      break;
    }
    if (cc != CURLE_OK)
      snprintf(res->error, sizeof res->error, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
    else
      snprintf(res->error, sizeof res->error, "server answered HTTP %ld", status);
    if (!retryable(cc, status)) break;
  }
  /* Record the outcome in the bundle, then move a delivered one to sent/. */
  write_status(bfd, res, o->url);
  if (res->sent) {
    const char *dname = bid && *bid ? bid : bname;
    char dst[PATH_MAX];
    int sentfd = pt_mkdir_beneath(hfd, "feedback/sent", 0700);
    if (sentfd >= 0 && !FMT_TRUNC(dst, "%s/feedback/sent/%s", home, dname) &&
        renameat(parentfd, bname, sentfd, dname) == 0) {
      snprintf(res->dir, sizeof res->dir, "%s", dst);
      (void)fsync(sentfd);
      (void)fsync(parentfd);
    }
    if (sentfd >= 0) close(sentfd);
    /* A failed move leaves a "sent" status.json in the outbox: still
     * recorded as delivered. */
    r = 0;
  } else {
    r = was_cancelled ? -ECANCELED : -EIO;
  }
out:
  curl_mime_free(mime);
  if (h) curl_easy_cleanup(h);
  json_decref(man);
  close(bfd);
  close(parentfd);
  close(hfd);
  return r;
}

/* ---------- picking and formatting ---------- */

json_t *pt_feedback_pick(json_t *entries, const char *kind_or_id) {
  size_t i;
  json_t *e, *best = NULL;
  if (!json_is_array(entries) || !kind_or_id) return NULL;
  json_array_foreach(entries, i, e) {
    const char *id = jstr(e, "id");
    if (id && strcmp(id, kind_or_id) == 0) return e;
  }
  json_int_t best_t = 0;
  json_array_foreach(entries, i, e) {
    const char *k = jstr(e, "kind");
    if (!k || strcmp(k, kind_or_id) != 0) continue;
    json_int_t t = json_integer_value(json_object_get(e, "created_unix"));
    if (!best || t > best_t) { best = e; best_t = t; }
  }
  return best;
}

void pt_feedback_fmt_size(uint64_t n, char *out, size_t cap) {
  if (n < 1024) snprintf(out, cap, "%" PRIu64 " B", n);
  else if (n < (1u << 20)) snprintf(out, cap, "%.1f KiB", (double)n / 1024.0);
  else snprintf(out, cap, "%.1f MiB", (double)n / (1024.0 * 1024.0));
}

void pt_feedback_fmt_age(int64_t t, int64_t now, char *out, size_t cap) {
  int64_t d = now - t;
  if (d < 0) d = 0;
  if (d < 60) snprintf(out, cap, "%" PRId64 " s ago", d);
  else if (d < 3600) snprintf(out, cap, "%" PRId64 " min ago", d / 60);
  else if (d < 86400) snprintf(out, cap, "%" PRId64 " h ago", d / 3600);
  else snprintf(out, cap, "%" PRId64 " d ago", d / 86400);
}
