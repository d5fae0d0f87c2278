/*
 * pt_feedback_upload.c - the HTTP upload of a feedback bundle with libcurl
 * (see pt_feedback_upload.h for the policy).
 *
 * DESIGN
 *  - The only unit of src/common that uses libcurl; it is a static library
 *    of its own (src/common/meson.build) linked into `polytoken` only.
 *  - Disk work (opening the bundle and its files, status.json, the move to
 *    sent/) is pt_feedback_outbox's; this file builds the request from the
 *    fds it hands out and runs the attempts.
 *  - Errors keep their errno: a file of the bundle that cannot be opened
 *    returns that open's error, a failed transfer -EIO, a failed record of
 *    the outcome is reported in res->record_error, never dropped.
 */
#include "common/pt_feedback_upload.h"

#include "common/pt_env.h"
#include "common/pt_err.h"
#include "common/pt_feedback.h"
#include "common/pt_feedback_outbox.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_init_rc;
static void do_curl_init(void) {
  curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == 0 ? 0 : -EIO;
}

int pt_feedback_upload_global_init(void) {
  pthread_once(&curl_once, do_curl_init);
  return curl_init_rc;
}

void pt_feedback_upload_opts_from_env(pt_feedback_upload_opts *o) {
  o->url = getenv("POLYTOKEN_FEEDBACK_URL");
  if (o->url && !*o->url) o->url = NULL;
  /* Strict (pt_env.h); a bad value falls back to the default. */
  o->tries = (int)pt_env_int("POLYTOKEN_FEEDBACK_TRIES", 4, 1, 1000, NULL, 0);
  o->base_delay_ms = (int)pt_env_int("POLYTOKEN_FEEDBACK_BACKOFF_MS", 200, 0, 3600 * 1000, NULL, 0);
  o->timeout_ms = pt_env_int("POLYTOKEN_FEEDBACK_TIMEOUT_MS", 30000, 1, 24L * 3600 * 1000, NULL, 0);
  o->cancel = NULL;
}

/* ---------- the request ---------- */

/* A bundle file handed to libcurl as a stream over an fd opened without
 * following a symlink (curl_mime_filedata would open the path itself and
 * follow a link planted in the bundle). */
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

/* Adds the bundle's file `name` as a part. 0, the open's negative errno,
 * or -ENOMEM. */
static int add_part(curl_mime *mime, const pt_feedback_bundle *b, const char *field,
                    const char *name, const char *type) {
  uint64_t size = 0;
  int fd = pt_feedback_outbox_open_file(b, name, &size);
  if (fd < 0) return fd;
  part_src *p = malloc(sizeof *p);
  curl_mimepart *part = p ? curl_mime_addpart(mime) : NULL;
  if (!part) {
    free(p);
    close(fd);
    return -ENOMEM;
  }
  p->fd = fd;
  p->off = 0;
  p->size = (curl_off_t)size;
  /* on success the part owns p (part_free); on failure free it here */
  if (curl_mime_data_cb(part, p->size, part_read, part_seek, part_free, p) != CURLE_OK) {
    part_free(p);
    return -ENOMEM;
  }
  if (curl_mime_name(part, field) != CURLE_OK || curl_mime_filename(part, name) != CURLE_OK ||
      curl_mime_type(part, type) != CURLE_OK)
    return -ENOMEM;
  return 0;
}

/* Builds the multipart body of the bundle. */
static int build_mime(curl_mime *mime, const pt_feedback_bundle *b, char *err, size_t errlen) {
  const char *what = "manifest.json";
  int r = add_part(mime, b, "manifest", what, "application/json");
  if (r == 0) r = add_part(mime, b, "message", what = "message.txt", "text/plain; charset=utf-8");
  size_t i;
  json_t *a;
  json_array_foreach(json_object_get(pt_feedback_outbox_manifest(b), "attachments"), i, a) {
    if (r < 0) break;
    what = pt_feedback_entry_str(a, "file");
    if (!what || !*what || strchr(what, '/') || what[0] == '.') {
      pt_errf(err, errlen, "the manifest of %s names a bad attachment file",
              pt_feedback_outbox_path(b));
      return -EBADMSG;
    }
    r = add_part(mime, b, "attachment", what, "application/octet-stream");
  }
  if (r == -ENOMEM) pt_errf(err, errlen, "out of memory");
  else if (r < 0)
    pt_errf(err, errlen, "cannot read %s of the bundle %s: %s", what, pt_feedback_outbox_path(b),
            r == -ELOOP ? "it is a symlink" : r == -EINVAL ? "not a regular file of its own"
                                                           : strerror(-r));
  return r;
}

