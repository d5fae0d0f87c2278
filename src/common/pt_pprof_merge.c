/*
 * pt_pprof_merge.c - merging pprof profiles (contract: pt_pprof_merge.h).
 *
 * DESIGN
 *  - The merge keeps its own tables, each an array plus an open-addressing
 *    hash index (struct ht: the entity's hash and index per slot): strings
 *    (bytes in an arena of chunks that never move, so a pt_pprof_str stays
 *    valid), functions, mappings, locations (lines in a pool) and samples
 *    (location indexes, labels and values in pools; a sample refers to its
 *    slices by offset, so pools may grow).
 *  - add maps an input's indexes to the merge's lazily, starting from its
 *    samples: a string, function or location is copied the first time a
 *    sample reaches it, so what no sample uses is not carried over.
 *    Mappings are taken first, all of them, in the input's order: the
 *    first is the main binary by convention, and pprof names a profile
 *    after it.
 *    Per input, the maps are one temporary block (NONE = not mapped yet).
 *  - A sample's key is its mapped locations and its labels sorted; the
 *    labels are stored sorted, so equal keys compare element by element.
 *  - result builds the pt_pprof view over the tables: sample and location
 *    structs with pointers into the pools (rebuilt each call, since pools
 *    may have moved), and a string table that is the merge's own plus the
 *    result's comments (kept apart, so a later result does not leave stale
 *    comment strings behind).
 *  - Memory: every growth is counted against PT_PPROF_MAX_MEMORY.
 * Invariants: every index stored in a table is in range of its table;
 * m->err != 0 means a failed add left the tables half-updated, and only
 * del is allowed then.
 */
#include "common/pt_pprof_merge.h"

#include "common/pt_alloc.h"
#include "common/pt_err.h"
#include "common/pt_fmt.h"
#include "common/pt_threadcpu_line.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NONE PT_PPROF_NONE
#define ARENA_CHUNK ((size_t)64 << 10)

typedef struct ht_slot {
  uint64_t h;
  uint32_t idx1; /* index + 1; 0 = empty */
} ht_slot;

typedef struct ht {
  ht_slot *s;
  size_t cap; /* power of two, or 0 */
  size_t n;
} ht;

typedef struct mloc {
  uint64_t address;
  uint32_t mapping; /* index or NONE */
  uint32_t line_off, n_lines;
  bool folded;
} mloc;

typedef struct msamp {
  size_t loc_off, lab_off, val_off;
  uint32_t n_loc, n_lab;
} msamp;

typedef struct window {
  char *name;
  int64_t time_nanos, duration_nanos, samples;
} window;

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  char data[];
} chunk;

struct pt_pprof_merge {
  int err;       /* sticky error of a failed add */
  size_t bytes;  /* memory held, against PT_PPROF_MAX_MEMORY */
  /* strings */
  pt_pprof_str *strs;
  size_t n_strs, cap_strs;
  uint8_t *is_comment; /* per string: already listed as an input comment */
  size_t cap_is_comment;
  ht h_strs;
  chunk *arena;
  /* the first profile's types (merge string indexes) */
  pt_pprof_value_type *types;
  size_t n_types;
  pt_pprof_value_type period_type;
  int64_t period;
  bool periods_differ;
  uint32_t drop_frames, keep_frames, default_sample_type, doc_url;
  /* entities */
  pt_pprof_function *fns;
  size_t n_fns, cap_fns;
  ht h_fns;
  pt_pprof_mapping *maps;
  size_t n_maps, cap_maps;
  ht h_maps;
  mloc *locs;
  size_t n_locs, cap_locs;
  ht h_locs;
  pt_pprof_line *lines;
  size_t n_lines, cap_lines;
  msamp *samps;
  size_t n_samps, cap_samps;
  ht h_samps;
  uint32_t *locpool;
  size_t n_locpool, cap_locpool;
  pt_pprof_label *labpool;
  size_t n_labpool, cap_labpool;
  int64_t *valpool;
  size_t n_valpool, cap_valpool;
  /* inputs' comments in order of first appearance (merge string indexes) */
  uint32_t *in_comments;
  size_t n_in_comments, cap_in_comments;
  window *wins;
  size_t n_wins, cap_wins;
  /* the inputs' threads' CPU lines summed (pt_threadcpu_line.h); tcl_bad:
   * one did not parse, so no sum is told */
  pt_tcl_sum tcl;
  bool tcl_bad;
  /* the last result */
  pt_pprof res;
  pt_pprof_sample *res_samples;
  pt_pprof_location *res_locs;
  pt_pprof_str *res_strs;
  uint32_t *res_comments;
  char **res_texts;
  size_t n_res_texts;
};

