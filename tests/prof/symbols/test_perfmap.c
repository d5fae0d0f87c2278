/*
 * test_perfmap.c - the perf map reader's core (symbols/ptp_perfmap.c):
 * exact ranges and names for good and bad lines, later lines winning over
 * earlier ones within one feed and across commits, streaming in any chunk
 * size, long lines, names made valid UTF-8, the caps, and a model check
 * against a byte-per-address reference on random maps.
 */
#include "pt_test.h"
#include "prof/symbols/ptp_perfmap.h"
#include "../fault_fixture.h"

#include <errno.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ptp_perfmap *load(const char *text) {
  ptp_perfmap *pm;
  PT_ASSERT_INT_EQ(ptp_perfmap_new(&pm), 0);
  size_t used;
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, text, strlen(text), &used), 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  return pm;
}

/* "lo-hi name;" for every range, to compare exactly. */
static char *dump(const ptp_perfmap *pm) {
  static char buf[8192];
  size_t n = 0;
  ptp_perfmap_stats st;
  ptp_perfmap_get_stats(pm, &st);
  buf[0] = 0;
  for (size_t i = 0; i < st.ranges; i++) {
    uint64_t lo, hi;
    const char *nm = ptp_perfmap_range(pm, i, &lo, &hi);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%llx-%llx %s;", (unsigned long long)lo,
                          (unsigned long long)hi, nm ? nm : "(none)");
  }
  return buf;
}

PT_TEST(prof_perfmap_lines) {
  ptp_perfmap *pm = load(
    "7f0000001000 40 JS:*fib /app/work.js:1:13\n"
    "0x7f0000002000 0x10 py::f:/x.py\n"           /* 0x prefixes */
    "  7f0000003000\t20\tLjava/lang/String;::hashCode\r\n"   /* blanks, tabs, CRLF */
    "7f0000004000 8 name with  spaces  \n"        /* the rest of the line, as is */
    "garbage\n"
    "7f0000005000 0 zero size\n"
    "7f0000006000 4000001 too big\n"              /* > 64 MiB */
    "ffffffffffffff00 100 wraps\n"
    "7f0000007000 10\n"                           /* no name */
    "7f0000007000 10 \n"                          /* empty name */
    "17f0000007000000 10 x\n"                     /* 16 digits: fine */
    "117f0000007000000 10 x\n"                    /* 17 digits */
    "7f000000800g 10 x\n"
    "-7f0000009000 10 x\n"
    "\n"
    "7f000000a000 10 last\n"
    "7f000000b000 10 cut, no newline");
  PT_ASSERT_STR_EQ(dump(pm),
    "7f0000001000-7f0000001040 JS:*fib /app/work.js:1:13;"
    "7f0000002000-7f0000002010 py::f:/x.py;"
    "7f0000003000-7f0000003020 Ljava/lang/String;::hashCode;"
    "7f0000004000-7f0000004008 name with  spaces  ;"
    "7f000000a000-7f000000a010 last;"
    "17f0000007000000-17f0000007000010 x;");
  ptp_perfmap_stats st;
  ptp_perfmap_get_stats(pm, &st);
  PT_ASSERT_UINT_EQ(st.lines, 16);
  PT_ASSERT_UINT_EQ(st.entries, 6);
  PT_ASSERT_UINT_EQ(st.bad, 10);
  PT_ASSERT_UINT_EQ(st.too_long, 0);
  /* Lookups: inside, at the first and last byte, just outside. */
  uint64_t lo, hi;
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x7f0000001000, &lo, &hi), "JS:*fib /app/work.js:1:13");
  PT_ASSERT_UINT_EQ(lo, 0x7f0000001000);
  PT_ASSERT_UINT_EQ(hi, 0x7f0000001040);
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x7f000000103f, NULL, NULL), "JS:*fib /app/work.js:1:13");
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x7f0000001040, NULL, NULL) == NULL);
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x7f0000000fff, NULL, NULL) == NULL);
  PT_ASSERT(ptp_perfmap_lookup(pm, 0, NULL, NULL) == NULL);
  PT_ASSERT(ptp_perfmap_lookup(pm, UINT64_MAX, NULL, NULL) == NULL);
  ptp_perfmap_del(pm);
}

