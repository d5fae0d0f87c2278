/* test_pprof_read.c - the pprof reader (src/common/pt_pprof_read.c).
 *
 *  - Real snapshots of this project (tests/common/fuzz_seeds/pprof_read, the .pb files:
 *    daemon and TUI snapshots of the profiling build, decompressed) and
 *    profiles of tests/mkprofile.py with labels, units and inlined frames:
 *    what the reader returns, printed the way `go tool pprof -raw` prints a
 *    profile, equals what go tool pprof prints for the same file (every
 *    comment, sample value, stack, label, line, function name and file,
 *    mapping and flag; ids as the tool renumbers them).
 *  - Profiles damaged in one place each: -EINVAL with the place named.
 *  - The caps, and every truncation of a real snapshot.
 */
#include "common_test.h"
#include "common/pt_gunzip.h"
#include "common/pt_pprof_read.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>

/* ---- a growing text buffer ---- */

typedef struct tbuf {
  char *s;
  size_t n, cap;
} tbuf;

static void tb_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(tbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  PT_ASSERT(k >= 0);
  if (b->n + (size_t)k + 1 > b->cap) {
    b->cap = (b->n + (size_t)k + 1) * 2;
    b->s = realloc(b->s, b->cap);
    PT_ASSERT(b->s);
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

static const char *S(const pt_pprof *p, uint32_t i) { return pt_pprof_string(p, i); }

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One sample's labels as Go's profile.String() prints them: string labels
 * grouped by key ("key:[v1 v2]"), then numeric ones ("key:[n]" or, when a
 * key has units, "key:[n unit]"), each group sorted, a line each. */
static void go_labels(tbuf *b, const pt_pprof *p, const pt_pprof_sample *s) {
  for (int numeric = 0; numeric < 2; numeric++) {
    char *items[64];
    size_t ni = 0;
    for (uint32_t i = 0; i < s->n_labels; i++) {
      const pt_pprof_label *l = &s->labels[i];
      int is_str = l->str != 0, is_num = !is_str && (l->num != 0 || l->num_unit != 0);
      if (numeric ? !is_num : !is_str) continue;
      int first = 1;
      for (uint32_t j = 0; j < i; j++) /* the key was grouped already */
        if (!strcmp(S(p, s->labels[j].key), S(p, l->key)) &&
            (numeric ? (s->labels[j].str == 0 &&
                        (s->labels[j].num != 0 || s->labels[j].num_unit != 0))
                     : s->labels[j].str != 0))
          first = 0;
      if (!first) continue;
      int has_unit = 0;
      for (uint32_t j = i; j < s->n_labels; j++)
        if (!strcmp(S(p, s->labels[j].key), S(p, l->key)) && s->labels[j].str == 0 &&
            s->labels[j].num_unit != 0)
          has_unit = 1;
      tbuf it = {0};
      tb_printf(&it, "%s:[", S(p, l->key));
      int k = 0;
      for (uint32_t j = i; j < s->n_labels; j++) {
        const pt_pprof_label *m = &s->labels[j];
        if (strcmp(S(p, m->key), S(p, l->key))) continue;
        if (numeric ? !(m->str == 0 && (m->num != 0 || m->num_unit != 0)) : m->str == 0) continue;
        if (numeric)
          tb_printf(&it, has_unit ? "%s%" PRId64 " %s" : "%s%" PRId64 "%s", k++ ? " " : "", m->num,
                    has_unit ? S(p, m->num_unit) : "");
        else
          tb_printf(&it, "%s%s", k++ ? " " : "", S(p, m->str));
      }
      tb_printf(&it, "]");
      PT_ASSERT(ni < 64);
      items[ni++] = it.s;
    }
    if (!ni) continue;
    qsort(items, ni, sizeof *items, cmp_str);
    tb_printf(b, "\n                ");
    for (size_t i = 0; i < ni; i++) {
      tb_printf(b, "%s%s", i ? " " : "", items[i]);
      free(items[i]);
    }
  }
}

static int zero_sample(const pt_pprof *p, const pt_pprof_sample *s) {
  for (size_t v = 0; v < p->n_sample_types; v++)
    if (s->values[v]) return 0;
  return 1;
}

/* The profile as `go tool pprof -raw` prints it: Go's profile.String() of
 * the profile after profile.Merge of it alone (which the tool always does):
 * samples whose values are all 0 dropped; locations renumbered 1, 2, ... in
 * the order samples first use them, unused ones dropped; mappings likewise,
 * the first mapping of the file first. (Merge also joins identical
 * locations, mappings and samples, which our files do not have.) Time: and
 * Duration: lines are left out (Go formats those its own way). */
static char *go_raw(const pt_pprof *p) {
  uint32_t *newloc = calloc(p->n_locations + 1, sizeof *newloc);
  uint32_t *locorder = calloc(p->n_locations + 1, sizeof *locorder);
  uint32_t *newmap = calloc(p->n_mappings + 1, sizeof *newmap);
  uint32_t *maporder = calloc(p->n_mappings + 1, sizeof *maporder);
  PT_ASSERT(newloc && locorder && newmap && maporder);
  uint32_t nl = 0, nm = 0;
  if (p->n_mappings) {
    newmap[0] = ++nm;
    maporder[0] = 0;
  }
  for (size_t i = 0; i < p->n_samples; i++) {
    const pt_pprof_sample *s = &p->samples[i];
    if (zero_sample(p, s)) continue;
    for (uint32_t l = 0; l < s->n_locations; l++) {
      uint32_t li = s->locations[l];
      if (newloc[li]) continue;
      locorder[nl] = li;
      newloc[li] = ++nl;
      uint32_t mi = p->locations[li].mapping;
      if (mi != PT_PPROF_NONE && !newmap[mi]) {
        maporder[nm] = mi;
        newmap[mi] = ++nm;
      }
    }
  }
  tbuf b = {0};
  for (size_t i = 0; i < p->n_comments; i++) tb_printf(&b, "Comment: %s\n", S(p, p->comments[i]));
  tb_printf(&b, "PeriodType: %s %s\n", S(p, p->period_type.type), S(p, p->period_type.unit));
  tb_printf(&b, "Period: %" PRId64 "\n", p->period);
  tb_printf(&b, "Samples:\n");
  for (size_t i = 0; i < p->n_sample_types; i++)
    tb_printf(&b, "%s%s/%s%s", i ? " " : "", S(p, p->sample_types[i].type),
              S(p, p->sample_types[i].unit),
              !strcmp(S(p, p->sample_types[i].type), S(p, p->default_sample_type)) ? "[dflt]" : "");
  tb_printf(&b, "\n");
  for (size_t i = 0; i < p->n_samples; i++) {
    const pt_pprof_sample *s = &p->samples[i];
    if (zero_sample(p, s)) continue;
    for (size_t v = 0; v < p->n_sample_types; v++) tb_printf(&b, " %10" PRId64, s->values[v]);
    tb_printf(&b, ": ");
    for (uint32_t l = 0; l < s->n_locations; l++) tb_printf(&b, "%" PRIu32 " ", newloc[s->locations[l]]);
    go_labels(&b, p, s);
    tb_printf(&b, "\n");
  }
  tb_printf(&b, "Locations\n");
  for (uint32_t i = 0; i < nl; i++) {
    const pt_pprof_location *l = &p->locations[locorder[i]];
    tbuf head = {0};
    tb_printf(&head, "%6" PRIu32 ": 0x%" PRIx64 " ", i + 1, l->address);
    if (l->mapping != PT_PPROF_NONE) tb_printf(&head, "M=%" PRIu32 " ", newmap[l->mapping]);
    if (l->is_folded) tb_printf(&head, "[F] ");
    if (l->n_lines == 0) tb_printf(&b, "%s\n", head.s);
    for (uint32_t k = 0; k < l->n_lines; k++) {
      const pt_pprof_function *f = &p->functions[l->lines[k].function];
      tb_printf(&b, "%s%s %s:%" PRId64 " s=%" PRId64, k ? "             " : head.s, S(p, f->name),
                S(p, f->filename), l->lines[k].line, f->start_line);
      if (strcmp(S(p, f->name), S(p, f->system_name))) tb_printf(&b, "(%s)", S(p, f->system_name));
      tb_printf(&b, "\n");
    }
    free(head.s);
  }
  tb_printf(&b, "Mappings\n");
  for (uint32_t i = 0; i < nm; i++) {
    const pt_pprof_mapping *m = &p->mappings[maporder[i]];
    tb_printf(&b, "%" PRIu32 ": 0x%" PRIx64 "/0x%" PRIx64 "/0x%" PRIx64 " %s %s %s%s%s%s\n", i + 1,
              m->memory_start, m->memory_limit, m->file_offset, S(p, m->filename),
              S(p, m->build_id), m->has_functions ? "[FN]" : "", m->has_filenames ? "[FL]" : "",
              m->has_line_numbers ? "[LN]" : "", m->has_inline_frames ? "[IN]" : "");
  }
  free(newloc);
  free(locorder);
  free(newmap);
  free(maporder);
  return b.s;
}

/* go tool pprof -raw of file without its Time:/Duration: lines; NULL when
 * go is not installed. */
static char *go_pprof_raw(const char *file) {
  char *argv[] = {"go", "tool", "pprof", "-raw", "-symbolize=none", (char *)file, NULL};
  char *out = NULL;
  int st = pt_run(argv, &out, 120000);
  if (st == -1 || st == 127) {
    free(out);
    return NULL;
  }
  PT_ASSERT_MSG(st == 0, "go tool pprof -raw %s: %s", file, out ? out : "");
  tbuf b = {0};
  tb_printf(&b, "%s", "");
  for (char *line = out, *nl; line && *line; line = nl ? nl + 1 : NULL) {
    nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    if (!strncmp(line, "Time: ", 6) || !strncmp(line, "Duration: ", 10)) continue;
    tb_printf(&b, "%.*s\n", (int)n, line);
  }
  free(out);
  return b.s;
}

static pt_pprof *read_file(const char *path, int *rc, char *err, size_t errlen) {
  size_t len = 0;
  char *d = pt_read_file(path, &len);
  PT_ASSERT_MSG(d, "cannot read %s", path);
  uint8_t *raw = (uint8_t *)d;
  size_t rawlen = len;
  if (pt_is_gzip(raw, len)) {
    PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)d, len, 0, &raw, &rawlen), 0);
    free(d);
  }
  pt_pprof *p = NULL;
  *rc = pt_pprof_read(raw, rawlen, NULL, &p, err, errlen);
  free(raw);
  return p;
}

