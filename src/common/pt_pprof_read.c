/*
 * pt_pprof_read.c - the sans-I/O pprof reader (contract: pt_pprof_read.h;
 * field numbers: proto/profile.proto).
 *
 * DESIGN
 *  - Three walks over the bytes, which are in memory and cheap to walk
 *    again, so that nothing is allocated before the whole size is known:
 *      COUNT  checks the wire format of every message, nested ones
 *             included, counts every repeated thing and the string bytes,
 *             and catches singular fields given twice;
 *             then one block is allocated for the whole pt_pprof (checked
 *             against max_memory first), plus one temporary table of ids;
 *      FILL_B fills the string table, sample types, scalars, mappings,
 *             functions and the ids of locations, checking string indexes;
 *             then the id tables are sorted (ids non-zero and unique);
 *      FILL_C fills locations (mapping and line references resolved) and
 *             samples (location references resolved, one value per sample
 *             type, labels).
 *    A reference that names nothing is found in FILL_B/FILL_C, whatever
 *    the order of the fields in the file.
 *  - Each repeated thing is filled from a pool in file order (a cursor per
 *    pool), so a sample's locations, values and labels, and a location's
 *    lines, are contiguous slices of their pools.
 *  - Errors: -EINVAL with err naming the message and its ordinal, -EFBIG
 *    for the caps, -ENOMEM; the block is freed on any error.
 * Invariants: a pbr never reads past its end; counts found by COUNT are
 * the exact numbers FILL_B/FILL_C store (the same bytes are walked), and a
 * mismatch is reported as damage rather than trusted.
 */
#include "common/pt_pprof_read.h"

#include "common/pt_alloc.h"
#include "common/pt_err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- protobuf wire reading ---------------- */

typedef struct pbr {
  const uint8_t *p, *end;
} pbr;

/* One field: its number, wire type, and the varint value (wt 0) or the
 * bytes (wt 2). Fixed32/64 fields (wt 5/1) are skipped with v = 0. */
typedef struct pbf {
  uint32_t field;
  int wt;
  uint64_t v;
  pbr sub;
} pbf;

static int pb_varint(pbr *r, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) return -1;
    uint8_t b = *r->p++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1; /* more than 10 bytes */
}

/* 1 with the next field in *f, 0 at the end, -1 on damage. */
static int pb_next(pbr *r, pbf *f) {
  if (r->p >= r->end) return 0;
  uint64_t key;
  if (pb_varint(r, &key) < 0) return -1;
  if ((key >> 3) == 0 || (key >> 3) > UINT32_MAX) return -1;
  f->field = (uint32_t)(key >> 3);
  f->wt = (int)(key & 7);
  f->v = 0;
  switch (f->wt) {
  case 0: return pb_varint(r, &f->v) < 0 ? -1 : 1;
  case 1:
    if (r->end - r->p < 8) return -1;
    r->p += 8;
    return 1;
  case 5:
    if (r->end - r->p < 4) return -1;
    r->p += 4;
    return 1;
  case 2: {
    uint64_t n;
    if (pb_varint(r, &n) < 0 || n > (uint64_t)(r->end - r->p)) return -1;
    f->sub.p = r->p;
    f->sub.end = r->p + n;
    r->p += n;
    return 1;
  }
  default: return -1; /* groups (3, 4) and the unused 6, 7 */
  }
}

/* A repeated varint field, packed (wt 2) or not (wt 0). */
typedef struct pk {
  pbr r;
  int single; /* 1: one value left in v; 2: done */
  uint64_t v;
} pk;

static int pk_init(pk *it, const pbf *f) {
  it->r = (pbr){NULL, NULL};
  if (f->wt == 0) {
    it->single = 1;
    it->v = f->v;
    return 0;
  }
  if (f->wt != 2) return -1;
  it->single = 0;
  it->r = f->sub;
  return 0;
}

/* 1 with *v, 0 at the end, -1 on damage. */
static int pk_next(pk *it, uint64_t *v) {
  if (it->single) {
    if (it->single == 2) return 0;
    it->single = 2;
    *v = it->v;
    return 1;
  }
  if (it->r.p >= it->r.end) return 0;
  return pb_varint(&it->r, v) < 0 ? -1 : 1;
}