PT_TEST(prof_perfmap_later_wins) {
  /* Within one feed: b over the middle of a, c over the end of b and
   * past a, d equal to an earlier range. */
  ptp_perfmap *pm = load("1000 1000 a\n1800 100 b\n1880 1000 c\n3000 100 d\n3000 100 e\n");
  PT_ASSERT_STR_EQ(dump(pm), "1000-1800 a;1800-1880 b;1880-2880 c;3000-3100 e;");
  /* Across commits: what was committed stays where nothing covers it. */
  size_t used;
  const char *more = "1900 10 f\n0 1000 g\n2800 900 h\n";
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, more, strlen(more), &used), 0);
  PT_ASSERT_UINT_EQ(used, strlen(more));
  PT_ASSERT_STR_EQ(dump(pm), "1000-1800 a;1800-1880 b;1880-2880 c;3000-3100 e;");   /* not yet */
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  PT_ASSERT_STR_EQ(dump(pm), "0-1000 g;1000-1800 a;1800-1880 b;1880-1900 c;1900-1910 f;1910-2800 c;"
                             "2800-3100 h;");
  /* One range over everything. */
  const char *all = "0 10000 all\n";
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, all, strlen(all), &used), 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  PT_ASSERT_STR_EQ(dump(pm), "0-10000 all;");
  ptp_perfmap_del(pm);
}

PT_TEST(prof_perfmap_streaming) {
  const char *text = "1000 100 alpha\n2000 100 beta\n1050 10 gamma\n3000 100 delta\n";
  ptp_perfmap *whole = load(text);
  char want[1024];
  snprintf(want, sizeof want, "%s", dump(whole));
  ptp_perfmap_del(whole);
  PT_ASSERT_STR_EQ(want, "1000-1050 alpha;1050-1060 gamma;1060-1100 alpha;2000-2100 beta;"
                         "3000-3100 delta;");
  /* Fed in chunks of every size, the unused rest handed in again. */
  size_t len = strlen(text);
  for (size_t chunk = 1; chunk <= len; chunk++) {
    ptp_perfmap *pm;
    PT_ASSERT_INT_EQ(ptp_perfmap_new(&pm), 0);
    char carry[256];
    size_t nc = 0, pos = 0;
    while (pos < len) {
      size_t k = chunk < len - pos ? chunk : len - pos;
      memcpy(carry + nc, text + pos, k);
      nc += k;
      pos += k;
      size_t used;
      PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, carry, nc, &used), 0);
      PT_ASSERT(used <= nc);
      PT_ASSERT(used == 0 || carry[used - 1] == '\n');
      memmove(carry, carry + used, nc - used);
      nc -= used;
    }
    PT_ASSERT_UINT_EQ(nc, 0);
    PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
    PT_ASSERT_MSG(strcmp(dump(pm), want) == 0, "chunk %zu: %s", chunk, dump(pm));
    ptp_perfmap_del(pm);
  }
}

