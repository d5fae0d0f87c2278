/*
 * ptprof-validate - checks gzip-compressed pprof profiles (FILE.pb.gz...).
 *
 * It decodes gzip and the protobuf wire format itself (its own small
 * decoder, not the library's encoder: a bug there must not hide here) and
 * checks both what `go tool pprof` rejects and what it silently lets
 * through (see docs/pprof-format.md):
 *   rejected by the viewer: empty file, not one gzip member, string_table[0]
 *   not "", string index out of range, id 0 or duplicate ids (mapping,
 *   location, function), sample -> missing location, Line without function,
 *   value count != sample_type count, no sample_type, two time_nanos;
 *   accepted but wrong: location -> missing mapping, label with both or
 *   neither of str/num, empty string labels, numeric label 0 without unit,
 *   duplicate label keys in a sample, empty function names, inverted or
 *   overlapping mapping ranges, period/period_type inconsistent, values not
 *   [n, n * period] for a samples+cpu profile, time_nanos/duration_nanos
 *   missing or <= 0, default_sample_type naming no sample type.
 * Prints one line per problem ("FILE: problem") and exits 1 if any; 0 when
 * every file is clean; 2 on usage or I/O errors. --summary also prints the
 * sample count, duration and top functions of each file.
 *
 * Input is untrusted: the decompressed size is capped, every length and
 * varint is bounds-checked.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#define MAX_IN ((size_t)256 << 20)
#define MAX_OUT ((size_t)1 << 30)
#define MAX_PRINTED 200
#define TOP_N 10

/* ---- problem reporting ---- */

static const char *g_file;
static size_t g_problems;

static void problem(const char *f, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *f, ...) {
  g_problems++;
  if (g_problems > MAX_PRINTED) return;
  va_list ap;
  va_start(ap, f);
  printf("%s: ", g_file);
  vprintf(f, ap);
  putchar('\n');
  va_end(ap);
}

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) {
    fprintf(stderr, "ptprof-validate: out of memory\n");
    exit(2);
  }
  return q;
}

#define PUSH(arr, n, cap, val)                                          \
  do {                                                                  \
    if ((n) == (cap)) {                                                 \
      (cap) = (cap) ? (cap) * 2 : 8;                                    \
      (arr) = xrealloc((arr), (cap) * sizeof *(arr));                   \
    }                                                                   \
    (arr)[(n)++] = (val);                                               \
  } while (0)

/* ---- the decoded profile ---- */

typedef struct { uint64_t *v; size_t n, cap; } u64vec;
typedef struct { int64_t type, unit; } valuetype;
typedef struct { int64_t key, str, num, unit; bool has_str, has_num, has_unit; } label;
typedef struct { u64vec locs, vals; label *labels; size_t nlabels, caplabels; } sample;
typedef struct {
  uint64_t id, start, limit, offset;
  int64_t filename, build_id;
  bool fn, fl, ln, in;
} mapping;
typedef struct { uint64_t function_id; int64_t line, column; } line;
typedef struct {
  uint64_t id, mapping_id, address;
  line *lines;
  size_t nlines, caplines;
  bool folded;
} location;
typedef struct { uint64_t id; int64_t name, system_name, filename, start_line; } function;
typedef struct { const uint8_t *p; size_t n; } str;

typedef struct profile {
  valuetype *st; size_t nst, capst;
  sample *samples; size_t nsamples, capsamples;
  mapping *maps; size_t nmaps, capmaps;
  location *locs; size_t nlocs, caplocs;
  function *funcs; size_t nfuncs, capfuncs;
  str *strs; size_t nstrs, capstrs;
  int64_t drop_frames, keep_frames, default_sample_type, doc_url;
  int64_t time_nanos, duration_nanos, period;
  int n_time, n_duration, n_period_type;
  valuetype period_type;
  u64vec comments;
} profile;

