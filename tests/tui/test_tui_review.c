/* test_tui_review.c - the review text of a feedback attachment
 * (src/tui/tui_review.c), which the TUI's review screen and `polytoken
 * feedback show` print: the exact text for a profile (summary from
 * src/common/pt_pprof_summary.c), for a profile with inlined frames (the
 * functions an inlined frame sits in count in cum, as go tool pprof counts
 * them), for a damaged one, for a log, and the note on a nearly empty
 * snapshot (not on a full one, nor on the merged profiles); the pickers'
 * window text. */
#include "pt_test.h"
#include "tui/tui_review.h"

#include <stdlib.h>

static json_t *entry(const char *kind, const char *label) {
  json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "label", label, "kind", kind, "source",
                        "daemon", "path", "profiling/x.pb.gz", "created", "2026-11-29T21:00:00Z",
                        "sha256", "abc");
  PT_ASSERT(e);
  return e;
}

/* The review text of a tests/mkprofile.py profile made with args, as an
 * entry of `kind`. */
static char *describe_profile_as(const char *kind, char **args) {
  char *dir = pt_tmpdir("review");
  size_t n = strlen(dir) + 16;
  char *f = malloc(n);
  PT_ASSERT(f);
  snprintf(f, n, "%s/p.pb.gz", dir);
  char *script = pt_source_path("tests/mkprofile.py");
  char *argv[16] = {"python3", script, f};
  int k = 3;
  for (; *args && k < 15; args++) argv[k++] = *args;
  argv[k] = NULL;
  char *out = NULL;
  PT_ASSERT_INT_EQ(pt_run(argv, &out, 30000), 0);
  free(out);
  size_t len = 0;
  char *d = pt_read_file(f, &len);
  PT_ASSERT(d);
  json_t *e = entry(kind, "CPU profile (pprof)");
  char *text = tui_review_describe(e, (const uint8_t *)d, len);
  PT_ASSERT(text);
  /* the size line depends on gzip's output: checked, then dropped */
  char *size = strstr(text, "  size:    ");
  PT_ASSERT(size);
  char *eol = strchr(size, '\n');
  memmove(size, eol + 1, strlen(eol + 1) + 1);
  json_decref(e);
  free(d);
  free(script);
  free(f);
  pt_rm_rf(dir);
  free(dir);
  return text;
}

static char *describe_profile(char **args) { return describe_profile_as("cpu-profile", args); }

PT_TEST(tui_review_text_of_a_profile) {
  char *a[] = {"--duration-ms", "7000", "hot_spin=30", "parse_line=12", "main=1", NULL};
  char *text = describe_profile(a);
  PT_ASSERT_STR_EQ(text,
                   "CPU profile (pprof)\n"
                   "  kind:    cpu-profile (from the daemon)\n"
                   "  file:    profiling/x.pb.gz\n"
                   "  created: 2026-11-29T21:00:00Z\n"
                   "  sha256:  abc\n"
                   "  samples: 43 (0.43 s of CPU) in 3 stacks\n"
                   "  duration: 7.00 s\n"
                   "  top functions (flat: samples in the function itself; cum: with callees):\n"
                   "      flat  flat%     cum  function\n"
                   "        30  69.8%      30  hot_spin\n"
                   "        12  27.9%      12  parse_line\n"
                   "         1   2.3%      43  main\n"
                   "  Sent raw and unsanitized: can contain symbolized stack frames with\n"
                   "  build-machine paths and internal symbol names.\n");
  free(text);
  /* Inlined frames: hot_spin, which inlined_helper was inlined into, is
   * on every stack of its location (go tool pprof: cum 30). */
  char *b[] = {"--inline", "inlined_helper", "hot_spin=30", "main=1", NULL};
  text = describe_profile(b);
  PT_ASSERT_MSG(strstr(text, "        31 100.0%      31  inlined_helper\n"
                             "         0   0.0%      31  main\n"
                             "         0   0.0%      30  hot_spin\n"),
                "%s", text);
  free(text);
}

PT_TEST(tui_review_text_of_damage_and_logs) {
  json_t *e = entry("cpu-profile", "CPU profile (pprof)");
  char *text = tui_review_describe(e, (const uint8_t *)"\x1f\x8b not really", 14);
  PT_ASSERT(text);
  PT_ASSERT_MSG(strstr(text, "  (cannot decode this profile: not a valid gzip'd pprof file)\n"),
                "%s", text);
  free(text);
  json_decref(e);
  e = entry("daemon-log", "Daemon log");
  const char log[] = "one\ntwo\nthree\nfour\nfive\x01\n";
  text = tui_review_describe(e, (const uint8_t *)log, sizeof log - 1);
  PT_ASSERT(text);
  PT_ASSERT_MSG(strstr(text, "  last lines:\n    two\n    three\n    four\n    five?\n"
                             "  Sent raw and unsanitized: everything the daemon recorded in it\n"),
                "%s", text);
  free(text);
  json_decref(e);
}

PT_TEST(tui_review_nearly_empty_snapshot) {
  const char *note = "  note: this snapshot is nearly empty (3 samples in 10.00 s): a\n"
                     "  snapshot covers only the time since the one before it. The picker also\n"
                     "  offers the session's kept snapshots merged into one profile:\n"
                     "  \"CPU profile (pprof), N kept snapshots merged\".\n";
  char *few[] = {"hot_spin=3", NULL};
  char *text = describe_profile(few);
  PT_ASSERT_MSG(strstr(text, note), "%s", text);
  free(text);
  /* short: under a second, whatever the samples */
  char *shortw[] = {"--duration-ms", "400", "hot_spin=50", NULL};
  text = describe_profile(shortw);
  PT_ASSERT_MSG(strstr(text, "  note: this snapshot is nearly empty (50 samples in 0.40 s): a\n"),
                "%s", text);
  free(text);
  /* the merged profiles: no such note */
  text = describe_profile_as("cpu-profile-merged", few);
  PT_ASSERT_MSG(!strstr(text, "nearly empty") && strstr(text, "  samples: 3 "), "%s", text);
  free(text);
  /* TUI snapshots name the TUI's merge */
  text = describe_profile_as("tui-cpu-profile", few);
  PT_ASSERT_MSG(strstr(text, "  \"TUI CPU profile (pprof), N kept snapshots merged\".\n"), "%s", text);
  free(text);
}

PT_TEST(tui_review_window_text) {
  char buf[64];
  json_t *e = json_pack("{s:s, s:I, s:I}", "kind", "cpu-profile", "samples", (json_int_t)1234,
                        "duration_ns", (json_int_t)60012000000LL);
  PT_ASSERT_STR_EQ(tui_review_window(e, buf, sizeof buf), "60.0 s, 1234 samples");
  json_object_set_new(e, "samples", json_integer(1));
  PT_ASSERT_STR_EQ(tui_review_window(e, buf, sizeof buf), "60.0 s, 1 sample");
  json_decref(e);
  e = json_pack("{s:s}", "kind", "daemon-log");
  PT_ASSERT_STR_EQ(tui_review_window(e, buf, sizeof buf), "");
  json_decref(e);
}
