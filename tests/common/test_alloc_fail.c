/* test_alloc_fail.c - every allocation of src/common's parsers of outside
 * input fails in turn (alloc_fail.h): the pprof reader, gunzip and the
 * review summary on real snapshots; the pprof writer, gzip and the merge; the IPC line framer and its JSON
 * helpers; base64; an artifact fetch from a fake daemon. No crash, no leak
 * (ASan variant), -ENOMEM every time, and the run that allocates freely
 * succeeds. */
#include "alloc_fail.h"
#include "common_test.h"
#include "common/pt_base64.h"
#include "common/pt_client.h"
#include "common/pt_feedback_fetch.h"
#include "common/pt_gunzip.h"
#include "common/pt_jsonl.h"
#include "common/pt_gzip.h"
#include "common/pt_pprof_merge.h"
#include "common/pt_pprof_read.h"
#include "common/pt_pprof_summary.h"
#include "common/pt_pprof_write.h"
#include "common/pt_sha256.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

/* The mechanism itself: the nth allocation of this thread fails once. */
PT_TEST(common_alloc_fail_countdown) {
  PTT_NEED_FAULT_INJECTION();
#if PT_FAULT_INJECTION
  pt_alloc_fail_at(2);
  void *a = pt_malloc(8), *b = pt_malloc(8), *c = pt_malloc(8);
  PT_ASSERT(a && !b && c);
  PT_ASSERT_INT_EQ(pt_alloc_fail_at(0), 1);
  PT_ASSERT_INT_EQ(pt_alloc_fail_at(0), 0); /* reported once */
  void *d = pt_realloc(a, 64);
  PT_ASSERT(d);
  pt_alloc_fail_at(1);
  PT_ASSERT(pt_realloc(d, 128) == NULL); /* d untouched, still ours */
  PT_ASSERT_INT_EQ(pt_alloc_fail_at(0), 1);
  free(d);
  free(c);
#endif
}

/* ---- profiles ---- */

typedef struct buf {
  uint8_t *d;
  size_t n;
} buf;

static buf load(const char *rel) {
  char *path = pt_source_path(rel);
  buf b = {0};
  b.d = (uint8_t *)pt_read_file(path, &b.n);
  PT_ASSERT_MSG(b.d, "cannot read %s", path);
  free(path);
  return b;
}

static int op_read(void *ctx) {
  buf *b = ctx;
  pt_pprof *p = NULL;
  char err[256];
  int r = pt_pprof_read(b->d, b->n, NULL, &p, err, sizeof err);
  if (r == 0 && (!p || p->n_samples == 0)) r = -EPROTO;
  pt_pprof_free(p);
  return r;
}

static int op_gunzip(void *ctx) {
  buf *b = ctx;
  uint8_t *out = NULL;
  size_t n = 0;
  int r = pt_gunzip(b->d, b->n, 0, &out, &n);
  free(out);
  return r;
}

static int op_summary(void *ctx) {
  buf *b = ctx;
  pt_pprof_summary s;
  int r = pt_pprof_summarize(b->d, b->n, PT_PPROF_TOP_MAX, &s);
  if (r == 0 && s.n_top == 0) r = -EPROTO;
  pt_pprof_summary_clear(&s);
  return r;
}

