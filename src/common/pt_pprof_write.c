/*
 * pt_pprof_write.c - the sans-I/O pprof encoder (contract: pt_pprof_write.h;
 * field numbers: proto/profile.proto).
 *
 * DESIGN
 *  - Check, measure, write: the whole struct is checked first (every index
 *    in range, ids non-zero and unique), then the exact encoded size is
 *    computed with the same functions that write (each *_len mirrors its
 *    put_*), then one buffer of that size is allocated and filled. A
 *    length-delimited field's length is its message's *_len, so nothing is
 *    moved or grown while writing.
 *  - Invariant: after the writer ran, the cursor is exactly at the end of
 *    the buffer (checked; a mismatch would be a bug here, reported as
 *    -EINVAL rather than bytes of the wrong length).
 *  - proto3 rules: scalar fields equal to 0 are omitted; repeated numbers
 *    are packed; the string table is written whole, "" first.
 */
#include "common/pt_pprof_write.h"

#include "common/pt_alloc.h"
#include "common/pt_err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- wire sizes and writers ---------------- */

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static uint8_t *put_varint(uint8_t *o, uint64_t v) {
  while (v >= 0x80) {
    *o++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *o++ = (uint8_t)v;
  return o;
}

static size_t key_len(uint32_t field) { return varint_len((uint64_t)field << 3); }

static uint8_t *put_key(uint8_t *o, uint32_t field, int wt) {
  return put_varint(o, (uint64_t)field << 3 | (uint64_t)wt);
}

/* A varint field, omitted when 0 (proto3). */
static size_t num_len(uint32_t field, uint64_t v) {
  return v ? key_len(field) + varint_len(v) : 0;
}

static uint8_t *put_num(uint8_t *o, uint32_t field, uint64_t v) {
  if (!v) return o;
  o = put_key(o, field, 0);
  return put_varint(o, v);
}

/* A length-delimited field of n bytes (key + length + n). */
static size_t ld_len(uint32_t field, size_t n) { return key_len(field) + varint_len(n) + n; }

static uint8_t *put_ld_head(uint8_t *o, uint32_t field, size_t n) {
  o = put_key(o, field, 2);
  return put_varint(o, n);
}

/* ---------------- messages ---------------- */

static size_t vt_body(const pt_pprof_value_type *v) { return num_len(1, v->type) + num_len(2, v->unit); }

static uint8_t *put_vt(uint8_t *o, uint32_t field, const pt_pprof_value_type *v) {
  o = put_ld_head(o, field, vt_body(v));
  o = put_num(o, 1, v->type);
  return put_num(o, 2, v->unit);
}

static size_t label_body(const pt_pprof_label *l) {
  return num_len(1, l->key) + num_len(2, l->str) + num_len(3, (uint64_t)l->num) +
         num_len(4, l->num_unit);
}

static uint8_t *put_label(uint8_t *o, const pt_pprof_label *l) {
  o = put_ld_head(o, 3, label_body(l));
  o = put_num(o, 1, l->key);
  o = put_num(o, 2, l->str);
  o = put_num(o, 3, (uint64_t)l->num);
  return put_num(o, 4, l->num_unit);
}

static size_t locids_body(const pt_pprof *p, const pt_pprof_sample *s) {
  size_t n = 0;
  for (uint32_t i = 0; i < s->n_locations; i++) n += varint_len(p->locations[s->locations[i]].id);
  return n;
}

static size_t values_body(const pt_pprof *p, const pt_pprof_sample *s) {
  size_t n = 0;
  for (size_t i = 0; i < p->n_sample_types; i++) n += varint_len((uint64_t)s->values[i]);
  return n;
}

static size_t sample_body(const pt_pprof *p, const pt_pprof_sample *s) {
  size_t n = 0;
  if (s->n_locations) n += ld_len(1, locids_body(p, s));
  n += ld_len(2, values_body(p, s)); /* n_sample_types >= 1 */
  for (uint32_t i = 0; i < s->n_labels; i++) n += ld_len(3, label_body(&s->labels[i]));
  return n;
}

static uint8_t *put_sample(uint8_t *o, const pt_pprof *p, const pt_pprof_sample *s) {
  o = put_ld_head(o, 2, sample_body(p, s));
  if (s->n_locations) {
    o = put_ld_head(o, 1, locids_body(p, s));
    for (uint32_t i = 0; i < s->n_locations; i++) o = put_varint(o, p->locations[s->locations[i]].id);
  }
  o = put_ld_head(o, 2, values_body(p, s));
  for (size_t i = 0; i < p->n_sample_types; i++) o = put_varint(o, (uint64_t)s->values[i]);
  for (uint32_t i = 0; i < s->n_labels; i++) o = put_label(o, &s->labels[i]);
  return o;
}

static size_t mapping_body(const pt_pprof_mapping *m) {
  return num_len(1, m->id) + num_len(2, m->memory_start) + num_len(3, m->memory_limit) +
         num_len(4, m->file_offset) + num_len(5, m->filename) + num_len(6, m->build_id) +
         num_len(7, m->has_functions) + num_len(8, m->has_filenames) +
         num_len(9, m->has_line_numbers) + num_len(10, m->has_inline_frames);
}

static uint8_t *put_mapping(uint8_t *o, const pt_pprof_mapping *m) {
  o = put_ld_head(o, 3, mapping_body(m));
  o = put_num(o, 1, m->id);
  o = put_num(o, 2, m->memory_start);
  o = put_num(o, 3, m->memory_limit);
  o = put_num(o, 4, m->file_offset);
  o = put_num(o, 5, m->filename);
  o = put_num(o, 6, m->build_id);
  o = put_num(o, 7, m->has_functions);
  o = put_num(o, 8, m->has_filenames);
  o = put_num(o, 9, m->has_line_numbers);
  return put_num(o, 10, m->has_inline_frames);
}

static size_t line_body(const pt_pprof *p, const pt_pprof_line *l) {
  return num_len(1, p->functions[l->function].id) + num_len(2, (uint64_t)l->line) +
         num_len(3, (uint64_t)l->column);
}

static uint64_t loc_mapping_id(const pt_pprof *p, const pt_pprof_location *l) {
  return l->mapping == PT_PPROF_NONE ? 0 : p->mappings[l->mapping].id;
}

static size_t location_body(const pt_pprof *p, const pt_pprof_location *l) {
  size_t n = num_len(1, l->id) + num_len(2, loc_mapping_id(p, l)) + num_len(3, l->address) +
             num_len(5, l->is_folded);
  for (uint32_t i = 0; i < l->n_lines; i++) n += ld_len(4, line_body(p, &l->lines[i]));
  return n;
}

static uint8_t *put_location(uint8_t *o, const pt_pprof *p, const pt_pprof_location *l) {
  o = put_ld_head(o, 4, location_body(p, l));
  o = put_num(o, 1, l->id);
  o = put_num(o, 2, loc_mapping_id(p, l));
  o = put_num(o, 3, l->address);
  for (uint32_t i = 0; i < l->n_lines; i++) {
    const pt_pprof_line *ln = &l->lines[i];
    o = put_ld_head(o, 4, line_body(p, ln));
    o = put_num(o, 1, p->functions[ln->function].id);
    o = put_num(o, 2, (uint64_t)ln->line);
    o = put_num(o, 3, (uint64_t)ln->column);
  }
  return put_num(o, 5, l->is_folded);
}

static size_t function_body(const pt_pprof_function *f) {
  return num_len(1, f->id) + num_len(2, f->name) + num_len(3, f->system_name) +
         num_len(4, f->filename) + num_len(5, (uint64_t)f->start_line);
}

static uint8_t *put_function(uint8_t *o, const pt_pprof_function *f) {
  o = put_ld_head(o, 5, function_body(f));
  o = put_num(o, 1, f->id);
  o = put_num(o, 2, f->name);
  o = put_num(o, 3, f->system_name);
  o = put_num(o, 4, f->filename);
  return put_num(o, 5, (uint64_t)f->start_line);
}

static size_t comments_body(const pt_pprof *p) {
  size_t n = 0;
  for (size_t i = 0; i < p->n_comments; i++) n += varint_len(p->comments[i]);
  return n;
}

/* The whole Profile. Sizes are summed in size_t; the caller has checked
 * the counts, and the total is compared with the cap by the caller. A sum
 * past SIZE_MAX would need more memory than the struct itself holds many
 * times over, which it cannot. */
static size_t profile_len(const pt_pprof *p) {
  size_t n = 0;
  for (size_t i = 0; i < p->n_sample_types; i++) n += ld_len(1, vt_body(&p->sample_types[i]));
  for (size_t i = 0; i < p->n_samples; i++) n += ld_len(2, sample_body(p, &p->samples[i]));
  for (size_t i = 0; i < p->n_mappings; i++) n += ld_len(3, mapping_body(&p->mappings[i]));
  for (size_t i = 0; i < p->n_locations; i++) n += ld_len(4, location_body(p, &p->locations[i]));
  for (size_t i = 0; i < p->n_functions; i++) n += ld_len(5, function_body(&p->functions[i]));
  for (size_t i = 0; i < p->n_strings; i++) n += ld_len(6, p->strings[i].len);
  n += num_len(7, p->drop_frames) + num_len(8, p->keep_frames) +
       num_len(9, (uint64_t)p->time_nanos) + num_len(10, (uint64_t)p->duration_nanos);
  if (p->period_type.type || p->period_type.unit) n += ld_len(11, vt_body(&p->period_type));
  n += num_len(12, (uint64_t)p->period);
  if (p->n_comments) n += ld_len(13, comments_body(p));
  n += num_len(14, p->default_sample_type) + num_len(15, p->doc_url);
  return n;
}

static uint8_t *put_profile(uint8_t *o, const pt_pprof *p) {
  for (size_t i = 0; i < p->n_sample_types; i++) o = put_vt(o, 1, &p->sample_types[i]);
  for (size_t i = 0; i < p->n_samples; i++) o = put_sample(o, p, &p->samples[i]);
  for (size_t i = 0; i < p->n_mappings; i++) o = put_mapping(o, &p->mappings[i]);
  for (size_t i = 0; i < p->n_locations; i++) o = put_location(o, p, &p->locations[i]);
  for (size_t i = 0; i < p->n_functions; i++) o = put_function(o, &p->functions[i]);
  for (size_t i = 0; i < p->n_strings; i++) {
    o = put_ld_head(o, 6, p->strings[i].len);
    if (p->strings[i].len) memcpy(o, p->strings[i].s, p->strings[i].len);
    o += p->strings[i].len;
  }
  o = put_num(o, 7, p->drop_frames);
  o = put_num(o, 8, p->keep_frames);
  o = put_num(o, 9, (uint64_t)p->time_nanos);
  o = put_num(o, 10, (uint64_t)p->duration_nanos);
  if (p->period_type.type || p->period_type.unit) o = put_vt(o, 11, &p->period_type);
  o = put_num(o, 12, (uint64_t)p->period);
  if (p->n_comments) {
    o = put_ld_head(o, 13, comments_body(p));
    for (size_t i = 0; i < p->n_comments; i++) o = put_varint(o, p->comments[i]);
  }
  o = put_num(o, 14, p->default_sample_type);
  return put_num(o, 15, p->doc_url);
}

/* ---------------- checks ---------------- */

static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -EINVAL;
}

