/* test_flame.c - the flame graph page's data and generator
 * (src/common/pt_flame_model.c, pt_flame_json.c, pt_flame.c):
 *
 *  - a small profile made by hand (inlined frames, unsymbolized code with
 *    and without a mapping, a pseudo-frame, string and numeric labels,
 *    duplicate labels, an all-zero sample, two samples on one stack): the
 *    exact frames, call tree, label sets, rows and totals;
 *  - real snapshots of this project (tests/common/fuzz_seeds/pprof_read):
 *    every node's total is its self plus its children's, the root's is the
 *    profile's; each function's outermost nodes sum to its cumulative
 *    value computed straight from the samples (inlined frames counted);
 *    each label value's rows sum to that label's samples;
 *  - the page: its JSON (read back with jansson) holds the model exactly;
 *    hostile names ("</script>", U+2028, invalid UTF-8, NUL) cannot end the
 *    script element and come back as themselves (invalid bytes as U+FFFD);
 *    the title is HTML-escaped; no external resource is referenced;
 *  - options: sample type by name and type/unit, the default, a wrong
 *    name; a base (type matching, differential rows); the caps;
 *  - every allocation failing in turn (tests/common/alloc_fail.h).
 */
#include "alloc_fail.h"
#include "common_test.h"
#include "common/pt_flame.h"
#include "common/pt_flame_json.h"
#include "common/pt_flame_model.h"
#include "common/pt_gunzip.h"
#include "common/pt_pprof_read.h"

#include <errno.h>
#include <jansson.h>

/* ---- a profile made by hand ---- */

enum {
  S_EMPTY, S_SAMPLES, S_COUNT, S_CPU, S_NS, S_MAIN, S_A_C, S_WORK, S_B_C, S_LEAF, S_C_C, S_INL,
  S_THREAD, S_T1, S_T2, S_TASK, S_LIBX, S_LOST, S_EXE, S_UNIT, S_EVIL, S_N
};
static pt_pprof_str h_strings[S_N];
static const char *h_text[S_N] = {
    "", "samples", "count", "cpu", "nanoseconds", "main", "/src/a.c", "work", "/src/b.c", "leaf",
    "/src/c.c", "inl", "thread_name", "t1", "t2", "task", "/lib/libx.so.1", "[lost: kernel mode]",
    "/usr/bin/x", "requests", "evil"};

static pt_pprof_value_type h_types[2] = {{S_SAMPLES, S_COUNT}, {S_CPU, S_NS}};
static pt_pprof_function h_funcs[] = {
    {1, S_MAIN, S_MAIN, S_A_C, 1},  {2, S_WORK, S_WORK, S_B_C, 1}, {3, S_LEAF, S_LEAF, S_C_C, 1},
    {4, S_INL, S_INL, S_C_C, 1},    {5, S_LOST, S_LOST, 0, 0},
};
static pt_pprof_mapping h_maps[] = {
    {1, 0x400000, 0x500000, 0, S_EXE, 0, true, true, true, true},
    {2, 0x7f0000000000, 0x7f0000100000, 0, S_LIBX, 0, false, false, false, false},
};
static pt_pprof_line h_l1[] = {{0, 10, 0}};          /* main:10 */
static pt_pprof_line h_l2[] = {{1, 20, 0}};          /* work:20 */
static pt_pprof_line h_l3[] = {{3, 5, 0}, {2, 30, 0}}; /* inl:5 inlined into leaf:30 */
static pt_pprof_line h_l5[] = {{4, 0, 0}};           /* [lost: kernel mode] */
enum { L1, L2, L3, L4, L5, L6 };
static pt_pprof_location h_locs[] = {
    {1, 0x401000, 0, 1, h_l1, false},
    {2, 0x402000, 0, 1, h_l2, false},
    {3, 0x403000, 0, 2, h_l3, false},
    {4, 0x7f0000001234, 1, 0, NULL, false},           /* in libx, no symbols */
    {5, 0, PT_PPROF_NONE, 1, h_l5, false},
    {6, 0xabc, PT_PPROF_NONE, 0, NULL, false},         /* nothing known */
};
static uint32_t h_st_leaf[] = {L3, L2, L1}, h_st_work[] = {L2, L1}, h_st_lib[] = {L4, L1},
                h_st_lost[] = {L5}, h_st_addr[] = {L6, L2, L1};