/* ---------------- memory ---------------- */

/* Makes room for `need` elements of `elem` bytes in *v (capacity *cap),
 * counting the growth against the cap. 0, -ENOMEM or -EFBIG. The first
 * call allocates even for need 0: a pool once grown is never NULL, so
 * pool + offset is always defined (a pool nobody added to, e.g. the labels
 * of samples without any, was NULL, and NULL + 0 is undefined behaviour:
 * found by the pprof reader's fuzz target, which merges what it reads). */
static int grow(pt_pprof_merge *m, void **v, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap && *v) return 0;
  if (need >= UINT32_MAX) return -EFBIG;
  size_t ncap = *cap ? *cap : 16;
  while (ncap < need) ncap *= 2;
  size_t add = (ncap - *cap) * elem;
  if (ncap > SIZE_MAX / elem || m->bytes + add > PT_PPROF_MAX_MEMORY) return -EFBIG;
  void *nv = pt_realloc(*v, ncap * elem);
  if (!nv) return -ENOMEM;
  *v = nv;
  *cap = ncap;
  m->bytes += add;
  return 0;
}

#define GROW(m, arr, capf, need) grow((m), (void **)&(arr), &(capf), (need), sizeof *(arr))

static char *arena_copy(pt_pprof_merge *m, const char *s, size_t len, int *r) {
  chunk *c = m->arena;
  if (!c || c->cap - c->used < len + 1) {
    size_t cap = len + 1 > ARENA_CHUNK ? len + 1 : ARENA_CHUNK;
    if (m->bytes + cap > PT_PPROF_MAX_MEMORY) {
      *r = -EFBIG;
      return NULL;
    }
    c = pt_malloc(sizeof *c + cap);
    if (!c) {
      *r = -ENOMEM;
      return NULL;
    }
    c->cap = cap;
    c->used = 0;
    c->next = m->arena;
    m->arena = c;
    m->bytes += cap;
  }
  char *d = c->data + c->used;
  if (len) memcpy(d, s, len);
  d[len] = 0;
  c->used += len + 1;
  return d;
}

/* ---------------- hashing ---------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
  return mix(h, n);
}

/* The slot where hash h with an entity equal to the probe is, or the empty
 * slot where it would go. eq(ctx, idx) compares entity idx with the probe. */
static ht_slot *ht_find(ht *t, uint64_t h, bool (*eq)(const pt_pprof_merge *, const void *, uint32_t),
                        const pt_pprof_merge *m, const void *probe) {
  size_t mask = t->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    ht_slot *s = &t->s[i];
    if (!s->idx1) return s;
    if (s->h == h && eq(m, probe, s->idx1 - 1)) return s;
  }
}

/* Keeps the load under 1/2 (so ht_find always meets an empty slot). */
static int ht_reserve(pt_pprof_merge *m, ht *t) {
  if ((t->n + 1) * 2 <= t->cap) return 0;
  size_t ncap = t->cap ? t->cap * 2 : 64;
  if (m->bytes + ncap * sizeof(ht_slot) > PT_PPROF_MAX_MEMORY) return -EFBIG;
  ht_slot *ns = pt_calloc(ncap, sizeof *ns);
  if (!ns) return -ENOMEM;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->s[i].idx1) continue;
    size_t j = (size_t)t->s[i].h & (ncap - 1);
    while (ns[j].idx1) j = (j + 1) & (ncap - 1);
    ns[j] = t->s[i];
  }
  m->bytes += ncap * sizeof(ht_slot);
  m->bytes -= t->cap * sizeof(ht_slot);
  free(t->s);
  t->s = ns;
  t->cap = ncap;
  return 0;
}

/* ---------------- strings ---------------- */

typedef struct str_probe {
  const char *s;
  size_t len;
} str_probe;

static bool str_eq(const pt_pprof_merge *m, const void *probe, uint32_t idx) {
  const str_probe *p = probe;
  return m->strs[idx].len == p->len && memcmp(m->strs[idx].s, p->s, p->len) == 0;
}

/* The merge's index of the string (interned once). 0 or a negative error. */
static int intern(pt_pprof_merge *m, const char *s, size_t len, uint32_t *out) {
  int r = ht_reserve(m, &m->h_strs);
  if (r < 0) return r;
  str_probe pr = {s, len};
  uint64_t h = hash_bytes(s, len);
  ht_slot *slot = ht_find(&m->h_strs, h, str_eq, m, &pr);
  if (slot->idx1) {
    *out = slot->idx1 - 1;
    return 0;
  }
  if ((r = GROW(m, m->strs, m->cap_strs, m->n_strs + 1)) < 0 ||
      (r = GROW(m, m->is_comment, m->cap_is_comment, m->n_strs + 1)) < 0)
    return r;
  char *copy = arena_copy(m, s, len, &r);
  if (!copy) return r;
  uint32_t idx = (uint32_t)m->n_strs++;
  m->strs[idx] = (pt_pprof_str){copy, len};
  m->is_comment[idx] = 0;
  slot->h = h;
  slot->idx1 = idx + 1;
  m->h_strs.n++;
  *out = idx;
  return 0;
}