static void profile_free(profile *p) {
  for (size_t i = 0; i < p->nsamples; i++) {
    free(p->samples[i].locs.v);
    free(p->samples[i].vals.v);
    free(p->samples[i].labels);
  }
  for (size_t i = 0; i < p->nlocs; i++) free(p->locs[i].lines);
  free(p->st); free(p->samples); free(p->maps); free(p->locs); free(p->funcs);
  free(p->strs); free(p->comments.v);
}

/* ---- protobuf wire reader ---- */

typedef struct rd { const uint8_t *p, *end; bool bad; } rd;

static uint64_t rd_varint(rd *r) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) { r->bad = true; return 0; }
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  r->bad = true;
  return 0;
}

/* Reads the next tag; false at the end or on error. */
static bool rd_tag(rd *r, uint32_t *field, uint32_t *wt) {
  if (r->bad || r->p >= r->end) return false;
  uint64_t t = rd_varint(r);
  if (r->bad) return false;
  *field = (uint32_t)(t >> 3);
  *wt = (uint32_t)(t & 7);
  if (*field == 0) { r->bad = true; return false; }
  return true;
}

static rd rd_sub(rd *r) {
  uint64_t n = rd_varint(r);
  rd s = {r->p, r->p, false};
  if (r->bad || n > (uint64_t)(r->end - r->p)) { r->bad = true; return s; }
  s.end = r->p + n;
  r->p += n;
  return s;
}

static void rd_skip(rd *r, uint32_t wt) {
  switch (wt) {
    case 0: rd_varint(r); break;
    case 1: if (r->end - r->p < 8) r->bad = true; else r->p += 8; break;
    case 2: rd_sub(r); break;
    case 5: if (r->end - r->p < 4) r->bad = true; else r->p += 4; break;
    default: r->bad = true;
  }
}

/* A repeated varint field, packed (wt 2) or not (wt 0). */
static void rd_repeated(rd *r, uint32_t wt, u64vec *v) {
  if (wt == 0) {
    uint64_t x = rd_varint(r);
    if (!r->bad) PUSH(v->v, v->n, v->cap, x);
  } else if (wt == 2) {
    rd s = rd_sub(r);
    while (!s.bad && !r->bad && s.p < s.end) {
      uint64_t x = rd_varint(&s);
      if (!s.bad) PUSH(v->v, v->n, v->cap, x);
    }
    if (s.bad) r->bad = true;
  } else {
    r->bad = true;
  }
}

static uint64_t rd_scalar(rd *r, uint32_t wt) {
  if (wt != 0) { rd_skip(r, wt); r->bad = true; return 0; }
  return rd_varint(r);
}

static void decode_valuetype(rd *r, valuetype *vt) {
  uint32_t f, wt;
  while (rd_tag(r, &f, &wt)) {
    if (f == 1) vt->type = (int64_t)rd_scalar(r, wt);
    else if (f == 2) vt->unit = (int64_t)rd_scalar(r, wt);
    else rd_skip(r, wt);
  }
}

static void decode_label(rd *r, label *l) {
  uint32_t f, wt;
  while (rd_tag(r, &f, &wt)) {
    if (f == 1) l->key = (int64_t)rd_scalar(r, wt);
    else if (f == 2) { l->str = (int64_t)rd_scalar(r, wt); l->has_str = l->str != 0; }
    else if (f == 3) { l->num = (int64_t)rd_scalar(r, wt); l->has_num = l->num != 0; }
    else if (f == 4) { l->unit = (int64_t)rd_scalar(r, wt); l->has_unit = l->unit != 0; }
    else rd_skip(r, wt);
  }
}

static void decode_sample(rd *r, sample *s) {
  uint32_t f, wt;
  while (rd_tag(r, &f, &wt)) {
    if (f == 1) rd_repeated(r, wt, &s->locs);
    else if (f == 2) rd_repeated(r, wt, &s->vals);
    else if (f == 3 && wt == 2) {
      rd sub = rd_sub(r);
      label l = {0};
      decode_label(&sub, &l);
      if (sub.bad) r->bad = true;
      PUSH(s->labels, s->nlabels, s->caplabels, l);
    } else rd_skip(r, wt);
  }
}

