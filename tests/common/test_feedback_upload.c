/* test_feedback_upload.c - the feedback upload (pt_feedback_upload.c): a
 * cancel flag stops a hanging upload; errors keep their meaning (a missing
 * file is -ENOENT, a planted symlink -ELOOP, a bad manifest -EBADMSG, not
 * all -EINVAL); a failure to record the outcome (status.json, the move to
 * sent/) is reported, never dropped. The HTTP server is a loopback socket
 * served by a thread of the test; the whole flow against a real server is
 * tests/feedback/feedback_upload_test.sh. */
#include "common_test.h"
#include "common/pt_feedback_upload.h"
#include "common/pt_file.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>


typedef struct {
  const char *home, *dir;
  pt_feedback_upload_opts o;
  pt_feedback_upload_result res;
  char err[1024];
  int rc;
} upload_arg;

static void *upload_thread(void *p) {
  upload_arg *a = p;
  a->rc = pt_feedback_upload(a->home, a->dir, &a->o, &a->res, a->err, sizeof a->err);
  return NULL;
}

/* A bundle made by hand: manifest without attachments plus the message. */
static char *make_bundle(const char *home) {
  char *dir = ptt_path2(home, "feedback/outbox/b1");
  PT_ASSERT_INT_EQ(pt_mkdir_p(dir, 0700), 0);
  char *m = ptt_path2(dir, "manifest.json");
  const char *man = "{\"id\":\"b1\",\"attachments\":[]}\n";
  pt_write_file(m, man, strlen(man));
  free(m);
  m = ptt_path2(dir, "message.txt");
  pt_write_file(m, "slow", 4);
  free(m);
  return dir;
}

/* ---- cancelling an upload (the TUI quits while one runs) ---- */

/* A loopback server that completes the TCP handshake (kernel backlog) but
 * never accepts or answers: curl sends and then waits for its timeout. The
 * timeout here is 60 s per attempt with 4 attempts, so only the cancel flag
 * can end the upload before the test's own 30 s limit. */
PT_TEST(common_feedback_upload_cancel_stops_a_hanging_upload) {
  char *home = pt_tmpdir("fbcancel");
  char *dir = make_bundle(home);
  int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  PT_ASSERT(srv >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  PT_ASSERT_INT_EQ(bind(srv, (struct sockaddr *)&sa, sizeof sa), 0);
  PT_ASSERT_INT_EQ(listen(srv, 4), 0);
  socklen_t sl = sizeof sa;
  PT_ASSERT_INT_EQ(getsockname(srv, (struct sockaddr *)&sa, &sl), 0);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/feedback", ntohs(sa.sin_port));

  atomic_int cancel;
  atomic_init(&cancel, 0);
  upload_arg a = {home, dir, {url, 4, 200, 60000, &cancel}, {0}, "", 1};
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, upload_thread, &a), 0);
  /* The first attempt is under way once its connection is queued on the
   * listening socket (readable = a connection waits to be accepted). */
  struct pollfd pfd = {.fd = srv, .events = POLLIN};
  PT_ASSERT_INT_EQ(poll(&pfd, 1, 20000), 1);
  atomic_store(&cancel, 1);
  PT_ASSERT_INT_EQ(pthread_join(th, NULL), 0);
  PT_ASSERT_INT_EQ(a.rc, -ECANCELED);
  PT_ASSERT_INT_EQ(a.res.sent, 0);
  PT_ASSERT_INT_EQ(a.res.attempts, 1); /* no retry after the cancel */
  PT_ASSERT_STR_EQ(a.err, "upload cancelled");
  /* recorded as failed, left in the outbox */
  char *st = ptt_path2(dir, "status.json");
  json_t *sj = json_load_file(st, 0, NULL);
  PT_ASSERT(sj != NULL);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(sj, "state")), "failed");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(sj, "error")), "upload cancelled");
  json_decref(sj);

  /* Cancelled before it starts: no attempt at all. */
  upload_arg b = {home, dir, {url, 4, 200, 60000, &cancel}, {0}, "", 1};
  upload_thread(&b);
  PT_ASSERT_INT_EQ(b.rc, -ECANCELED);
  PT_ASSERT_INT_EQ(b.res.attempts, 0);
  close(srv);
  free(st);
  free(dir);
  pt_rm_rf(home);
  free(home);
}

/* ---- errors keep their meaning ---- */

/* An upload that must fail before any byte is sent: r, and no status.json
 * written (nothing was attempted). The URL is never contacted. */