/* ---------------- one input's maps ---------------- */

typedef struct in_map {
  const pt_pprof *p;
  uint32_t *str, *fn, *map, *loc; /* input index -> merge index, NONE = not yet */
} in_map;

static int map_str(pt_pprof_merge *m, in_map *im, uint32_t i, uint32_t *out) {
  if (im->str[i] == NONE) {
    int r = intern(m, im->p->strings[i].s, im->p->strings[i].len, &im->str[i]);
    if (r < 0) return r;
  }
  *out = im->str[i];
  return 0;
}

static bool fn_eq(const pt_pprof_merge *m, const void *probe, uint32_t idx) {
  const pt_pprof_function *a = probe, *b = &m->fns[idx];
  return a->name == b->name && a->system_name == b->system_name && a->filename == b->filename &&
         a->start_line == b->start_line;
}

static int map_fn(pt_pprof_merge *m, in_map *im, uint32_t i, uint32_t *out) {
  if (im->fn[i] != NONE) {
    *out = im->fn[i];
    return 0;
  }
  const pt_pprof_function *f = &im->p->functions[i];
  pt_pprof_function k = {0};
  int r;
  if ((r = map_str(m, im, f->name, &k.name)) < 0 ||
      (r = map_str(m, im, f->system_name, &k.system_name)) < 0 ||
      (r = map_str(m, im, f->filename, &k.filename)) < 0 || (r = ht_reserve(m, &m->h_fns)) < 0)
    return r;
  k.start_line = f->start_line;
  uint64_t h = mix(mix(mix(mix(1, k.name), k.system_name), k.filename), (uint64_t)k.start_line);
  ht_slot *slot = ht_find(&m->h_fns, h, fn_eq, m, &k);
  if (!slot->idx1) {
    if ((r = GROW(m, m->fns, m->cap_fns, m->n_fns + 1)) < 0) return r;
    k.id = m->n_fns + 1;
    m->fns[m->n_fns] = k;
    slot->h = h;
    slot->idx1 = (uint32_t)++m->n_fns;
    m->h_fns.n++;
  }
  *out = im->fn[i] = slot->idx1 - 1;
  return 0;
}

static bool map_eq(const pt_pprof_merge *m, const void *probe, uint32_t idx) {
  const pt_pprof_mapping *a = probe, *b = &m->maps[idx];
  return a->memory_start == b->memory_start && a->memory_limit == b->memory_limit &&
         a->file_offset == b->file_offset && a->filename == b->filename &&
         a->build_id == b->build_id;
}

static int map_map(pt_pprof_merge *m, in_map *im, uint32_t i, uint32_t *out) {
  if (i == NONE) {
    *out = NONE;
    return 0;
  }
  if (im->map[i] != NONE) {
    *out = im->map[i];
    return 0;
  }
  const pt_pprof_mapping *src = &im->p->mappings[i];
  pt_pprof_mapping k = *src;
  int r;
  if ((r = map_str(m, im, src->filename, &k.filename)) < 0 ||
      (r = map_str(m, im, src->build_id, &k.build_id)) < 0 || (r = ht_reserve(m, &m->h_maps)) < 0)
    return r;
  uint64_t h = mix(mix(mix(mix(mix(2, k.memory_start), k.memory_limit), k.file_offset), k.filename),
                   k.build_id);
  ht_slot *slot = ht_find(&m->h_maps, h, map_eq, m, &k);
  if (!slot->idx1) {
    if ((r = GROW(m, m->maps, m->cap_maps, m->n_maps + 1)) < 0) return r;
    k.id = m->n_maps + 1;
    m->maps[m->n_maps] = k;
    slot->h = h;
    slot->idx1 = (uint32_t)++m->n_maps;
    m->h_maps.n++;
  } else {
    /* has_*: true only when every input says so */
    pt_pprof_mapping *d = &m->maps[slot->idx1 - 1];
    d->has_functions &= src->has_functions;
    d->has_filenames &= src->has_filenames;
    d->has_line_numbers &= src->has_line_numbers;
    d->has_inline_frames &= src->has_inline_frames;
  }
  *out = im->map[i] = slot->idx1 - 1;
  return 0;
}