PT_TEST_T(common_alloc_fail_pprof_read_gunzip_summary, 120000) {
  PTT_NEED_FAULT_INJECTION();
  buf raw = load("tests/common/fuzz_seeds/pprof_read/daemon-busy.pb");
  PT_ASSERT(ptt_alloc_fail_each("pt_pprof_read", op_read, &raw, 0) >= 2);
  buf inl = load("tests/common/fuzz_seeds/pprof_read/mkprofile.pb");
  ptt_alloc_fail_each("pt_pprof_read (labels, inline)", op_read, &inl, 0);
  /* gzip'd: a real snapshot compressed as the sampler does (one member) */
  char *tmp = pt_tmpdir("allocgz");
  char *f = ptt_path2(tmp, "p.pb.gz");
  ptt_mkprofile(f, "--inline", "helper", "hot_spin=30", "parse_line=12", "main=1");
  buf gz = {0};
  gz.d = (uint8_t *)pt_read_file(f, &gz.n);
  PT_ASSERT(gz.d);
  PT_ASSERT(ptt_alloc_fail_each("pt_gunzip", op_gunzip, &gz, 0) >= 2);
  PT_ASSERT(ptt_alloc_fail_each("pt_pprof_summarize", op_summary, &gz, 0) >= 4);
  free(gz.d);
  /* A larger stream (1 MiB out of gzip -6): the output buffer grows and
   * zlib allocates its window between calls. */
  char *big = ptt_path2(tmp, "big");
  uint8_t *data = malloc(1 << 20);
  PT_ASSERT(data);
  for (size_t i = 0; i < (1 << 20); i++) data[i] = (uint8_t)("profile "[i % 8] + (i % 4099 == 0));
  pt_write_file(big, data, 1 << 20);
  free(data);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "gzip -6 -c '%s' > '%s.gz'", big, big);
  char *gargv[] = {"sh", "-c", cmd, NULL};
  ptt_run_ok(gargv);
  char *bigz = ptt_path2(tmp, "big.gz");
  gz.d = (uint8_t *)pt_read_file(bigz, &gz.n);
  PT_ASSERT(gz.d);
  PT_ASSERT(ptt_alloc_fail_each("pt_gunzip (1 MiB)", op_gunzip, &gz, 0) >= 5);
  free(gz.d);
  free(bigz);
  free(big);
  free(f);
  pt_rm_rf(tmp);
  free(tmp);
  free(inl.d);
  free(raw.d);
}

/* ---- the pprof writer, gzip and the merge ---- */

typedef struct two {
  pt_pprof *a, *b;
} two;

static int op_write(void *ctx) {
  two *t = ctx;
  uint8_t *out = NULL;
  size_t n = 0;
  int r = pt_pprof_write(t->a, &out, &n, NULL, 0);
  if (r == 0 && n == 0) r = -EPROTO;
  free(out);
  return r;
}

static int op_gzip(void *ctx) {
  buf *b = ctx;
  uint8_t *out = NULL;
  size_t n = 0;
  int r = pt_gzip(b->d, b->n, &out, &n);
  free(out);
  return r;
}

static int op_merge(void *ctx) {
  two *t = ctx;
  pt_pprof_merge *m = NULL;
  int r = pt_pprof_merge_new(&m);
  if (r == 0) r = pt_pprof_merge_add(m, t->a, "a", NULL, 0);
  if (r == 0) r = pt_pprof_merge_add(m, t->b, "b", NULL, 0);
  if (r == 0) r = pt_pprof_merge_add(m, t->a, "a again", NULL, 0);
  const pt_pprof *out = NULL;
  if (r == 0) r = pt_pprof_merge_result(m, &out, NULL, 0);
  if (r == 0 && out->n_comments < 4) r = -EPROTO;
  pt_pprof_merge_del(m);
  return r;
}

PT_TEST_T(common_alloc_fail_pprof_write_gzip_merge, 120000) {
  PTT_NEED_FAULT_INJECTION();
  buf ra = load("tests/common/fuzz_seeds/pprof_read/daemon-busy.pb");
  buf rb = load("tests/common/fuzz_seeds/pprof_read/mkprofile.pb");
  two t = {NULL, NULL};
  PT_ASSERT_INT_EQ(pt_pprof_read(ra.d, ra.n, NULL, &t.a, NULL, 0), 0);
  PT_ASSERT_INT_EQ(pt_pprof_read(rb.d, rb.n, NULL, &t.b, NULL, 0), 0);
  PT_ASSERT(ptt_alloc_fail_each("pt_pprof_write", op_write, &t, 0) >= 2);
  PT_ASSERT(ptt_alloc_fail_each("pt_gzip", op_gzip, &ra, 0) >= 2);
  PT_ASSERT(ptt_alloc_fail_each("pt_pprof_merge", op_merge, &t, 0) >= 20);
  pt_pprof_free(t.a);
  pt_pprof_free(t.b);
  free(ra.d);
  free(rb.d);
}

