/* test_feedback.c - unit tests of the feedback side: the self-contained
 * gzip/pprof reader (against real gzip and real profiles), bundle assembly
 * and the outbox layout. Uploads are tested against a real HTTP server in
 * tests/catalog/feedback_upload_test.sh. */
#include "pt_test.h"
#include "common/pt_feedback.h"
#include "common/pt_feedback_pprof.h"
#include "common/pt_file.h"
#include "common/pt_sha256.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static char *path2(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  PT_ASSERT(p);
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

static void run_ok(char *const argv[]) {
  char *out = NULL;
  int st = pt_run(argv, &out, 30000);
  PT_ASSERT_MSG(st == 0, "%s failed (%d): %s", argv[0], st, out ? out : "");
  free(out);
}

PT_TEST(feedback_pprof_summary_of_real_profile) {
  char *dir = pt_tmpdir("fbprof");
  char *f = path2(dir, "p.pb.gz");
  char *script = pt_source_path("tests/catalog/mkprofile.py");
  char *argv[] = {"python3", script, f, "--duration-ms", "7000", "hot_spin=30", "parse_line=12",
                  "main=1", NULL};
  run_ok(argv);
  size_t len = 0;
  char *d = pt_read_file(f, &len);
  PT_ASSERT(d);
  pt_pprof_summary s;
  PT_ASSERT_INT_EQ(pt_pprof_summarize((const uint8_t *)d, len, 5, &s), 0);
  PT_ASSERT_INT_EQ(s.samples, 43);
  PT_ASSERT_INT_EQ(s.duration_ns, 7000000000LL);
  PT_ASSERT_INT_EQ(s.period, 1000000000 / 99);
  PT_ASSERT_UINT_EQ(s.n_stacks, 3);
  PT_ASSERT_STR_EQ(s.sample_types, "samples,cpu");
  PT_ASSERT_UINT_EQ(s.n_top, 3);
  PT_ASSERT_STR_EQ(s.top[0].name, "hot_spin");
  PT_ASSERT_INT_EQ(s.top[0].flat, 30);
  PT_ASSERT_STR_EQ(s.top[1].name, "parse_line");
  PT_ASSERT_INT_EQ(s.top[1].flat, 12);
  PT_ASSERT_STR_EQ(s.top[2].name, "main");
  PT_ASSERT_INT_EQ(s.top[2].flat, 1);
  PT_ASSERT_INT_EQ(s.top[2].cum, 43);
  pt_pprof_summary_clear(&s);

  /* Cross-check against the real viewer when it is here. */
  char *gargv[] = {"go", "tool", "pprof", "-symbolize=none", "-nodefraction=0", "-top", f, NULL};
  char *out = NULL;
  if (pt_run(gargv, &out, 60000) == 0) {
    PT_ASSERT(strstr(out, "hot_spin"));
    PT_ASSERT(strstr(out, "Duration: 7s"));
  }
  free(out);

  /* Every truncation of the file is refused cleanly (never a crash). */
  for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : 17)) {
    int r = pt_pprof_summarize((const uint8_t *)d, cut, 5, &s);
    PT_ASSERT_MSG(r == -EINVAL, "cut %zu: %d", cut, r);
  }
  /* Flipped bytes: refused by the CRC or the decoder, or (for bytes in the
   * gzip header's mtime/os fields) decoded the same. */
  for (size_t i = 0; i < len; i++) {
    d[i] ^= 0x5a;
    int r = pt_pprof_summarize((const uint8_t *)d, len, 5, &s);
    PT_ASSERT(r == 0 || r == -EINVAL);
    if (r == 0) pt_pprof_summary_clear(&s);
    d[i] ^= 0x5a;
  }
  free(d);
  free(script);
  free(f);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(feedback_gunzip_matches_gzip) {
  char *dir = pt_tmpdir("fbgz");
  char *raw = path2(dir, "raw");
  /* Text-like data with repeats (dynamic Huffman, back-references) and a
   * random tail (stored blocks at -1 on incompressible data). */
  size_t n = 300000;
  uint8_t *buf = malloc(n);
  PT_ASSERT(buf);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    buf[i] = i < n / 2 ? (uint8_t)("the quick brown fox "[i % 20] + (i % 977 == 0))
                       : (uint8_t)(x >> 24);
  }
  pt_write_file(raw, buf, n);
  const char *levels[] = {"-1", "-6", "-9"};
  for (int l = 0; l < 3; l++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gzip %s -c '%s' > '%s.gz'", levels[l], raw, raw);
    char *argv[] = {"sh", "-c", cmd, NULL};
    run_ok(argv);
    char *gz = path2(dir, "raw.gz");
    size_t glen = 0;
    char *g = pt_read_file(gz, &glen);
    PT_ASSERT(g);
    uint8_t *out = NULL;
    size_t olen = 0;
    PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)g, glen, 0, &out, &olen), 0);
    PT_ASSERT_UINT_EQ(olen, n);
    PT_ASSERT_MEM_EQ(out, buf, n);
    free(out);
    /* Output cap. */
    PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)g, glen, 1000, &out, &olen), -EFBIG);
    PT_ASSERT(out == NULL);
    free(g);
    free(gz);
  }
  /* Fixed Huffman / stored blocks as Python's zlib writes them. */
  char *py = path2(dir, "small.gz");
  char *pargv[] = {"python3", "-c",
                   "import gzip,sys; open(sys.argv[1],'wb').write(gzip.compress(b'abcabcabc'*3, 0))",
                   py, NULL};
  run_ok(pargv);
  size_t glen = 0;
  char *g = pt_read_file(py, &glen);
  uint8_t *out = NULL;
  size_t olen = 0;
  PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)g, glen, 0, &out, &olen), 0);
  PT_ASSERT_UINT_EQ(olen, 27);
  PT_ASSERT_MEM_EQ(out, "abcabcabcabcabcabcabcabcabc", 27);
  free(out);
  free(g);
  /* Fixed Huffman codes (Z_FIXED) with long back-references. */
  char *fx = path2(dir, "fixed.gz");
  char *fargv[] = {"python3", "-c",
                   "import zlib,sys\n"
                   "d=(b'fixed huffman block '*500)+bytes(range(256))*4\n"
                   "c=zlib.compressobj(9,zlib.DEFLATED,31,9,zlib.Z_FIXED)\n"
                   "open(sys.argv[1],'wb').write(c.compress(d)+c.flush())",
                   fx, NULL};
  run_ok(fargv);
  g = pt_read_file(fx, &glen);
  PT_ASSERT(g);
  PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)g, glen, 0, &out, &olen), 0);
  PT_ASSERT_UINT_EQ(olen, 20 * 500 + 1024);
  PT_ASSERT_MEM_EQ(out, "fixed huffman block fixed", 25);
  PT_ASSERT_INT_EQ(out[20 * 500 + 1023], 255);
  free(out);
  free(g);
  free(fx);
  PT_ASSERT_INT_EQ(pt_gunzip((const uint8_t *)"not gzip at all, really", 23, 0, &out, &olen), -EINVAL);
  free(py);
  free(buf);
  free(raw);
  pt_rm_rf(dir);
  free(dir);
}