/* A location probe: its lines are already mapped, in m->lines from
 * line_off (appended tentatively; dropped again when the location exists). */
static bool loc_eq(const pt_pprof_merge *m, const void *probe, uint32_t idx) {
  const mloc *a = probe, *b = &m->locs[idx];
  if (a->address != b->address || a->mapping != b->mapping || a->folded != b->folded ||
      a->n_lines != b->n_lines)
    return false;
  for (uint32_t i = 0; i < a->n_lines; i++) {
    const pt_pprof_line *x = &m->lines[a->line_off + i], *y = &m->lines[b->line_off + i];
    if (x->function != y->function || x->line != y->line || x->column != y->column) return false;
  }
  return true;
}

static int map_loc(pt_pprof_merge *m, in_map *im, uint32_t i, uint32_t *out) {
  if (im->loc[i] != NONE) {
    *out = im->loc[i];
    return 0;
  }
  const pt_pprof_location *src = &im->p->locations[i];
  mloc k = {src->address, NONE, (uint32_t)m->n_lines, src->n_lines, src->is_folded};
  int r = map_map(m, im, src->mapping, &k.mapping);
  if (r < 0) return r;
  if ((r = GROW(m, m->lines, m->cap_lines, m->n_lines + src->n_lines)) < 0) return r;
  uint64_t h = mix(mix(mix(3, k.address), k.mapping), k.folded);
  for (uint32_t j = 0; j < src->n_lines; j++) {
    pt_pprof_line ln = src->lines[j];
    if ((r = map_fn(m, im, ln.function, &ln.function)) < 0) return r;
    m->lines[k.line_off + j] = ln;
    h = mix(mix(mix(h, ln.function), (uint64_t)ln.line), (uint64_t)ln.column);
  }
  if ((r = ht_reserve(m, &m->h_locs)) < 0) return r;
  ht_slot *slot = ht_find(&m->h_locs, h, loc_eq, m, &k);
  if (!slot->idx1) {
    if ((r = GROW(m, m->locs, m->cap_locs, m->n_locs + 1)) < 0) return r;
    m->locs[m->n_locs] = k;
    m->n_lines += k.n_lines; /* keep the tentative lines */
    slot->h = h;
    slot->idx1 = (uint32_t)++m->n_locs;
    m->h_locs.n++;
  }
  *out = im->loc[i] = slot->idx1 - 1;
  return 0;
}

/* ---------------- samples ---------------- */

typedef struct samp_probe {
  const uint32_t *locs;
  const pt_pprof_label *labs;
  uint32_t n_loc, n_lab;
} samp_probe;

static bool samp_eq(const pt_pprof_merge *m, const void *probe, uint32_t idx) {
  const samp_probe *a = probe;
  const msamp *b = &m->samps[idx];
  if (a->n_loc != b->n_loc || a->n_lab != b->n_lab) return false;
  if (a->n_loc && memcmp(a->locs, m->locpool + b->loc_off, a->n_loc * sizeof *a->locs) != 0)
    return false;
  for (uint32_t i = 0; i < a->n_lab; i++) {
    const pt_pprof_label *x = &a->labs[i], *y = &m->labpool[b->lab_off + i];
    if (x->key != y->key || x->str != y->str || x->num != y->num || x->num_unit != y->num_unit)
      return false;
  }
  return true;
}

static int lab_cmp(const void *a, const void *b) {
  const pt_pprof_label *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->str != y->str) return x->str < y->str ? -1 : 1;
  if (x->num != y->num) return x->num < y->num ? -1 : 1;
  if (x->num_unit != y->num_unit) return x->num_unit < y->num_unit ? -1 : 1;
  return 0;
}