/* Reads path, prints it like go, and compares with go tool pprof -raw. */
static int same_as_go(const char *path) {
  char err[256] = "";
  int r;
  pt_pprof *p = read_file(path, &r, err, sizeof err);
  PT_ASSERT_MSG(r == 0, "%s: %d %s", path, r, err);
  char *ours = go_raw(p);
  char *theirs = go_pprof_raw(path);
  if (!theirs) {
    free(ours);
    pt_pprof_free(p);
    return 0;
  }
  if (strcmp(ours, theirs) != 0) {
    fprintf(stderr, "--- ours\n%s--- go tool pprof -raw\n%s", ours, theirs);
    PT_ASSERT_MSG(0, "%s: the reader and go tool pprof disagree", path);
  }
  free(ours);
  free(theirs);
  pt_pprof_free(p);
  return 1;
}

PT_TEST_T(common_pprof_read_agrees_with_go_pprof, 120000) {
  char *dir = pt_source_path("tests/common/fuzz_seeds/pprof_read");
  DIR *d = opendir(dir);
  PT_ASSERT(d);
  struct dirent *de;
  int n = 0, compared = 0;
  while ((de = readdir(d))) {
    /* the real snapshots (*.pb); the fuzz target's regression inputs
     * (regress-*) are no profile anything here writes */
    size_t nl = strlen(de->d_name);
    if (de->d_name[0] == '.' || nl < 3 || strcmp(de->d_name + nl - 3, ".pb") != 0) continue;
    char *f = ptt_path2(dir, de->d_name);
    compared += same_as_go(f);
    n++;
    free(f);
  }
  closedir(d);
  PT_ASSERT(n >= 3);

  /* Labels (string, numeric, with and without a unit), inlined frames. */
  char *tmp = pt_tmpdir("pprofrd");
  char *f = ptt_path2(tmp, "labels.pb.gz");
  ptt_mkprofile(f, "--label", "thread_name=worker", "--label", "task=parse",
                "--num-label", "thread_id=42", "--num-label", "bytes=4096:bytes", "--inline",
                "inlined_helper", "hot_spin=30", "parse_line=12", "main=1");
  compared += same_as_go(f);
  /* What the reader returns, checked without go too. */
  int r;
  char err[256];
  pt_pprof *p = read_file(f, &r, err, sizeof err);
  PT_ASSERT_INT_EQ(r, 0);
  PT_ASSERT_UINT_EQ(p->n_samples, 3);
  PT_ASSERT_UINT_EQ(p->n_sample_types, 2);
  PT_ASSERT_STR_EQ(S(p, p->sample_types[1].type), "cpu");
  PT_ASSERT_STR_EQ(S(p, p->period_type.unit), "nanoseconds");
  PT_ASSERT_INT_EQ(p->period, 10101010);
  PT_ASSERT_INT_EQ(p->duration_nanos, 10000000000LL);
  const pt_pprof_sample *s = &p->samples[0];
  PT_ASSERT_INT_EQ(s->values[0], 30);
  PT_ASSERT_INT_EQ(s->values[1], 30 * 10101010LL);
  PT_ASSERT_UINT_EQ(s->n_locations, 2);
  const pt_pprof_location *leaf = &p->locations[s->locations[0]];
  PT_ASSERT_UINT_EQ(leaf->n_lines, 2); /* inlined callee first */
  PT_ASSERT_STR_EQ(S(p, p->functions[leaf->lines[0].function].name), "inlined_helper");
  PT_ASSERT_STR_EQ(S(p, p->functions[leaf->lines[1].function].name), "hot_spin");
  PT_ASSERT_STR_EQ(S(p, p->mappings[leaf->mapping].filename), "/usr/bin/polytokend");
  PT_ASSERT_UINT_EQ(s->n_labels, 4);
  PT_ASSERT_STR_EQ(S(p, s->labels[0].key), "thread_name");
  PT_ASSERT_STR_EQ(S(p, s->labels[0].str), "worker");
  PT_ASSERT_STR_EQ(S(p, s->labels[3].key), "bytes");
  PT_ASSERT_INT_EQ(s->labels[3].num, 4096);
  PT_ASSERT_STR_EQ(S(p, s->labels[3].num_unit), "bytes");
  PT_ASSERT_INT_EQ(s->labels[2].num_unit, 0);
  PT_ASSERT(pt_pprof_memory(p) > sizeof *p);
  pt_pprof_free(p);
  free(f);
  pt_rm_rf(tmp);
  free(tmp);
  free(dir);
  if (compared == 0) PT_SKIP("go is not installed: read, but not compared with go tool pprof");
}

