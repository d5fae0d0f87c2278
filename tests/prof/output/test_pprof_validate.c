/*
 * test_pprof_validate.c - tools/ptprof-validate against hand-crafted broken
 * profiles: each defect is rejected with its own message. For a few of them
 * `go tool pprof` is run too, to pin down which defects the viewer rejects
 * and which it lets through (the reason the validator exists).
 */
#include "pt_test.h"
#include "prof/output/ptp_pb_wire.h"
#include "prof/output/ptp_gzip.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct knobs {
  int str0_bad, loc_id0, sample_missing_loc, loc_missing_map, label_mode, empty_fn,
      overlap, one_value, no_sample_type, no_time, line_no_func, dup_loc;
} knobs;

enum { S_EMPTY, S_SAMPLES, S_COUNT, S_CPU, S_NS, S_F, S_TID, S_TNAME, S_BIN, S_NSTR };

static void vt(ptp_pb_buf *b, uint32_t field, int64_t t, int64_t u) {
  ptp_pb_mark m = ptp_pb_begin(b, field);
  ptp_pb_int64(b, 1, t);
  ptp_pb_int64(b, 2, u);
  ptp_pb_end(b, m);
}

static void mapping(ptp_pb_buf *b, uint64_t id, uint64_t start, uint64_t limit) {
  ptp_pb_mark m = ptp_pb_begin(b, 3);
  ptp_pb_uint64(b, 1, id);
  ptp_pb_uint64(b, 2, start);
  ptp_pb_uint64(b, 3, limit);
  ptp_pb_int64(b, 5, S_BIN);
  ptp_pb_end(b, m);
}

/* A small valid CPU profile, with the defects the knobs ask for. */
static void build(const knobs *k, uint8_t **gz, size_t *gzlen) {
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, 0);
  if (!k->no_sample_type) {
    vt(&b, 1, S_SAMPLES, S_COUNT);
    vt(&b, 1, S_CPU, S_NS);
  }
  /* sample */
  ptp_pb_mark s = ptp_pb_begin(&b, 2);
  uint64_t loc = k->sample_missing_loc ? 7 : 1;
  ptp_pb_packed_uint64(&b, 1, &loc, 1);
  uint64_t vals[2] = {3, 3 * 10101010ull};
  ptp_pb_packed_uint64(&b, 2, vals, k->one_value ? 1 : 2);
  ptp_pb_mark l = ptp_pb_begin(&b, 3);
  ptp_pb_int64(&b, 1, S_TID);
  if (k->label_mode == 1) { ptp_pb_int64(&b, 2, S_F); ptp_pb_int64(&b, 3, 42); }   /* both */
  else if (k->label_mode == 2) ptp_pb_int64(&b, 3, 0);                          /* num 0, no unit */
  else ptp_pb_int64(&b, 3, 42);
  ptp_pb_end(&b, l);
  if (k->label_mode == 3) {   /* the same key again */
    l = ptp_pb_begin(&b, 3);
    ptp_pb_int64(&b, 1, S_TID);
    ptp_pb_int64(&b, 3, 43);
    ptp_pb_end(&b, l);
  }
  ptp_pb_end(&b, s);
  mapping(&b, 1, 0x400000, 0x500000);
  if (k->overlap) mapping(&b, 2, 0x480000, 0x580000);
  /* location */
  ptp_pb_mark lo = ptp_pb_begin(&b, 4);
  ptp_pb_uint64(&b, 1, k->loc_id0 ? 0 : 1);
  ptp_pb_uint64(&b, 2, k->loc_missing_map ? 9 : 1);
  ptp_pb_uint64(&b, 3, 0x401234);
  ptp_pb_mark ln = ptp_pb_begin(&b, 4);
  if (!k->line_no_func) ptp_pb_uint64(&b, 1, 1);
  ptp_pb_int64(&b, 2, 12);
  ptp_pb_end(&b, ln);
  ptp_pb_end(&b, lo);
  if (k->dup_loc) {
    lo = ptp_pb_begin(&b, 4);
    ptp_pb_uint64(&b, 1, 1);
    ptp_pb_end(&b, lo);
  }
  /* function */
  ptp_pb_mark f = ptp_pb_begin(&b, 5);
  ptp_pb_uint64(&b, 1, 1);
  ptp_pb_int64(&b, 2, k->empty_fn ? S_EMPTY : S_F);
  ptp_pb_end(&b, f);
  const char *strs[S_NSTR] = {k->str0_bad ? "x" : "", "samples", "count", "cpu", "nanoseconds",
                              "hot_fn", "thread_id", "thread_name", "/bin/prog"};
  for (int i = 0; i < S_NSTR; i++) ptp_pb_string(&b, 6, strs[i]);
  if (!k->no_time) {
    ptp_pb_int64(&b, 9, 1700000000000000000LL);
    ptp_pb_int64(&b, 10, 1000000000LL);
  }
  vt(&b, 11, S_CPU, S_NS);
  ptp_pb_int64(&b, 12, 10101010);
  PT_ASSERT_INT_EQ(b.err, 0);
  PT_ASSERT_INT_EQ(ptp_gzip(b.data, b.len, 6, gz, gzlen), 0);
  ptp_pb_buf_free(&b);
}