PT_TEST(prof_perfmap_long_lines) {
  ptp_perfmap *pm;
  PT_ASSERT_INT_EQ(ptp_perfmap_new(&pm), 0);
  /* A line of exactly PTP_PERFMAP_LINE_MAX bytes is taken; one byte more is
   * not, and the next line is read normally. */
  size_t cap = 3 * PTP_PERFMAP_LINE_MAX;
  char *buf = malloc(cap);
  PT_ASSERT(buf);
  int pre = snprintf(buf, cap, "1000 10 ");
  memset(buf + pre, 'n', PTP_PERFMAP_LINE_MAX - (size_t)pre);
  buf[PTP_PERFMAP_LINE_MAX] = '\n';
  size_t used;
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, buf, PTP_PERFMAP_LINE_MAX + 1, &used), 0);
  PT_ASSERT_UINT_EQ(used, PTP_PERFMAP_LINE_MAX + 1);
  pre = snprintf(buf, cap, "2000 10 ");
  memset(buf + pre, 'm', PTP_PERFMAP_LINE_MAX + 1 - (size_t)pre);
  strcpy(buf + PTP_PERFMAP_LINE_MAX + 1, "\n3000 10 ok\n");
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, buf, strlen(buf), &used), 0);
  PT_ASSERT_UINT_EQ(used, strlen(buf));
  /* A partial line already longer than the cap is consumed and its rest
   * skipped in the next feeds, up to its newline. */
  memset(buf, 'z', PTP_PERFMAP_LINE_MAX + 10);
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, buf, PTP_PERFMAP_LINE_MAX + 10, &used), 0);
  PT_ASSERT_UINT_EQ(used, PTP_PERFMAP_LINE_MAX + 10);
  const char *tail = "4000 10 still the long line\n5000 10 next\n";
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, tail, strlen(tail), &used), 0);
  PT_ASSERT_UINT_EQ(used, strlen(tail));
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  ptp_perfmap_stats st;
  ptp_perfmap_get_stats(pm, &st);
  PT_ASSERT_UINT_EQ(st.too_long, 2);
  PT_ASSERT_UINT_EQ(st.entries, 3);
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x1000, NULL, NULL) != NULL);
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x2000, NULL, NULL) == NULL);
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x3000, NULL, NULL), "ok");
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x4000, NULL, NULL) == NULL);
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x5000, NULL, NULL), "next");
  /* restart: the next bytes begin a line even in the middle of skipping. */
  memset(buf, 'z', PTP_PERFMAP_LINE_MAX + 10);
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, buf, PTP_PERFMAP_LINE_MAX + 10, &used), 0);
  ptp_perfmap_restart(pm);
  const char *fresh = "6000 10 fresh\n";
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, fresh, strlen(fresh), &used), 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x6000, NULL, NULL), "fresh");
  free(buf);
  ptp_perfmap_del(pm);
}

PT_TEST(prof_perfmap_names_utf8) {
  ptp_perfmap *pm = load(
    "1000 10 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"       /* valid: kept */
    "2000 10 a\x01" "b\x7f" "c\x1b[31m\n"                       /* controls */
    "3000 10 bad\xff\xc3(\xe2\x82\xc0\xc0\xaf\xed\xa0\x80x\n"   /* invalid, overlong, surrogate */
    "4000 10 cut\xe2\x82\n");
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x1000, NULL, NULL),
                   "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x2000, NULL, NULL), "a?b?c?[31m");
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x3000, NULL, NULL), "bad?" "?(????????x");
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x4000, NULL, NULL), "cut??");
  ptp_perfmap_del(pm);
}