static void decode_mapping(rd *r, mapping *m) {
  uint32_t f, wt;
  while (rd_tag(r, &f, &wt)) {
    switch (f) {
      case 1: m->id = rd_scalar(r, wt); break;
      case 2: m->start = rd_scalar(r, wt); break;
      case 3: m->limit = rd_scalar(r, wt); break;
      case 4: m->offset = rd_scalar(r, wt); break;
      case 5: m->filename = (int64_t)rd_scalar(r, wt); break;
      case 6: m->build_id = (int64_t)rd_scalar(r, wt); break;
      case 7: m->fn = rd_scalar(r, wt) != 0; break;
      case 8: m->fl = rd_scalar(r, wt) != 0; break;
      case 9: m->ln = rd_scalar(r, wt) != 0; break;
      case 10: m->in = rd_scalar(r, wt) != 0; break;
      default: rd_skip(r, wt);
    }
  }
}

static void decode_location(rd *r, location *l) {
  uint32_t f, wt;
  while (rd_tag(r, &f, &wt)) {
    if (f == 1) l->id = rd_scalar(r, wt);
    else if (f == 2) l->mapping_id = rd_scalar(r, wt);
    else if (f == 3) l->address = rd_scalar(r, wt);
    else if (f == 5) l->folded = rd_scalar(r, wt) != 0;
    else if (f == 4 && wt == 2) {
      rd sub = rd_sub(r);
      line ln = {0};
      uint32_t g, wt2;
      while (rd_tag(&sub, &g, &wt2)) {
        if (g == 1) ln.function_id = rd_scalar(&sub, wt2);
        else if (g == 2) ln.line = (int64_t)rd_scalar(&sub, wt2);
        else if (g == 3) ln.column = (int64_t)rd_scalar(&sub, wt2);
        else rd_skip(&sub, wt2);
      }
      if (sub.bad) r->bad = true;
      PUSH(l->lines, l->nlines, l->caplines, ln);
    } else rd_skip(r, wt);
  }
}

static void decode_function(rd *r, function *fn) {
  uint32_t f, wt;
  while (rd_tag(r, &f, &wt)) {
    switch (f) {
      case 1: fn->id = rd_scalar(r, wt); break;
      case 2: fn->name = (int64_t)rd_scalar(r, wt); break;
      case 3: fn->system_name = (int64_t)rd_scalar(r, wt); break;
      case 4: fn->filename = (int64_t)rd_scalar(r, wt); break;
      case 5: fn->start_line = (int64_t)rd_scalar(r, wt); break;
      default: rd_skip(r, wt);
    }
  }
}

/* Returns false (and reports) when the wire format itself is broken. */
static bool decode_profile(const uint8_t *d, size_t n, profile *p) {
  rd r = {d, d + n, false};
  uint32_t f, wt;
  while (rd_tag(&r, &f, &wt)) {
    if (wt == 2 && (f == 1 || f == 2 || f == 3 || f == 4 || f == 5 || f == 11)) {
      rd sub = rd_sub(&r);
      if (r.bad) break;
      if (f == 1) { valuetype vt = {0}; decode_valuetype(&sub, &vt); PUSH(p->st, p->nst, p->capst, vt); }
      else if (f == 2) { sample s = {0}; decode_sample(&sub, &s); PUSH(p->samples, p->nsamples, p->capsamples, s); }
      else if (f == 3) { mapping m = {0}; decode_mapping(&sub, &m); PUSH(p->maps, p->nmaps, p->capmaps, m); }
      else if (f == 4) { location l = {0}; decode_location(&sub, &l); PUSH(p->locs, p->nlocs, p->caplocs, l); }
      else if (f == 5) { function fn = {0}; decode_function(&sub, &fn); PUSH(p->funcs, p->nfuncs, p->capfuncs, fn); }
      else { decode_valuetype(&sub, &p->period_type); p->n_period_type++; }
      if (sub.bad) { problem("malformed protobuf inside field %u of Profile", f); return false; }
    } else if (f == 6 && wt == 2) {
      rd sub = rd_sub(&r);
      if (r.bad) break;
      str s = {sub.p, (size_t)(sub.end - sub.p)};
      PUSH(p->strs, p->nstrs, p->capstrs, s);
    } else if (f == 13) {
      rd_repeated(&r, wt, &p->comments);
    } else if (wt == 0 && f >= 7 && f <= 15) {
      int64_t v = (int64_t)rd_varint(&r);
      switch (f) {
        case 7: p->drop_frames = v; break;
        case 8: p->keep_frames = v; break;
        case 9: p->time_nanos = v; p->n_time++; break;
        case 10: p->duration_nanos = v; p->n_duration++; break;
        case 12: p->period = v; break;
        case 14: p->default_sample_type = v; break;
        case 15: p->doc_url = v; break;
        default: break;
      }
    } else {
      rd_skip(&r, wt);
    }
  }
  if (r.bad) {
    problem("malformed protobuf at byte %zu of %zu (not a pprof Profile?)", (size_t)(r.p - d), n);
    return false;
  }
  return true;
}

