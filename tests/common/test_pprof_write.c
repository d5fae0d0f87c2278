/* test_pprof_write.c - the pprof encoder (src/common/pt_pprof_write.c) and
 * gzip (pt_gzip.c).
 *
 *  - Round trip on real snapshots (tests/common/fuzz_seeds/pprof_read) and
 *    a mkprofile.py profile with labels, units and inlined frames: read ->
 *    write -> read gives a struct equal field for field, and writing that
 *    again gives the same bytes.
 *  - Fuzz-style round trip: thousands of random profiles from a seeded
 *    generator (strings with NUL bytes, negative numbers, ids up to
 *    UINT64_MAX, locations without a mapping, empty samples, labels of
 *    every kind) each written and read back equal.
 *  - Bad structs are refused with -EINVAL and the place named, never
 *    written: every kind of index out of range, ids 0 or used twice.
 *  - gzip: pt_gunzip gives the input back; the output is deterministic.
 * (The allocation failures of both are in test_alloc_fail.c; the reader's
 * fuzz target also round-trips every profile it reads.)
 */
#include "common_test.h"
#include "pprof_equal.h"
#include "common/pt_gunzip.h"
#include "common/pt_gzip.h"
#include "common/pt_pprof_read.h"
#include "common/pt_pprof_write.h"

#include <dirent.h>
#include <errno.h>

static pt_pprof *read_bytes(const uint8_t *d, size_t n) {
  pt_pprof *p = NULL;
  char err[256] = "";
  int r = pt_pprof_read(d, n, NULL, &p, err, sizeof err);
  PT_ASSERT_MSG(r == 0, "read back: %d %s", r, err);
  return p;
}

/* read(write(p)) == p and write(read(write(p))) == write(p). */
static void round_trip(const pt_pprof *p, const char *what) {
  uint8_t *b1 = NULL, *b2 = NULL;
  size_t n1 = 0, n2 = 0;
  char err[256] = "";
  int r = pt_pprof_write(p, &b1, &n1, err, sizeof err);
  PT_ASSERT_MSG(r == 0, "%s: write: %d %s", what, r, err);
  pt_pprof *q = read_bytes(b1, n1);
  char why[256] = "";
  PT_ASSERT_MSG(ptt_pprof_equal(p, q, why, sizeof why), "%s: read back differs: %s", what, why);
  PT_ASSERT_INT_EQ(pt_pprof_write(q, &b2, &n2, err, sizeof err), 0);
  PT_ASSERT_MSG(n1 == n2 && memcmp(b1, b2, n1) == 0, "%s: second encoding differs", what);
  pt_pprof_free(q);
  free(b1);
  free(b2);
}

static void round_trip_file(const char *path) {
  size_t n = 0;
  uint8_t *d = (uint8_t *)pt_read_file(path, &n);
  PT_ASSERT_MSG(d, "cannot read %s", path);
  uint8_t *raw = d;
  size_t rawn = n;
  if (pt_is_gzip(d, n)) PT_ASSERT_INT_EQ(pt_gunzip(d, n, 0, &raw, &rawn), 0);
  pt_pprof *p = read_bytes(raw, rawn);
  round_trip(p, path);
  pt_pprof_free(p);
  if (raw != d) free(raw);
  free(d);
}

PT_TEST_T(common_pprof_write_round_trip_snapshots, 60000) {
  char *dir = pt_source_path("tests/common/fuzz_seeds/pprof_read");
  DIR *d = opendir(dir);
  PT_ASSERT(d);
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char *f = ptt_path2(dir, de->d_name);
    round_trip_file(f);
    free(f);
    n++;
  }
  closedir(d);
  free(dir);
  PT_ASSERT(n >= 3);
  char *tmp = pt_tmpdir("pprofwr");
  char *f = ptt_path2(tmp, "labels.pb.gz");
  ptt_mkprofile(f, "--label", "thread_name=worker", "--num-label", "thread_id=42",
                "--num-label", "bytes=4096:bytes", "--inline", "inlined_helper", "hot_spin=30",
                "parse_line=12", "main=1");
  round_trip_file(f);
  free(f);
  free(tmp);
}

/* ---- random profiles ---- */

static uint64_t rng;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static uint32_t rndn(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }
/* Numbers of every size: 0, small, large, negative. */
static int64_t rnd_i64(void) {
  switch (rndn(5)) {
  case 0: return 0;
  case 1: return (int64_t)rndn(200);
  case 2: return -(int64_t)rndn(1000) - 1;
  case 3: return (int64_t)rnd();
  default: return (int64_t)(rnd() >> rndn(64));
  }
}

/* A random valid profile; every array malloc'd (gen_free). */
typedef struct gen {
  pt_pprof p;
  char *strbytes;
  uint32_t *locrefs;
  int64_t *values;
  pt_pprof_label *labels;
  pt_pprof_line *lines;
} gen;