/* Adds input sample s; locs/labs are scratch of the input's largest sample. */
static int add_sample(pt_pprof_merge *m, in_map *im, const pt_pprof_sample *s, uint32_t *locs,
                      pt_pprof_label *labs) {
  int r;
  uint64_t h = mix(4, s->n_locations);
  for (uint32_t j = 0; j < s->n_locations; j++) {
    if ((r = map_loc(m, im, s->locations[j], &locs[j])) < 0) return r;
    h = mix(h, locs[j]);
  }
  for (uint32_t j = 0; j < s->n_labels; j++) {
    const pt_pprof_label *l = &s->labels[j];
    labs[j].num = l->num;
    if ((r = map_str(m, im, l->key, &labs[j].key)) < 0 ||
        (r = map_str(m, im, l->str, &labs[j].str)) < 0 ||
        (r = map_str(m, im, l->num_unit, &labs[j].num_unit)) < 0)
      return r;
  }
  if (s->n_labels > 1) qsort(labs, s->n_labels, sizeof *labs, lab_cmp);
  for (uint32_t j = 0; j < s->n_labels; j++)
    h = mix(mix(mix(mix(h, labs[j].key), labs[j].str), (uint64_t)labs[j].num), labs[j].num_unit);
  if ((r = ht_reserve(m, &m->h_samps)) < 0) return r;
  samp_probe pr = {locs, labs, s->n_locations, s->n_labels};
  ht_slot *slot = ht_find(&m->h_samps, h, samp_eq, m, &pr);
  if (slot->idx1) {
    int64_t *v = m->valpool + m->samps[slot->idx1 - 1].val_off;
    for (size_t k = 0; k < m->n_types; k++)
      if (__builtin_add_overflow(v[k], s->values[k], &v[k])) return -EOVERFLOW;
    return 0;
  }
  if ((r = GROW(m, m->samps, m->cap_samps, m->n_samps + 1)) < 0 ||
      (r = GROW(m, m->locpool, m->cap_locpool, m->n_locpool + s->n_locations)) < 0 ||
      (r = GROW(m, m->labpool, m->cap_labpool, m->n_labpool + s->n_labels)) < 0 ||
      (r = GROW(m, m->valpool, m->cap_valpool, m->n_valpool + m->n_types)) < 0)
    return r;
  msamp *d = &m->samps[m->n_samps];
  d->loc_off = m->n_locpool;
  d->lab_off = m->n_labpool;
  d->val_off = m->n_valpool;
  d->n_loc = s->n_locations;
  d->n_lab = s->n_labels;
  if (s->n_locations) memcpy(m->locpool + m->n_locpool, locs, s->n_locations * sizeof *locs);
  if (s->n_labels) memcpy(m->labpool + m->n_labpool, labs, s->n_labels * sizeof *labs);
  if (m->n_types) memcpy(m->valpool + m->n_valpool, s->values, m->n_types * sizeof *s->values);
  m->n_locpool += s->n_locations;
  m->n_labpool += s->n_labels;
  m->n_valpool += m->n_types;
  slot->h = h;
  slot->idx1 = (uint32_t)++m->n_samps;
  m->h_samps.n++;
  return 0;
}

/* ---------------- add ---------------- */

static const char *pstr(const pt_pprof *p, uint32_t i) { return p->strings[i].s; }

static bool same_str(const pt_pprof_merge *m, uint32_t mi, const pt_pprof *p, uint32_t pi) {
  return m->strs[mi].len == p->strings[pi].len &&
         memcmp(m->strs[mi].s, p->strings[pi].s, p->strings[pi].len) == 0;
}

/* -EINVAL with err when p's types differ from the first profile's. */
static int check_types(const pt_pprof_merge *m, const pt_pprof *p, char *err, size_t errlen) {
  bool ok = p->n_sample_types == m->n_types;
  for (size_t i = 0; ok && i < m->n_types; i++)
    ok = same_str(m, m->types[i].type, p, p->sample_types[i].type) &&
         same_str(m, m->types[i].unit, p, p->sample_types[i].unit);
  if (!ok) {
    char a[160] = "", b[160] = "";
    size_t an = 0, bn = 0;
    for (size_t i = 0; i < m->n_types && an < sizeof a; i++)
      an += (size_t)snprintf(a + an, sizeof a - an, "%s%s/%s", i ? "," : "", m->strs[m->types[i].type].s,
                             m->strs[m->types[i].unit].s);
    for (size_t i = 0; i < p->n_sample_types && bn < sizeof b; i++)
      bn += (size_t)snprintf(b + bn, sizeof b - bn, "%s%s/%s", i ? "," : "",
                             pstr(p, p->sample_types[i].type), pstr(p, p->sample_types[i].unit));
    pt_errf(err, errlen, "different sample types: %s, not %s as in the first profile", b, a);
    return -EINVAL;
  }
  if (!same_str(m, m->period_type.type, p, p->period_type.type) ||
      !same_str(m, m->period_type.unit, p, p->period_type.unit)) {
    pt_errf(err, errlen, "different period types: %s/%s, not %s/%s as in the first profile",
            pstr(p, p->period_type.type), pstr(p, p->period_type.unit),
            m->strs[m->period_type.type].s, m->strs[m->period_type.unit].s);
    return -EINVAL;
  }
  return 0;
}

int64_t pt_pprof_sample_total(const pt_pprof *p) {
  size_t k = 0;
  for (size_t i = 0; i < p->n_sample_types; i++)
    if (strcmp(pstr(p, p->sample_types[i].type), "samples") == 0) {
      k = i;
      break;
    }
  int64_t t = 0;
  for (size_t i = 0; i < p->n_samples; i++)
    if (__builtin_add_overflow(t, p->samples[i].values[k], &t)) return INT64_MAX;
  return t;
}