/* ---- gzip ---- */

static int gunzip_one(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen, bool *trailing) {
  z_stream z = {0};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return -ENOMEM;
  size_t cap = len * 4 + 1024, olen = 0;
  uint8_t *buf = xrealloc(NULL, cap);
  z.next_in = (Bytef *)(uintptr_t)in;
  z.avail_in = (uInt)len;
  int zr;
  for (;;) {
    if (olen == cap) {
      if (cap >= MAX_OUT) { free(buf); inflateEnd(&z); return -E2BIG; }
      cap *= 2;
      buf = xrealloc(buf, cap);
    }
    z.next_out = buf + olen;
    z.avail_out = (uInt)(cap - olen > UINT32_MAX ? UINT32_MAX : cap - olen);
    uInt before = z.avail_out;
    zr = inflate(&z, Z_NO_FLUSH);
    olen += before - z.avail_out;
    if (zr == Z_STREAM_END) break;
    if (zr == Z_BUF_ERROR && z.avail_out == 0) continue;
    if (zr != Z_OK || (z.avail_in == 0 && z.avail_out != 0)) {
      free(buf);
      inflateEnd(&z);
      return -EBADMSG;
    }
  }
  *trailing = z.avail_in > 0;
  inflateEnd(&z);
  *out = buf;
  *outlen = olen;
  return 0;
}

/* ---- checks ---- */

static bool str_ok(const profile *p, int64_t idx, const char *what) {
  if (idx < 0 || (uint64_t)idx >= p->nstrs) {
    problem("string index %" PRId64 " out of range (%zu strings) in %s", idx, p->nstrs, what);
    return false;
  }
  return true;
}

static bool str_is(const profile *p, int64_t idx, const char *s) {
  if (idx < 0 || (uint64_t)idx >= p->nstrs) return false;
  size_t n = strlen(s);
  return p->strs[idx].n == n && memcmp(p->strs[idx].p, s, n) == 0;
}

