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
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  const uint8_t *p = data;
  size_t off = 0;
  int r = 0;
  while (off < len) {
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

static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char p[PATH_MAX];
      if (!FMT_TRUNC(p, "%s/%s", dir, de->d_name)) unlink(p); /* bundles are flat */
    }
    closedir(d);
  }
  rmdir(dir);
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
  char fbdir[PATH_MAX], tmpbase[PATH_MAX], outbox[PATH_MAX], tmpdir[PATH_MAX], final[PATH_MAX];
  int r;
  if (FMT_TRUNC(fbdir, "%s/feedback", home) || FMT_TRUNC(tmpbase, "%s/tmp", fbdir) ||
      FMT_TRUNC(outbox, "%s/outbox", fbdir)) {
    seterr(err, errlen, "state root path too long");
    return -ENAMETOOLONG;
  }
  if ((r = pt_mkdir_p(tmpbase, 0700)) < 0 || (r = pt_mkdir_p(outbox, 0700)) < 0) {
    seterr(err, errlen, "cannot create %s: %s", fbdir, strerror(-r));
    return r;
  }
  /* Bundle id: creation time + 32 random bits, sortable and unique. */
  char created[32], compact[24];
  now_rfc3339(created, compact);
  uint32_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd) rnd = (uint32_t)getpid() ^ (uint32_t)time(NULL);
  char id[48];
  snprintf(id, sizeof id, "%s-%08" PRIx32, compact, rnd);
  if (FMT_TRUNC(tmpdir, "%s/%s.XXXXXX", tmpbase, id) || FMT_TRUNC(final, "%s/%s", outbox, id)) {
    seterr(err, errlen, "state root path too long");
    return -ENAMETOOLONG;
  }
  if (!mkdtemp(tmpdir)) {
    r = -errno;
    seterr(err, errlen, "cannot create a bundle in %s: %s", tmpbase, strerror(errno));
    return r;
  }
  int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  json_t *man = NULL, *arr = NULL;
  char *mtext = NULL;
  if (dfd < 0) { r = -errno; seterr(err, errlen, "open %s: %s", tmpdir, strerror(errno)); goto fail; }

  size_t mlen = strlen(fb->message);
  char msha[PT_SHA256_HEX];
  if ((r = pt_sha256_hex(fb->message, mlen, msha)) < 0 ||
      (r = write_file(dfd, "message.txt", fb->message, mlen)) < 0) {
    seterr(err, errlen, "writing message.txt: %s", strerror(-r));
    goto fail;
  }
  arr = json_array();
  if (!arr) { r = -ENOMEM; goto fail_oom; }
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
  if (rename(tmpdir, final) != 0) {
    r = -errno;
    seterr(err, errlen, "moving the bundle into %s: %s", outbox, strerror(errno));
    goto fail;
  }
  pt_fsync_dir(outbox);
  pt_fsync_dir(tmpbase);
  close(dfd);
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
  rm_tree(tmpdir);
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

static int write_status(const char *dir, const pt_feedback_upload_result *res, const char *url) {
  char when[32];
  now_rfc3339(when, NULL);
  json_t *o = json_pack("{s:s, s:i, s:I, s:s, s:s, s:s}", "state", res->sent ? "sent" : "failed",
                        "attempts", res->attempts, "http_status", (json_int_t)res->http_status,
                        "error", res->error, "url", url, "at", when);
  if (!o) return -ENOMEM;
  char *s = json_dumps(o, JSON_INDENT(2));
  json_decref(o);
  if (!s) return -ENOMEM;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/status.json", dir);
  int r = pt_write_atomic(path, s, strlen(s), 0600);
  free(s);
  return r;
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
  char mpath[PATH_MAX];
  snprintf(mpath, sizeof mpath, "%s/manifest.json", bundle_dir);
  json_t *man = json_load_file(mpath, 0, NULL);
  if (!man || !json_is_array(json_object_get(man, "attachments"))) {
    json_decref(man);
    snprintf(res->error, sizeof res->error, "%s is not a feedback bundle (no manifest)", bundle_dir);
    return -EINVAL;
  }
  const char *bid = jstr(man, "id");
  if (bid && (!*bid || strchr(bid, '/') || bid[0] == '.')) bid = NULL; /* only a plain name */
  CURL *h = curl_easy_init();
  curl_mime *mime = h ? curl_mime_init(h) : NULL;
  if (!h || !mime) { r = -ENOMEM; snprintf(res->error, sizeof res->error, "out of memory"); goto out; }
  curl_mimepart *part = curl_mime_addpart(mime);
  curl_mime_name(part, "manifest");
  curl_mime_filedata(part, mpath);
  curl_mime_filename(part, "manifest.json");
  curl_mime_type(part, "application/json");
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/message.txt", bundle_dir);
  part = curl_mime_addpart(mime);
  curl_mime_name(part, "message");
  curl_mime_filedata(part, path);
  curl_mime_filename(part, "message.txt");
  curl_mime_type(part, "text/plain; charset=utf-8");
  size_t i;
  json_t *a;
  json_array_foreach(json_object_get(man, "attachments"), i, a) {
    const char *f = jstr(a, "file");
    if (!f || strchr(f, '/') || f[0] == '.') {
      r = -EINVAL;
      snprintf(res->error, sizeof res->error, "manifest names a bad attachment file");
      goto out;
    }
    snprintf(path, sizeof path, "%s/%s", bundle_dir, f);
    part = curl_mime_addpart(mime);
    curl_mime_name(part, "attachment");
    curl_mime_filedata(part, path); /* also sets the part's filename */
    curl_mime_type(part, "application/octet-stream");
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
  write_status(bundle_dir, res, o->url);
  if (res->sent) {
    char sentdir[PATH_MAX], dst[PATH_MAX];
    snprintf(sentdir, sizeof sentdir, "%s/feedback/sent", home);
    const char *base = strrchr(bundle_dir, '/');
    base = base ? base + 1 : bundle_dir;
    if (!FMT_TRUNC(dst, "%s/%s", sentdir, bid && *bid ? bid : base) &&
        pt_mkdir_p(sentdir, 0700) == 0 && rename(bundle_dir, dst) == 0) {
      snprintf(res->dir, sizeof res->dir, "%s", dst);
      pt_fsync_dir(sentdir);
      char ob[PATH_MAX];
      snprintf(ob, sizeof ob, "%s", bundle_dir);
      char *slash = strrchr(ob, '/');
      if (slash) { *slash = '\0'; pt_fsync_dir(ob); }
    }
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