static void expect_refused(const char *home, const char *dir, int want, const char *why) {
  pt_feedback_upload_opts o = {"http://127.0.0.1:9/never", 1, 0, 1000, NULL};
  pt_feedback_upload_result res;
  char err[1024] = "";
  int r = pt_feedback_upload(home, dir, &o, &res, err, sizeof err);
  PT_ASSERT_MSG(r == want, "%s: got %d (%s), want %d", why, r, err, want);
  PT_ASSERT_MSG(err[0] != '\0', "%s: no message", why);
  PT_ASSERT_INT_EQ(res.attempts, 0);
  char *st = ptt_path2(dir, "status.json");
  struct stat sb;
  PT_ASSERT_MSG(lstat(st, &sb) != 0, "%s: status.json written", why);
  free(st);
}

PT_TEST(common_feedback_upload_errors_keep_their_meaning) {
  char *home = pt_tmpdir("fberr");
  char *dir = make_bundle(home);
  char *missing = ptt_path2(home, "feedback/outbox/nothing-here");
  expect_refused(home, missing, -ENOENT, "no such bundle");
  expect_refused(home, "/elsewhere/feedback/outbox/b1", -EINVAL, "not below the state root");
  /* a symlink in place of the bundle */
  char *blink = ptt_path2(home, "feedback/outbox/b2");
  PT_ASSERT_INT_EQ(symlink(dir, blink), 0);
  expect_refused(home, blink, -ELOOP, "bundle is a symlink");

  /* the bundle's files */
  char *msg = ptt_path2(dir, "message.txt");
  char *msg_away = ptt_path2(home, "message.away");
  PT_ASSERT_INT_EQ(rename(msg, msg_away), 0);
  expect_refused(home, dir, -ENOENT, "message.txt missing");
  PT_ASSERT_INT_EQ(symlink(msg_away, msg), 0);
  expect_refused(home, dir, -ELOOP, "message.txt a symlink");
  PT_ASSERT_INT_EQ(unlink(msg), 0);
  PT_ASSERT_INT_EQ(link(msg_away, msg), 0); /* a second hard link */
  expect_refused(home, dir, -EINVAL, "message.txt with two links");
  PT_ASSERT_INT_EQ(unlink(msg_away), 0);

  char *man = ptt_path2(dir, "manifest.json");
  const char *with_att = "{\"id\":\"b1\",\"attachments\":[{\"file\":\"01-x.pb.gz\"}]}\n";
  pt_write_file(man, with_att, strlen(with_att));
  expect_refused(home, dir, -ENOENT, "attachment missing");
  const char *bad_file = "{\"id\":\"b1\",\"attachments\":[{\"file\":\"../x\"}]}\n";
  pt_write_file(man, bad_file, strlen(bad_file));
  expect_refused(home, dir, -EBADMSG, "manifest names a path");
  pt_write_file(man, "{\"attachments\": [", 17);
  expect_refused(home, dir, -EBADMSG, "manifest not JSON");
  PT_ASSERT_INT_EQ(unlink(man), 0);
  expect_refused(home, dir, -ENOENT, "manifest missing");
  free(man);
  free(msg_away);
  free(msg);
  free(blink);
  free(missing);
  free(dir);
  pt_rm_rf(home);
  free(home);
}

/* ---- recording the outcome ---- */

/* A one-request HTTP server on a loopback port (a thread of the test):
 * reads the request (headers, answering "Expect: 100-continue", then the
 * Content-Length bytes of the body) and answers `status`. */
typedef struct http1 {
  int srv;
  int status;
  int port;
  pthread_t th;
} http1;

static void *http1_serve(void *p) {
  http1 *h = p;
  int c = accept(h->srv, NULL, NULL);
  if (c < 0) return NULL;
  char buf[65536];
  size_t n = 0;
  char *end = NULL;
  while (!end && n < sizeof buf - 1) {
    ssize_t k = read(c, buf + n, sizeof buf - 1 - n);
    if (k <= 0) break;
    n += (size_t)k;
    buf[n] = '\0';
    end = strstr(buf, "\r\n\r\n");
  }
  if (end) {
    size_t body = 0, have = n - (size_t)(end + 4 - buf);
    const char *cl = strcasestr(buf, "content-length:");
    if (cl) body = strtoul(cl + 15, NULL, 10);
    if (strcasestr(buf, "expect: 100-continue")) {
      const char *cont = "HTTP/1.1 100 Continue\r\n\r\n";
      (void)!write(c, cont, strlen(cont));
    }
    while (have < body) {
      ssize_t k = read(c, buf, sizeof buf);
      if (k <= 0) break;
      have += (size_t)k;
    }
    char resp[128];
    int rn = snprintf(resp, sizeof resp,
                      "HTTP/1.1 %d X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", h->status);
    (void)!write(c, resp, (size_t)rn);
  }
  close(c);
  return NULL;
}