static const char *str_get(const profile *p, int64_t idx, char *buf, size_t cap) {
  if (idx < 0 || (uint64_t)idx >= p->nstrs) { snprintf(buf, cap, "?"); return buf; }
  size_t n = p->strs[idx].n < cap - 1 ? p->strs[idx].n : cap - 1;
  memcpy(buf, p->strs[idx].p, n);
  buf[n] = 0;
  return buf;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorted copy of ids; reports zeros and duplicates. */
static uint64_t *check_ids(const char *what, const uint64_t *ids, size_t n) {
  uint64_t *s = xrealloc(NULL, n * sizeof *s);
  memcpy(s, ids, n * sizeof *s);
  for (size_t i = 0; i < n; i++)
    if (ids[i] == 0) problem("%s at position %zu has id 0 (reserved)", what, i);
  qsort(s, n, sizeof *s, cmp_u64);
  for (size_t i = 1; i < n; i++)
    if (s[i] == s[i - 1] && s[i]) problem("duplicate %s id %" PRIu64, what, s[i]);
  return s;
}

static bool has_id(const uint64_t *sorted, size_t n, uint64_t id) {
  return id && bsearch(&id, sorted, n, sizeof id, cmp_u64) != NULL;
}

typedef struct { uint64_t start, limit, id; } range;
static int cmp_range(const void *a, const void *b) {
  const range *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

static void check_profile(profile *p) {
  char b1[256], b2[256];
  /* string table */
  if (p->nstrs == 0) problem("string table is empty (entry 0 must be \"\")");
  else if (p->strs[0].n != 0) problem("string table entry 0 is \"%s\", must be \"\"", str_get(p, 0, b1, sizeof b1));

  /* sample types */
  if (p->nst == 0) problem("no sample_type");
  for (size_t i = 0; i < p->nst; i++) {
    str_ok(p, p->st[i].type, "sample_type.type");
    str_ok(p, p->st[i].unit, "sample_type.unit");
    if (p->st[i].type == 0) problem("sample_type %zu has an empty type", i);
  }
  if (p->default_sample_type && str_ok(p, p->default_sample_type, "default_sample_type")) {
    bool found = false;
    for (size_t i = 0; i < p->nst; i++)
      found |= p->st[i].type >= 0 && (uint64_t)p->st[i].type < p->nstrs &&
               str_is(p, p->st[i].type, str_get(p, p->default_sample_type, b1, sizeof b1));
    if (!found) problem("default_sample_type \"%s\" names no sample type", b1);
  }

  /* ids */
  uint64_t *ids = xrealloc(NULL, (p->nmaps + p->nlocs + p->nfuncs + 1) * sizeof *ids);
  for (size_t i = 0; i < p->nmaps; i++) ids[i] = p->maps[i].id;
  uint64_t *map_ids = check_ids("mapping", ids, p->nmaps);
  for (size_t i = 0; i < p->nlocs; i++) ids[i] = p->locs[i].id;
  uint64_t *loc_ids = check_ids("location", ids, p->nlocs);
  for (size_t i = 0; i < p->nfuncs; i++) ids[i] = p->funcs[i].id;
  uint64_t *fn_ids = check_ids("function", ids, p->nfuncs);
  free(ids);

  /* mappings */
  range *rs = xrealloc(NULL, (p->nmaps + 1) * sizeof *rs);
  for (size_t i = 0; i < p->nmaps; i++) {
    const mapping *m = &p->maps[i];
    str_ok(p, m->filename, "mapping.filename");
    str_ok(p, m->build_id, "mapping.build_id");
    if (m->limit <= m->start)
      problem("mapping %" PRIu64 " range inverted or empty: [%#" PRIx64 ", %#" PRIx64 ")", m->id, m->start, m->limit);
    rs[i] = (range){m->start, m->limit, m->id};
  }
  qsort(rs, p->nmaps, sizeof *rs, cmp_range);
  for (size_t i = 1; i < p->nmaps; i++)
    if (rs[i].start < rs[i - 1].limit && rs[i - 1].limit > rs[i - 1].start)
      problem("mappings %" PRIu64 " and %" PRIu64 " overlap", rs[i - 1].id, rs[i].id);
  free(rs);

  /* functions */
  for (size_t i = 0; i < p->nfuncs; i++) {
    const function *f = &p->funcs[i];
    bool ok = str_ok(p, f->name, "function.name");
    str_ok(p, f->system_name, "function.system_name");
    str_ok(p, f->filename, "function.filename");
    if (ok && (f->name == 0 || p->strs[f->name].n == 0)) problem("function %" PRIu64 " has an empty name", f->id);
  }

  /* locations */
  for (size_t i = 0; i < p->nlocs; i++) {
    const location *l = &p->locs[i];
    if (l->mapping_id && !has_id(map_ids, p->nmaps, l->mapping_id))
      problem("location %" PRIu64 " points at missing mapping %" PRIu64 " (the viewer accepts this silently)", l->id, l->mapping_id);
    for (size_t k = 0; k < l->nlines; k++) {
      if (l->lines[k].function_id == 0)
        problem("location %" PRIu64 " line %zu has no function", l->id, k);
      else if (!has_id(fn_ids, p->nfuncs, l->lines[k].function_id))
        problem("location %" PRIu64 " line %zu points at missing function %" PRIu64, l->id, k, l->lines[k].function_id);
    }
  }

  /* samples */
  size_t loc_missing = 0, val_mismatch = 0, bad_values = 0;
  int samples_i = -1, cpu_i = -1;
  for (size_t i = 0; i < p->nst; i++) {
    if (str_is(p, p->st[i].type, "samples") && str_is(p, p->st[i].unit, "count")) samples_i = (int)i;
    if (str_is(p, p->st[i].type, "cpu") && str_is(p, p->st[i].unit, "nanoseconds")) cpu_i = (int)i;
  }
  for (size_t i = 0; i < p->nsamples; i++) {
    const sample *s = &p->samples[i];
    if (s->vals.n != p->nst && val_mismatch++ < 10)
      problem("sample %zu has %zu values, but there are %zu sample types", i, s->vals.n, p->nst);
    for (size_t k = 0; k < s->locs.n; k++)
      if (!has_id(loc_ids, p->nlocs, s->locs.v[k]) && loc_missing++ < 10)
        problem("sample %zu points at missing location %" PRIu64 " (\"sample has nil location\")", i, s->locs.v[k]);
    if (samples_i >= 0 && cpu_i >= 0 && p->period > 0 && s->vals.n == p->nst &&
        s->vals.v[cpu_i] != s->vals.v[samples_i] * (uint64_t)p->period && bad_values++ < 10)
      problem("sample %zu: cpu value %" PRId64 " != samples %" PRId64 " * period %" PRId64, i,
              (int64_t)s->vals.v[cpu_i], (int64_t)s->vals.v[samples_i], p->period);
    for (size_t k = 0; k < s->nlabels; k++) {
      const label *l = &s->labels[k];
      if (!str_ok(p, l->key, "label.key") || !str_ok(p, l->str, "label.str") ||
          !str_ok(p, l->unit, "label.num_unit"))
        continue;
      const char *key = str_get(p, l->key, b1, sizeof b1);
      if (l->key == 0) problem("sample %zu has a label with an empty key", i);
      if (l->has_str && (l->has_num || l->has_unit))
        problem("sample %zu label \"%s\" has both str and num (the viewer keeps only str)", i, key);
      else if (!l->has_str && !l->has_num && !l->has_unit)
        problem("sample %zu label \"%s\" has neither str nor num: an empty string or a numeric 0 "
                "without unit, which the viewer drops silently", i, key);
      for (size_t j = 0; j < k; j++)
        if (s->labels[j].key == l->key) {
          problem("sample %zu has label key \"%s\" twice", i, key);
          break;
        }
    }
  }
  if (loc_missing > 10) problem("... %zu samples point at missing locations in total", loc_missing);
  if (val_mismatch > 10) problem("... %zu samples have the wrong value count in total", val_mismatch);
  if (bad_values > 10) problem("... %zu samples have cpu != samples * period in total", bad_values);

  /* period, time */
  if (p->n_period_type > 1) problem("period_type appears %d times", p->n_period_type);
  if (p->n_period_type) {
    str_ok(p, p->period_type.type, "period_type.type");
    str_ok(p, p->period_type.unit, "period_type.unit");
    if (p->period <= 0) problem("period_type is set but period is %" PRId64, p->period);
    bool match = false;
    for (size_t i = 0; i < p->nst; i++)
      match |= p->st[i].type == p->period_type.type && p->st[i].unit == p->period_type.unit;
    if (!match && p->period_type.type < (int64_t)p->nstrs && p->period_type.unit < (int64_t)p->nstrs &&
        p->period_type.type >= 0 && p->period_type.unit >= 0)
      problem("period_type %s/%s matches no sample type", str_get(p, p->period_type.type, b1, sizeof b1),
              str_get(p, p->period_type.unit, b2, sizeof b2));
  } else if (p->period) {
    problem("period %" PRId64 " without period_type", p->period);
  }
  if (p->n_time > 1 || p->n_duration > 1)
    problem("time_nanos/duration_nanos appear more than once (two profiles concatenated?)");
  if (p->time_nanos <= 0) problem("time_nanos is missing or <= 0 (%" PRId64 ")", p->time_nanos);
  if (p->duration_nanos <= 0) problem("duration_nanos is missing or <= 0 (%" PRId64 ")", p->duration_nanos);
  for (size_t i = 0; i < p->comments.n; i++) str_ok(p, (int64_t)p->comments.v[i], "comment");
  if (p->drop_frames) str_ok(p, p->drop_frames, "drop_frames");
  if (p->keep_frames) str_ok(p, p->keep_frames, "keep_frames");
  if (p->doc_url) str_ok(p, p->doc_url, "doc_url");
  free(map_ids);
  free(loc_ids);
  free(fn_ids);
}

/* ---- summary ---- */

typedef struct { uint64_t fid; int64_t flat, cum; } fstat;

static int cmp_fstat(const void *a, const void *b) {
  const fstat *x = a, *y = b;
  if (x->flat != y->flat) return x->flat > y->flat ? -1 : 1;
  if (x->cum != y->cum) return x->cum > y->cum ? -1 : 1;
  return x->fid < y->fid ? -1 : x->fid > y->fid;
}

static const location *find_loc(const profile *p, uint64_t id) {
  for (size_t i = 0; i < p->nlocs; i++)   /* ids are dense in our files: try id-1 first */
    if (p->locs[(i + id - 1) % p->nlocs].id == id) return &p->locs[(i + id - 1) % p->nlocs];
  return NULL;
}

static void summary(const profile *p) {
  char b1[256];
  int vi = 0, cpu_i = -1;
  for (size_t i = 0; i < p->nst; i++) {
    if (str_is(p, p->st[i].type, "samples")) vi = (int)i;
    if (str_is(p, p->st[i].unit, "nanoseconds")) cpu_i = (int)i;
  }
  int64_t total = 0, cpu = 0;
  fstat *fs = xrealloc(NULL, (p->nfuncs + 1) * sizeof *fs);
  for (size_t i = 0; i < p->nfuncs; i++) fs[i] = (fstat){p->funcs[i].id, 0, 0};
  uint64_t *seen = xrealloc(NULL, (p->nfuncs + 1) * sizeof *seen);
  for (size_t i = 0; i < p->nsamples; i++) {
    const sample *s = &p->samples[i];
    if ((size_t)vi >= s->vals.n) continue;
    int64_t v = (int64_t)s->vals.v[vi];
    total += v;
    if (cpu_i >= 0 && (size_t)cpu_i < s->vals.n) cpu += (int64_t)s->vals.v[cpu_i];
    size_t nseen = 0;
    for (size_t k = 0; k < s->locs.n; k++) {
      const location *l = find_loc(p, s->locs.v[k]);
      if (!l) continue;
      for (size_t j = 0; j < l->nlines; j++) {
        uint64_t fid = l->lines[j].function_id;
        for (size_t q = 0; q < p->nfuncs; q++) {
          if (fs[q].fid != fid) continue;
          if (k == 0 && j == 0) fs[q].flat += v;
          bool dup = false;
          for (size_t z = 0; z < nseen && !dup; z++) dup = seen[z] == fid;
          if (!dup) {
            fs[q].cum += v;
            if (nseen < p->nfuncs) seen[nseen++] = fid;
          }
          break;
        }
      }
    }
  }
  free(seen);
  qsort(fs, p->nfuncs, sizeof *fs, cmp_fstat);
  printf("%s: samples: %" PRId64 "\n", g_file, total);
  if (cpu_i >= 0) printf("%s: cpu: %.3f s\n", g_file, (double)cpu / 1e9);
  printf("%s: duration: %.3f s\n", g_file, (double)p->duration_nanos / 1e9);
  if (p->time_nanos > 0) {
    time_t t = (time_t)(p->time_nanos / 1000000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char ts[64];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("%s: time: %s\n", g_file, ts);
  }
  printf("%s: top functions (flat, cum samples):\n", g_file);
  for (size_t i = 0; i < p->nfuncs && i < TOP_N; i++) {
    if (!fs[i].flat && !fs[i].cum) break;
    const char *name = "?";
    for (size_t q = 0; q < p->nfuncs; q++)
      if (p->funcs[q].id == fs[i].fid) name = str_get(p, p->funcs[q].name, b1, sizeof b1);
    printf("%s:   %8" PRId64 " %5.1f%% %8" PRId64 " %5.1f%%  %s\n", g_file, fs[i].flat,
           total ? 100.0 * (double)fs[i].flat / (double)total : 0.0, fs[i].cum,
           total ? 100.0 * (double)fs[i].cum / (double)total : 0.0, name);
  }
  free(fs);
}

/* ---- main ---- */

static uint8_t *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 65536, n = 0;
  uint8_t *buf = xrealloc(NULL, cap);
  for (;;) {
    if (n == cap) {
      if (cap >= MAX_IN) { free(buf); fclose(f); errno = EFBIG; return NULL; }
      cap *= 2;
      buf = xrealloc(buf, cap);
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  bool err = ferror(f);
  fclose(f);
  if (err) { free(buf); errno = EIO; return NULL; }
  *len = n;
  return buf;
}

/* Returns the number of problems, or -1 if the file could not be read. */
static long validate_file(const char *path, bool want_summary) {
  g_file = path;
  g_problems = 0;
  size_t len = 0;
  uint8_t *data = read_all(path, &len);
  if (!data) {
    fprintf(stderr, "ptprof-validate: %s: %s\n", path, strerror(errno));
    return -1;
  }
  uint8_t *pb = NULL;
  size_t pblen = 0;
  profile p;
  memset(&p, 0, sizeof p);
  if (len == 0) {
    problem("empty file");
    goto done;
  }
  if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    bool trailing = false;
    int r = gunzip_one(data, len, &pb, &pblen, &trailing);
    if (r == -E2BIG) { problem("decompresses to more than %zu bytes", MAX_OUT); goto done; }
    if (r) { problem("corrupt or truncated gzip data"); goto done; }
    if (trailing)   /* a second member or garbage after the first */
      problem("more than one gzip member (or trailing bytes): viewers concatenate members into one "
              "protobuf, merging two profiles");
  } else {
    problem("not gzip-compressed (snapshots are .pb.gz)");
    pb = xrealloc(NULL, len);
    memcpy(pb, data, len);
    pblen = len;
  }
  if (pblen == 0) {
    problem("empty profile (no protobuf bytes)");
    goto done;
  }
  if (decode_profile(pb, pblen, &p)) {
    check_profile(&p);
    if (want_summary) summary(&p);
  }
done:
  if (g_problems > MAX_PRINTED) printf("%s: ... %zu problems in total\n", path, g_problems);
  profile_free(&p);
  free(pb);
  free(data);
  return (long)g_problems;
}

int main(int argc, char **argv) {
  bool want_summary = false;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    if (!strcmp(argv[first], "--summary")) want_summary = true;
    else if (!strcmp(argv[first], "--")) { first++; break; }
    else if (!strcmp(argv[first], "--help") || !strcmp(argv[first], "-h")) {
      printf("usage: ptprof-validate [--summary] FILE.pb.gz...\n"
             "Checks pprof profiles; one line per problem; exit 0 clean, 1 problems, 2 errors.\n");
      return 0;
    } else {
      fprintf(stderr, "ptprof-validate: unknown option %s\n", argv[first]);
      return 2;
    }
  }
  if (first >= argc) {
    fprintf(stderr, "usage: ptprof-validate [--summary] FILE.pb.gz...\n");
    return 2;
  }
  int rc = 0;
  for (int i = first; i < argc; i++) {
    long n = validate_file(argv[i], want_summary);
    if (n < 0) rc = 2;
    else if (n > 0 && rc == 0) rc = 1;
  }
  return rc;
}