static char *g_dir;

static char *save(const char *name, const uint8_t *d, size_t n) {
  if (!g_dir) g_dir = pt_tmpdir("validate");
  size_t len = strlen(g_dir) + strlen(name) + 2;
  char *p = malloc(len);
  snprintf(p, len, "%s/%s", g_dir, name);
  pt_write_file(p, d, n);
  return p;
}

static int run_validator(const char *file, char **out) {
  char *bin = pt_build_path("tools/ptprof-validate");
  char *argv[] = {bin, (char *)file, NULL};
  int rc = pt_run(argv, out, 60000);
  free(bin);
  return rc;
}

/* Builds the profile for k, runs the validator, expects rc and message. */
static void expect(const char *name, const knobs *k, int want_rc, const char *msg) {
  uint8_t *gz;
  size_t n;
  build(k, &gz, &n);
  char *file = save(name, gz, n);
  char *out = NULL;
  int rc = run_validator(file, &out);
  PT_ASSERT_MSG(rc == want_rc, "%s: validator exit %d (want %d):\n%s", name, rc, want_rc, out);
  if (msg) PT_ASSERT_MSG(strstr(out, msg), "%s: want \"%s\" in:\n%s", name, msg, out);
  free(out);
  free(file);
  free(gz);
}

static int go_pprof_accepts(const char *file, char **out) {
  char *argv[] = {"go", "tool", "pprof", "-symbolize=none", "-nodefraction=0", "-raw", (char *)file, NULL};
  int rc = pt_run(argv, out, 120000);
  if (rc == 127 || rc < 0) PT_SKIP("go tool pprof unavailable");
  return rc == 0;
}