static json_t *entry_for(const char *id, const char *kind, const char *path, const void *data,
                         size_t len, long created) {
  char hex[PT_SHA256_HEX];
  PT_ASSERT_INT_EQ(pt_sha256_hex(data, len, hex), 0);
  return json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:I, s:s}", "id", id, "kind", kind,
                   "label", "CPU profile (pprof)", "source", "daemon", "size", (json_int_t)len,
                   "sha256", hex, "path", path, "created_unix", (json_int_t)created, "created",
                   "2026-11-29T21:00:00Z");
}

PT_TEST(feedback_bundle_written_to_outbox) {
  char *home = pt_tmpdir("fbhome");
  pt_feedback *fb = NULL;
  PT_ASSERT_INT_EQ(pt_feedback_new(&fb, "the reply was slow\nsecond line"), 0);
  const char prof[] = "\x1f\x8b profile bytes \x00\x01\x02";
  const char log[] = "2026-11-29 log line\n";
  json_t *e1 = entry_for("0123456789abcdef", "cpu-profile",
                         "profiling/daemon-profile-20261129T210000Z-1.pb.gz", prof, sizeof prof, 10);
  json_t *e2 = entry_for("fedcba9876543210", "daemon-log", "logs/daemon.log", log, strlen(log), 5);
  char err[256];
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e1, (const uint8_t *)prof, sizeof prof, err, sizeof err), 0);
  /* The same id twice, or bytes that are not what the catalog listed. */
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e1, (const uint8_t *)prof, sizeof prof, err, sizeof err),
                   -EEXIST);
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e2, (const uint8_t *)"2026-11-29 log linX\n", strlen(log),
                                   err, sizeof err), -EBADMSG);
  PT_ASSERT(strstr(err, "SHA-256"));
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e2, (const uint8_t *)log, strlen(log) - 1, err, sizeof err),
                   -EBADMSG);
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e2, (const uint8_t *)log, strlen(log), err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(pt_feedback_count(fb), 2);

  char dir[4096];
  PT_ASSERT_INT_EQ(pt_feedback_write(fb, home, dir, sizeof dir, err, sizeof err), 0);
  char *outbox = path2(home, "feedback/outbox");
  PT_ASSERT(strncmp(dir, outbox, strlen(outbox)) == 0);
  char *m = path2(dir, "message.txt");
  size_t len = 0;
  char *d = pt_read_file(m, &len);
  PT_ASSERT_STR_EQ(d, "the reply was slow\nsecond line");
  free(d);
  char *a1 = path2(dir, "01-daemon-profile-20261129T210000Z-1.pb.gz");
  d = pt_read_file(a1, &len);
  PT_ASSERT(d);
  PT_ASSERT_UINT_EQ(len, sizeof prof);
  PT_ASSERT_MEM_EQ(d, prof, sizeof prof);
  free(d);
  char *a2 = path2(dir, "02-daemon.log");
  d = pt_read_file(a2, &len);
  PT_ASSERT_STR_EQ(d, log);
  free(d);
  char *mp = path2(dir, "manifest.json");
  json_t *man = json_load_file(mp, 0, NULL);
  PT_ASSERT(man);
  json_t *atts = json_object_get(man, "attachments");
  PT_ASSERT_UINT_EQ(json_array_size(atts), 2);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(atts, 0), "id")),
                   "0123456789abcdef");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(atts, 0), "sha256")),
                   json_string_value(json_object_get(e1, "sha256")));
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(atts, 1), "file")),
                   "02-daemon.log");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(atts, 1), "kind")),
                   "daemon-log");
  json_decref(man);
  /* Nothing left half-built. */
  char *tmp = path2(home, "feedback/tmp");
  DIR *td = opendir(tmp);
  PT_ASSERT(td);
  struct dirent *de;
  int n = 0;
  while ((de = readdir(td))) n += de->d_name[0] != '.';
  closedir(td);
  PT_ASSERT_INT_EQ(n, 0);

  /* No URL: upload refuses clearly and the bundle stays. */
  pt_feedback_upload_opts o = {NULL, 4, 200, 1000, NULL};
  pt_feedback_upload_result res;
  PT_ASSERT_INT_EQ(pt_feedback_upload(home, dir, &o, &res), -EINVAL);
  PT_ASSERT(access(mp, F_OK) == 0);

  /* Picking by kind or id. */
  json_t *arr = json_pack("[O, O]", e2, e1);
  json_t *newer = entry_for("aaaaaaaaaaaaaaaa", "cpu-profile", "profiling/x.pb.gz", "x", 1, 99);
  json_array_append_new(arr, newer);
  PT_ASSERT(pt_feedback_pick(arr, "cpu-profile") == newer);
  PT_ASSERT(pt_feedback_pick(arr, "0123456789abcdef") == json_array_get(arr, 1));
  PT_ASSERT(pt_feedback_pick(arr, "daemon-log") == json_array_get(arr, 0));
  PT_ASSERT(pt_feedback_pick(arr, "telemetry") == NULL);
  json_decref(arr);

  pt_feedback_del(fb);
  json_decref(e1);
  json_decref(e2);
  free(tmp); free(mp); free(a1); free(a2); free(m); free(outbox);
  pt_rm_rf(home);
  free(home);
}