/* ---------------- the reader's state ---------------- */

enum { COUNT, FILL_B, FILL_C };

typedef struct id_ent {
  uint64_t id;
  uint32_t idx;
} id_ent;

typedef struct id_tab {
  id_ent *e;
  size_t n;
} id_tab;

typedef struct rd {
  const uint8_t *data;
  size_t len;
  char *err;
  size_t errlen;
  int mode;
  pt_pprof *p;
  /* COUNT's totals (the pools' sizes) */
  size_t n_st, n_samples, n_maps, n_locs, n_fns, n_strs, n_comments;
  size_t n_locrefs, n_values, n_labels, n_lines, str_bytes;
  uint32_t seen; /* singular Profile fields seen (bit = field number) */
  /* fill cursors */
  size_t c_str, c_comment, c_locref, c_value, c_label, c_line;
  uint32_t *locpool;      /* the samples' location references */
  int64_t *valpool;       /* the samples' values */
  pt_pprof_label *labpool;
  pt_pprof_line *linepool;
  char *strpool;
  size_t c_strbyte;
  id_tab maps, locs, fns;
} rd;

static int fail(rd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(rd *d, const char *fmt, ...) {
  if (d->err && d->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, d->errlen, fmt, ap);
    va_end(ap);
  }
  return -EINVAL;
}

#define DAMAGED(d, what, i) fail((d), "%s %zu: damaged protobuf", (what), (size_t)(i))

/* A string index read from the file (an int64 on the wire). */
static int str_idx(rd *d, uint64_t v, uint32_t *out, const char *what, size_t i) {
  int64_t s = (int64_t)v;
  if (s < 0 || (uint64_t)s >= d->n_strs)
    return fail(d, "%s %zu: string index %lld out of range (%zu strings)", what, i, (long long)s,
                d->n_strs);
  *out = (uint32_t)s;
  return 0;
}

static int want_wt(rd *d, const pbf *f, int wt, const char *what, size_t i) {
  if (f->wt == wt) return 0;
  return fail(d, "%s %zu: field %u has wire type %d, not %d", what, i, f->field, f->wt, wt);
}