/* ---------- the attempts ---------- */

static int retryable(CURLcode cc, long status) {
  if (cc != CURLE_OK) return 1; /* connection refused, reset, timeout... */
  return status == 408 || status == 429 || status >= 500;
}

static size_t discard_body(char *p, size_t sz, size_t n, void *ud) {
  (void)p;
  (void)ud;
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
  (void)dltotal;
  (void)dlnow;
  (void)ultotal;
  (void)ulnow;
  return cancelled(ud);
}

/* Runs up to o->tries attempts. Returns 0 (delivered), -EIO or -ECANCELED
 * with the last error in xerr. */
static int attempts(CURL *h, const pt_feedback_upload_opts *o, pt_feedback_upload_result *res,
                    char *xerr, size_t xerrlen) {
  curl_easy_setopt(h, CURLOPT_URL, o->url);
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
  for (int t = 0; t < tries; t++) {
    if (t > 0) {
      sleep_ms(delay, o->cancel);
      delay *= 2;
    }
    if (cancelled(o->cancel)) break;
    errbuf[0] = '\0';
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    res->attempts = t + 1;
    res->http_status = status;
    if (cc == CURLE_OK && status >= 200 && status < 300) {
      res->sent = 1;
      xerr[0] = '\0';
      return 0;
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK) break;
    if (cc != CURLE_OK)
      snprintf(xerr, xerrlen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
    else
      snprintf(xerr, xerrlen, "server answered HTTP %ld", status);
    if (!retryable(cc, status)) return -EIO;
  }
  if (cancelled(o->cancel)) {
    snprintf(xerr, xerrlen, "upload cancelled");
    return -ECANCELED;
  }
  return -EIO;
}

/* Records the outcome in the bundle and moves a delivered one to sent/.
 * A failure is kept in res->record_error and err, never dropped: for a
 * delivered bundle the move to sent/ is tried even when status.json could
 * not be written (the move alone records the delivery). */
static void record(pt_feedback_bundle *b, const pt_feedback_upload_opts *o,
                   pt_feedback_upload_result *res, const char *xerr, char *err, size_t errlen) {
  char rerr[1024] = "", merr[1024] = "";
  pt_feedback_status st = {res->sent, res->attempts, res->http_status, xerr, o->url};
  int rr = pt_feedback_outbox_record(b, &st, rerr, sizeof rerr);
  int mr = res->sent ? pt_feedback_outbox_move_sent(b, merr, sizeof merr) : 0;
  snprintf(res->dir, sizeof res->dir, "%s", pt_feedback_outbox_path(b));
  res->record_error = rr < 0 ? rr : mr;
  if (!res->sent)
    pt_errf(err, errlen, "%s%s%s", xerr, rr < 0 ? "; and " : "", rerr);
  else if (rr < 0 || mr < 0)
    pt_errf(err, errlen, "delivered, but %s%s%s", rerr, rr < 0 && mr < 0 ? "; and " : "", merr);
}

int pt_feedback_upload(const char *home, const char *bundle_dir, const pt_feedback_upload_opts *o,
                       pt_feedback_upload_result *res, char *err, size_t errlen) {
  memset(res, 0, sizeof *res);
  snprintf(res->dir, sizeof res->dir, "%s", bundle_dir);
  if (!o || !o->url || !*o->url) {
    pt_errf(err, errlen, "no upload URL (POLYTOKEN_FEEDBACK_URL)");
    return -EINVAL;
  }
  int r = pt_feedback_upload_global_init();
  if (r < 0) {
    pt_errf(err, errlen, "libcurl failed to initialise");
    return r;
  }
  pt_feedback_bundle *b = NULL;
  if ((r = pt_feedback_outbox_open(home, bundle_dir, &b, err, errlen)) < 0) return r;
  CURL *h = curl_easy_init();
  curl_mime *mime = h ? curl_mime_init(h) : NULL;
  if (!mime) {
    r = -ENOMEM;
    pt_errf(err, errlen, "out of memory");
    goto out;
  }
  if ((r = build_mime(mime, b, err, errlen)) < 0) goto out;
  if (curl_easy_setopt(h, CURLOPT_MIMEPOST, mime) != CURLE_OK) {
    r = -ENOMEM;
    pt_errf(err, errlen, "out of memory");
    goto out;
  }
  char xerr[512] = "";
  r = attempts(h, o, res, xerr, sizeof xerr);
  record(b, o, res, xerr, err, errlen);
out:
  curl_mime_free(mime);
  if (h) curl_easy_cleanup(h);
  pt_feedback_outbox_close(b);
  return r;
}