static void http1_start(http1 *h, int status) {
  h->status = status;
  h->srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  PT_ASSERT(h->srv >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  PT_ASSERT_INT_EQ(bind(h->srv, (struct sockaddr *)&sa, sizeof sa), 0);
  PT_ASSERT_INT_EQ(listen(h->srv, 4), 0);
  socklen_t sl = sizeof sa;
  PT_ASSERT_INT_EQ(getsockname(h->srv, (struct sockaddr *)&sa, &sl), 0);
  h->port = ntohs(sa.sin_port);
  PT_ASSERT_INT_EQ(pthread_create(&h->th, NULL, http1_serve, h), 0);
}

static void http1_stop(http1 *h) {
  pthread_join(h->th, NULL);
  close(h->srv);
}

static int upload_to(http1 *h, const char *home, const char *dir, pt_feedback_upload_result *res,
                     char *err, size_t errlen) {
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/feedback", h->port);
  pt_feedback_upload_opts o = {url, 1, 0, 20000, NULL};
  int r = pt_feedback_upload(home, dir, &o, res, err, errlen);
  http1_stop(h);
  return r;
}

PT_TEST(common_feedback_upload_record_failures_are_reported) {
  char *home = pt_tmpdir("fbrec");
  char *dir = make_bundle(home);
  /* A non-empty directory where status.json goes: the atomic rename over
   * it fails (EISDIR), whoever runs the test (root included). */
  char *stdir = ptt_path2(dir, "status.json");
  char *inside = ptt_path2(stdir, "x");
  PT_ASSERT_INT_EQ(pt_mkdir_p(stdir, 0700), 0);
  pt_write_file(inside, "x", 1);

  /* Not delivered (400, not retried), and the record failed too: -EIO, the
   * record's error kept beside it. */
  http1 h;
  pt_feedback_upload_result res;
  char err[1024] = "";
  http1_start(&h, 400);
  PT_ASSERT_INT_EQ(upload_to(&h, home, dir, &res, err, sizeof err), -EIO);
  PT_ASSERT_INT_EQ(res.sent, 0);
  PT_ASSERT_INT_EQ(res.http_status, 400);
  PT_ASSERT_INT_EQ(res.record_error, -EISDIR);
  PT_ASSERT_MSG(strstr(err, "HTTP 400") && strstr(err, "status.json"), "err: %s", err);

  /* Delivered, status.json not writable: still 0 (sent; retrying would
   * send it twice), the bundle moved to sent/ (the move records the
   * delivery), the failure reported. */
  http1_start(&h, 200);
  PT_ASSERT_INT_EQ(upload_to(&h, home, dir, &res, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(res.sent, 1);
  PT_ASSERT_INT_EQ(res.record_error, -EISDIR);
  PT_ASSERT_MSG(strstr(err, "delivered") && strstr(err, "status.json"), "err: %s", err);
  char *sent = ptt_path2(home, "feedback/sent/b1");
  PT_ASSERT_STR_EQ(res.dir, sent);
  PT_ASSERT(access(sent, F_OK) == 0);
  PT_ASSERT(access(dir, F_OK) != 0);

  /* Delivered, status.json written, but sent/ cannot be made (a file is in
   * the way): 0, status "sent" in the outbox, the failed move reported. */
  free(dir);
  pt_rm_rf(sent);
  dir = make_bundle(home);
  char *sentdir = ptt_path2(home, "feedback/sent");
  pt_rm_rf(sentdir);
  pt_write_file(sentdir, "not a directory", 15);
  http1_start(&h, 200);
  PT_ASSERT_INT_EQ(upload_to(&h, home, dir, &res, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(res.sent, 1);
  PT_ASSERT_INT_EQ(res.record_error, -ENOTDIR);
  PT_ASSERT_MSG(strstr(err, "feedback/sent"), "err: %s", err);
  PT_ASSERT_STR_EQ(res.dir, dir);
  char *st = ptt_path2(dir, "status.json");
  json_t *sj = json_load_file(st, 0, NULL);
  PT_ASSERT(sj != NULL);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(sj, "state")), "sent");
  json_decref(sj);

  /* And with nothing in the way: 0, no record error, no message. */
  unlink(sentdir);
  free(dir);
  dir = make_bundle(home);
  pt_rm_rf(st);
  err[0] = '\0';
  http1_start(&h, 200);
  PT_ASSERT_INT_EQ(upload_to(&h, home, dir, &res, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(res.record_error, 0);
  PT_ASSERT_STR_EQ(err, "");
  PT_ASSERT(access(sent, F_OK) == 0);
  free(st);
  free(sentdir);
  free(sent);
  free(inside);
  free(stdir);
  free(dir);
  pt_rm_rf(home);
  free(home);
}