static int64_t h_v1[] = {2, 20}, h_v2[] = {3, 30}, h_v3[] = {1, 10}, h_v4[] = {4, 40},
               h_v5[] = {5, 50}, h_v0[] = {0, 0}, h_v7[] = {1, 10}, h_v8[] = {1, 10};
static pt_pprof_label h_lab_t1[] = {{S_THREAD, S_T1, 0, 0}};
static pt_pprof_label h_lab_t2[] = {{S_TASK, 0, 0, 7}, {S_THREAD, S_T2, 0, 0}};
static pt_pprof_label h_lab_t1x2[] = {{S_THREAD, S_T1, 0, 0}, {S_THREAD, S_T1, 0, 0},
                                      {S_EVIL, 0, 0, 0} /* empty: dropped */};
static pt_pprof_label h_lab_num_unit[] = {{S_TASK, 0, S_UNIT, 3}};
static pt_pprof_sample h_samples[] = {
    {h_st_leaf, 3, 1, h_v1, h_lab_t1},
    {h_st_leaf, 3, 2, h_v2, h_lab_t2},
    {h_st_work, 2, 1, h_v3, h_lab_t1},
    {h_st_lib, 2, 0, h_v4, NULL},
    {h_st_lost, 1, 1, h_v5, h_lab_num_unit},
    {h_st_leaf, 3, 1, h_v0, h_lab_t1},   /* all zero: left out */
    {h_st_addr, 3, 3, h_v7, h_lab_t1x2}, /* t1 twice: one pair */
    {h_st_leaf, 3, 1, h_v8, h_lab_t1},   /* joins the first row */
};
static uint32_t h_comments[] = {S_MAIN};

static pt_pprof hand(void) {
  for (int i = 0; i < S_N; i++) h_strings[i] = (pt_pprof_str){h_text[i], strlen(h_text[i])};
  pt_pprof p = {0};
  p.sample_types = h_types;
  p.n_sample_types = 2;
  p.samples = h_samples;
  p.n_samples = sizeof h_samples / sizeof *h_samples;
  p.mappings = h_maps;
  p.n_mappings = 2;
  p.locations = h_locs;
  p.n_locations = sizeof h_locs / sizeof *h_locs;
  p.functions = h_funcs;
  p.n_functions = sizeof h_funcs / sizeof *h_funcs;
  p.strings = h_strings;
  p.n_strings = S_N;
  p.comments = h_comments;
  p.n_comments = 1;
  p.time_nanos = 1700000000000000000;
  p.duration_nanos = 10000000000;
  p.period_type = (pt_pprof_value_type){S_CPU, S_NS};
  p.period = 10101010;
  return p;
}

/* ---- model helpers ---- */

static const char *fname(const pt_flame_model *m, uint32_t node) {
  uint32_t f = m->nodes[node].frame;
  return f == PT_FLAME_NO_FRAME ? "(root)" : pt_flame_str(m, m->frames[f].name);
}

/* The node at the path "a/b/c" of frame names from the root, or -1. */
static int64_t node_at(const pt_flame_model *m, const char *path) {
  uint32_t cur = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *save = NULL, *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
    int64_t found = -1;
    for (uint32_t i = cur + 1; i < m->n_nodes; i++)
      if (m->nodes[i].parent == cur && !strcmp(fname(m, i), tok)) found = i;
    if (found < 0) return -1;
    cur = (uint32_t)found;
  }
  return cur;
}

/* self and total of every node for sample type t of profile `which`;
 * checks preorder (parent < child, depth = parent's + 1) on the way. */
static void node_sums(const pt_flame_model *m, int which, size_t t, int64_t *self, int64_t *tot) {
  memset(self, 0, m->n_nodes * sizeof *self);
  const pt_flame_rows *r = &m->rows[which];
  for (size_t i = 0; i < r->n; i++) self[r->node[i]] += r->values[i * m->n_types + t];
  memcpy(tot, self, m->n_nodes * sizeof *tot);
  for (size_t v = m->n_nodes; v-- > 1;) {
    PT_ASSERT(m->nodes[v].parent < v);
    PT_ASSERT_UINT_EQ(m->nodes[v].depth, m->nodes[m->nodes[v].parent].depth + 1);
    tot[m->nodes[v].parent] += tot[v];
  }
}