PT_TEST(feedback_base64_roundtrip_and_errors) {
  uint8_t *o = NULL;
  size_t n = 0;
  PT_ASSERT_INT_EQ(pt_feedback_b64decode("aGVsbG8=", 8, &o, &n), 0);
  PT_ASSERT_UINT_EQ(n, 5);
  PT_ASSERT_MEM_EQ(o, "hello", 5);
  free(o);
  PT_ASSERT_INT_EQ(pt_feedback_b64decode("", 0, &o, &n), 0);
  PT_ASSERT_UINT_EQ(n, 0);
  free(o);
  PT_ASSERT_INT_EQ(pt_feedback_b64decode("aGVsbG8", 7, &o, &n), -EINVAL);
  PT_ASSERT_INT_EQ(pt_feedback_b64decode("aG=sbG8=", 8, &o, &n), -EINVAL);
  PT_ASSERT_INT_EQ(pt_feedback_b64decode("a!Vs", 4, &o, &n), -EINVAL);
  char buf[32];
  pt_feedback_fmt_size(2048, buf, sizeof buf);
  PT_ASSERT_STR_EQ(buf, "2.0 KiB");
  pt_feedback_fmt_age(1000, 1000 + 125, buf, sizeof buf);
  PT_ASSERT_STR_EQ(buf, "2 min ago");
}

