/*
 * test_threadcpu_line.c - the threads' CPU comment read back and summed
 * (src/common/pt_threadcpu_line.c): lines as the sampler writes them
 * (quoted names, renamed threads' labels, the "more names" tail) summed by
 * name; lines that are not one, or do not parse, leave the sum alone; the
 * quoting reads back. The merge that uses it: tests/tui/profile_cli_test.sh.
 */
#include "pt_test.h"
#include "common/pt_threadcpu_line.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HEAD "threads' CPU since the previous snapshot's cut, by each thread's CPU clock, the " \
             "profiler's own work apart (%s ms on these threads, and its own thread), with their "   \
             "samples:"
#define TAIL "; a name with less CPU than a period (10.1 ms) has a sample with probability CPU / period"

static int add(pt_tcl_sum *s, const char *own, const char *entries) {
  char line[2048];
  snprintf(line, sizeof line, HEAD "%s" TAIL, own, entries);
  return pt_tcl_add(s, line, strlen(line));
}

PT_TEST(common_threadcpu_line_sum) {
  pt_tcl_sum s;
  memset(&s, 0, sizeof s);
  PT_ASSERT_INT_EQ(add(&s, "0.1",
                       " loop 80.7 ms (7 samples), pool 43.8 ms (3 threads, 3 samples, thread_name "
                       "job-x, \"job y\", ...), \"a, b\\\"(c)\\\\\\x09\" 1.0 ms (0 samples), (no name) 0.4 ms "
                       "(1 sample)"), 0);
  PT_ASSERT_INT_EQ(add(&s, "2.5",
                       " pool 10.0 ms (4 threads, 1 sample), loop 0.3 ms (0 samples), (other names) 2.0 ms "
                       "(40 threads, 0 samples); 3 more names: 1.2 ms (5 threads, 2 samples)"), 0);
  PT_ASSERT_UINT_EQ(s.lines, 2);
  PT_ASSERT_INT_EQ(s.own_tenths, 26);
  char *out = pt_tcl_format(&s, 2);
  PT_ASSERT(out);
  const char *want =
      "threads' CPU over the 2 windows merged, summed from their lines (each thread's CPU clock, the "
      "profiler's own work apart: 2.6 ms on these threads), with their samples: loop 81.0 ms (7 "
      "samples), pool 53.8 ms (4 samples), (other names) 2.0 ms (0 samples), \"a, b\\\"(c)\\\\\\x09\" "
      "1.0 ms (0 samples), (no name) 0.4 ms (1 sample); names their windows did not list: 1.2 ms (2 "
      "samples)";
  PT_ASSERT_MSG(strcmp(out, want) == 0, "got:\n%s\nwant:\n%s", out, want);
  free(out);
  pt_tcl_sum_free(&s);
  PT_ASSERT_UINT_EQ(s.n, 0);
}

PT_TEST(common_threadcpu_line_not_or_bad) {
  pt_tcl_sum s;
  memset(&s, 0, sizeof s);
  const char *other = "process CPU since sampling started: 40.9 ms";
  PT_ASSERT_INT_EQ(pt_tcl_add(&s, other, strlen(other)), 1);
  PT_ASSERT_INT_EQ(add(&s, "0.0", " loop 1.0 ms (1 sample)"), 0);
  /* each of these starts like a line but breaks the grammar: refused, the
   * sum as it was */
  const char *bad[] = {
      " loop 1.0 ms (1 sample)",                 /* the same, then cut short below */
      " loop 1 ms (1 sample)",                   /* no tenths */
      " loop 1.0 ms (1 sample",                  /* no ")" */
      " \"unterminated 1.0 ms (1 sample)",
      " \"bad\\q\" 1.0 ms (1 sample)",           /* unknown escape */
      " sixteen-bytes-xx 1.0 ms (1 sample)",     /* longer than a thread name */
      " loop 1.0 ms (x threads, 1 sample)",
      " loop 1.0 ms (1 sample, thread_name )",
      " loop 1.0 ms (1 sample); 3 more names: 1.0 ms (2 samples)",   /* tail without threads */
      " loop 1234567890123.0 ms (1 sample)",     /* past 12 digits of ms: sums stay in range */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char line[512];
    int n = snprintf(line, sizeof line, HEAD "%s" TAIL, "0.0", bad[i]);
    size_t len = i == 0 ? (size_t)n - strlen(TAIL) - 4 : (size_t)n;   /* cut inside the entry */
    PT_ASSERT_MSG(pt_tcl_add(&s, line, len) == -EINVAL, "accepted: %.*s", (int)len, line);
  }
  PT_ASSERT_UINT_EQ(s.lines, 1);
  PT_ASSERT_UINT_EQ(s.n, 1);
  PT_ASSERT_INT_EQ(s.e[0].cpu_tenths, 10);
  pt_tcl_sum_free(&s);
  /* nothing summed: no line */
  PT_ASSERT(pt_tcl_format(&s, 3) == NULL);
}

/* pt_tcl_quote writes what the parser reads back, for names with every
 * kind of byte a thread name may hold. */
PT_TEST(common_threadcpu_line_quote_round_trip) {
  const char *names[] = {"loop", "a b", "x,y;z", "(p)", "q\"uote", "back\\slash", "\x01\x1f\x7f",
                         "caf\xc3\xa9", "fifteen-bytes-x"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char q[80], entries[160];
    pt_tcl_quote(names[i], q, sizeof q);
    snprintf(entries, sizeof entries, " %s 2.5 ms (3 samples)", q);
    pt_tcl_sum s;
    memset(&s, 0, sizeof s);
    PT_ASSERT_MSG(add(&s, "0.0", entries) == 0, "%s did not parse back", q);
    PT_ASSERT_UINT_EQ(s.n, 1);
    PT_ASSERT_STR_EQ(s.e[0].name, names[i]);
    PT_ASSERT_INT_EQ(s.e[0].cpu_tenths, 25);
    PT_ASSERT_UINT_EQ(s.e[0].samples, 3);
    pt_tcl_sum_free(&s);
  }
  char small[4];
  PT_ASSERT_UINT_EQ(pt_tcl_quote("abcdef", small, sizeof small), 3);   /* cut short, terminated */
  PT_ASSERT_STR_EQ(small, "abc");
}