#define STR_OK(i) ((size_t)(i) < p->n_strings)

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Ids non-zero and unique within each kind; tmp has room for the largest
 * kind. */
static int check_ids(const pt_pprof *p, uint64_t *tmp, char *err, size_t errlen) {
  static const char *const what[] = {"mapping", "location", "function"};
  for (int k = 0; k < 3; k++) {
    size_t n = k == 0 ? p->n_mappings : k == 1 ? p->n_locations : p->n_functions;
    for (size_t i = 0; i < n; i++) {
      uint64_t id = k == 0 ? p->mappings[i].id : k == 1 ? p->locations[i].id : p->functions[i].id;
      if (!id) return bad(err, errlen, "%s %zu: id 0", what[k], i);
      tmp[i] = id;
    }
    if (n > 1) qsort(tmp, n, sizeof *tmp, cmp_u64);
    for (size_t i = 1; i < n; i++)
      if (tmp[i] == tmp[i - 1])
        return bad(err, errlen, "%s id %llu is used twice", what[k], (unsigned long long)tmp[i]);
  }
  return 0;
}

static int check(const pt_pprof *p, char *err, size_t errlen) {
  if (!p->n_strings || !p->strings) return bad(err, errlen, "no string table");
  if (p->strings[0].len != 0) return bad(err, errlen, "string 0 is not \"\"");
  for (size_t i = 0; i < p->n_strings; i++)
    if (p->strings[i].len && !p->strings[i].s) return bad(err, errlen, "string %zu has no bytes", i);
  if (!p->n_sample_types) return bad(err, errlen, "no sample_type");
  for (size_t i = 0; i < p->n_sample_types; i++)
    if (!STR_OK(p->sample_types[i].type) || !STR_OK(p->sample_types[i].unit))
      return bad(err, errlen, "sample_type %zu: string index out of range", i);
  if (!STR_OK(p->period_type.type) || !STR_OK(p->period_type.unit))
    return bad(err, errlen, "period_type: string index out of range");
  if (!STR_OK(p->drop_frames) || !STR_OK(p->keep_frames) || !STR_OK(p->default_sample_type) ||
      !STR_OK(p->doc_url))
    return bad(err, errlen, "profile: string index out of range");
  for (size_t i = 0; i < p->n_comments; i++)
    if (!STR_OK(p->comments[i])) return bad(err, errlen, "comment %zu: string index out of range", i);
  for (size_t i = 0; i < p->n_samples; i++) {
    const pt_pprof_sample *s = &p->samples[i];
    if (!s->values) return bad(err, errlen, "sample %zu: no values", i);
    for (uint32_t j = 0; j < s->n_locations; j++)
      if (s->locations[j] >= p->n_locations)
        return bad(err, errlen, "sample %zu: location index %u out of range", i, s->locations[j]);
    for (uint32_t j = 0; j < s->n_labels; j++) {
      const pt_pprof_label *l = &s->labels[j];
      if (!STR_OK(l->key) || !STR_OK(l->str) || !STR_OK(l->num_unit))
        return bad(err, errlen, "sample %zu, label %u: string index out of range", i, j);
    }
  }
  for (size_t i = 0; i < p->n_mappings; i++)
    if (!STR_OK(p->mappings[i].filename) || !STR_OK(p->mappings[i].build_id))
      return bad(err, errlen, "mapping %zu: string index out of range", i);
  for (size_t i = 0; i < p->n_locations; i++) {
    const pt_pprof_location *l = &p->locations[i];
    if (l->mapping != PT_PPROF_NONE && l->mapping >= p->n_mappings)
      return bad(err, errlen, "location %zu: mapping index %u out of range", i, l->mapping);
    for (uint32_t j = 0; j < l->n_lines; j++)
      if (l->lines[j].function >= p->n_functions)
        return bad(err, errlen, "location %zu, line %u: function index %u out of range", i, j,
                   l->lines[j].function);
  }
  for (size_t i = 0; i < p->n_functions; i++) {
    const pt_pprof_function *f = &p->functions[i];
    if (!STR_OK(f->name) || !STR_OK(f->system_name) || !STR_OK(f->filename))
      return bad(err, errlen, "function %zu: string index out of range", i);
  }
  return 0;
}

