/*
 * pt_pprof_summary.c - sample count, sample types and top functions of a
 * profile (see pt_pprof_summary.h).
 *
 * flat counts the function of a sample's leaf frame: the first Line (the
 * innermost inlined callee) of its first location; cum counts every
 * function on any Line of any location of the sample once, as
 * `go tool pprof -top` does.
 */
#include "common/pt_pprof_summary.h"

#include "common/pt_alloc.h"
#include "common/pt_gunzip.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fn_acc {
  uint32_t fn;    /* index into p->functions */
  int64_t flat, cum;
  size_t seen;    /* 1 + the last sample that counted it in cum */
} fn_acc;

static int cmp_top(const void *a, const void *b, void *arg) {
  const pt_pprof *p = arg;
  const fn_acc *x = a, *y = b;
  if (x->flat != y->flat) return x->flat > y->flat ? -1 : 1;
  if (x->cum != y->cum) return x->cum > y->cum ? -1 : 1;
  uint64_t ix = p->functions[x->fn].id, iy = p->functions[y->fn].id;
  return ix < iy ? -1 : ix > iy;
}


/* A name for the screen: "?" for none, control characters as '?'. */
static char *screen_name(const pt_pprof *p, uint32_t s) {
  const pt_pprof_str *st = &p->strings[s];
  if (st->len == 0) s = 0;
  const char *src = s ? st->s : "?";
  size_t n = s ? st->len : 1;
  char *out = pt_malloc(n + 1);
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++)
    out[i] = ((unsigned char)src[i] < 0x20) ? '?' : src[i];
  out[n] = '\0';
  return out;
}

static int str_is(const pt_pprof *p, uint32_t s, const char *want) {
  size_t n = strlen(want);
  return p->strings[s].len == n && memcmp(p->strings[s].s, want, n) == 0;
}

void pt_pprof_summary_clear(pt_pprof_summary *s) {
  for (size_t i = 0; i < s->n_top; i++) free(s->top[i].name);
  memset(s, 0, sizeof *s);
}

int pt_pprof_summarize_profile(const pt_pprof *p, size_t top_n, pt_pprof_summary *out) {
  memset(out, 0, sizeof *out);
  if (top_n > PT_PPROF_TOP_MAX) top_n = PT_PPROF_TOP_MAX;
  out->duration_ns = p->duration_nanos;
  out->time_ns = p->time_nanos;
  out->period = p->period;
  out->n_stacks = p->n_samples;
  out->n_functions = p->n_functions;
  out->n_locations = p->n_locations;
  size_t count_idx = 0, used = 0;
  for (size_t i = 0; i < p->n_sample_types; i++)
    if (str_is(p, p->sample_types[i].type, "samples")) {
      count_idx = i;
      break;
    }
  /* Comma-separated sample type names, for the review screen. */
  for (size_t i = 0; i < p->n_sample_types && used + 1 < sizeof out->sample_types; i++) {
    const pt_pprof_str *t = &p->strings[p->sample_types[i].type];
    if (i) out->sample_types[used++] = ',';
    for (size_t j = 0; j < t->len && used + 1 < sizeof out->sample_types; j++)
      out->sample_types[used++] = (unsigned char)t->s[j] < 0x20 ? '?' : t->s[j];
  }
  out->sample_types[used] = '\0';

  fn_acc *acc = pt_calloc(p->n_functions ? p->n_functions : 1, sizeof *acc);
  if (!acc) return -ENOMEM;
  for (size_t i = 0; i < p->n_functions; i++) acc[i].fn = (uint32_t)i;
  int r = 0;
  for (size_t si = 0; si < p->n_samples && r == 0; si++) {
    const pt_pprof_sample *s = &p->samples[si];
    int64_t n = s->values[count_idx];
    /* Counts come from the file: one that overflows a sum is damage. */
    if (__builtin_add_overflow(out->samples, n, &out->samples)) r = -EINVAL;
    for (uint32_t li = 0; li < s->n_locations && r == 0; li++) {
      const pt_pprof_location *l = &p->locations[s->locations[li]];
      for (uint32_t k = 0; k < l->n_lines && r == 0; k++) {
        fn_acc *a = &acc[l->lines[k].function];
        if (li == 0 && k == 0 && __builtin_add_overflow(a->flat, n, &a->flat)) r = -EINVAL;
        if (a->seen != si + 1) { /* recursion counts once */
          if (__builtin_add_overflow(a->cum, n, &a->cum)) r = -EINVAL;
          a->seen = si + 1;
        }
      }
    }
  }
  if (r == 0 && p->n_functions) qsort_r(acc, p->n_functions, sizeof *acc, cmp_top, (void *)p);
  for (size_t i = 0; r == 0 && i < p->n_functions && out->n_top < top_n; i++) {
    if (acc[i].flat == 0 && acc[i].cum == 0) continue;
    pt_pprof_func *t = &out->top[out->n_top];
    t->name = screen_name(p, p->functions[acc[i].fn].name);
    if (!t->name) {
      r = -ENOMEM;
      break;
    }
    t->flat = acc[i].flat;
    t->cum = acc[i].cum;
    out->n_top++;
  }
  free(acc);
  if (r < 0) pt_pprof_summary_clear(out);
  return r;
}

int pt_pprof_summarize(const uint8_t *data, size_t len, size_t top_n, pt_pprof_summary *out) {
  memset(out, 0, sizeof *out);
  uint8_t *raw = NULL;
  size_t rawlen = len;
  const uint8_t *d = data;
  if (pt_is_gzip(data, len)) {
    int r = pt_gunzip(data, len, 0, &raw, &rawlen);
    if (r < 0) return r;
    d = raw;
  }
  pt_pprof *p = NULL;
  int r = pt_pprof_read(d, rawlen, NULL, &p, NULL, 0);
  free(raw);
  if (r == 0) r = pt_pprof_summarize_profile(p, top_n, out);
  pt_pprof_free(p);
  return r;
}