/* ---- the IPC line framer and its JSON helpers ---- */

static int op_jsonl(void *ctx) {
  (void)ctx;
  static const char in[] =
      "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1,\"client\":\"x\"}}\n"
      "\n{\"id\":2,\"method\":\"sessions.list\"}\r\n{\"id\":3,\"params\":{\"text\":\"a b c\"}}\n";
  pt_jsonl *f = pt_jsonl_new(256);
  if (!f) return -ENOMEM;
  int r = 0, lines = 0;
  for (size_t off = 0; r == 0 && off < sizeof in - 1; off += 17) {
    size_t n = sizeof in - 1 - off < 17 ? sizeof in - 1 - off : 17;
    r = pt_jsonl_feed(f, in + off, n);
    const char *line;
    size_t len;
    int k;
    while (r == 0 && (k = pt_jsonl_next(f, &line, &len)) == 1) {
      json_t *j = NULL;
      char err[128];
      r = pt_jsonl_parse(line, len, &j, err, sizeof err);
      if (r == 0) {
        char *out = NULL;
        size_t olen = 0;
        r = pt_jsonl_dump(j, 0, &out, &olen);
        free(out);
        json_decref(j);
        lines++;
      }
    }
  }
  pt_jsonl_del(f);
  if (r == 0 && lines != 3) r = -EPROTO;
  return r;
}

static int op_base64(void *ctx) {
  (void)ctx;
  uint8_t *o = NULL;
  size_t n = 0;
  int r = pt_base64_decode("aGVsbG8gd29ybGQ=", 16, &o, &n);
  if (r == 0 && (n != 11 || memcmp(o, "hello world", 11))) r = -EPROTO;
  free(o);
  return r;
}

PT_TEST(common_alloc_fail_jsonl_and_base64) {
  PTT_NEED_FAULT_INJECTION();
  /* The framer and pt_jsonl_dump: -ENOMEM each time. */
  PT_ASSERT(ptt_alloc_fail_each("pt_jsonl", op_jsonl, NULL, 0) >= 4);
  /* With jansson's own allocations failing too (its parser reports some of
   * them as syntax errors: -EINVAL, as pt_jsonl.h says). */
  PT_ASSERT(ptt_alloc_fail_each("pt_jsonl + jansson", op_jsonl, NULL,
                                PTT_ALLOC_JANSSON | PTT_ALLOC_EINVAL_OK) >= 20);
  PT_ASSERT_UINT_EQ(ptt_alloc_fail_each("pt_base64_decode", op_base64, NULL, 0), 1);
}

/* ---- an artifact fetch from a fake daemon ---- */

static const char ARTIFACT[] = "a CPU profile would be here, 52 bytes of it, honest";

/* The daemon's side of a socketpair: answers artifacts.fetch requests with
 * 8-byte chunks of ARTIFACT until the client closes. Its allocations are
 * never failed (the countdown belongs to the test's thread). */