PT_TEST_T(prof_pprof_validate_rejects_broken_profiles, 120000) {
  knobs ok = {0};
  expect("ok.pb.gz", &ok, 0, NULL);
  knobs k;
  k = ok; k.str0_bad = 1;
  expect("str0.pb.gz", &k, 1, "string table entry 0 is \"x\", must be \"\"");
  k = ok; k.loc_id0 = 1;
  expect("locid0.pb.gz", &k, 1, "location at position 0 has id 0");
  k = ok; k.sample_missing_loc = 1;
  expect("missloc.pb.gz", &k, 1, "sample 0 points at missing location 7");
  k = ok; k.loc_missing_map = 1;
  expect("missmap.pb.gz", &k, 1, "location 1 points at missing mapping 9");
  k = ok; k.label_mode = 1;
  expect("both.pb.gz", &k, 1, "label \"thread_id\" has both str and num");
  k = ok; k.label_mode = 2;
  expect("num0.pb.gz", &k, 1, "label \"thread_id\" has neither str nor num");
  k = ok; k.label_mode = 3;
  expect("dupkey.pb.gz", &k, 1, "has label key \"thread_id\" twice");
  k = ok; k.empty_fn = 1;
  expect("emptyfn.pb.gz", &k, 1, "function 1 has an empty name");
  k = ok; k.overlap = 1;
  expect("overlap.pb.gz", &k, 1, "mappings 1 and 2 overlap");
  k = ok; k.one_value = 1;
  expect("onevalue.pb.gz", &k, 1, "sample 0 has 1 values, but there are 2 sample types");
  k = ok; k.no_sample_type = 1;
  expect("nost.pb.gz", &k, 1, "no sample_type");
  k = ok; k.no_time = 1;
  expect("notime.pb.gz", &k, 1, "time_nanos is missing");
  k = ok; k.line_no_func = 1;
  expect("linenofn.pb.gz", &k, 1, "location 1 line 0 has no function");
  k = ok; k.dup_loc = 1;
  expect("duploc.pb.gz", &k, 1, "duplicate location id 1");

  /* two gzip members concatenated */
  uint8_t *gz;
  size_t n;
  build(&ok, &gz, &n);
  uint8_t *two = malloc(2 * n);
  memcpy(two, gz, n);
  memcpy(two + n, gz, n);
  char *file = save("two.pb.gz", two, 2 * n);
  char *out = NULL;
  PT_ASSERT_INT_EQ(run_validator(file, &out), 1);
  PT_ASSERT_MSG(strstr(out, "more than one gzip member"), "%s", out);
  free(out);
  free(file);
  /* an empty file; a truncated one */
  file = save("empty.pb.gz", (const uint8_t *)"", 0);
  PT_ASSERT_INT_EQ(run_validator(file, &out), 1);
  PT_ASSERT_MSG(strstr(out, "empty file"), "%s", out);
  free(out);
  free(file);
  file = save("trunc.pb.gz", gz, n / 2);
  PT_ASSERT_INT_EQ(run_validator(file, &out), 1);
  PT_ASSERT_MSG(strstr(out, "corrupt or truncated gzip"), "%s", out);
  free(out);
  free(file);
  /* a missing file is an I/O error (2), not a verdict */
  file = save("nope", (const uint8_t *)"", 0);
  PT_ASSERT_INT_EQ(unlink(file), 0);
  PT_ASSERT_INT_EQ(run_validator(file, &out), 2);
  free(out);
  free(file);
  free(two);
  free(gz);
  pt_rm_rf(g_dir);
}

/* What the viewer itself does with some of these: rejects string 0 and a
 * sample's missing location, silently accepts a missing mapping. */
PT_TEST_T(prof_pprof_validate_vs_go_pprof, 120000) {
  knobs k = {0};
  uint8_t *gz;
  size_t n;
  char *out = NULL, *file;
  k.str0_bad = 1;
  build(&k, &gz, &n);
  file = save("g-str0.pb.gz", gz, n);
  PT_ASSERT_MSG(!go_pprof_accepts(file, &out), "go pprof accepted a bad string 0:\n%s", out);
  free(out); free(file); free(gz);
  memset(&k, 0, sizeof k);
  k.sample_missing_loc = 1;
  build(&k, &gz, &n);
  file = save("g-missloc.pb.gz", gz, n);
  PT_ASSERT_MSG(!go_pprof_accepts(file, &out), "go pprof accepted a missing location:\n%s", out);
  free(out); free(file); free(gz);
  memset(&k, 0, sizeof k);
  k.loc_missing_map = 1;
  build(&k, &gz, &n);
  file = save("g-missmap.pb.gz", gz, n);
  PT_ASSERT_MSG(go_pprof_accepts(file, &out), "go pprof rejected a missing mapping:\n%s", out);
  free(out);
  PT_ASSERT_INT_EQ(run_validator(file, &out), 1);
  free(out); free(file); free(gz);
  pt_rm_rf(g_dir);
}
