/* test_pprof_merge.c - merging profiles (src/common/pt_pprof_merge.c).
 *
 *  - Real snapshots: the merge of several equals, stack by stack and label
 *    by label, the sum of the inputs (compared through a canonical text of
 *    every sample: its frames by name, file and line, its mapping's file,
 *    its labels), and it is a valid profile (written, read back).
 *  - The same profile twice: every value doubled, no new entities.
 *  - Labels in another order are the same labels; other labels stay apart.
 *  - Window: earliest start, the span to the latest end; comments name
 *    each window and keep each input comment once.
 *  - Different sample or period types: -EINVAL naming both, and the merge
 *    is unchanged; values that overflow: -EOVERFLOW, and the merge is
 *    unusable after it.
 */
#include "common_test.h"
#include "common/pt_gunzip.h"
#include "common/pt_pprof_merge.h"
#include "common/pt_pprof_read.h"
#include "common/pt_pprof_write.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>

static pt_pprof *load(const char *path) {
  size_t n = 0;
  uint8_t *d = (uint8_t *)pt_read_file(path, &n);
  PT_ASSERT_MSG(d, "cannot read %s", path);
  uint8_t *raw = d;
  size_t rawn = n;
  if (pt_is_gzip(d, n)) PT_ASSERT_INT_EQ(pt_gunzip(d, n, 0, &raw, &rawn), 0);
  pt_pprof *p = NULL;
  char err[256] = "";
  PT_ASSERT_MSG(pt_pprof_read(raw, rawn, NULL, &p, err, sizeof err) == 0, "%s: %s", path, err);
  if (raw != d) free(raw);
  free(d);
  return p;
}

/* ---- canonical text: one line per distinct (stack, labels), values summed ---- */

typedef struct line {
  char *key;
  int64_t v[4];
} line;

static int line_cmp(const void *a, const void *b) {
  return strcmp(((const line *)a)->key, ((const line *)b)->key);
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char **)a, *(char **)b); }

static char *sample_key(const pt_pprof *p, const pt_pprof_sample *s) {
  char *k = NULL;
  size_t kn = 0;
  FILE *f = open_memstream(&k, &kn);
  for (uint32_t i = 0; i < s->n_locations; i++) {
    const pt_pprof_location *l = &p->locations[s->locations[i]];
    fprintf(f, "[%s@%" PRIx64 "%s", l->mapping == PT_PPROF_NONE ? "-" : pt_pprof_string(p, p->mappings[l->mapping].filename),
            l->address, l->is_folded ? " folded" : "");
    for (uint32_t j = 0; j < l->n_lines; j++) {
      const pt_pprof_function *fn = &p->functions[l->lines[j].function];
      fprintf(f, " %s/%s/%s:%" PRId64 ":%" PRId64 "+%" PRId64, pt_pprof_string(p, fn->name),
              pt_pprof_string(p, fn->system_name), pt_pprof_string(p, fn->filename),
              l->lines[j].line, l->lines[j].column, fn->start_line);
    }
    fputs("]", f);
  }
  char *labs[64];
  uint32_t nl = s->n_labels < 64 ? s->n_labels : 64;
  for (uint32_t i = 0; i < nl; i++) {
    const pt_pprof_label *l = &s->labels[i];
    PT_ASSERT(asprintf(&labs[i], "%s=%s|%" PRId64 "%s", pt_pprof_string(p, l->key),
                       pt_pprof_string(p, l->str), l->num, pt_pprof_string(p, l->num_unit)) > 0);
  }
  qsort(labs, nl, sizeof *labs, str_cmp);
  for (uint32_t i = 0; i < nl; i++) {
    fprintf(f, " {%s}", labs[i]);
    free(labs[i]);
  }
  fclose(f);
  return k;
}

/* Appends p's samples to *v (n, cap). */
static void add_lines(line **v, size_t *n, size_t *cap, const pt_pprof *p) {
  for (size_t i = 0; i < p->n_samples; i++) {
    if (*n == *cap) {
      *cap = *cap ? *cap * 2 : 64;
      *v = realloc(*v, *cap * sizeof **v);
      PT_ASSERT(*v);
    }
    line *l = &(*v)[(*n)++];
    memset(l, 0, sizeof *l);
    l->key = sample_key(p, &p->samples[i]);
    for (size_t k = 0; k < p->n_sample_types && k < 4; k++) l->v[k] = p->samples[i].values[k];
  }
}

