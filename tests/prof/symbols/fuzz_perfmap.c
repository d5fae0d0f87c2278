/*
 * fuzz_perfmap.c - libFuzzer harness of the perf map reader's core
 * (src/prof/symbols/ptp_perfmap.c); built and run by
 * tests/prof/perfmap_fuzz_test.sh.
 *
 * Input: one control byte (chunk size 1..64 and how often to commit), then
 * the map text, fed in chunks with the unused rest handed in again as the
 * file reader does. Checked after the last commit:
 *  - the ranges are sorted, disjoint and non-empty; names are valid UTF-8
 *    without control characters;
 *  - the same text parsed in one piece gives the same ranges;
 *  - a model: every complete line parsed alone (a fresh map per line) gives
 *    that line's entry or none; at the start, end and middle of every
 *    entry, the map names the address as the last entry covering it.
 * Any mismatch aborts (a crash for libFuzzer); ASan/UBSan catch the rest.
 */
#include "prof/symbols/ptp_perfmap.h"
#include "tests/fuzz_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ent { uint64_t lo, hi; char *name; } ent;

static ptp_perfmap *feed_chunks(const char *t, size_t n, size_t chunk, unsigned every) {
  ptp_perfmap *pm;
  CHECK(ptp_perfmap_new(&pm) == 0);
  char *carry = malloc(n + 1);
  CHECK(carry);
  size_t nc = 0, pos = 0;
  unsigned k = 0;
  while (pos < n) {
    size_t take = chunk < n - pos ? chunk : n - pos;
    memcpy(carry + nc, t + pos, take);
    nc += take;
    pos += take;
    size_t used;
    CHECK(ptp_perfmap_feed(pm, carry, nc, &used) == 0);
    CHECK(used <= nc);
    memmove(carry, carry + used, nc - used);
    nc -= used;
    if (every && ++k % every == 0) CHECK(ptp_perfmap_commit(pm) == 0);
  }
  CHECK(ptp_perfmap_commit(pm) == 0);
  free(carry);
  return pm;
}

static int valid_utf8_name(const unsigned char *s) {
  for (size_t i = 0; s[i];) {
    if (s[i] < 0x20 || s[i] == 0x7f) return 0;
    if (s[i] < 0x80) { i++; continue; }
    size_t k = s[i] >= 0xf0 ? 4 : s[i] >= 0xe0 ? 3 : s[i] >= 0xc2 ? 2 : 0;
    if (!k || s[i] > 0xf4) return 0;
    for (size_t j = 1; j < k; j++)
      if ((s[i + j] & 0xc0) != 0x80) return 0;
    i += k;
  }
  return 1;
}

static const char *name_at(const ent *e, size_t ne, uint64_t a) {
  for (size_t i = ne; i-- > 0;)
    if (a >= e[i].lo && a < e[i].hi) return e[i].name ? e[i].name : "";
  return NULL;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  if (size < 1) return 0;
  size_t chunk = 1 + (data[0] & 63);
  unsigned every = data[0] >> 6;
  const char *t = (const char *)data + 1;
  size_t n = size - 1;

  ptp_perfmap *pm = feed_chunks(t, n, chunk, every);
  ptp_perfmap *whole = feed_chunks(t, n, n ? n : 1, 0);
  ptp_perfmap_stats st, sw;
  ptp_perfmap_get_stats(pm, &st);
  ptp_perfmap_get_stats(whole, &sw);
  CHECK(st.ranges == sw.ranges);
  CHECK(st.entries == sw.entries && st.bad == sw.bad && st.too_long == sw.too_long);
  uint64_t prev = 0;
  for (size_t i = 0; i < st.ranges; i++) {
    uint64_t lo, hi, lo2, hi2;
    const char *nm = ptp_perfmap_range(pm, i, &lo, &hi);
    const char *nm2 = ptp_perfmap_range(whole, i, &lo2, &hi2);
    CHECK(lo < hi && (i == 0 || lo >= prev));
    CHECK(lo == lo2 && hi == hi2);
    CHECK((nm == NULL) == (nm2 == NULL) && (!nm || strcmp(nm, nm2) == 0));
    CHECK(!nm || (nm[0] && valid_utf8_name((const unsigned char *)nm)));
    CHECK(ptp_perfmap_lookup(pm, lo, NULL, NULL) == nm);
    CHECK(ptp_perfmap_lookup(pm, hi - 1, NULL, NULL) == nm);
    prev = hi;
  }

  /* The model: each complete line alone. */
  ent *e = calloc(n + 1, sizeof *e);
  CHECK(e);
  size_t ne = 0;
  for (size_t p = 0; p < n;) {
    const char *nl = memchr(t + p, '\n', n - p);
    if (!nl) break;
    size_t ll = (size_t)(nl - (t + p)) + 1;
    if (ll - 1 > PTP_PERFMAP_LINE_MAX) {    /* too long: skipped whole */
      p += ll;
      continue;
    }
    ptp_perfmap *one;
    CHECK(ptp_perfmap_new(&one) == 0);
    size_t used;
    CHECK(ptp_perfmap_feed(one, t + p, ll, &used) == 0 && used == ll);
    CHECK(ptp_perfmap_commit(one) == 0);
    ptp_perfmap_stats so;
    ptp_perfmap_get_stats(one, &so);
    CHECK(so.ranges <= 1 && so.lines == 1);
    if (so.ranges == 1) {
      const char *nm = ptp_perfmap_range(one, 0, &e[ne].lo, &e[ne].hi);
      CHECK(nm);
      e[ne].name = strdup(nm);
      ne++;
    }
    ptp_perfmap_del(one);
    p += ll;
  }
  CHECK(ne == st.entries);
  for (size_t i = 0; i < ne; i++) {
    uint64_t probes[3] = { e[i].lo, e[i].hi - 1, e[i].lo + (e[i].hi - e[i].lo) / 2 };
    for (int k = 0; k < 3; k++) {
      const char *want = name_at(e, ne, probes[k]);
      const char *got = ptp_perfmap_lookup(pm, probes[k], NULL, NULL);
      CHECK(want && got && strcmp(want, got) == 0);
    }
  }
  for (size_t i = 0; i < ne; i++) free(e[i].name);
  free(e);
  ptp_perfmap_del(pm);
  ptp_perfmap_del(whole);
  return 0;
}
