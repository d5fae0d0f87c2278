/* test_pprof_summary.c - the profile summary of the feedback review
 * (src/common/pt_pprof_summary.c) on real gzip'd profiles, cross-checked with
 * go tool pprof when it is installed, and on damaged ones. */
#include "common_test.h"
#include "common/pt_pprof_summary.h"

#include <errno.h>

PT_TEST(common_pprof_summary_of_real_profile) {
  char *dir = pt_tmpdir("fbprof");
  char *f = ptt_path2(dir, "p.pb.gz");
  char *script = pt_source_path("tests/mkprofile.py");
  char *argv[] = {"python3", script, f, "--duration-ms", "7000", "hot_spin=30", "parse_line=12",
                  "main=1", NULL};
  ptt_run_ok(argv);
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