/* ---- profiles damaged in one place ---- */

typedef struct pbw {
  uint8_t b[2048];
  size_t n;
} pbw;

static void w_varint(pbw *w, uint64_t v) {
  do {
    PT_ASSERT(w->n < sizeof w->b);
    w->b[w->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
}
static void w_num(pbw *w, uint32_t field, uint64_t v) {
  w_varint(w, (uint64_t)field << 3);
  w_varint(w, v);
}
static void w_bytes(pbw *w, uint32_t field, const void *d, size_t n) {
  w_varint(w, (uint64_t)field << 3 | 2);
  w_varint(w, n);
  PT_ASSERT(w->n + n <= sizeof w->b);
  memcpy(w->b + w->n, d, n);
  w->n += n;
}
static void w_msg(pbw *w, uint32_t field, const pbw *m) { w_bytes(w, field, m->b, m->n); }
static void w_str(pbw *w, const char *s) { w_bytes(w, 6, s, strlen(s)); }

/* The knobs of a small profile; the defaults make it valid. */
typedef struct spec {
  const char *str0;        /* string_table[0] */
  int sample_types;        /* how many sample_type (1) */
  int values;              /* values in the sample (1) */
  uint64_t sample_loc;     /* the sample's location id (1) */
  uint64_t loc_id, loc2_id; /* ids of the two locations (1, 2) */
  uint64_t loc_map;        /* location 1's mapping id (1) */
  uint64_t map_id;         /* the mapping's id (1) */
  uint64_t line_fn;        /* location 1's line's function id (1) */
  int line_without_fn;
  uint64_t fn_id, fn2_id;  /* ids of the two functions (1, 2) */
  int64_t fn_name;         /* function 1's name index (4) */
  int time_twice;
  int sample_as_varint;    /* field 2 with wire type 0 */
  int group;               /* a field of wire type 3 */
  int cut;                 /* bytes cut off the end */
} spec;

static const spec VALID = {"", 1, 1, 1, 1, 2, 1, 1, 1, 0, 1, 2, 4, 0, 0, 0, 0};

static pbw build(spec s) {
  pbw p = {0}, m;
  for (int i = 0; i < s.sample_types; i++) {
    m = (pbw){0};
    w_num(&m, 1, 1);
    w_num(&m, 2, 2);
    w_msg(&p, 1, &m);
  }
  m = (pbw){0};
  w_num(&m, 1, s.sample_loc);
  for (int i = 0; i < s.values; i++) w_num(&m, 2, 5);
  if (s.sample_as_varint) w_num(&p, 2, 7);
  else w_msg(&p, 2, &m);
  m = (pbw){0};
  w_num(&m, 1, s.map_id);
  w_num(&m, 5, 3);
  w_msg(&p, 3, &m);
  m = (pbw){0};
  pbw ln = {0};
  if (!s.line_without_fn) w_num(&ln, 1, s.line_fn);
  w_num(&ln, 2, 7);
  w_num(&m, 1, s.loc_id);
  w_num(&m, 2, s.loc_map);
  w_num(&m, 3, 0x10);
  w_msg(&m, 4, &ln);
  w_msg(&p, 4, &m);
  m = (pbw){0};
  w_num(&m, 1, s.loc2_id);
  w_msg(&p, 4, &m);
  m = (pbw){0};
  w_num(&m, 1, s.fn_id);
  w_num(&m, 2, (uint64_t)s.fn_name);
  w_msg(&p, 5, &m);
  m = (pbw){0};
  w_num(&m, 1, s.fn2_id);
  w_msg(&p, 5, &m);
  w_str(&p, s.str0);
  w_str(&p, "samples");
  w_str(&p, "count");
  w_str(&p, "/bin/x");
  w_str(&p, "main");
  w_num(&p, 9, 1000);
  if (s.time_twice) w_num(&p, 9, 2000);
  if (s.group) w_varint(&p, 20 << 3 | 3);
  p.n -= (size_t)s.cut;
  return p;
}

static void expect_bad(spec s, const char *want) {
  pbw b = build(s);
  pt_pprof *p = (pt_pprof *)1;
  char err[256] = "";
  int r = pt_pprof_read(b.b, b.n, NULL, &p, err, sizeof err);
  PT_ASSERT_MSG(r == -EINVAL, "want -EINVAL (%s), got %d (%s)", want, r, err);
  PT_ASSERT(p == NULL);
  PT_ASSERT_MSG(strstr(err, want), "error \"%s\" does not say \"%s\"", err, want);
}

PT_TEST(common_pprof_read_refuses_damage) {
  pbw ok = build(VALID);
  pt_pprof *p = NULL;
  char err[256] = "";
  PT_ASSERT_INT_EQ(pt_pprof_read(ok.b, ok.n, NULL, &p, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(p->n_locations, 2);
  PT_ASSERT_UINT_EQ(p->locations[0].mapping, 0);
  PT_ASSERT_UINT_EQ(p->locations[1].mapping, PT_PPROF_NONE);
  PT_ASSERT_STR_EQ(S(p, p->functions[p->locations[0].lines[0].function].name), "main");
  PT_ASSERT_UINT_EQ(p->samples[0].locations[0], 0);
  PT_ASSERT_INT_EQ(p->time_nanos, 1000);
  pt_pprof_free(p);

  spec s;
  PT_ASSERT_INT_EQ(pt_pprof_read(ok.b, 0, NULL, &p, err, sizeof err), -EINVAL);
  PT_ASSERT(strstr(err, "no string table"));
  s = VALID; s.str0 = "x"; expect_bad(s, "string_table[0]");
  s = VALID; s.sample_types = 0; s.values = 0; expect_bad(s, "no sample_type");
  s = VALID; s.values = 2; expect_bad(s, "sample 0: 2 values for 1 sample types");
  s = VALID; s.sample_loc = 9; expect_bad(s, "sample 0: location id 9 does not exist");
  s = VALID; s.sample_loc = 0; expect_bad(s, "sample 0: location id 0 does not exist");
  s = VALID; s.loc_id = 0; expect_bad(s, "location 0: id 0");
  s = VALID; s.loc2_id = 1; expect_bad(s, "location id 1 appears twice");
  s = VALID; s.map_id = 0; expect_bad(s, "mapping 0: id 0");
  s = VALID; s.loc_map = 5; expect_bad(s, "location 0: mapping id 5 does not exist");
  s = VALID; s.line_fn = 3; expect_bad(s, "location 0: function id 3 does not exist");
  s = VALID; s.line_without_fn = 1; expect_bad(s, "location 0: a line without a function");
  s = VALID; s.fn_id = 0; expect_bad(s, "function 0: id 0");
  s = VALID; s.fn2_id = 1; expect_bad(s, "function id 1 appears twice");
  s = VALID; s.fn_name = 5; expect_bad(s, "function 0: string index 5 out of range (5 strings)");
  s = VALID; s.fn_name = -1; expect_bad(s, "function 0: string index -1 out of range");
  s = VALID; s.time_twice = 1; expect_bad(s, "time_nanos appears twice");
  s = VALID; s.sample_as_varint = 1; expect_bad(s, "sample 0: field 2 has wire type 0, not 2");
  s = VALID; s.group = 1; expect_bad(s, "damaged protobuf");
  s = VALID; s.cut = 1; expect_bad(s, "damaged protobuf"); /* the last varint cut */
}

/* ---- caps ---- */

PT_TEST(common_pprof_read_caps) {
  pbw ok = build(VALID);
  pt_pprof *p = NULL;
  char err[256];
  pt_pprof_limits lim = {ok.n - 1, 0};
  PT_ASSERT_INT_EQ(pt_pprof_read(ok.b, ok.n, &lim, &p, err, sizeof err), -EFBIG);
  PT_ASSERT(p == NULL);
  lim = (pt_pprof_limits){ok.n, 0};
  PT_ASSERT_INT_EQ(pt_pprof_read(ok.b, ok.n, &lim, &p, err, sizeof err), 0);
  size_t need = pt_pprof_memory(p);
  pt_pprof_free(p);
  /* the block plus its temporary id table must fit */
  lim = (pt_pprof_limits){0, need};
  PT_ASSERT_INT_EQ(pt_pprof_read(ok.b, ok.n, &lim, &p, err, sizeof err), -EFBIG);
  PT_ASSERT(strstr(err, "more than"));
  lim = (pt_pprof_limits){0, need + 1024};
  PT_ASSERT_INT_EQ(pt_pprof_read(ok.b, ok.n, &lim, &p, err, sizeof err), 0);
  pt_pprof_free(p);
  pt_pprof_free(NULL);
}

/* Every prefix of a real snapshot: read or refused, never a crash (ASan and
 * UBSan watch in the asan variant); a prefix cut inside a message never
 * reads. */
PT_TEST(common_pprof_read_every_truncation) {
  char *f = pt_source_path("tests/common/fuzz_seeds/pprof_read/daemon-busy.pb");
  size_t len = 0;
  char *d = pt_read_file(f, &len);
  PT_ASSERT(d);
  int ok = 0;
  for (size_t cut = 0; cut <= len; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees any overread */
    memcpy(copy, d, cut);
    pt_pprof *p = NULL;
    int r = pt_pprof_read(copy, cut, NULL, &p, NULL, 0);
    PT_ASSERT_MSG(r == 0 || r == -EINVAL, "cut %zu: %d", cut, r);
    if (r == 0) ok++;
    pt_pprof_free(p);
    free(copy);
  }
  PT_ASSERT(ok >= 1); /* the whole file at least */
  free(d);
  free(f);
}