static void *fake_daemon(void *arg) {
  int fd = *(int *)arg;
  char hex[PT_SHA256_HEX];
  pt_sha256_hex(ARTIFACT, sizeof ARTIFACT - 1, hex);
  char line[4096];
  size_t n = 0;
  for (;;) {
    ssize_t k = read(fd, line + n, sizeof line - 1 - n);
    if (k <= 0) break;
    n += (size_t)k;
    char *nl;
    while ((nl = memchr(line, '\n', n))) {
      json_t *req = json_loadb(line, (size_t)(nl - line), 0, NULL);
      json_int_t id = json_integer_value(json_object_get(req, "id"));
      json_int_t off = json_integer_value(json_object_get(json_object_get(req, "params"), "offset"));
      json_decref(req);
      size_t total = sizeof ARTIFACT - 1;
      size_t len = off < (json_int_t)total ? total - (size_t)off : 0;
      if (len > 8) len = 8;
      char b64[32] = "";
      static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      const uint8_t *s = (const uint8_t *)ARTIFACT + off;
      size_t o = 0;
      for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < len ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < len ? s[i + 2] : 0);
        b64[o++] = tbl[v >> 18];
        b64[o++] = tbl[(v >> 12) & 63];
        b64[o++] = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
        b64[o++] = i + 2 < len ? tbl[v & 63] : '=';
      }
      b64[o] = '\0';
      char out[512];
      int m = snprintf(out, sizeof out,
                       "{\"id\":%lld,\"result\":{\"id\":\"0123456789abcdef\",\"size\":%zu,"
                       "\"sha256\":\"%s\",\"offset\":%lld,\"length\":%zu,\"eof\":%s,"
                       "\"data_base64\":\"%s\"}}\n",
                       (long long)id, total, hex, (long long)off, len,
                       (size_t)off + len >= total ? "true" : "false", b64);
      (void)!write(fd, out, (size_t)m);
      n -= (size_t)(nl + 1 - line);
      memmove(line, nl + 1, n);
    }
  }
  close(fd);
  return NULL;
}

typedef struct fetch_ctx {
  json_t *entry;
} fetch_ctx;

static int op_fetch(void *ctx) {
  fetch_ctx *fc = ctx;
  int sv[2];
  PT_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, fake_daemon, &sv[1]), 0);
  /* The client's set-up is not the fetch under test; its line buffer is
   * made here too (an event fed in), as a connected client has one. */
  ptt_alloc_suspend();
  pt_client *c = pt_client_new("/nonexistent-home", "test");
  PT_ASSERT(c);
  PT_ASSERT_INT_EQ(pt_client_adopt_fd(c, sv[0]), 0);
  static const char ev[] = "{\"event\":\"warm\",\"params\":{}}\n";
  PT_ASSERT_INT_EQ(pt_client_feed(c, ev, sizeof ev - 1), 0);
  ptt_alloc_resume();
  uint8_t *data = NULL;
  size_t len = 0;
  char err[256] = "";
  int r = pt_feedback_fetch(c, fc->entry, &data, &len, err, sizeof err);
  if (r == 0 && (len != sizeof ARTIFACT - 1 || memcmp(data, ARTIFACT, len))) r = -EPROTO;
  if (r < 0 && r != -ENOMEM) fprintf(stderr, "fetch: %d %s\n", r, err);
  free(data);
  ptt_alloc_suspend();
  pt_client_del(c); /* closes: the fake daemon sees EOF */
  ptt_alloc_resume();
  pthread_join(th, NULL);
  return r;
}

PT_TEST(common_alloc_fail_feedback_fetch) {
  PTT_NEED_FAULT_INJECTION();
  char hex[PT_SHA256_HEX];
  PT_ASSERT_INT_EQ(pt_sha256_hex(ARTIFACT, sizeof ARTIFACT - 1, hex), 0);
  fetch_ctx fc;
  fc.entry = json_pack("{s:s, s:s, s:I, s:s}", "id", "0123456789abcdef", "kind", "cpu-profile",
                       "size", (json_int_t)(sizeof ARTIFACT - 1), "sha256", hex);
  PT_ASSERT(fc.entry);
  /* Without failures first: the fake daemon is right. */
  PT_ASSERT_INT_EQ(op_fetch(&fc), 0);
  PT_ASSERT(ptt_alloc_fail_each("pt_feedback_fetch", op_fetch, &fc, 0) >= 8);
  json_decref(fc.entry);
}