/* Sorted, equal keys summed; returns the text. */
static char *canon(line *v, size_t n) {
  qsort(v, n, sizeof *v, line_cmp);
  char *t = NULL;
  size_t tn = 0;
  FILE *f = open_memstream(&t, &tn);
  for (size_t i = 0; i < n;) {
    int64_t s[4] = {0};
    size_t j = i;
    for (; j < n && strcmp(v[j].key, v[i].key) == 0; j++)
      for (int k = 0; k < 4; k++) s[k] += v[j].v[k];
    fprintf(f, "%s = %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n", v[i].key, s[0], s[1], s[2], s[3]);
    i = j;
  }
  fclose(f);
  for (size_t i = 0; i < n; i++) free(v[i].key);
  free(v);
  return t;
}

static const pt_pprof *result(pt_pprof_merge *m) {
  const pt_pprof *r = NULL;
  char err[256] = "";
  PT_ASSERT_MSG(pt_pprof_merge_result(m, &r, err, sizeof err) == 0, "result: %s", err);
  /* always a valid profile */
  uint8_t *b = NULL;
  size_t n = 0;
  PT_ASSERT_MSG(pt_pprof_write(r, &b, &n, err, sizeof err) == 0, "write: %s", err);
  pt_pprof *back = NULL;
  PT_ASSERT_MSG(pt_pprof_read(b, n, NULL, &back, err, sizeof err) == 0, "read back: %s", err);
  PT_ASSERT_UINT_EQ(back->n_samples, r->n_samples);
  pt_pprof_free(back);
  free(b);
  return r;
}

static int has_comment(const pt_pprof *p, const char *prefix) {
  int n = 0;
  for (size_t i = 0; i < p->n_comments; i++)
    n += strncmp(pt_pprof_string(p, p->comments[i]), prefix, strlen(prefix)) == 0;
  return n;
}

PT_TEST_T(common_pprof_merge_snapshots_sum, 60000) {
  const char *names[] = {"daemon-busy.pb", "daemon-inline.pb", "tui-idle.pb"};
  pt_pprof *in[3];
  pt_pprof_merge *m = NULL;
  PT_ASSERT_INT_EQ(pt_pprof_merge_new(&m), 0);
  line *v = NULL;
  size_t n = 0, cap = 0;
  for (int i = 0; i < 3; i++) {
    char rel[128];
    snprintf(rel, sizeof rel, "tests/common/fuzz_seeds/pprof_read/%s", names[i]);
    char *path = pt_source_path(rel);
    in[i] = load(path);
    free(path);
    char err[256] = "";
    PT_ASSERT_MSG(pt_pprof_merge_add(m, in[i], names[i], err, sizeof err) == 0, "%s", err);
    add_lines(&v, &n, &cap, in[i]);
  }
  char *want = canon(v, n);
  const pt_pprof *r = result(m);
  v = NULL;
  n = cap = 0;
  add_lines(&v, &n, &cap, r);
  char *got = canon(v, n);
  if (strcmp(want, got) != 0) fprintf(stderr, "--- want\n%s--- got\n%s", want, got);
  PT_ASSERT_MSG(strcmp(want, got) == 0, "the merge is not the sum of its inputs");
  /* one sample per distinct key */
  size_t lines = 0;
  for (char *c = got; *c; c++) lines += *c == '\n';
  PT_ASSERT_UINT_EQ(r->n_samples, lines);
  PT_ASSERT_INT_EQ(has_comment(r, "merged window "), 3);
  PT_ASSERT_INT_EQ(has_comment(r, "merged window 2 of 3: daemon-inline.pb, start "), 1);
  PT_ASSERT_INT_EQ(has_comment(r, "merged profile: 3 windows"), 1);
  /* every input comment once */
  for (int i = 0; i < 3; i++)
    for (size_t c = 0; c < in[i]->n_comments; c++) {
      const char *want_c = pt_pprof_string(in[i], in[i]->comments[c]);
      int seen = 0;
      for (size_t k = 0; k < r->n_comments; k++)
        seen += strcmp(pt_pprof_string(r, r->comments[k]), want_c) == 0;
      PT_ASSERT_MSG(seen == 1, "input comment seen %d times: %s", seen, want_c);
    }
  int64_t t0 = INT64_MAX, end = 0;
  for (int i = 0; i < 3; i++) {
    if (in[i]->time_nanos < t0) t0 = in[i]->time_nanos;
    if (in[i]->time_nanos + in[i]->duration_nanos > end) end = in[i]->time_nanos + in[i]->duration_nanos;
  }
  PT_ASSERT_INT_EQ(r->time_nanos, t0);
  PT_ASSERT_INT_EQ(r->duration_nanos, end - t0);
  PT_ASSERT_UINT_EQ(pt_pprof_merge_count(m), 3);
  /* the main binary (first mapping) stays first */
  PT_ASSERT(r->n_mappings >= 1 && in[0]->n_mappings >= 1);
  PT_ASSERT_STR_EQ(pt_pprof_string(r, r->mappings[0].filename),
                   pt_pprof_string(in[0], in[0]->mappings[0].filename));
  free(want);
  free(got);
  pt_pprof_merge_del(m);
  for (int i = 0; i < 3; i++) pt_pprof_free(in[i]);
}