static int cmp_cstr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the value of rows at node n with label set "k=v,k=v" ("" = empty) */
static int64_t row_value(const pt_flame_model *m, int which, int64_t n, const char *labels,
                         size_t t) {
  int64_t sum = 0;
  const pt_flame_rows *r = &m->rows[which];
  for (size_t i = 0; i < r->n; i++) {
    if (r->node[i] != (uint64_t)n) continue;
    char *items[16], buf[256] = "";
    size_t ni = 0, k = 0;
    for (uint32_t j = m->lset_off[r->labelset[i]]; j < m->lset_off[r->labelset[i] + 1]; j++) {
      PT_ASSERT(ni < 16);
      PT_ASSERT(asprintf(&items[ni++], "%s=%s", pt_flame_str(m, m->lset_pairs[2 * j]),
                         pt_flame_str(m, m->lset_pairs[2 * j + 1])) > 0);
    }
    qsort(items, ni, sizeof *items, cmp_cstr); /* by name, whatever the stored order */
    for (size_t j = 0; j < ni; j++) {
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", j ? "," : "", items[j]);
      free(items[j]);
    }
    if (!strcmp(buf, labels)) sum += r->values[i * m->n_types + t];
  }
  return sum;
}

PT_TEST(common_flame_model_hand) {
  pt_pprof p = hand();
  pt_flame_model *m = NULL;
  char err[256] = "";
  PT_ASSERT_INT_EQ(pt_flame_model_build(&p, NULL, 0, &m, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(m->n_types, 2);
  PT_ASSERT(!m->has_base && !m->base_type);
  PT_ASSERT_INT_EQ(m->totals[0][0], 17);
  PT_ASSERT_INT_EQ(m->totals[0][1], 170);
  PT_ASSERT_UINT_EQ(m->n_samples[0], 7);
  /* frames: main, work, leaf, inl (inlined), [libx.so.1] (no symbols,
   * file = its object), [lost: kernel mode], 0xabc */
  PT_ASSERT_UINT_EQ(m->n_frames, 7);
  int seen = 0;
  for (size_t f = 0; f < m->n_frames; f++) {
    const char *n = pt_flame_str(m, m->frames[f].name), *file = pt_flame_str(m, m->frames[f].file);
    int k = m->frames[f].kind;
    if (!strcmp(n, "inl")) { PT_ASSERT(k == PT_FLAME_INLINE && !strcmp(file, "/src/c.c")); seen |= 1; }
    if (!strcmp(n, "leaf")) { PT_ASSERT(k == PT_FLAME_FUNC && !strcmp(file, "/src/c.c")); seen |= 2; }
    if (!strcmp(n, "[libx.so.1]")) { PT_ASSERT(k == PT_FLAME_NOSYM && !strcmp(file, "/lib/libx.so.1")); seen |= 4; }
    if (!strcmp(n, "0xabc")) { PT_ASSERT(k == PT_FLAME_NOSYM && !*file); seen |= 8; }
    if (!strcmp(n, "[lost: kernel mode]")) { PT_ASSERT(k == PT_FLAME_FUNC); seen |= 16; }
  }
  PT_ASSERT_INT_EQ(seen, 31);
  /* the tree: root, main, work, leaf, inl, 0xabc, [libx.so.1], [lost] */
  PT_ASSERT_UINT_EQ(m->n_nodes, 8);
  int64_t inl = node_at(m, "main/work/leaf/inl"), work = node_at(m, "main/work"),
          lib = node_at(m, "main/[libx.so.1]"), lost = node_at(m, "[lost: kernel mode]"),
          addr = node_at(m, "main/work/0xabc"), leaf = node_at(m, "main/work/leaf");
  PT_ASSERT(inl > 0 && work > 0 && lib > 0 && lost > 0 && addr > 0 && leaf > 0);
  PT_ASSERT_INT_EQ(m->nodes[inl].line, 5);
  PT_ASSERT_INT_EQ(m->nodes[leaf].line, 30);
  PT_ASSERT_INT_EQ(m->nodes[work].line, 20);
  PT_ASSERT_INT_EQ(m->nodes[lib].line, 0);
  /* label sets: {}, {thread_name=t1}, {task=7, thread_name=t2}, {task=3 requests} */
  PT_ASSERT_UINT_EQ(m->n_lsets, 4);
  PT_ASSERT_UINT_EQ(m->rows[0].n, 6);
  PT_ASSERT_INT_EQ(row_value(m, 0, inl, "thread_name=t1", 0), 3);
  PT_ASSERT_INT_EQ(row_value(m, 0, inl, "task=7,thread_name=t2", 1), 30);
  PT_ASSERT_INT_EQ(row_value(m, 0, work, "thread_name=t1", 0), 1);
  PT_ASSERT_INT_EQ(row_value(m, 0, lib, "", 1), 40);
  PT_ASSERT_INT_EQ(row_value(m, 0, lost, "task=3 requests", 0), 5);
  PT_ASSERT_INT_EQ(row_value(m, 0, addr, "thread_name=t1", 0), 1);
  int64_t self[8], tot[8];
  node_sums(m, 0, 0, self, tot);
  PT_ASSERT_INT_EQ(tot[0], 17);
  PT_ASSERT_INT_EQ(tot[node_at(m, "main")], 12);
  PT_ASSERT_INT_EQ(tot[work], 8);
  PT_ASSERT_INT_EQ(self[work], 1);
  PT_ASSERT_INT_EQ(tot[leaf], 6);
  PT_ASSERT_INT_EQ(self[leaf], 0);
  PT_ASSERT_INT_EQ(self[inl], 6);
  pt_flame_model_free(m);
}

PT_TEST(common_flame_model_base) {
  pt_pprof p = hand(), b = hand();
  /* the base: only cpu (index 0 there), and one sample less */
  static pt_pprof_value_type bt[1] = {{S_CPU, S_NS}};
  static int64_t bv[8][1] = {{20}, {30}, {10}, {40}, {50}, {0}, {10}, {0}};
  static pt_pprof_sample bs[8];
  memcpy(bs, h_samples, sizeof bs);
  for (int i = 0; i < 8; i++) bs[i].values = bv[i];
  b.sample_types = bt;
  b.n_sample_types = 1;
  b.samples = bs;
  pt_flame_model *m = NULL;
  PT_ASSERT_INT_EQ(pt_flame_model_build(&p, &b, 0, &m, NULL, 0), 0);
  PT_ASSERT(m->has_base);
  PT_ASSERT_INT_EQ(m->base_type[0], -1); /* samples: not in the base */
  PT_ASSERT_INT_EQ(m->base_type[1], 0);
  PT_ASSERT_INT_EQ(m->totals[1][0], 0);
  PT_ASSERT_INT_EQ(m->totals[1][1], 160);
  PT_ASSERT_UINT_EQ(m->n_nodes, 8); /* the same stacks: no new node */
  int64_t inl = node_at(m, "main/work/leaf/inl");
  PT_ASSERT_INT_EQ(row_value(m, 1, inl, "thread_name=t1", 1), 20);
  PT_ASSERT_INT_EQ(row_value(m, 0, inl, "thread_name=t1", 1), 30);
  pt_flame_model_free(m);
}

/* ---- real snapshots ---- */

static pt_pprof *load(const char *rel) {
  char *path = pt_source_path(rel);
  size_t n = 0;
  uint8_t *d = (uint8_t *)pt_read_file(path, &n);
  PT_ASSERT_MSG(d, "cannot read %s", path);
  free(path);
  if (pt_is_gzip(d, n)) {
    uint8_t *raw;
    size_t rn;
    PT_ASSERT_INT_EQ(pt_gunzip(d, n, 0, &raw, &rn), 0);
    free(d);
    d = raw;
    n = rn;
  }
  pt_pprof *p = NULL;
  char err[256] = "";
  int r = pt_pprof_read(d, n, NULL, &p, err, sizeof err);
  PT_ASSERT_MSG(r == 0, "%s: %s", rel, err);
  free(d);
  return p;
}

/* The name a frame of function index fi gets (as the model names it). */
static const char *func_name(const pt_pprof *p, uint32_t fi) {
  const pt_pprof_function *f = &p->functions[fi];
  const char *n = pt_pprof_string(p, f->name);
  return *n ? n : *pt_pprof_string(p, f->system_name) ? pt_pprof_string(p, f->system_name) : "??";
}

static void check_real(const char *rel, int want_inline, int want_labels) {
  pt_pprof *p = load(rel);
  pt_flame_model *m = NULL;
  char err[256] = "";
  PT_ASSERT_INT_EQ(pt_flame_model_build(p, NULL, 0, &m, err, sizeof err), 0);
  size_t T = p->n_sample_types;
  int64_t *self = calloc(m->n_nodes, sizeof *self), *tot = calloc(m->n_nodes, sizeof *tot);
  PT_ASSERT(self && tot);
  int n_inline = 0;
  for (size_t f = 0; f < m->n_frames; f++) n_inline += m->frames[f].kind == PT_FLAME_INLINE;
  PT_ASSERT_MSG(!want_inline || n_inline > 0, "%s: no inlined frame", rel);
  for (size_t t = 0; t < T; t++) {
    node_sums(m, 0, t, self, tot);
    int64_t want = 0;
    for (size_t s = 0; s < p->n_samples; s++) want += p->samples[s].values[t];
    PT_ASSERT_INT_EQ(tot[0], want);
    PT_ASSERT_INT_EQ(m->totals[0][t], want);
    /* every function: its outermost nodes' totals = the samples with it
     * on their stack, counted once per sample, straight from the file */
    for (size_t fi = 0; fi < p->n_functions; fi++) {
      const char *fn = func_name(p, (uint32_t)fi);
      int64_t direct = 0;
      for (size_t s = 0; s < p->n_samples; s++) {
        const pt_pprof_sample *sm = &p->samples[s];
        int on = 0;
        for (uint32_t j = 0; j < sm->n_locations && !on; j++) {
          const pt_pprof_location *loc = &p->locations[sm->locations[j]];
          for (uint32_t k = 0; k < loc->n_lines; k++)
            if (!strcmp(func_name(p, loc->lines[k].function), fn)) on = 1;
        }
        if (on) direct += sm->values[t];
      }
      int64_t sum = 0;
      for (uint32_t v = 1; v < m->n_nodes; v++) {
        if (strcmp(fname(m, v), fn)) continue;
        int outer = 1;
        for (uint32_t a = m->nodes[v].parent; a; a = m->nodes[a].parent)
          if (!strcmp(fname(m, a), fn)) outer = 0;
        if (outer) sum += tot[v];
      }
      PT_ASSERT_MSG(sum == direct, "%s: %s type %zu: tree %" PRId64 ", samples %" PRId64, rel, fn,
                    t, sum, direct);
    }
  }
  /* labels: each (key, value)'s rows = its samples */
  int n_labels = 0;
  for (size_t s = 0; s < p->n_samples; s++)
    for (uint32_t l = 0; l < p->samples[s].n_labels; l++) {
      const pt_pprof_label *lb = &p->samples[s].labels[l];
      if (!lb->str) continue;
      n_labels++;
      const char *k = pt_pprof_string(p, lb->key), *v = pt_pprof_string(p, lb->str);
      int64_t direct = 0, rows = 0;
      for (size_t s2 = 0; s2 < p->n_samples; s2++)
        for (uint32_t l2 = 0; l2 < p->samples[s2].n_labels; l2++)
          if (!strcmp(pt_pprof_string(p, p->samples[s2].labels[l2].key), k) &&
              !strcmp(pt_pprof_string(p, p->samples[s2].labels[l2].str), v)) {
            direct += p->samples[s2].values[T - 1];
            break;
          }
      for (size_t i = 0; i < m->rows[0].n; i++) {
        uint32_t ls = m->rows[0].labelset[i];
        for (uint32_t j = m->lset_off[ls]; j < m->lset_off[ls + 1]; j++)
          if (!strcmp(pt_flame_str(m, m->lset_pairs[2 * j]), k) &&
              !strcmp(pt_flame_str(m, m->lset_pairs[2 * j + 1]), v))
            rows += m->rows[0].values[i * T + T - 1];
      }
      PT_ASSERT_MSG(rows == direct, "%s: label %s=%s: rows %" PRId64 ", samples %" PRId64, rel, k,
                    v, rows, direct);
    }
  PT_ASSERT_MSG(!want_labels || n_labels > 0, "%s: no string label", rel);
  free(self);
  free(tot);
  pt_flame_model_free(m);
  pt_pprof_free(p);
}

PT_TEST(common_flame_model_real) {
  check_real("tests/common/fuzz_seeds/pprof_read/daemon-busy.pb", 0, 1);
  check_real("tests/common/fuzz_seeds/pprof_read/daemon-inline.pb", 1, 1);
  check_real("tests/common/fuzz_seeds/pprof_read/tui-idle.pb", 0, 0);
}

/* ---- the page ---- */

/* The JSON of the page (between the data element's tags), parsed. */
static json_t *page_json(const char *html, size_t len) {
  PT_ASSERT_UINT_EQ(strlen(html), len);
  const char *open = "<script type=\"application/json\" id=\"pt-data\">";
  const char *a = strstr(html, open);
  PT_ASSERT(a);
  a += strlen(open);
  const char *e = strstr(a, "</script>");
  PT_ASSERT(e);
  /* nothing in the data can end the element: the first "</script>" after
   * it is its own end, and the rest is the page's script */
  PT_ASSERT(!memchr(a, '<', (size_t)(e - a)));
  json_error_t je;
  json_t *j = json_loadb(a, (size_t)(e - a), JSON_ALLOW_NUL, &je);
  PT_ASSERT_MSG(j, "page JSON: %s at %d", je.text, je.position);
  return j;
}

PT_TEST(common_flame_page_json) {
  pt_pprof p = hand();
  pt_flame_model *m = NULL;
  PT_ASSERT_INT_EQ(pt_flame_model_build(&p, NULL, 0, &m, NULL, 0), 0);
  char *html = NULL, err[256] = "";
  size_t len = 0;
  PT_ASSERT_INT_EQ(pt_flame_html(&p, NULL, &html, &len, err, sizeof err), 0);
  json_t *j = page_json(html, len);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(j, "v")), 1);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(j, "title")), "Profile");
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(j, "default_type")), 1); /* the last */
  PT_ASSERT(json_is_null(json_object_get(j, "base")) && json_is_null(json_object_get(j, "base_rows")));
  json_t *prof = json_object_get(j, "profile");
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(prof, "time_nanos")), 1700000000000000000);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(prof, "duration_nanos")), 10000000000);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(prof, "period")), 10101010);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(prof, "n_samples")), 7);
  PT_ASSERT_STR_EQ(json_string_value(json_array_get(json_object_get(prof, "comments"), 0)), "main");
  PT_ASSERT_STR_EQ(json_string_value(json_array_get(json_array_get(json_object_get(prof, "sample_types"), 1), 0)), "cpu");
  /* the model, element for element */
  json_t *strs = json_object_get(j, "strings");
  PT_ASSERT_UINT_EQ(json_array_size(strs), m->n_strings);
  for (size_t i = 0; i < m->n_strings; i++)
    PT_ASSERT_STR_EQ(json_string_value(json_array_get(strs, i)), pt_flame_str(m, (uint32_t)i));
  json_t *fr = json_object_get(j, "frames");
  PT_ASSERT_UINT_EQ(json_array_size(json_object_get(fr, "name")), m->n_frames);
  for (size_t i = 0; i < m->n_frames; i++) {
    PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(fr, "name"), i)), m->frames[i].name);
    PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(fr, "file"), i)), m->frames[i].file);
    PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(fr, "kind"), i)), m->frames[i].kind);
  }
  json_t *nd = json_object_get(j, "nodes");
  PT_ASSERT_UINT_EQ(json_array_size(json_object_get(nd, "depth")), m->n_nodes);
  for (size_t i = 0; i < m->n_nodes; i++) {
    PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(nd, "depth"), i)), m->nodes[i].depth);
    PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(nd, "frame"), i)),
                     i ? (int64_t)m->nodes[i].frame : -1);
    PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(nd, "line"), i)), m->nodes[i].line);
  }
  json_t *ls = json_object_get(j, "labelsets");
  PT_ASSERT_UINT_EQ(json_array_size(ls), m->n_lsets);
  PT_ASSERT_UINT_EQ(json_array_size(json_array_get(ls, 0)), 0);
  for (size_t i = 0; i < m->n_lsets; i++)
    for (uint32_t k = m->lset_off[i]; k < m->lset_off[i + 1]; k++)
      PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_array_get(ls, i), 2 * (k - m->lset_off[i]))),
                       m->lset_pairs[2 * k]);
  json_t *rows = json_object_get(j, "rows");
  PT_ASSERT_UINT_EQ(json_array_size(json_object_get(rows, "node")), m->rows[0].n);
  for (size_t i = 0; i < m->rows[0].n; i++) {
    PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(rows, "node"), i)), m->rows[0].node[i]);
    PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(rows, "labelset"), i)), m->rows[0].labelset[i]);
    for (size_t t = 0; t < 2; t++)
      PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_array_get(json_object_get(rows, "values"), t), i)),
                       m->rows[0].values[i * 2 + t]);
  }
  PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(j, "totals"), 0)), 17);
  PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(j, "totals"), 1)), 170);
  /* self-contained: no reference to anything outside the page */
  PT_ASSERT(!strstr(html, "http:") && !strstr(html, "https:") && !strstr(html, "src=") &&
            !strstr(html, "@import") && !strstr(html, "url("));
  PT_ASSERT(strstr(html, "default-src 'none'"));
  PT_ASSERT(!strstr(html, "@CSS@") && !strstr(html, "@JS@") && !strstr(html, "@DATA@"));
  json_decref(j);
  free(html);
  pt_flame_model_free(m);
}