static uint64_t unique_id(size_t i, uint64_t base) {
  switch (base % 3) {
  case 0: return i + 1;
  case 1: return UINT64_MAX - i;
  default: return (uint64_t)(i + 1) * 0x9e3779b97f4aULL;
  }
}

static void gen_make(gen *g) {
  memset(g, 0, sizeof *g);
  pt_pprof *p = &g->p;
  p->n_strings = 1 + rndn(20);
  p->strings = calloc(p->n_strings, sizeof *p->strings);
  g->strbytes = malloc(p->n_strings * 16);
  PT_ASSERT(p->strings && g->strbytes);
  for (size_t i = 0; i < p->n_strings; i++) {
    char *s = g->strbytes + i * 16;
    size_t len = i ? rndn(15) : 0;
    for (size_t k = 0; k < len; k++) s[k] = (char)rndn(256); /* NULs included */
    s[len] = 0;
    p->strings[i] = (pt_pprof_str){s, len};
  }
  uint32_t ns = (uint32_t)p->n_strings;
  p->n_sample_types = 1 + rndn(3);
  p->sample_types = malloc(p->n_sample_types * sizeof *p->sample_types);
  for (size_t i = 0; i < p->n_sample_types; i++)
    p->sample_types[i] = (pt_pprof_value_type){rndn(ns), rndn(ns)};
  p->n_mappings = rndn(5);
  p->mappings = calloc(p->n_mappings + 1, sizeof *p->mappings);
  uint64_t base = rnd();
  for (size_t i = 0; i < p->n_mappings; i++) {
    pt_pprof_mapping *m = &p->mappings[i];
    m->id = unique_id(i, base);
    m->memory_start = (uint64_t)rnd_i64();
    m->memory_limit = (uint64_t)rnd_i64();
    m->file_offset = (uint64_t)rnd_i64();
    m->filename = rndn(ns);
    m->build_id = rndn(ns);
    m->has_functions = rndn(2);
    m->has_filenames = rndn(2);
    m->has_line_numbers = rndn(2);
    m->has_inline_frames = rndn(2);
  }
  p->n_functions = rndn(7);
  p->functions = calloc(p->n_functions + 1, sizeof *p->functions);
  base = rnd();
  for (size_t i = 0; i < p->n_functions; i++)
    p->functions[i] = (pt_pprof_function){unique_id(i, base), rndn(ns), rndn(ns), rndn(ns), rnd_i64()};
  p->n_locations = rndn(9);
  p->locations = calloc(p->n_locations + 1, sizeof *p->locations);
  g->lines = calloc(p->n_locations * 3 + 1, sizeof *g->lines);
  base = rnd();
  size_t nl = 0;
  for (size_t i = 0; i < p->n_locations; i++) {
    pt_pprof_location *l = &p->locations[i];
    l->id = unique_id(i, base);
    l->address = (uint64_t)rnd_i64();
    l->mapping = p->n_mappings && rndn(4) ? rndn((uint32_t)p->n_mappings) : PT_PPROF_NONE;
    l->n_lines = p->n_functions ? rndn(4) : 0;
    l->lines = g->lines + nl;
    for (uint32_t j = 0; j < l->n_lines; j++)
      g->lines[nl++] = (pt_pprof_line){rndn((uint32_t)p->n_functions), rnd_i64(), rnd_i64()};
    l->is_folded = rndn(2);
  }
  p->n_samples = rndn(11);
  p->samples = calloc(p->n_samples + 1, sizeof *p->samples);
  g->locrefs = calloc(p->n_samples * 5 + 1, sizeof *g->locrefs);
  g->values = calloc(p->n_samples * p->n_sample_types + 1, sizeof *g->values);
  g->labels = calloc(p->n_samples * 3 + 1, sizeof *g->labels);
  size_t nlr = 0, nv = 0, nlab = 0;
  for (size_t i = 0; i < p->n_samples; i++) {
    pt_pprof_sample *s = &p->samples[i];
    s->n_locations = p->n_locations ? rndn(6) : 0;
    s->locations = g->locrefs + nlr;
    for (uint32_t j = 0; j < s->n_locations; j++) g->locrefs[nlr++] = rndn((uint32_t)p->n_locations);
    s->values = g->values + nv;
    for (size_t j = 0; j < p->n_sample_types; j++) g->values[nv++] = rnd_i64();
    s->n_labels = rndn(4);
    s->labels = g->labels + nlab;
    for (uint32_t j = 0; j < s->n_labels; j++)
      g->labels[nlab++] = (pt_pprof_label){rndn(ns), rndn(ns), rndn(ns), rnd_i64()};
  }
  p->n_comments = rndn(4);
  p->comments = calloc(p->n_comments + 1, sizeof *p->comments);
  for (size_t i = 0; i < p->n_comments; i++) p->comments[i] = rndn(ns);
  p->drop_frames = rndn(ns);
  p->keep_frames = rndn(ns);
  p->time_nanos = rnd_i64();
  p->duration_nanos = rnd_i64();
  if (rndn(3)) p->period_type = (pt_pprof_value_type){rndn(ns), rndn(ns)};
  p->period = rnd_i64();
  p->default_sample_type = rndn(ns);
  p->doc_url = rndn(ns);
}