/* The first profile fixes the types. */
static int set_types(pt_pprof_merge *m, const pt_pprof *p) {
  m->types = pt_calloc(p->n_sample_types, sizeof *m->types);
  if (!m->types) return -ENOMEM;
  m->bytes += p->n_sample_types * sizeof *m->types;
  m->n_types = p->n_sample_types;
  int r = 0;
  for (size_t i = 0; i < p->n_sample_types && r == 0; i++) {
    const pt_pprof_value_type *t = &p->sample_types[i];
    r = intern(m, p->strings[t->type].s, p->strings[t->type].len, &m->types[i].type);
    if (r == 0) r = intern(m, p->strings[t->unit].s, p->strings[t->unit].len, &m->types[i].unit);
  }
  const pt_pprof_value_type *pt = &p->period_type;
  if (r == 0) r = intern(m, p->strings[pt->type].s, p->strings[pt->type].len, &m->period_type.type);
  if (r == 0) r = intern(m, p->strings[pt->unit].s, p->strings[pt->unit].len, &m->period_type.unit);
  return r;
}

static int add_inner(pt_pprof_merge *m, const pt_pprof *p, in_map *im, const char *name) {
  int r = 0;
  if (!m->n_wins && (r = set_types(m, p)) < 0) return r;
  if ((r = GROW(m, m->wins, m->cap_wins, m->n_wins + 1)) < 0) return r;
  char nbuf[32];
  if (!name) {
    snprintf(nbuf, sizeof nbuf, "profile %zu", m->n_wins + 1);
    name = nbuf;
  }
  char *copy = arena_copy(m, name, strlen(name), &r);
  if (!copy) return r;
  m->wins[m->n_wins++] = (window){copy, p->time_nanos, p->duration_nanos, pt_pprof_sample_total(p)};

  if (m->n_wins > 1 && p->period != m->period) {
    m->periods_differ = true;
    if (p->period > m->period) m->period = p->period;
  } else if (m->n_wins == 1) {
    m->period = p->period;
  }
  if (!m->drop_frames && p->drop_frames && (r = map_str(m, im, p->drop_frames, &m->drop_frames)) < 0)
    return r;
  if (!m->keep_frames && p->keep_frames && (r = map_str(m, im, p->keep_frames, &m->keep_frames)) < 0)
    return r;
  if (!m->default_sample_type && p->default_sample_type &&
      (r = map_str(m, im, p->default_sample_type, &m->default_sample_type)) < 0)
    return r;
  if (!m->doc_url && p->doc_url && (r = map_str(m, im, p->doc_url, &m->doc_url)) < 0) return r;

  for (size_t i = 0; i < p->n_comments; i++) {
    uint32_t c;
    /* a snapshot's threads' CPU line: summed into the merge's own (one
     * that does not parse is only kept, below) */
    if (p->comments[i] < p->n_strings) {
      const pt_pprof_str *cs = &p->strings[p->comments[i]];
      int t = pt_tcl_add(&m->tcl, cs->s, cs->len);
      if (t == -ENOMEM) return t;
      if (t == -EINVAL) m->tcl_bad = true;
    }
    if ((r = map_str(m, im, p->comments[i], &c)) < 0) return r;
    if (m->is_comment[c]) continue;
    if ((r = GROW(m, m->in_comments, m->cap_in_comments, m->n_in_comments + 1)) < 0) return r;
    m->in_comments[m->n_in_comments++] = c;
    m->is_comment[c] = 1;
  }

  /* Mappings in the input's order, so the main binary (the first mapping,
   * by convention) stays first: pprof names the profile after it. */
  for (size_t i = 0; i < p->n_mappings; i++) {
    uint32_t ignored;
    if ((r = map_map(m, im, (uint32_t)i, &ignored)) < 0) return r;
  }
  uint32_t most_locs = 0, most_labs = 0;
  for (size_t i = 0; i < p->n_samples; i++) {
    if (p->samples[i].n_locations > most_locs) most_locs = p->samples[i].n_locations;
    if (p->samples[i].n_labels > most_labs) most_labs = p->samples[i].n_labels;
  }
  uint32_t *locs = pt_malloc(((size_t)most_locs + 1) * sizeof *locs);
  pt_pprof_label *labs = pt_malloc(((size_t)most_labs + 1) * sizeof *labs);
  if (!locs || !labs) r = -ENOMEM;
  for (size_t i = 0; i < p->n_samples && r == 0; i++) r = add_sample(m, im, &p->samples[i], locs, labs);
  free(locs);
  free(labs);
  return r;
}