/* ---- cancelling an upload (the TUI quits while one runs) ---- */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

typedef struct {
  const char *home, *dir;
  pt_feedback_upload_opts o;
  pt_feedback_upload_result res;
  int rc;
} upload_arg;

static void *upload_thread(void *p) {
  upload_arg *a = p;
  a->rc = pt_feedback_upload(a->home, a->dir, &a->o, &a->res);
  return NULL;
}

/* A bundle made by hand: manifest without attachments plus the message. */
static char *make_bundle(const char *home) {
  char *dir = path2(home, "feedback/outbox/b1");
  PT_ASSERT_INT_EQ(pt_mkdir_p(dir, 0700), 0);
  char *m = path2(dir, "manifest.json");
  const char *man = "{\"id\":\"b1\",\"attachments\":[]}\n";
  pt_write_file(m, man, strlen(man));
  free(m);
  m = path2(dir, "message.txt");
  pt_write_file(m, "slow", 4);
  free(m);
  return dir;
}

/* A loopback server that completes the TCP handshake (kernel backlog) but
 * never accepts or answers: curl sends and then waits for its timeout. The
 * timeout here is 60 s per attempt with 4 attempts, so only the cancel flag
 * can end the upload before the test's own 30 s limit. */
PT_TEST(feedback_upload_cancel_stops_a_hanging_upload) {
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
  upload_arg a = {home, dir, {url, 4, 200, 60000, &cancel}, {0}, 1};
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
  PT_ASSERT_STR_EQ(a.res.error, "upload cancelled");
  /* recorded as failed, left in the outbox */
  char *st = path2(dir, "status.json");
  json_t *sj = json_load_file(st, 0, NULL);
  PT_ASSERT(sj != NULL);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(sj, "state")), "failed");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(sj, "error")), "upload cancelled");
  json_decref(sj);

  /* Cancelled before it starts: no attempt at all. */
  upload_arg b = {home, dir, {url, 4, 200, 60000, &cancel}, {0}, 1};
  upload_thread(&b);
  PT_ASSERT_INT_EQ(b.rc, -ECANCELED);
  PT_ASSERT_INT_EQ(b.res.attempts, 0);
  close(srv);
  free(st);
  free(dir);
  pt_rm_rf(home);
  free(home);
}