PT_TEST(common_flame_page_escaping) {
  pt_pprof p = hand();
  /* a function name that tries to end the script, with U+2028, U+2029,
   * an invalid byte, an overlong '/', a surrogate and a NUL */
  static const char evil[] = "</script><script>alert(1)</script><!-- \xe2\x80\xa8\xe2\x80\xa9 "
                             "\xff \xc0\xaf \xed\xa0\x80 \x01&\"'\\ \xc3\xa9\0x";
  h_strings[S_LEAF] = (pt_pprof_str){evil, sizeof evil - 1};
  pt_flame_opts o;
  pt_flame_opts_init(&o);
  o.title = "a <b> & \"c\" </title><script>";
  char *html = NULL;
  size_t len = 0;
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, NULL, 0), 0);
  PT_ASSERT(strstr(html, "<title>a &lt;b&gt; &amp; &quot;c&quot; &lt;/title&gt;&lt;script&gt;</title>"));
  /* the only "</script" are the ends of the page's two script elements */
  int n = 0;
  for (const char *s = html; (s = strstr(s, "</script")); s++) n++;
  PT_ASSERT_INT_EQ(n, 2);
  PT_ASSERT(!strstr(html, "\xe2\x80\xa8") && !strstr(html, "\xe2\x80\xa9"));
  json_t *j = page_json(html, len);
  json_t *strs = json_object_get(j, "strings");
  const char *back = NULL;
  size_t backlen = 0;
  for (size_t i = 0; i < json_array_size(strs); i++)
    if (!strncmp(json_string_value(json_array_get(strs, i)), "</script>", 9)) {
      back = json_string_value(json_array_get(strs, i));
      backlen = json_string_length(json_array_get(strs, i));
    }
  PT_ASSERT(back);
  static const char want[] = "</script><script>alert(1)</script><!-- \xe2\x80\xa8\xe2\x80\xa9 "
                             "\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                             "\x01&\"'\\ \xc3\xa9\0x";
  PT_ASSERT_UINT_EQ(backlen, sizeof want - 1);
  PT_ASSERT(!memcmp(back, want, backlen));
  json_decref(j);
  free(html);
}