PT_TEST(common_pprof_merge_same_twice_doubles) {
  char *path = pt_source_path("tests/common/fuzz_seeds/pprof_read/daemon-busy.pb");
  pt_pprof *p = load(path);
  free(path);
  pt_pprof_merge *m = NULL;
  PT_ASSERT_INT_EQ(pt_pprof_merge_new(&m), 0);
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, p, NULL, NULL, 0), 0);
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, p, NULL, NULL, 0), 0);
  const pt_pprof *r = result(m);
  PT_ASSERT(r->n_samples <= p->n_samples);
  PT_ASSERT(r->n_locations <= p->n_locations && r->n_functions <= p->n_functions &&
            r->n_mappings <= p->n_mappings);
  for (size_t k = 0; k < p->n_sample_types; k++) {
    int64_t a = 0, b = 0;
    for (size_t i = 0; i < p->n_samples; i++) a += p->samples[i].values[k];
    for (size_t i = 0; i < r->n_samples; i++) b += r->samples[i].values[k];
    PT_ASSERT_INT_EQ(b, 2 * a);
  }
  PT_ASSERT_INT_EQ(pt_pprof_sample_total(r), 2 * pt_pprof_sample_total(p));
  PT_ASSERT_INT_EQ(has_comment(r, "merged window 1 of 2: profile 1, "), 1);
  PT_ASSERT_INT_EQ(r->time_nanos, p->time_nanos);
  PT_ASSERT_INT_EQ(r->duration_nanos, p->duration_nanos);
  pt_pprof_merge_del(m);
  pt_pprof_free(p);
}

/* ---- hand-made profiles ---- */

/* One stack (main <- leaf) with the given labels; types "samples/count"
 * and t1/u1. */
typedef struct mini {
  pt_pprof p;
  pt_pprof_str strs[16];
  pt_pprof_value_type st[2];
  pt_pprof_sample s[1];
  uint32_t locs[2];
  int64_t vals[2];
  pt_pprof_label labs[3];
  pt_pprof_location loc[2];
  pt_pprof_line lines[2];
  pt_pprof_function fn[2];
  uint32_t comments[1];
} mini;

static void mini_make(mini *x, const char *t1, const char *period_unit, int64_t v, int64_t t_s,
                      int64_t d_s, int swap_labels) {
  memset(x, 0, sizeof *x);
  const char *s[] = {"", "samples", "count", t1, "nanoseconds", "leaf", "main", "thread_name",
                     "loop", "task_kind", "turn", "a shared comment", "cpu", period_unit};
  for (int i = 0; i < 14; i++) x->strs[i] = (pt_pprof_str){s[i], strlen(s[i])};
  pt_pprof *p = &x->p;
  p->strings = x->strs;
  p->n_strings = 14;
  x->st[0] = (pt_pprof_value_type){1, 2};
  x->st[1] = (pt_pprof_value_type){3, 4};
  p->sample_types = x->st;
  p->n_sample_types = 2;
  x->fn[0] = (pt_pprof_function){10, 5, 5, 0, 0};
  x->fn[1] = (pt_pprof_function){20, 6, 6, 0, 0};
  p->functions = x->fn;
  p->n_functions = 2;
  x->lines[0] = (pt_pprof_line){0, 3, 0};
  x->lines[1] = (pt_pprof_line){1, 9, 0};
  x->loc[0] = (pt_pprof_location){7, 0x1000, PT_PPROF_NONE, 1, &x->lines[0], false};
  x->loc[1] = (pt_pprof_location){8, 0x2000, PT_PPROF_NONE, 1, &x->lines[1], false};
  p->locations = x->loc;
  p->n_locations = 2;
  x->locs[0] = 0;
  x->locs[1] = 1;
  x->vals[0] = v;
  x->vals[1] = v <= INT64_MAX / 10 ? v * 10 : v;
  x->labs[swap_labels ? 1 : 0] = (pt_pprof_label){7, 8, 0, 0};
  x->labs[swap_labels ? 0 : 1] = (pt_pprof_label){9, 10, 0, 0};
  x->s[0] = (pt_pprof_sample){x->locs, 2, 2, x->vals, x->labs};
  p->samples = x->s;
  p->n_samples = 1;
  x->comments[0] = 11;
  p->comments = x->comments;
  p->n_comments = 1;
  p->time_nanos = t_s * 1000000000LL;
  p->duration_nanos = d_s * 1000000000LL;
  p->period_type = (pt_pprof_value_type){12, 13};
  p->period = 10101010;
}