PT_TEST(prof_perfmap_caps) {
  ptp_perfmap *pm;
  PT_ASSERT_INT_EQ(ptp_perfmap_new(&pm), 0);
  /* At most 4 ranges: entries past that are dropped, counted. */
  ptp_perfmap_set_limits(pm, 4, 0);
  const char *t = "1000 10 a\n2000 10 b\n3000 10 c\n4000 10 d\n";
  size_t used;
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, t, strlen(t), &used), 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  const char *t2 = "5000 10 e\n6000 10 f\n";
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, t2, strlen(t2), &used), 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  ptp_perfmap_stats st;
  ptp_perfmap_get_stats(pm, &st);
  PT_ASSERT_UINT_EQ(st.ranges, 4);
  PT_ASSERT_UINT_EQ(st.dropped, 2);
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x5000, NULL, NULL) == NULL);
  ptp_perfmap_del(pm);
  /* 1024 bytes of names: a line whose name does not fit still takes its
   * range, unnamed, so a name under it is gone (never stale). */
  PT_ASSERT_INT_EQ(ptp_perfmap_new(&pm), 0);
  ptp_perfmap_set_limits(pm, 0, 1024);
  char line[128];
  for (int i = 0; i < 40; i++) {         /* 40 names of 30 bytes: 34 fit */
    int n = snprintf(line, sizeof line, "%x 10 name%02d_xxxxxxxxxxxxxxxxxxxxxx\n", 0x1000 + 0x100 * i, i);
    PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, line, (size_t)n, &used), 0);
  }
  const char *over = "1000 10 another name over the first\n";
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, over, strlen(over), &used), 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  ptp_perfmap_get_stats(pm, &st);
  PT_ASSERT_UINT_EQ(st.ranges, 40);
  PT_ASSERT_UINT_EQ(st.unnamed, 7);      /* 6 of them, and the one over name00 */
  PT_ASSERT(st.name_bytes <= 1024);
  uint64_t lo, hi;
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x1000, &lo, &hi) == NULL);   /* not name00 */
  PT_ASSERT_UINT_EQ(lo, 0x1000);
  PT_ASSERT_UINT_EQ(hi, 0x1010);
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x1100, NULL, NULL), "name01_xxxxxxxxxxxxxxxxxxxxxx");
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x1000 + 0x100 * 39, NULL, NULL) == NULL);
  /* Everything covered (its 2-byte name still fits), then more entries
   * than a compaction's spacing (1024): at the 1024th, the dead names are
   * compacted away and the later ones fit again. */
  const char *all = "0 100000 x\n";
  PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, all, strlen(all), &used), 0);
  for (int i = 0; i < 1050; i++) {
    int n = snprintf(line, sizeof line, "%x 10 late%04d\n", 0x200000 + 0x100 * i, i);
    PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, line, (size_t)n, &used), 0);
  }
  PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
  PT_ASSERT(ptp_perfmap_lookup(pm, 0x200000, NULL, NULL) == NULL);   /* before the compaction */
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x200000 + 0x100 * 1049, NULL, NULL), "late1049");
  PT_ASSERT_STR_EQ(ptp_perfmap_lookup(pm, 0x1100, &lo, &hi), "x");   /* name01 covered */
  PT_ASSERT_UINT_EQ(lo, 0);
  PT_ASSERT_UINT_EQ(hi, 0x100000);
  ptp_perfmap_get_stats(pm, &st);
  PT_ASSERT(st.name_bytes <= 1024);
  ptp_perfmap_del(pm);
}

/* ---- model check --------------------------------------------------------- */

#define SPACE 512       /* addresses 0x10000 .. 0x10000 + SPACE */

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

PT_TEST(prof_perfmap_model) {
  /* Random entries over a small address space, in random chunks and
   * commits; after every commit each address is named by the last entry
   * covering it (or nothing), as a byte-per-address reference says. */
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 200; round++) {
    ptp_perfmap *pm;
    PT_ASSERT_INT_EQ(ptp_perfmap_new(&pm), 0);
    int owner[SPACE];
    for (int i = 0; i < SPACE; i++) owner[i] = -1;
    int nent = 1 + (int)(rnd(&seed) % 60);
    char text[8192];
    size_t tn = 0;
    int id = 0;
    for (int k = 0; k < nent; k++) {
      uint64_t lo = rnd(&seed) % SPACE, sz = 1 + rnd(&seed) % 80;
      if (lo + sz > SPACE) sz = SPACE - lo;
      tn += (size_t)snprintf(text + tn, sizeof text - tn, "%llx %llx n%d\n",
                             (unsigned long long)(0x10000 + lo), (unsigned long long)sz, id);
      for (uint64_t a = lo; a < lo + sz; a++) owner[a] = id;
      id++;
      if (rnd(&seed) % 4 == 0 || k == nent - 1) {
        size_t used;
        PT_ASSERT_INT_EQ(ptp_perfmap_feed(pm, text, tn, &used), 0);
        PT_ASSERT_UINT_EQ(used, tn);
        tn = 0;
        PT_ASSERT_INT_EQ(ptp_perfmap_commit(pm), 0);
        for (int a = 0; a < SPACE; a++) {
          const char *nm = ptp_perfmap_lookup(pm, 0x10000 + (uint64_t)a, NULL, NULL);
          char want[16];
          snprintf(want, sizeof want, "n%d", owner[a]);
          PT_ASSERT_MSG(owner[a] < 0 ? nm == NULL : (nm && strcmp(nm, want) == 0),
                        "round %d address %#x: %s, want %s", round, a, nm ? nm : "(none)",
                        owner[a] < 0 ? "(none)" : want);
        }
        /* Sorted, disjoint, non-empty. */
        ptp_perfmap_stats st;
        ptp_perfmap_get_stats(pm, &st);
        uint64_t prev = 0;
        for (size_t i = 0; i < st.ranges; i++) {
          uint64_t lo2, hi2;
          ptp_perfmap_range(pm, i, &lo2, &hi2);
          PT_ASSERT(lo2 < hi2 && lo2 >= prev);
          prev = hi2;
        }
      }
    }
    ptp_perfmap_del(pm);
  }
}