PT_TEST(common_flame_page_options) {
  pt_pprof p = hand();
  char *html = NULL, err[256] = "";
  size_t len = 0;
  pt_flame_opts o;
  pt_flame_opts_init(&o);
  struct { const char *name; int want; } cases[] = {
      {"samples", 0}, {"cpu", 1}, {"cpu/nanoseconds", 1}, {"samples/count", 0}};
  for (size_t i = 0; i < 4; i++) {
    o.sample_type = cases[i].name;
    PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), 0);
    json_t *j = page_json(html, len);
    PT_ASSERT_INT_EQ(json_integer_value(json_object_get(j, "default_type")), cases[i].want);
    json_decref(j);
    free(html);
  }
  o.sample_type = "cpu/seconds";
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), -EINVAL);
  PT_ASSERT(!html && !len);
  PT_ASSERT_MSG(strstr(err, "'cpu/seconds'") && strstr(err, "samples/count, cpu/nanoseconds"), "%s", err);
  /* default_sample_type names the first type */
  o.sample_type = NULL;
  p.default_sample_type = S_SAMPLES;
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), 0);
  json_t *j = page_json(html, len);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(j, "default_type")), 0);
  json_decref(j);
  free(html);
  p.default_sample_type = 0;

  /* a base: its own title, rows, the normalize flag */
  pt_pprof b = hand();
  o.base = &b;
  o.base_title = "before";
  o.diff_normalize = 1;
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), 0);
  j = page_json(html, len);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(j, "base_title")), "before");
  PT_ASSERT(json_is_true(json_object_get(j, "diff_normalize")));
  PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(j, "base_type"), 1)), 1);
  PT_ASSERT_INT_EQ(json_integer_value(json_array_get(json_object_get(j, "base_totals"), 1)), 170);
  PT_ASSERT_UINT_EQ(json_array_size(json_object_get(json_object_get(j, "base_rows"), "node")), 6);
  json_decref(j);
  free(html);
  /* a base without a sample type in common */
  static pt_pprof_value_type other[2] = {{S_SAMPLES, S_NS}, {S_CPU, S_COUNT}};
  b.sample_types = other;
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), -EINVAL);
  PT_ASSERT_MSG(strstr(err, "shares no sample type"), "%s", err);
  PT_ASSERT(!html);
  o.base = NULL;

  /* the caps */
  o.max_nodes = 7; /* the tree has 8 */
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), -EFBIG);
  PT_ASSERT_MSG(strstr(err, "over 7 nodes"), "%s", err);
  o.max_nodes = 8;
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), 0);
  size_t full = len;
  free(html);
  o.max_output = full - 1;
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), -EFBIG);
  PT_ASSERT(!html && !len);
  PT_ASSERT_MSG(strstr(err, "max_output"), "%s", err);
  o.max_output = full;
  PT_ASSERT_INT_EQ(pt_flame_html(&p, &o, &html, &len, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(len, full);
  free(html);
}

/* ---- allocation failures ---- */

typedef struct flame_ctx {
  pt_pprof *cur, *base;
} flame_ctx;

static int op_flame(void *ctx) {
  flame_ctx *c = ctx;
  pt_flame_opts o;
  pt_flame_opts_init(&o);
  o.base = c->base;
  char *html = NULL, err[256] = "";
  size_t len = 0;
  int r = pt_flame_html(c->cur, &o, &html, &len, err, sizeof err);
  if (r == 0 && (!html || len < 1000)) r = -EPROTO;
  if (r == -ENOMEM && !strstr(err, "out of memory")) r = -EPROTO; /* the error says what */
  free(html);
  return r;
}

PT_TEST(common_flame_alloc_fail) {
  PTT_NEED_FAULT_INJECTION();
  flame_ctx c = {load("tests/common/fuzz_seeds/pprof_read/daemon-inline.pb"), NULL};
  unsigned long n = ptt_alloc_fail_each("flame page", op_flame, &c, 0);
  PT_ASSERT(n > 10);
  c.base = load("tests/common/fuzz_seeds/pprof_read/daemon-busy.pb");
  ptt_alloc_fail_each("flame page with a base", op_flame, &c, 0);
  pt_pprof_free(c.cur);
  pt_pprof_free(c.base);
}