PT_TEST(common_pprof_merge_labels_and_window) {
  mini a, b, c;
  mini_make(&a, "cpu", "nanoseconds", 3, 100, 10, 0);
  mini_make(&b, "cpu", "nanoseconds", 4, 130, 5, 1); /* same labels, other order */
  mini_make(&c, "cpu", "nanoseconds", 5, 120, 2, 0);
  c.labs[1].str = 7; /* task_kind=thread_name: another label set */
  pt_pprof_merge *m = NULL;
  PT_ASSERT_INT_EQ(pt_pprof_merge_new(&m), 0);
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &a.p, "a", NULL, 0), 0);
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &b.p, "b", NULL, 0), 0);
  const pt_pprof *r = result(m);
  PT_ASSERT_UINT_EQ(r->n_samples, 1);
  PT_ASSERT_INT_EQ(r->samples[0].values[0], 7);
  PT_ASSERT_INT_EQ(r->samples[0].values[1], 70);
  PT_ASSERT_UINT_EQ(r->samples[0].n_labels, 2);
  PT_ASSERT_UINT_EQ(r->n_functions, 2);
  PT_ASSERT_UINT_EQ(r->n_locations, 2);
  PT_ASSERT_INT_EQ(r->time_nanos, 100000000000LL);
  PT_ASSERT_INT_EQ(r->duration_nanos, 35000000000LL); /* 100 s .. 135 s */
  PT_ASSERT_INT_EQ(has_comment(r, "a shared comment"), 1);
  PT_ASSERT_INT_EQ(has_comment(r, "merged window 2 of 2: b, start 1970-01-01T00:02:10.000Z, "
                                  "length 5.000 s, 4 samples"), 1);
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &c.p, "c", NULL, 0), 0);
  r = result(m);
  PT_ASSERT_UINT_EQ(r->n_samples, 2);
  PT_ASSERT_INT_EQ(has_comment(r, "merged window "), 3);
  PT_ASSERT_INT_EQ(has_comment(r, "merged window 2 of 3: "), 1); /* no stale comment */
  PT_ASSERT_INT_EQ(r->duration_nanos, 35000000000LL);
  pt_pprof_merge_del(m);
}

PT_TEST(common_pprof_merge_refuses_other_types) {
  mini a, b, c;
  mini_make(&a, "cpu", "nanoseconds", 3, 100, 10, 0);
  mini_make(&b, "wall", "nanoseconds", 3, 100, 10, 0);
  mini_make(&c, "cpu", "count", 3, 100, 10, 0);
  pt_pprof_merge *m = NULL;
  PT_ASSERT_INT_EQ(pt_pprof_merge_new(&m), 0);
  char err[256] = "";
  const pt_pprof *r = NULL;
  PT_ASSERT_INT_EQ(pt_pprof_merge_result(m, &r, err, sizeof err), -EINVAL); /* nothing yet */
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &a.p, "a", NULL, 0), 0);
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &b.p, "b", err, sizeof err), -EINVAL);
  PT_ASSERT_STR_EQ(err, "different sample types: samples/count,wall/nanoseconds, not "
                        "samples/count,cpu/nanoseconds as in the first profile");
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &c.p, "c", err, sizeof err), -EINVAL);
  PT_ASSERT_STR_EQ(err, "different period types: cpu/count, not cpu/nanoseconds as in the first "
                        "profile");
  /* unchanged: still the first profile alone */
  r = result(m);
  PT_ASSERT_UINT_EQ(pt_pprof_merge_count(m), 1);
  PT_ASSERT_INT_EQ(r->samples[0].values[0], 3);
  pt_pprof_merge_del(m);
}

PT_TEST(common_pprof_merge_overflow) {
  mini a, b;
  mini_make(&a, "cpu", "nanoseconds", INT64_MAX - 1, 100, 10, 0);
  mini_make(&b, "cpu", "nanoseconds", 2, 100, 10, 0);
  pt_pprof_merge *m = NULL;
  PT_ASSERT_INT_EQ(pt_pprof_merge_new(&m), 0);
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &a.p, "a", NULL, 0), 0);
  char err[256] = "";
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &b.p, "b", err, sizeof err), -EOVERFLOW);
  PT_ASSERT(strstr(err, "INT64_MAX"));
  const pt_pprof *r = NULL;
  PT_ASSERT_INT_EQ(pt_pprof_merge_result(m, &r, err, sizeof err), -EOVERFLOW);
  PT_ASSERT_INT_EQ(pt_pprof_merge_add(m, &a.p, "a", err, sizeof err), -EOVERFLOW);
  pt_pprof_merge_del(m);
}