/* ---- allocation failures --------------------------------------------------- */

typedef struct alloc_ctx {
  char *text;
  size_t len;
  char want[8192];          /* the ranges without failures */
  char got[8192];
} alloc_ctx;

static int alloc_op(void *arg) {
  alloc_ctx *x = arg;
  ptp_perfmap *pm;
  int rc = ptp_perfmap_new(&pm);
  if (rc) return rc;
  size_t used;
  rc = ptp_perfmap_feed(pm, x->text, x->len, &used);
  if (rc == 0) rc = ptp_perfmap_commit(pm);
  /* Whatever failed, the map stays usable: more text, commit, lookups. */
  const char *more = "100 10 more\n";
  int rc2 = ptp_perfmap_feed(pm, more, strlen(more), &used);
  if (rc2 == 0) rc2 = ptp_perfmap_commit(pm);
  (void)ptp_perfmap_lookup(pm, 0x105, NULL, NULL);
  snprintf(x->got, sizeof x->got, "%s", dump(pm));
  ptp_perfmap_del(pm);
  return rc ? rc : rc2;
}

static void alloc_check(void *arg, int rc, uint64_t n, int failed) {
  alloc_ctx *x = arg;
  if (failed) {
    PT_ASSERT_MSG(rc == -ENOMEM, "allocation %llu failed: %d, not -ENOMEM", (unsigned long long)n, rc);
  } else {
    PT_ASSERT_INT_EQ(rc, 0);
    PT_ASSERT_STR_EQ(x->got, x->want);
  }
}

PT_TEST(prof_alloc_perfmap) {
  ptt_fault_require();
  alloc_ctx x;
  memset(&x, 0, sizeof x);
  x.text = malloc(1 << 16);
  PT_ASSERT(x.text);
  /* 300 overlapping entries (names growing the buffer several times). */
  for (int i = 0; i < 300; i++)
    x.len += (size_t)snprintf(x.text + x.len, (1 << 16) - x.len, "%x %x fn_%d_%s\n", 0x1000 + 0x40 * (i % 37),
                              0x30 + (i % 5) * 0x10, i, i % 3 ? "JS:*work /app/a.js:1:1" : "x");
  PT_ASSERT_INT_EQ(alloc_op(&x), 0);
  memcpy(x.want, x.got, sizeof x.want);
  PT_ASSERT(strlen(x.want) > 100);
  uint64_t runs = ptt_fault_loop(alloc_op, alloc_check, &x, 200);
  printf("# %llu allocations, each failed in turn\n", (unsigned long long)(runs - 1));
  PT_ASSERT(runs >= 5);
  free(x.text);
  ptt_no_leaks();
}
