/*
 * fuzz_pprof_read.c - libFuzzer target for the pprof reader
 * (src/common/pt_pprof_read.c) and the summary built on it
 * (pt_pprof_summary.c), from seeds that are real snapshots of this project
 * (tests/common/fuzz_seeds/pprof_read: daemon and TUI snapshots of the
 * profiling build, decompressed, and a tests/mkprofile.py profile with
 * labels, units and inlined frames; and regress-* inputs that once failed
 * here, e.g. a sample without locations, whose merge formed NULL + 0).
 *
 * For every input: pt_pprof_read returns 0 or one of its documented errors
 * (with a message), never crashes or reads past the input (an exact-size
 * heap copy: ASan sees it); on success every invariant of pt_pprof_read.h
 * holds (string 0 is "", strings NUL-terminated, every index in range, one
 * value per sample type, non-zero ids), the decoded size is within the cap,
 * and a second read gives the same memory size; the summary of a profile
 * read keeps its bounds. The last input byte picks a small memory cap now
 * and then, so the cap path is fuzzed too. Every profile read is also
 * written with pt_pprof_write and read back: the result must equal it
 * field for field (pprof_equal.h); and merged with itself
 * (pt_pprof_merge): the merge must be a profile the writer and the reader
 * accept, with twice the samples (or -EOVERFLOW). Built and run by
 * tests/common/pprof_read_fuzz_test.sh.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pt_pprof_merge.h"
#include "common/pt_pprof_read.h"
#include "common/pt_pprof_summary.h"
#include "common/pt_pprof_write.h"
#include "pprof_equal.h"
#include "tests/fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const pt_pprof *p) {
  size_t ns = p->n_strings;
  CHECK(ns >= 1 && p->strings[0].len == 0);
  for (size_t i = 0; i < ns; i++) CHECK(p->strings[i].s && p->strings[i].s[p->strings[i].len] == 0);
  CHECK(p->n_sample_types >= 1);
  for (size_t i = 0; i < p->n_sample_types; i++)
    CHECK(p->sample_types[i].type < ns && p->sample_types[i].unit < ns);
  CHECK(p->period_type.type < ns && p->period_type.unit < ns);
  CHECK(p->drop_frames < ns && p->keep_frames < ns && p->default_sample_type < ns &&
        p->doc_url < ns);
  for (size_t i = 0; i < p->n_comments; i++) CHECK(p->comments[i] < ns);
  for (size_t i = 0; i < p->n_mappings; i++) {
    const pt_pprof_mapping *m = &p->mappings[i];
    CHECK(m->id != 0 && m->filename < ns && m->build_id < ns);
  }
  for (size_t i = 0; i < p->n_functions; i++) {
    const pt_pprof_function *f = &p->functions[i];
    CHECK(f->id != 0 && f->name < ns && f->system_name < ns && f->filename < ns);
  }
  for (size_t i = 0; i < p->n_locations; i++) {
    const pt_pprof_location *l = &p->locations[i];
    CHECK(l->id != 0);
    CHECK(l->mapping == PT_PPROF_NONE || l->mapping < p->n_mappings);
    CHECK((l->n_lines == 0) == (l->lines == NULL));
    for (uint32_t k = 0; k < l->n_lines; k++) CHECK(l->lines[k].function < p->n_functions);
  }
  for (size_t i = 0; i < p->n_samples; i++) {
    const pt_pprof_sample *s = &p->samples[i];
    CHECK(s->values != NULL);
    volatile int64_t sum = 0;
    for (size_t v = 0; v < p->n_sample_types; v++) sum += s->values[v] & 1;
    (void)sum;
    CHECK((s->n_locations == 0) == (s->locations == NULL));
    for (uint32_t l = 0; l < s->n_locations; l++) CHECK(s->locations[l] < p->n_locations);
    CHECK((s->n_labels == 0) == (s->labels == NULL));
    for (uint32_t l = 0; l < s->n_labels; l++)
      CHECK(s->labels[l].key < ns && s->labels[l].str < ns && s->labels[l].num_unit < ns);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *in = malloc(size ? size : 1); /* exact size: ASan sees any overread */
  if (!in) return 0;
  memcpy(in, data, size);
  pt_pprof_limits lim = {0, 0};
  if (size && in[size - 1] % 7 == 0) lim.max_memory = 4096 + (size_t)in[0] * 64;
  pt_pprof *p = (pt_pprof *)&lim; /* must be reset to NULL on error */
  char err[256] = "";
  int r = pt_pprof_read(in, size, &lim, &p, err, sizeof err);
  if (r == 0) {
    check(p);
    CHECK(pt_pprof_memory(p) <= (lim.max_memory ? lim.max_memory : PT_PPROF_MAX_MEMORY));
    pt_pprof *q = NULL;
    CHECK(pt_pprof_read(in, size, &lim, &q, NULL, 0) == 0);
    CHECK(pt_pprof_memory(q) == pt_pprof_memory(p) && q->n_samples == p->n_samples);
    pt_pprof_free(q);
    pt_pprof_summary s;
    int sr = pt_pprof_summarize_profile(p, PT_PPROF_TOP_MAX, &s);
    CHECK(sr == 0 || sr == -EINVAL || sr == -ENOMEM);
    if (sr == 0) {
      CHECK(s.n_top <= PT_PPROF_TOP_MAX && s.n_stacks == p->n_samples);
      for (size_t i = 0; i < s.n_top; i++)
        for (const char *c = s.top[i].name; *c; c++) CHECK((unsigned char)*c >= 0x20);
    }
    pt_pprof_summary_clear(&s);
    /* write -> read: the same profile */
    uint8_t *w = NULL;
    size_t wn = 0;
    int wr = pt_pprof_write(p, &w, &wn, err, sizeof err);
    CHECK(wr == 0 || wr == -EFBIG || wr == -ENOMEM);
    if (wr == 0) {
      pt_pprof *back = NULL;
      CHECK(pt_pprof_read(w, wn, NULL, &back, err, sizeof err) == 0);
      char why[256] = "";
      if (!ptt_pprof_equal(p, back, why, sizeof why)) {
        fprintf(stderr, "round trip: %s\n", why);
        abort();
      }
      pt_pprof_free(back);
      free(w);
    }
    /* merged with itself: a valid profile with twice the samples */
    pt_pprof_merge *m = NULL;
    int mr = pt_pprof_merge_new(&m);
    if (mr == 0) mr = pt_pprof_merge_add(m, p, "a", NULL, 0);
    if (mr == 0) mr = pt_pprof_merge_add(m, p, "b", NULL, 0);
    const pt_pprof *mp = NULL;
    if (mr == 0) mr = pt_pprof_merge_result(m, &mp, NULL, 0);
    CHECK(mr == 0 || mr == -EOVERFLOW || mr == -ENOMEM || mr == -EFBIG);
    if (mr == 0) {
      CHECK(mp->n_samples <= p->n_samples);
      int64_t t = pt_pprof_sample_total(p);
      if (t < INT64_MAX / 2 && t > INT64_MIN / 2) CHECK(pt_pprof_sample_total(mp) == 2 * t);
      wr = pt_pprof_write(mp, &w, &wn, err, sizeof err);
      CHECK(wr == 0 || wr == -EFBIG || wr == -ENOMEM);
      if (wr == 0) {
        pt_pprof *back = NULL;
        CHECK(pt_pprof_read(w, wn, NULL, &back, err, sizeof err) == 0);
        CHECK(back->n_samples == mp->n_samples);
        pt_pprof_free(back);
        free(w);
      }
    }
    pt_pprof_merge_del(m);
    pt_pprof_free(p);
  } else {
    CHECK(r == -EINVAL || r == -EFBIG || r == -ENOMEM);
    CHECK(p == NULL && err[0] != '\0');
  }
  free(in);
  return 0;
}