int pt_pprof_write(const pt_pprof *p, uint8_t **out, size_t *outlen, char *err, size_t errlen) {
  *out = NULL;
  *outlen = 0;
  if (!p) return bad(err, errlen, "no profile");
  int r = check(p, err, errlen);
  if (r < 0) return r;
  size_t most = p->n_mappings;
  if (p->n_locations > most) most = p->n_locations;
  if (p->n_functions > most) most = p->n_functions;
  if (most) {
    uint64_t *tmp = pt_malloc(most * sizeof *tmp);
    if (!tmp) {
      pt_errf(err, errlen, "out of memory");
      return -ENOMEM;
    }
    r = check_ids(p, tmp, err, errlen);
    free(tmp);
    if (r < 0) return r;
  }
  size_t n = profile_len(p);
  if (n > PT_PPROF_MAX_INPUT) {
    pt_errf(err, errlen, "the encoded profile would be %zu bytes, more than %zu", n,
            PT_PPROF_MAX_INPUT);
    return -EFBIG;
  }
  uint8_t *buf = pt_malloc(n ? n : 1);
  if (!buf) {
    pt_errf(err, errlen, "out of memory for %zu bytes", n);
    return -ENOMEM;
  }
  size_t wrote = (size_t)(put_profile(buf, p) - buf);
  if (wrote != n) {
    free(buf);
    return bad(err, errlen, "internal error: encoded %zu bytes, measured %zu", wrote, n);
  }
  *out = buf;
  *outlen = n;
  return 0;
}