int pt_pprof_merge_add(pt_pprof_merge *m, const pt_pprof *p, const char *name, char *err,
                       size_t errlen) {
  if (m->err) {
    pt_errf(err, errlen, "an earlier profile could not be merged");
    return m->err;
  }
  if (!p || !p->n_sample_types || !p->n_strings) {
    pt_errf(err, errlen, "not a profile");
    return -EINVAL;
  }
  if (m->n_wins) {
    int r = check_types(m, p, err, errlen);
    if (r < 0) return r;
  }
  /* One block of maps, all NONE (0xff bytes). */
  size_t total = p->n_strings + p->n_functions + p->n_mappings + p->n_locations;
  uint32_t *block = pt_malloc((total ? total : 1) * sizeof *block);
  int r = block ? 0 : -ENOMEM;
  if (block) {
    memset(block, 0xff, total * sizeof *block);
    in_map im = {p, block, block + p->n_strings, block + p->n_strings + p->n_functions,
                 block + p->n_strings + p->n_functions + p->n_mappings};
    r = add_inner(m, p, &im, name);
    free(block);
  }
  if (r < 0) {
    m->err = r;
    pt_errf(err, errlen, "%s",
            r == -EOVERFLOW ? "a sample's values add up past INT64_MAX"
            : r == -EFBIG   ? "the merged profile would be too large"
                            : "out of memory");
  }
  return r;
}

/* ---------------- result ---------------- */

static void free_result(pt_pprof_merge *m) {
  free(m->res_samples);
  free(m->res_locs);
  free(m->res_strs);
  free(m->res_comments);
  for (size_t i = 0; i < m->n_res_texts; i++) free(m->res_texts[i]);
  free(m->res_texts);
  m->res_samples = NULL;
  m->res_locs = NULL;
  m->res_strs = NULL;
  m->res_comments = NULL;
  m->res_texts = NULL;
  m->n_res_texts = 0;
  memset(&m->res, 0, sizeof m->res);
}