static void gen_free(gen *g) {
  free(g->p.strings);
  free(g->strbytes);
  free(g->p.sample_types);
  free(g->p.mappings);
  free(g->p.functions);
  free(g->p.locations);
  free(g->lines);
  free(g->p.samples);
  free(g->locrefs);
  free(g->values);
  free(g->labels);
  free(g->p.comments);
}

PT_TEST_T(common_pprof_write_round_trip_random, 60000) {
  rng = 0x243f6a8885a308d3ULL;
  for (int i = 0; i < 5000; i++) {
    gen g;
    gen_make(&g);
    char what[64];
    snprintf(what, sizeof what, "random profile %d", i);
    round_trip(&g.p, what);
    gen_free(&g);
  }
}

/* ---- refused ---- */

static void refused(const pt_pprof *p, const char *want) {
  uint8_t *b = (uint8_t *)"x";
  size_t n = 7;
  char err[256] = "";
  PT_ASSERT_INT_EQ(pt_pprof_write(p, &b, &n, err, sizeof err), -EINVAL);
  PT_ASSERT(b == NULL && n == 0);
  PT_ASSERT_MSG(strstr(err, want), "error '%s' does not say '%s'", err, want);
}

PT_TEST(common_pprof_write_refuses_bad_structs) {
  rng = 7;
  gen g;
  /* a profile with two of everything to break */
  for (;;) {
    gen_make(&g);
    if (g.p.n_mappings >= 2 && g.p.n_functions >= 2 && g.p.n_locations >= 2 &&
        g.p.n_samples >= 1 && g.p.samples[0].n_locations && g.p.samples[0].n_labels &&
        g.p.locations[0].n_lines && g.p.n_comments)
      break;
    gen_free(&g);
  }
  pt_pprof *p = &g.p;
  uint32_t ns = (uint32_t)p->n_strings;
  round_trip(p, "the base profile");
#define BREAK(field, bad, want)        \
  do {                                 \
    __typeof__(field) keep_ = (field); \
    (field) = (bad);                   \
    refused(p, want);                  \
    (field) = keep_;                   \
  } while (0)
  BREAK(p->sample_types[0].type, ns, "sample_type 0");
  BREAK(p->period_type.unit, ns + 5, "period_type");
  BREAK(p->doc_url, ns, "profile: string index");
  BREAK(p->comments[0], ns, "comment 0");
  BREAK(p->samples[0].locations[0], (uint32_t)p->n_locations, "sample 0: location index");
  BREAK(p->samples[0].labels[0].str, ns, "sample 0, label 0");
  BREAK(p->mappings[1].filename, ns, "mapping 1");
  BREAK(p->locations[1].mapping, (uint32_t)p->n_mappings, "location 1: mapping index");
  BREAK(p->locations[0].lines[0].function, (uint32_t)p->n_functions, "location 0, line 0");
  BREAK(p->functions[1].name, ns, "function 1");
  BREAK(p->functions[1].id, 0, "function 1: id 0");
  BREAK(p->mappings[1].id, p->mappings[0].id, "mapping id");
  BREAK(p->locations[1].id, p->locations[0].id, "location id");
  BREAK(p->n_sample_types, 0, "no sample_type");
  BREAK(p->n_strings, 0, "no string table");
  pt_pprof_str s0 = p->strings[0];
  p->strings[0] = (pt_pprof_str){"x", 1};
  refused(p, "string 0");
  p->strings[0] = s0;
  round_trip(p, "the base profile, restored");
#undef BREAK
  gen_free(&g);
}

/* ---- gzip ---- */

PT_TEST(common_gzip_round_trip) {
  rng = 99;
  size_t sizes[] = {0, 1, 100, 70000, 1 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    uint8_t *in = malloc(n + 1);
    for (size_t i = 0; i < n; i++) in[i] = (uint8_t)(i % 7 == 0 ? rnd() : i / 13);
    uint8_t *gz = NULL, *gz2 = NULL, *back = NULL;
    size_t gzn = 0, gzn2 = 0, backn = 0;
    PT_ASSERT_INT_EQ(pt_gzip(in, n, &gz, &gzn), 0);
    PT_ASSERT(pt_is_gzip(gz, gzn));
    PT_ASSERT_INT_EQ(pt_gunzip(gz, gzn, 0, &back, &backn), 0);
    PT_ASSERT_UINT_EQ(backn, n);
    PT_ASSERT(n == 0 || memcmp(back, in, n) == 0);
    PT_ASSERT_INT_EQ(pt_gzip(in, n, &gz2, &gzn2), 0);
    PT_ASSERT_MSG(gzn == gzn2 && memcmp(gz, gz2, gzn) == 0, "gzip is not deterministic");
    free(in);
    free(gz);
    free(gz2);
    free(back);
  }
}
