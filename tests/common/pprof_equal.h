/*
 * pprof_equal.h - field-by-field equality of two pt_pprof structs, for the
 * writer's round-trip tests (test_pprof_write.c) and the reader's fuzz
 * target (fuzz_pprof_read.c: every profile it reads is written and read
 * again). Indexes are compared as indexes (the writer keeps every table's
 * order), strings by their bytes, ids as ids. Header-only, no allocation.
 */
#ifndef PPROF_EQUAL_H
#define PPROF_EQUAL_H

#include <stdio.h>
#include <string.h>

#include "common/pt_pprof_read.h"

#define PPE_FAIL(...)                     \
  do {                                    \
    if (why && whylen) snprintf(why, whylen, __VA_ARGS__); \
    return 0;                             \
  } while (0)

/* 1 when a and b hold the same profile; else 0 with why saying where. */
static inline int ptt_pprof_equal(const pt_pprof *a, const pt_pprof *b, char *why, size_t whylen) {
  if (a->n_strings != b->n_strings) PPE_FAIL("n_strings %zu != %zu", a->n_strings, b->n_strings);
  for (size_t i = 0; i < a->n_strings; i++)
    if (a->strings[i].len != b->strings[i].len ||
        memcmp(a->strings[i].s, b->strings[i].s, a->strings[i].len) != 0)
      PPE_FAIL("string %zu differs", i);
  if (a->n_sample_types != b->n_sample_types) PPE_FAIL("n_sample_types");
  for (size_t i = 0; i < a->n_sample_types; i++)
    if (a->sample_types[i].type != b->sample_types[i].type ||
        a->sample_types[i].unit != b->sample_types[i].unit)
      PPE_FAIL("sample_type %zu", i);
  if (a->n_samples != b->n_samples) PPE_FAIL("n_samples %zu != %zu", a->n_samples, b->n_samples);
  for (size_t i = 0; i < a->n_samples; i++) {
    const pt_pprof_sample *x = &a->samples[i], *y = &b->samples[i];
    if (x->n_locations != y->n_locations || x->n_labels != y->n_labels)
      PPE_FAIL("sample %zu: counts", i);
    for (uint32_t j = 0; j < x->n_locations; j++)
      if (x->locations[j] != y->locations[j]) PPE_FAIL("sample %zu: location %u", i, j);
    for (size_t j = 0; j < a->n_sample_types; j++)
      if (x->values[j] != y->values[j]) PPE_FAIL("sample %zu: value %zu", i, j);
    for (uint32_t j = 0; j < x->n_labels; j++)
      if (x->labels[j].key != y->labels[j].key || x->labels[j].str != y->labels[j].str ||
          x->labels[j].num != y->labels[j].num || x->labels[j].num_unit != y->labels[j].num_unit)
        PPE_FAIL("sample %zu: label %u", i, j);
  }
  if (a->n_mappings != b->n_mappings) PPE_FAIL("n_mappings");
  for (size_t i = 0; i < a->n_mappings; i++) {
    const pt_pprof_mapping *x = &a->mappings[i], *y = &b->mappings[i];
    if (x->id != y->id || x->memory_start != y->memory_start ||
        x->memory_limit != y->memory_limit || x->file_offset != y->file_offset ||
        x->filename != y->filename || x->build_id != y->build_id ||
        x->has_functions != y->has_functions || x->has_filenames != y->has_filenames ||
        x->has_line_numbers != y->has_line_numbers || x->has_inline_frames != y->has_inline_frames)
      PPE_FAIL("mapping %zu", i);
  }
  if (a->n_locations != b->n_locations) PPE_FAIL("n_locations");
  for (size_t i = 0; i < a->n_locations; i++) {
    const pt_pprof_location *x = &a->locations[i], *y = &b->locations[i];
    if (x->id != y->id || x->address != y->address || x->mapping != y->mapping ||
        x->n_lines != y->n_lines || x->is_folded != y->is_folded)
      PPE_FAIL("location %zu", i);
    for (uint32_t j = 0; j < x->n_lines; j++)
      if (x->lines[j].function != y->lines[j].function || x->lines[j].line != y->lines[j].line ||
          x->lines[j].column != y->lines[j].column)
        PPE_FAIL("location %zu: line %u", i, j);
  }
  if (a->n_functions != b->n_functions) PPE_FAIL("n_functions");
  for (size_t i = 0; i < a->n_functions; i++) {
    const pt_pprof_function *x = &a->functions[i], *y = &b->functions[i];
    if (x->id != y->id || x->name != y->name || x->system_name != y->system_name ||
        x->filename != y->filename || x->start_line != y->start_line)
      PPE_FAIL("function %zu", i);
  }
  if (a->n_comments != b->n_comments) PPE_FAIL("n_comments");
  for (size_t i = 0; i < a->n_comments; i++)
    if (a->comments[i] != b->comments[i]) PPE_FAIL("comment %zu", i);
  if (a->drop_frames != b->drop_frames || a->keep_frames != b->keep_frames ||
      a->time_nanos != b->time_nanos || a->duration_nanos != b->duration_nanos ||
      a->period_type.type != b->period_type.type || a->period_type.unit != b->period_type.unit ||
      a->period != b->period || a->default_sample_type != b->default_sample_type ||
      a->doc_url != b->doc_url)
    PPE_FAIL("profile scalars");
  return 1;
}

#undef PPE_FAIL
#endif