static char *textf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *textf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *s = pt_malloc((size_t)n + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

int pt_pprof_merge_result(pt_pprof_merge *m, const pt_pprof **out, char *err, size_t errlen) {
  *out = NULL;
  if (m->err) {
    pt_errf(err, errlen, "an earlier profile could not be merged");
    return m->err;
  }
  if (!m->n_wins) {
    pt_errf(err, errlen, "no profile to merge");
    return -EINVAL;
  }
  free_result(m);
  /* the windows' threads' CPU summed: only when every window had its line
   * and each parsed (a sum over some of them would pass for all) */
  char *tcl = m->n_wins > 1 && !m->tcl_bad && m->tcl.lines == m->n_wins
                  ? pt_tcl_format(&m->tcl, m->n_wins) : NULL;
  size_t n_texts = 1 + m->n_wins + (m->periods_differ ? 1 : 0) + (tcl ? 1 : 0);
  m->res_texts = pt_calloc(n_texts, sizeof *m->res_texts);
  m->res_samples = pt_calloc(m->n_samps ? m->n_samps : 1, sizeof *m->res_samples);
  m->res_locs = pt_calloc(m->n_locs ? m->n_locs : 1, sizeof *m->res_locs);
  m->res_strs = pt_malloc((m->n_strs + n_texts) * sizeof *m->res_strs);
  m->res_comments = pt_malloc((n_texts + m->n_in_comments) * sizeof *m->res_comments);
  if (!m->res_texts || !m->res_samples || !m->res_locs || !m->res_strs || !m->res_comments) {
    free(tcl);
    goto nomem;
  }
  /* The window: earliest start to latest end. */
  int64_t t0 = 0, end = 0, sum = 0, samples = 0;
  for (size_t i = 0; i < m->n_wins; i++) {
    const window *w = &m->wins[i];
    if (__builtin_add_overflow(sum, w->duration_nanos, &sum)) sum = INT64_MAX;
    if (__builtin_add_overflow(samples, w->samples, &samples)) samples = INT64_MAX;
    if (w->time_nanos <= 0) continue;
    int64_t e;
    if (__builtin_add_overflow(w->time_nanos, w->duration_nanos > 0 ? w->duration_nanos : 0, &e))
      e = INT64_MAX;
    if (!t0 || w->time_nanos < t0) t0 = w->time_nanos;
    if (e > end) end = e;
  }
  char span[64];
  pt_fmt_utc_ms(t0, 1, "unknown", span, sizeof span);
  m->res_texts[m->n_res_texts++] =
      textf("merged profile: %zu window%s, %" PRId64 " sample%s; samples with the same stack and "
            "labels are summed (polytoken profile merge)",
            m->n_wins, m->n_wins == 1 ? "" : "s", samples, samples == 1 ? "" : "s");
  for (size_t i = 0; i < m->n_wins; i++) {
    const window *w = &m->wins[i];
    char when[64];
    pt_fmt_utc_ms(w->time_nanos, 1, "unknown", when, sizeof when);
    m->res_texts[m->n_res_texts++] =
        textf("merged window %zu of %zu: %s, start %s, length %.3f s, %" PRId64 " sample%s",
              i + 1, m->n_wins, w->name, when, (double)w->duration_nanos / 1e9, w->samples,
              w->samples == 1 ? "" : "s");
  }
  if (m->periods_differ)
    m->res_texts[m->n_res_texts++] =
        textf("the windows' sampling periods differ; period is the largest, %" PRId64, m->period);
  if (tcl) m->res_texts[m->n_res_texts++] = tcl;   /* owned by res_texts from here */
  for (size_t i = 0; i < m->n_res_texts; i++)
    if (!m->res_texts[i]) goto nomem;

  pt_pprof *r = &m->res;
  memcpy(m->res_strs, m->strs, m->n_strs * sizeof *m->strs);
  for (size_t i = 0; i < m->n_res_texts; i++) {
    m->res_strs[m->n_strs + i] = (pt_pprof_str){m->res_texts[i], strlen(m->res_texts[i])};
    m->res_comments[i] = (uint32_t)(m->n_strs + i);
  }
  if (m->n_in_comments)
    memcpy(m->res_comments + m->n_res_texts, m->in_comments,
           m->n_in_comments * sizeof *m->in_comments);
  /* the pools were grown for every sample and location (never NULL: grow) */
  for (size_t i = 0; i < m->n_samps; i++) {
    const msamp *s = &m->samps[i];
    m->res_samples[i] = (pt_pprof_sample){m->locpool + s->loc_off, s->n_loc, s->n_lab,
                                          m->valpool + s->val_off, m->labpool + s->lab_off};
  }
  for (size_t i = 0; i < m->n_locs; i++) {
    const mloc *l = &m->locs[i];
    m->res_locs[i] = (pt_pprof_location){i + 1, l->address, l->mapping, l->n_lines,
                                         m->lines + l->line_off, l->folded};
  }
  r->sample_types = m->types;
  r->n_sample_types = m->n_types;
  r->samples = m->res_samples;
  r->n_samples = m->n_samps;
  r->mappings = m->maps;
  r->n_mappings = m->n_maps;
  r->locations = m->res_locs;
  r->n_locations = m->n_locs;
  r->functions = m->fns;
  r->n_functions = m->n_fns;
  r->strings = m->res_strs;
  r->n_strings = m->n_strs + m->n_res_texts;
  r->comments = m->res_comments;
  r->n_comments = m->n_res_texts + m->n_in_comments;
  r->drop_frames = m->drop_frames;
  r->keep_frames = m->keep_frames;
  r->time_nanos = t0;
  r->duration_nanos = t0 ? end - t0 : sum;
  r->period_type = m->period_type;
  r->period = m->period;
  r->default_sample_type = m->default_sample_type;
  r->doc_url = m->doc_url;
  *out = r;
  return 0;
nomem:
  free_result(m);
  pt_errf(err, errlen, "out of memory");
  return -ENOMEM;
}

size_t pt_pprof_merge_count(const pt_pprof_merge *m) { return m->n_wins; }

/* ---------------- lifecycle ---------------- */

int pt_pprof_merge_new(pt_pprof_merge **out) {
  *out = NULL;
  pt_pprof_merge *m = pt_calloc(1, sizeof *m);
  if (!m) return -ENOMEM;
  uint32_t zero;
  int r = intern(m, "", 0, &zero); /* string 0 is "" */
  if (r < 0) {
    pt_pprof_merge_del(m);
    return r;
  }
  *out = m;
  return 0;
}

void pt_pprof_merge_del(pt_pprof_merge *m) {
  if (!m) return;
  free_result(m);
  free(m->strs);
  free(m->is_comment);
  free(m->h_strs.s);
  while (m->arena) {
    chunk *c = m->arena;
    m->arena = c->next;
    free(c);
  }
  free(m->types);
  free(m->fns);
  free(m->h_fns.s);
  free(m->maps);
  free(m->h_maps.s);
  free(m->locs);
  free(m->h_locs.s);
  free(m->lines);
  free(m->samps);
  free(m->h_samps.s);
  free(m->locpool);
  free(m->labpool);
  free(m->valpool);
  free(m->in_comments);
  free(m->wins);
  pt_tcl_sum_free(&m->tcl);
  free(m);
}