static int cmp_id(const void *a, const void *b) {
  const id_ent *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The index of the entity with id, or PT_PPROF_NONE. */
static uint32_t find_id(const id_tab *t, uint64_t id) {
  if (!t->n) return PT_PPROF_NONE; /* bsearch takes no NULL base */
  id_ent key = {id, 0};
  const id_ent *e = bsearch(&key, t->e, t->n, sizeof *t->e, cmp_id);
  return e ? e->idx : PT_PPROF_NONE;
}

/* Sorts an id table; ids must be non-zero (checked when filled) and unique. */
static int sort_ids(rd *d, id_tab *t, const char *what) {
  if (t->n) qsort(t->e, t->n, sizeof *t->e, cmp_id);
  for (size_t i = 1; i < t->n; i++)
    if (t->e[i].id == t->e[i - 1].id)
      return fail(d, "%s id %llu appears twice", what, (unsigned long long)t->e[i].id);
  return 0;
}

/* ---------------- messages ---------------- */

/* ValueType (sample_type, period_type). */
static int value_type(rd *d, pbr m, pt_pprof_value_type *out, const char *what, size_t i) {
  pbf f;
  int k;
  while ((k = pb_next(&m, &f)) == 1) {
    if (f.field != 1 && f.field != 2) continue;
    if (want_wt(d, &f, 0, what, i) < 0) return -EINVAL;
    if (d->mode != FILL_B || !out) continue;
    if (str_idx(d, f.v, f.field == 1 ? &out->type : &out->unit, what, i) < 0) return -EINVAL;
  }
  return k < 0 ? DAMAGED(d, what, i) : 0;
}

static int label(rd *d, pbr m, pt_pprof_label *l, size_t si) {
  pbf f;
  int k;
  while ((k = pb_next(&m, &f)) == 1) {
    if (f.field < 1 || f.field > 4) continue;
    if (want_wt(d, &f, 0, "label of sample", si) < 0) return -EINVAL;
    if (d->mode != FILL_C) continue;
    int r = 0;
    switch (f.field) {
    case 1: r = str_idx(d, f.v, &l->key, "label key of sample", si); break;
    case 2: r = str_idx(d, f.v, &l->str, "label of sample", si); break;
    case 3: l->num = (int64_t)f.v; break;
    case 4: r = str_idx(d, f.v, &l->num_unit, "label unit of sample", si); break;
    }
    if (r < 0) return r;
  }
  return k < 0 ? DAMAGED(d, "label of sample", si) : 0;
}

/* Sample: its location references, values and labels go to the ends of
 * their pools (FILL_C), or are counted (COUNT). */
static int sample(rd *d, pbr m, size_t si) {
  pt_pprof *p = d->p;
  pt_pprof_sample *s = d->mode == FILL_C ? &p->samples[si] : NULL;
  size_t loc0 = d->c_locref, val0 = d->c_value, lab0 = d->c_label, nval = 0;
  pbf f;
  int k;
  while ((k = pb_next(&m, &f)) == 1) {
    if (f.field == 1 || f.field == 2) {
      pk it;
      uint64_t v;
      int kk;
      if (pk_init(&it, &f) < 0)
        return fail(d, "sample %zu: field %u has wire type %d", si, f.field, f.wt);
      while ((kk = pk_next(&it, &v)) == 1) {
        if (f.field == 2) {
          nval++;
          if (d->mode == COUNT) {
            d->n_values++;
          } else if (s) {
            if (d->c_value >= d->n_values) return DAMAGED(d, "sample", si);
            d->valpool[d->c_value++] = (int64_t)v;
          }
        } else if (d->mode == COUNT) {
          d->n_locrefs++;
        } else if (s) {
          uint32_t li = v ? find_id(&d->locs, v) : PT_PPROF_NONE;
          if (li == PT_PPROF_NONE)
            return fail(d, "sample %zu: location id %llu does not exist", si,
                        (unsigned long long)v);
          if (d->c_locref >= d->n_locrefs) return DAMAGED(d, "sample", si);
          d->locpool[d->c_locref++] = li;
        }
      }
      if (kk < 0) return DAMAGED(d, "sample", si);
    } else if (f.field == 3) {
      if (want_wt(d, &f, 2, "sample", si) < 0) return -EINVAL;
      pt_pprof_label l = {0, 0, 0, 0};
      if (label(d, f.sub, &l, si) < 0) return -EINVAL;
      if (d->mode == COUNT) {
        d->n_labels++;
      } else if (s) {
        if (d->c_label >= d->n_labels) return DAMAGED(d, "sample", si);
        d->labpool[d->c_label++] = l;
      }
    }
  }
  if (k < 0) return DAMAGED(d, "sample", si);
  if (!s) return 0;
  if (nval != p->n_sample_types)
    return fail(d, "sample %zu: %zu values for %zu sample types", si, nval, p->n_sample_types);
  /* This sample's slices of the pools (NULL when empty). */
  s->n_locations = (uint32_t)(d->c_locref - loc0);
  s->n_labels = (uint32_t)(d->c_label - lab0);
  s->locations = s->n_locations ? d->locpool + loc0 : NULL;
  s->values = nval ? d->valpool + val0 : NULL;
  s->labels = s->n_labels ? d->labpool + lab0 : NULL;
  return 0;
}

static int mapping(rd *d, pbr m, size_t mi) {
  pt_pprof_mapping *mp = d->mode == FILL_B ? &d->p->mappings[mi] : NULL;
  pbf f;
  int k;
  while ((k = pb_next(&m, &f)) == 1) {
    if (f.field < 1 || f.field > 10) continue;
    if (want_wt(d, &f, 0, "mapping", mi) < 0) return -EINVAL;
    if (!mp) continue;
    int r = 0;
    switch (f.field) {
    case 1: mp->id = f.v; break;
    case 2: mp->memory_start = f.v; break;
    case 3: mp->memory_limit = f.v; break;
    case 4: mp->file_offset = f.v; break;
    case 5: r = str_idx(d, f.v, &mp->filename, "mapping", mi); break;
    case 6: r = str_idx(d, f.v, &mp->build_id, "mapping", mi); break;
    case 7: mp->has_functions = f.v != 0; break;
    case 8: mp->has_filenames = f.v != 0; break;
    case 9: mp->has_line_numbers = f.v != 0; break;
    case 10: mp->has_inline_frames = f.v != 0; break;
    }
    if (r < 0) return r;
  }
  if (k < 0) return DAMAGED(d, "mapping", mi);
  if (mp) {
    if (mp->id == 0) return fail(d, "mapping %zu: id 0", mi);
    d->maps.e[d->maps.n++] = (id_ent){mp->id, (uint32_t)mi};
  }
  return 0;
}

static int line(rd *d, pbr m, pt_pprof_line *ln, size_t li) {
  uint64_t fid = 0;
  pbf f;
  int k;
  while ((k = pb_next(&m, &f)) == 1) {
    if (f.field < 1 || f.field > 3) continue;
    if (want_wt(d, &f, 0, "line of location", li) < 0) return -EINVAL;
    if (f.field == 1) fid = f.v;
    else if (f.field == 2) ln->line = (int64_t)f.v;
    else ln->column = (int64_t)f.v;
  }
  if (k < 0) return DAMAGED(d, "line of location", li);
  if (d->mode != FILL_C) return 0;
  if (fid == 0) return fail(d, "location %zu: a line without a function", li);
  ln->function = find_id(&d->fns, fid);
  if (ln->function == PT_PPROF_NONE)
    return fail(d, "location %zu: function id %llu does not exist", li, (unsigned long long)fid);
  return 0;
}

/* Location: FILL_B records its id, FILL_C the rest. */
static int location(rd *d, pbr m, size_t li) {
  pt_pprof *p = d->p;
  pt_pprof_location *l = d->mode == COUNT ? NULL : &p->locations[li];
  size_t line0 = d->c_line;
  uint64_t mid = 0;
  pbf f;
  int k;
  while ((k = pb_next(&m, &f)) == 1) {
    if (f.field < 1 || f.field > 5) continue;
    if (want_wt(d, &f, f.field == 4 ? 2 : 0, "location", li) < 0) return -EINVAL;
    switch (f.field) {
    case 1: if (l) l->id = f.v; break;
    case 2: mid = f.v; break;
    case 3: if (l) l->address = f.v; break;
    case 5: if (l) l->is_folded = f.v != 0; break;
    case 4: {
      pt_pprof_line ln = {0, 0, 0};
      if (line(d, f.sub, &ln, li) < 0) return -EINVAL;
      if (d->mode == COUNT) {
        d->n_lines++;
      } else if (d->mode == FILL_C) {
        if (d->c_line >= d->n_lines) return DAMAGED(d, "location", li);
        d->linepool[d->c_line++] = ln;
      }
      break;
    }
    }
  }
  if (k < 0) return DAMAGED(d, "location", li);
  if (d->mode == FILL_B) {
    if (l->id == 0) return fail(d, "location %zu: id 0", li);
    d->locs.e[d->locs.n++] = (id_ent){l->id, (uint32_t)li};
  } else if (d->mode == FILL_C) {
    l->n_lines = (uint32_t)(d->c_line - line0);
    l->lines = l->n_lines ? d->linepool + line0 : NULL;
    l->mapping = PT_PPROF_NONE;
    if (mid) {
      l->mapping = find_id(&d->maps, mid);
      if (l->mapping == PT_PPROF_NONE)
        return fail(d, "location %zu: mapping id %llu does not exist", li,
                    (unsigned long long)mid);
    }
  }
  return 0;
}

static int function(rd *d, pbr m, size_t fi) {
  pt_pprof_function *fn = d->mode == FILL_B ? &d->p->functions[fi] : NULL;
  pbf f;
  int k;
  while ((k = pb_next(&m, &f)) == 1) {
    if (f.field < 1 || f.field > 5) continue;
    if (want_wt(d, &f, 0, "function", fi) < 0) return -EINVAL;
    if (!fn) continue;
    int r = 0;
    switch (f.field) {
    case 1: fn->id = f.v; break;
    case 2: r = str_idx(d, f.v, &fn->name, "function", fi); break;
    case 3: r = str_idx(d, f.v, &fn->system_name, "function", fi); break;
    case 4: r = str_idx(d, f.v, &fn->filename, "function", fi); break;
    case 5: fn->start_line = (int64_t)f.v; break;
    }
    if (r < 0) return r;
  }
  if (k < 0) return DAMAGED(d, "function", fi);
  if (fn) {
    if (fn->id == 0) return fail(d, "function %zu: id 0", fi);
    d->fns.e[d->fns.n++] = (id_ent){fn->id, (uint32_t)fi};
  }
  return 0;
}

/* ---------------- the Profile message ---------------- */

static const char *const singular_name[16] = {
    [7] = "drop_frames", [8] = "keep_frames", [9] = "time_nanos", [10] = "duration_nanos",
    [11] = "period_type", [12] = "period", [14] = "default_sample_type", [15] = "doc_url"};

/* A singular scalar field of Profile (a string index where `idx`). */
static int scalar(rd *d, const pbf *f, int64_t *num, uint32_t *idx) {
  if (want_wt(d, f, 0, singular_name[f->field], 0) < 0) return -EINVAL;
  if (d->mode != FILL_B) return 0;
  if (num) *num = (int64_t)f->v;
  return idx ? str_idx(d, f->v, idx, singular_name[f->field], 0) : 0;
}

/* One walk of the top level in d->mode. */
static int walk(rd *d) {
  pt_pprof *p = d->p;
  int fill_b = d->mode == FILL_B;
  pbr r = {d->data, d->data + d->len};
  pbf f;
  int k, e = 0;
  size_t ist = 0, isample = 0, imap = 0, iloc = 0, ifn = 0, istr = 0;
  while (e == 0 && (k = pb_next(&r, &f)) == 1) {
    uint32_t fld = f.field;
    if (d->mode == COUNT && fld < 16 && singular_name[fld]) {
      if (d->seen & (1u << fld))
        return fail(d, "Profile.%s appears twice (two profiles concatenated?)",
                    singular_name[fld]);
      d->seen |= 1u << fld;
    }
    switch (fld) {
    case 1: /* sample_type */
      if ((e = want_wt(d, &f, 2, "sample_type", ist)) < 0) break;
      e = value_type(d, f.sub, fill_b ? &p->sample_types[ist] : NULL, "sample_type", ist);
      ist++;
      break;
    case 2:
      if ((e = want_wt(d, &f, 2, "sample", isample)) < 0) break;
      e = sample(d, f.sub, isample++);
      break;
    case 3:
      if ((e = want_wt(d, &f, 2, "mapping", imap)) < 0) break;
      e = mapping(d, f.sub, imap++);
      break;
    case 4:
      if ((e = want_wt(d, &f, 2, "location", iloc)) < 0) break;
      e = location(d, f.sub, iloc++);
      break;
    case 5:
      if ((e = want_wt(d, &f, 2, "function", ifn)) < 0) break;
      e = function(d, f.sub, ifn++);
      break;
    case 6:
      if ((e = want_wt(d, &f, 2, "string", istr)) < 0) break;
      if (d->mode == COUNT) {
        d->str_bytes += (size_t)(f.sub.end - f.sub.p) + 1;
      } else if (fill_b) {
        size_t n = (size_t)(f.sub.end - f.sub.p);
        if (d->c_str >= d->n_strs || d->c_strbyte + n + 1 > d->str_bytes)
          return DAMAGED(d, "string", istr);
        char *s = d->strpool + d->c_strbyte;
        if (n) memcpy(s, f.sub.p, n);
        s[n] = '\0';
        p->strings[d->c_str++] = (pt_pprof_str){s, n};
        d->c_strbyte += n + 1;
      }
      istr++;
      break;
    case 7: e = scalar(d, &f, NULL, &p->drop_frames); break;
    case 8: e = scalar(d, &f, NULL, &p->keep_frames); break;
    case 9: e = scalar(d, &f, &p->time_nanos, NULL); break;
    case 10: e = scalar(d, &f, &p->duration_nanos, NULL); break;
    case 11:
      if ((e = want_wt(d, &f, 2, "period_type", 0)) < 0) break;
      e = value_type(d, f.sub, fill_b ? &p->period_type : NULL, "period_type", 0);
      break;
    case 12: e = scalar(d, &f, &p->period, NULL); break;
    case 13: {
      pk it;
      uint64_t v;
      int kk;
      if (pk_init(&it, &f) < 0)
        return fail(d, "comment: field 13 has wire type %d", f.wt);
      while (e == 0 && (kk = pk_next(&it, &v)) == 1) {
        if (d->mode == COUNT) {
          d->n_comments++;
        } else if (fill_b) {
          if (d->c_comment >= d->n_comments) return DAMAGED(d, "comment", d->c_comment);
          e = str_idx(d, v, &p->comments[d->c_comment], "comment", d->c_comment);
          d->c_comment++;
        }
      }
      if (e == 0 && kk < 0) return DAMAGED(d, "comment", d->c_comment);
      break;
    }
    case 14: e = scalar(d, &f, NULL, &p->default_sample_type); break;
    case 15: e = scalar(d, &f, NULL, &p->doc_url); break;
    default: break; /* unknown: skipped */
    }
  }
  if (e < 0) return e;
  if (k < 0) return fail(d, "damaged protobuf at byte %zu", (size_t)(r.p - d->data));
  if (d->mode == COUNT) {
    d->n_st = ist;
    d->n_samples = isample;
    d->n_maps = imap;
    d->n_locs = iloc;
    d->n_fns = ifn;
    d->n_strs = istr;
  } else if (isample != d->n_samples || iloc != d->n_locs || imap != d->n_maps ||
             ifn != d->n_fns || istr != d->n_strs || ist != d->n_st) {
    return fail(d, "damaged protobuf"); /* cannot happen: the same bytes */
  }
  return 0;
}

/* ---------------- the block ---------------- */

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

/* Adds count * size (8-aligned) to *total; 0 or -EFBIG on overflow. */
static int add_bytes(size_t *total, size_t count, size_t size) {
  size_t b;
  if (__builtin_mul_overflow(count, size, &b) || b > SIZE_MAX - 8) return -EFBIG;
  if (__builtin_add_overflow(*total, ALIGN8(b), total)) return -EFBIG;
  return 0;
}

/* Carves the next count * size bytes out of the block. */
static void *carve(char **cur, size_t count, size_t size) {
  void *r = count ? *cur : NULL;
  *cur += ALIGN8(count * size);
  return r;
}

static int fail_plain(char *err, size_t errlen, const char *what) {
  pt_errf(err, errlen, "%s", what);
  return -EINVAL;
}

struct pt_pprof_block {
  pt_pprof p;
  size_t bytes;
};

void pt_pprof_free(pt_pprof *p) { free(p); }

size_t pt_pprof_memory(const pt_pprof *p) {
  return ((const struct pt_pprof_block *)(const void *)p)->bytes;
}

int pt_pprof_read(const uint8_t *data, size_t len, const pt_pprof_limits *lim, pt_pprof **out,
                  char *err, size_t errlen) {
  *out = NULL;
  static const uint8_t none[1];
  if (!data && len) return fail_plain(err, errlen, "no data");
  if (!data) data = none; /* no arithmetic on NULL below */
  size_t max_input = lim && lim->max_input ? lim->max_input : PT_PPROF_MAX_INPUT;
  size_t max_memory = lim && lim->max_memory ? lim->max_memory : PT_PPROF_MAX_MEMORY;
  if (len > max_input) {
    pt_errf(err, errlen, "the profile is %zu bytes, more than %zu", len, max_input);
    return -EFBIG;
  }
  rd d;
  memset(&d, 0, sizeof d);
  d.data = data;
  d.len = len;
  d.err = err;
  d.errlen = errlen;
  pt_pprof scratch;
  memset(&scratch, 0, sizeof scratch);
  d.p = &scratch;
  d.mode = COUNT;
  int r = walk(&d);
  if (r < 0) return r;
  if (d.n_strs == 0) return fail(&d, "no string table");
  if (d.n_st == 0) return fail(&d, "no sample_type");

  /* Everything's size, checked before anything is allocated. */
  size_t bytes = 0, tmp = 0;
  const size_t counts[] = {d.n_locrefs, d.n_values, d.n_labels, d.n_lines, d.n_samples, d.n_locs,
                           d.n_maps, d.n_fns, d.n_strs, d.n_comments, d.n_st};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    if (counts[i] >= UINT32_MAX) r = -EFBIG; /* indexes and counts are uint32_t */
  if (r == 0) r = add_bytes(&bytes, 1, sizeof(struct pt_pprof_block));
  if (r == 0) r = add_bytes(&bytes, d.n_st, sizeof(pt_pprof_value_type));
  if (r == 0) r = add_bytes(&bytes, d.n_samples, sizeof(pt_pprof_sample));
  if (r == 0) r = add_bytes(&bytes, d.n_locrefs, sizeof(uint32_t));
  if (r == 0) r = add_bytes(&bytes, d.n_values, sizeof(int64_t));
  if (r == 0) r = add_bytes(&bytes, d.n_labels, sizeof(pt_pprof_label));
  if (r == 0) r = add_bytes(&bytes, d.n_maps, sizeof(pt_pprof_mapping));
  if (r == 0) r = add_bytes(&bytes, d.n_locs, sizeof(pt_pprof_location));
  if (r == 0) r = add_bytes(&bytes, d.n_lines, sizeof(pt_pprof_line));
  if (r == 0) r = add_bytes(&bytes, d.n_fns, sizeof(pt_pprof_function));
  if (r == 0) r = add_bytes(&bytes, d.n_strs, sizeof(pt_pprof_str));
  if (r == 0) r = add_bytes(&bytes, d.n_comments, sizeof(uint32_t));
  if (r == 0) r = add_bytes(&bytes, d.str_bytes, 1);
  if (r == 0) r = add_bytes(&tmp, d.n_maps + d.n_locs + d.n_fns, sizeof(id_ent));
  if (r < 0 || bytes > max_memory || tmp > max_memory - bytes) {
    pt_errf(err, errlen, "the decoded profile would take more than %zu bytes", max_memory);
    return -EFBIG;
  }
  char *block = pt_malloc(bytes);
  id_ent *ids = tmp ? pt_malloc(tmp) : NULL;
  if (!block || (tmp && !ids)) {
    free(block);
    free(ids);
    pt_errf(err, errlen, "out of memory for a profile of %zu bytes", bytes);
    return -ENOMEM;
  }
  memset(block, 0, bytes);
  char *cur = block;
  struct pt_pprof_block *blk = carve(&cur, 1, sizeof *blk);
  blk->bytes = bytes;
  pt_pprof *p = &blk->p;
  p->n_sample_types = d.n_st;
  p->n_samples = d.n_samples;
  p->n_mappings = d.n_maps;
  p->n_locations = d.n_locs;
  p->n_functions = d.n_fns;
  p->n_strings = d.n_strs;
  p->n_comments = d.n_comments;
  p->sample_types = carve(&cur, d.n_st, sizeof(pt_pprof_value_type));
  p->samples = carve(&cur, d.n_samples, sizeof(pt_pprof_sample));
  d.locpool = carve(&cur, d.n_locrefs, sizeof(uint32_t));
  d.valpool = carve(&cur, d.n_values, sizeof(int64_t));
  d.labpool = carve(&cur, d.n_labels, sizeof(pt_pprof_label));
  p->mappings = carve(&cur, d.n_maps, sizeof(pt_pprof_mapping));
  p->locations = carve(&cur, d.n_locs, sizeof(pt_pprof_location));
  d.linepool = carve(&cur, d.n_lines, sizeof(pt_pprof_line));
  p->functions = carve(&cur, d.n_fns, sizeof(pt_pprof_function));
  p->strings = carve(&cur, d.n_strs, sizeof(pt_pprof_str));
  p->comments = carve(&cur, d.n_comments, sizeof(uint32_t));
  d.strpool = carve(&cur, d.str_bytes, 1);
  d.maps.e = ids;
  d.locs.e = ids ? ids + d.n_maps : NULL;
  d.fns.e = ids ? ids + d.n_maps + d.n_locs : NULL;
  d.p = p;

  d.mode = FILL_B;
  r = walk(&d);
  if (r == 0 && p->strings[0].len != 0) r = fail(&d, "string_table[0] is not \"\"");
  if (r == 0) r = sort_ids(&d, &d.maps, "mapping");
  if (r == 0) r = sort_ids(&d, &d.locs, "location");
  if (r == 0) r = sort_ids(&d, &d.fns, "function");
  if (r == 0) {
    d.mode = FILL_C;
    r = walk(&d);
  }
  free(ids);
  if (r < 0) {
    free(block);
    return r;
  }
  *out = p;
  return 0;
}
