/*
 * pt_flame_model.c - the call tree, label sets and rows of the flame graph
 * page (see pt_flame_model.h for the model's DESIGN).
 *
 * Every "distinct X" of the model is interned through one open-addressing
 * hash table per kind (fm_tab): the table holds entry indexes (+1, 0 =
 * empty slot) and their 32-bit hashes, the entries live in the model's
 * arrays, and an equality callback compares a candidate with the entry.
 * Tables only grow (to keep the load under 1/2) and are freed once the
 * model is built; the trie is renumbered into preorder at the end, which
 * invalidates the node table, so it is never used after that.
 *
 * Allocation through pt_alloc.h; every failure unwinds to -ENOMEM and the
 * partial model is freed.
 */
#include "common/pt_flame_model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pt_alloc.h"
#include "common/pt_err.h"

/* ---- growable arrays and hash tables ---- */

/* Makes *p hold at least need elements of size elem (*cap counts them). */
static int fm_grow(void *pp, size_t *cap, size_t need, size_t elem) {
  void **p = pp;
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 16;
  while (nc < need) {
    if (nc > SIZE_MAX / 2 / elem) return -ENOMEM;
    nc *= 2;
  }
  void *q = pt_realloc(*p, nc * elem);
  if (!q) return -ENOMEM;
  *p = q;
  *cap = nc;
  return 0;
}

typedef struct fm_tab {
  uint32_t *slot; /* entry + 1; 0 empty */
  uint32_t *hash;
  size_t cap, n;  /* cap a power of two or 0 */
} fm_tab;

typedef bool (*fm_eq)(const void *key, uint32_t entry, const void *ctx);

static uint32_t fm_find(const fm_tab *t, uint32_t h, fm_eq eq, const void *key, const void *ctx) {
  if (!t->cap) return UINT32_MAX;
  size_t mask = t->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    if (!t->slot[i]) return UINT32_MAX;
    if (t->hash[i] == h && eq(key, t->slot[i] - 1, ctx)) return t->slot[i] - 1;
  }
}

static void fm_put(fm_tab *t, uint32_t h, uint32_t entry) {
  size_t mask = t->cap - 1, i = h & mask;
  while (t->slot[i]) i = (i + 1) & mask;
  t->slot[i] = entry + 1;
  t->hash[i] = h;
  t->n++;
}

/* Adds entry (known absent) under hash h. */
static int fm_add(fm_tab *t, uint32_t h, uint32_t entry) {
  if ((t->n + 1) * 2 > t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 64;
    fm_tab g = {pt_calloc(nc, sizeof *g.slot), pt_malloc(nc * sizeof *g.hash), nc, 0};
    if (!g.slot || !g.hash) {
      free(g.slot);
      free(g.hash);
      return -ENOMEM;
    }
    for (size_t i = 0; i < t->cap; i++)
      if (t->slot[i]) fm_put(&g, t->hash[i], t->slot[i] - 1);
    free(t->slot);
    free(t->hash);
    *t = g;
  }
  fm_put(t, h, entry);
  return 0;
}

static void fm_tab_free(fm_tab *t) {
  free(t->slot);
  free(t->hash);
  memset(t, 0, sizeof *t);
}

static uint32_t fm_hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
  return (uint32_t)(h ^ (h >> 32));
}

static uint32_t fm_mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return (uint32_t)(x ^ (x >> 32));
}

/* ---- the builder's private state ---- */

typedef struct fm_priv {
  fm_tab strs, frames, nodes, lsets, rows[2];
  size_t cap_strings, cap_frames, cap_nodes, cap_pairs, cap_off;
  size_t cap_rows[2][3]; /* node, labelset, values (in elements) */
  char **owned; /* strings formatted here */
  size_t n_owned, cap_owned;
  uint32_t *pairs; /* one sample's label pairs */
  size_t cap_tmp;
  size_t max_nodes;
} fm_priv;

typedef struct fm_ctx {
  pt_flame_model *m;
  fm_priv *p;
  char *err;
  size_t errlen;
  const pt_pprof *sp; /* the profile being added, and its string index ->  */
  uint32_t *smap;     /* model string index (UINT32_MAX: not yet) */
} fm_ctx;

/* ---- strings ---- */

typedef struct fm_strkey {
  const char *s;
  size_t len;
} fm_strkey;

static bool fm_str_eq(const void *key, uint32_t e, const void *ctx) {
  const fm_strkey *k = key;
  const pt_flame_model *m = ctx;
  return m->strings[e].len == k->len && !memcmp(m->strings[e].s, k->s, k->len);
}

/* Interns s[0..len) (NUL-terminated at s[len]); copy: the bytes are
 * temporary and are copied when new. */
static int fm_str(fm_ctx *c, const char *s, size_t len, bool copy, uint32_t *out) {
  pt_flame_model *m = c->m;
  fm_priv *p = c->p;
  fm_strkey k = {s, len};
  uint32_t h = fm_hash_bytes(s, len);
  uint32_t e = fm_find(&p->strs, h, fm_str_eq, &k, m);
  if (e != UINT32_MAX) {
    *out = e;
    return 0;
  }
  if (m->n_strings >= UINT32_MAX - 1) return -EFBIG;
  if (fm_grow(&m->strings, &p->cap_strings, m->n_strings + 1, sizeof *m->strings)) return -ENOMEM;
  if (copy) {
    if (fm_grow(&p->owned, &p->cap_owned, p->n_owned + 1, sizeof *p->owned)) return -ENOMEM;
    char *d = pt_malloc(len + 1);
    if (!d) return -ENOMEM;
    memcpy(d, s, len);
    d[len] = 0;
    p->owned[p->n_owned++] = d;
    s = d;
  }
  e = (uint32_t)m->n_strings;
  if (fm_add(&p->strs, h, e)) return -ENOMEM; /* an owned copy stays in owned */
  m->strings[m->n_strings++] = (pt_pprof_str){s, len};
  *out = e;
  return 0;
}

/* String i of pp: each is hashed once per profile (smap), not once per
 * use (a large profile names the same functions millions of times). */
static int fm_pstr(fm_ctx *c, const pt_pprof *pp, uint32_t i, uint32_t *out) {
  if (c->sp == pp && c->smap[i] != UINT32_MAX) {
    *out = c->smap[i];
    return 0;
  }
  int r = fm_str(c, pp->strings[i].s, pp->strings[i].len, false, out);
  if (!r && c->sp == pp) c->smap[i] = *out;
  return r;
}

/* ---- frames ---- */

static bool fm_frame_eq(const void *key, uint32_t e, const void *ctx) {
  const pt_flame_frame *k = key, *f = &((const pt_flame_model *)ctx)->frames[e];
  return f->name == k->name && f->file == k->file && f->kind == k->kind;
}

static int fm_frame(fm_ctx *c, uint32_t name, uint32_t file, pt_flame_kind kind, uint32_t *out) {
  pt_flame_model *m = c->m;
  fm_priv *p = c->p;
  pt_flame_frame k = {name, file, (uint8_t)kind};
  uint32_t h = fm_mix(((uint64_t)name << 32) | file, kind);
  uint32_t e = fm_find(&p->frames, h, fm_frame_eq, &k, m);
  if (e == UINT32_MAX) {
    if (m->n_frames >= UINT32_MAX - 1) return -EFBIG;
    if (fm_grow(&m->frames, &p->cap_frames, m->n_frames + 1, sizeof *m->frames)) return -ENOMEM;
    e = (uint32_t)m->n_frames;
    if (fm_add(&p->frames, h, e)) return -ENOMEM;
    m->frames[m->n_frames++] = k;
  }
  *out = e;
  return 0;
}

/* The frame of a location without lines: "[basename of its mapping]", or
 * its address without a mapping file. */
static int fm_nosym_frame(fm_ctx *c, const pt_pprof *pp, const pt_pprof_location *loc,
                          uint32_t *out) {
  char buf[64];
  uint32_t name, file = 0;
  const pt_pprof_str *mf = NULL;
  if (loc->mapping != PT_PPROF_NONE) mf = &pp->strings[pp->mappings[loc->mapping].filename];
  int r;
  if (mf && mf->len) {
    const char *b = mf->s + mf->len;
    while (b > mf->s && b[-1] != '/') b--;
    size_t bl = (size_t)(mf->s + mf->len - b);
    char *t = pt_malloc(bl + 3);
    if (!t) return -ENOMEM;
    t[0] = '[';
    memcpy(t + 1, b, bl);
    t[bl + 1] = ']';
    t[bl + 2] = 0;
    r = fm_str(c, t, bl + 2, true, &name);
    free(t);
    if (r) return r;
    if ((r = fm_str(c, mf->s, mf->len, false, &file))) return r;
  } else {
    int n = snprintf(buf, sizeof buf, "0x%" PRIx64, loc->address);
    if ((r = fm_str(c, buf, (size_t)n, true, &name))) return r;
  }
  return fm_frame(c, name, file, PT_FLAME_NOSYM, out);
}

/* ---- nodes ---- */

typedef struct fm_nodekey {
  uint32_t parent, frame;
  int64_t line;
} fm_nodekey;

static bool fm_node_eq(const void *key, uint32_t e, const void *ctx) {
  const fm_nodekey *k = key;
  const pt_flame_node *n = &((const pt_flame_model *)ctx)->nodes[e];
  return n->parent == k->parent && n->frame == k->frame && n->line == k->line;
}

static int fm_child(fm_ctx *c, uint32_t parent, uint32_t frame, int64_t line, uint32_t *out) {
  pt_flame_model *m = c->m;
  fm_priv *p = c->p;
  fm_nodekey k = {parent, frame, line};
  uint32_t h = fm_mix(((uint64_t)parent << 32) | frame, (uint64_t)line);
  uint32_t e = fm_find(&p->nodes, h, fm_node_eq, &k, m);
  if (e == UINT32_MAX) {
    if (m->n_nodes >= p->max_nodes) {
      pt_errf(c->err, c->errlen,
              "the call tree has over %zu nodes (distinct call paths): too large for one page",
              p->max_nodes);
      return -EFBIG;
    }
    if (fm_grow(&m->nodes, &p->cap_nodes, m->n_nodes + 1, sizeof *m->nodes)) return -ENOMEM;
    e = (uint32_t)m->n_nodes;
    if (fm_add(&p->nodes, h, e)) return -ENOMEM;
    m->nodes[m->n_nodes++] =
        (pt_flame_node){parent, frame, m->nodes[parent].depth + 1, line};
  }
  *out = e;
  return 0;
}

/* ---- label sets ---- */

typedef struct fm_lskey {
  const uint32_t *pairs;
  size_t n; /* pairs */
} fm_lskey;

static bool fm_ls_eq(const void *key, uint32_t e, const void *ctx) {
  const fm_lskey *k = key;
  const pt_flame_model *m = ctx;
  size_t a = m->lset_off[e], b = m->lset_off[e + 1];
  return b - a == k->n && !memcmp(m->lset_pairs + 2 * a, k->pairs, k->n * 2 * sizeof *k->pairs);
}

static int cmp_pair(const void *a, const void *b) {
  const uint32_t *x = a, *y = b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  if (x[1] != y[1]) return x[1] < y[1] ? -1 : 1;
  return 0;
}

/* The label set of sample s of pp. */
static int fm_labelset(fm_ctx *c, const pt_pprof *pp, const pt_pprof_sample *s, uint32_t *out) {
  pt_flame_model *m = c->m;
  fm_priv *p = c->p;
  int r;
  if (!s->n_labels) { /* set 0 */
    *out = 0;
    return 0;
  }
  if (fm_grow(&p->pairs, &p->cap_tmp, (size_t)s->n_labels * 2, sizeof *p->pairs)) return -ENOMEM;
  size_t n = 0;
  for (uint32_t i = 0; i < s->n_labels; i++) {
    const pt_pprof_label *l = &s->labels[i];
    uint32_t k, v;
    if (!l->str && !l->num && !l->num_unit) continue; /* nothing: go tool pprof drops it */
    if ((r = fm_pstr(c, pp, l->key, &k))) return r;
    if (l->str) {
      if ((r = fm_pstr(c, pp, l->str, &v))) return r;
    } else {
      /* a numeric label: its decimal value, with the unit if it has one */
      const pt_pprof_str *u = &pp->strings[l->num_unit];
      size_t bl = 24 + u->len;
      char *b = pt_malloc(bl);
      if (!b) return -ENOMEM;
      int bn = snprintf(b, bl, u->len ? "%" PRId64 " %s" : "%" PRId64, l->num, u->s);
      r = fm_str(c, b, (size_t)bn, true, &v);
      free(b);
      if (r) return r;
    }
    p->pairs[2 * n] = k;
    p->pairs[2 * n + 1] = v;
    n++;
  }
  qsort(p->pairs, n, 2 * sizeof *p->pairs, cmp_pair);
  size_t w = 0; /* the same pair twice counts once */
  for (size_t i = 0; i < n; i++)
    if (!w || cmp_pair(p->pairs + 2 * i, p->pairs + 2 * (w - 1))) {
      p->pairs[2 * w] = p->pairs[2 * i];
      p->pairs[2 * w + 1] = p->pairs[2 * i + 1];
      w++;
    }
  fm_lskey k = {p->pairs, w};
  if (!w) { /* every label was empty */
    *out = 0;
    return 0;
  }
  uint32_t h = fm_hash_bytes((const char *)p->pairs, w * 2 * sizeof *p->pairs);
  uint32_t e = fm_find(&p->lsets, h, fm_ls_eq, &k, m);
  if (e == UINT32_MAX) {
    size_t used = m->lset_off[m->n_lsets];
    if (fm_grow(&m->lset_pairs, &p->cap_pairs, 2 * (used + w), sizeof *m->lset_pairs) ||
        fm_grow(&m->lset_off, &p->cap_off, m->n_lsets + 2, sizeof *m->lset_off))
      return -ENOMEM;
    e = (uint32_t)m->n_lsets;
    if (fm_add(&p->lsets, h, e)) return -ENOMEM;
    memcpy(m->lset_pairs + 2 * used, p->pairs, w * 2 * sizeof *p->pairs);
    m->lset_off[++m->n_lsets] = (uint32_t)(used + w);
  }
  *out = e;
  return 0;
}

/* ---- rows ---- */

typedef struct fm_rowkey {
  uint32_t node, lset;
} fm_rowkey;

static bool fm_row_eq(const void *key, uint32_t e, const void *ctx) {
  const fm_rowkey *k = key;
  const pt_flame_rows *rows = ctx;
  return rows->node[e] == k->node && rows->labelset[e] == k->lset;
}

static int fm_row(fm_ctx *c, int which, uint32_t node, uint32_t lset, uint32_t *out) {
  pt_flame_model *m = c->m;
  fm_priv *p = c->p;
  pt_flame_rows *rows = &m->rows[which];
  fm_rowkey k = {node, lset};
  uint32_t h = fm_mix(node, lset);
  uint32_t e = fm_find(&p->rows[which], h, fm_row_eq, &k, rows);
  if (e == UINT32_MAX) {
    if (fm_grow(&rows->node, &p->cap_rows[which][0], rows->n + 1, sizeof *rows->node) ||
        fm_grow(&rows->labelset, &p->cap_rows[which][1], rows->n + 1, sizeof *rows->labelset) ||
        fm_grow(&rows->values, &p->cap_rows[which][2], (rows->n + 1) * m->n_types,
                sizeof *rows->values))
      return -ENOMEM;
    e = (uint32_t)rows->n;
    if (fm_add(&p->rows[which], h, e)) return -ENOMEM;
    rows->node[e] = node;
    rows->labelset[e] = lset;
    memset(rows->values + (size_t)e * m->n_types, 0, m->n_types * sizeof *rows->values);
    rows->n++;
  }
  *out = e;
  return 0;
}

/* ---- one profile ---- */

static int fm_overflow(fm_ctx *c) {
  pt_errf(c->err, c->errlen, "the sample values overflow a 64-bit sum");
  return -EINVAL;
}

static int fm_add_samples(fm_ctx *c, const pt_pprof *pp, int which, const int32_t *type_map);

static int fm_add_profile(fm_ctx *c, const pt_pprof *pp, int which, const int32_t *type_map) {
  c->smap = pt_malloc(pp->n_strings * sizeof *c->smap);
  if (!c->smap) return -ENOMEM;
  memset(c->smap, 0xff, pp->n_strings * sizeof *c->smap);
  c->sp = pp;
  int r = fm_add_samples(c, pp, which, type_map);
  free(c->smap);
  c->smap = NULL;
  c->sp = NULL;
  return r;
}

static int fm_add_samples(fm_ctx *c, const pt_pprof *pp, int which, const int32_t *type_map) {
  pt_flame_model *m = c->m;
  int r;
  for (size_t si = 0; si < pp->n_samples; si++) {
    const pt_pprof_sample *s = &pp->samples[si];
    bool any = false;
    for (size_t t = 0; t < pp->n_sample_types; t++) any |= s->values[t] != 0;
    if (!any) continue;
    uint32_t node = 0;
    for (uint32_t li = s->n_locations; li-- > 0;) {
      const pt_pprof_location *loc = &pp->locations[s->locations[li]];
      uint32_t f;
      if (!loc->n_lines) {
        if ((r = fm_nosym_frame(c, pp, loc, &f))) return r;
        if ((r = fm_child(c, node, f, 0, &node))) return r;
        continue;
      }
      for (uint32_t k = loc->n_lines; k-- > 0;) { /* the physical function first */
        const pt_pprof_line *ln = &loc->lines[k];
        const pt_pprof_function *fn = &pp->functions[ln->function];
        uint32_t name, file;
        uint32_t ni = pp->strings[fn->name].len ? fn->name : fn->system_name;
        if (pp->strings[ni].len) {
          if ((r = fm_pstr(c, pp, ni, &name))) return r;
        } else if ((r = fm_str(c, "??", 2, true, &name))) {
          return r;
        }
        if ((r = fm_pstr(c, pp, fn->filename, &file))) return r;
        if ((r = fm_frame(c, name, file, k + 1 < loc->n_lines ? PT_FLAME_INLINE : PT_FLAME_FUNC,
                          &f)))
          return r;
        if ((r = fm_child(c, node, f, ln->line, &node))) return r;
      }
    }
    uint32_t ls, row;
    if ((r = fm_labelset(c, pp, s, &ls))) return r;
    if ((r = fm_row(c, which, node, ls, &row))) return r;
    int64_t *v = m->rows[which].values + (size_t)row * m->n_types;
    for (size_t t = 0; t < m->n_types; t++) {
      int32_t st = type_map ? type_map[t] : (int32_t)t;
      if (st < 0) continue;
      int64_t x = s->values[st];
      if (__builtin_add_overflow(v[t], x, &v[t]) ||
          __builtin_add_overflow(m->totals[which][t], x, &m->totals[which][t]))
        return fm_overflow(c);
    }
    m->n_samples[which]++;
  }
  return 0;
}

/* ---- preorder ---- */

/* Renumbers the trie in preorder (children in creation order) and the
 * rows' nodes with it. */
static int fm_preorder(pt_flame_model *m) {
  size_t n = m->n_nodes;
  uint32_t *first = pt_malloc(n * sizeof *first), *last = pt_malloc(n * sizeof *last),
           *next = pt_malloc(n * sizeof *next), *nid = pt_malloc(n * sizeof *nid);
  pt_flame_node *nn = pt_malloc(n * sizeof *nn);
  int r = -ENOMEM;
  if (!first || !last || !next || !nid || !nn) goto out;
  for (size_t i = 0; i < n; i++) first[i] = last[i] = next[i] = UINT32_MAX;
  for (uint32_t i = 1; i < n; i++) {
    uint32_t p = m->nodes[i].parent;
    if (last[p] == UINT32_MAX) first[p] = i;
    else next[last[p]] = i;
    last[p] = i;
  }
  uint32_t v = 0, k = 0;
  nid[0] = k++;
  for (;;) {
    if (first[v] != UINT32_MAX) {
      v = first[v];
    } else {
      while (v && next[v] == UINT32_MAX) v = m->nodes[v].parent;
      if (!v) break;
      v = next[v];
    }
    nid[v] = k++;
  }
  for (size_t i = 0; i < n; i++) {
    nn[nid[i]] = m->nodes[i];
    nn[nid[i]].parent = nid[m->nodes[i].parent];
  }
  free(m->nodes);
  m->nodes = nn;
  nn = NULL;
  for (int w = 0; w < 2; w++)
    for (size_t i = 0; i < m->rows[w].n; i++) m->rows[w].node[i] = nid[m->rows[w].node[i]];
  r = 0;
out:
  free(first);
  free(last);
  free(next);
  free(nid);
  free(nn);
  return r;
}

/* ---- the model ---- */

static void fm_priv_free(fm_priv *p, bool strings_too) {
  if (!p) return;
  fm_tab_free(&p->strs);
  fm_tab_free(&p->frames);
  fm_tab_free(&p->nodes);
  fm_tab_free(&p->lsets);
  fm_tab_free(&p->rows[0]);
  fm_tab_free(&p->rows[1]);
  free(p->pairs);
  p->pairs = NULL;
  if (strings_too) {
    for (size_t i = 0; i < p->n_owned; i++) free(p->owned[i]);
    free(p->owned);
    free(p);
  }
}

void pt_flame_model_free(pt_flame_model *m) {
  if (!m) return;
  fm_priv_free(m->priv, true);
  free(m->base_type);
  free(m->strings);
  free(m->frames);
  free(m->nodes);
  free(m->lset_pairs);
  free(m->lset_off);
  for (int w = 0; w < 2; w++) {
    free(m->rows[w].node);
    free(m->rows[w].labelset);
    free(m->rows[w].values);
    free(m->totals[w]);
  }
  free(m);
}

static bool same_str(const pt_pprof *a, uint32_t i, const pt_pprof *b, uint32_t j) {
  return a->strings[i].len == b->strings[j].len &&
         !memcmp(a->strings[i].s, b->strings[j].s, a->strings[i].len);
}

int pt_flame_model_build(const pt_pprof *cur, const pt_pprof *base, size_t max_nodes,
                         pt_flame_model **out, char *err, size_t errlen) {
  *out = NULL;
  int r = -ENOMEM;
  pt_flame_model *m = pt_calloc(1, sizeof *m);
  if (!m) goto fail;
  fm_priv *p = pt_calloc(1, sizeof *p);
  if (!p) goto fail;
  m->priv = p;
  p->max_nodes = max_nodes ? max_nodes : PT_FLAME_MAX_NODES;
  if (p->max_nodes > UINT32_MAX - 1) p->max_nodes = UINT32_MAX - 1;
  m->n_types = cur->n_sample_types;
  m->has_base = base != NULL;
  for (int w = 0; w < 2; w++)
    if (!(m->totals[w] = pt_calloc(m->n_types, sizeof *m->totals[w]))) goto fail;
  if (base) {
    if (!(m->base_type = pt_malloc(m->n_types * sizeof *m->base_type))) goto fail;
    for (size_t t = 0; t < m->n_types; t++) {
      m->base_type[t] = -1;
      for (size_t u = 0; u < base->n_sample_types && m->base_type[t] < 0; u++)
        if (same_str(cur, cur->sample_types[t].type, base, base->sample_types[u].type) &&
            same_str(cur, cur->sample_types[t].unit, base, base->sample_types[u].unit))
          m->base_type[t] = (int32_t)u;
    }
  }
  fm_ctx c = {m, p, err, errlen, NULL, NULL};
  uint32_t z;
  if (fm_str(&c, "", 0, false, &z)) goto fail; /* string 0 */
  if (fm_grow(&m->nodes, &p->cap_nodes, 1, sizeof *m->nodes) ||
      fm_grow(&m->lset_off, &p->cap_off, 2, sizeof *m->lset_off))
    goto fail;
  m->nodes[0] = (pt_flame_node){0, PT_FLAME_NO_FRAME, 0, 0};
  m->n_nodes = 1;
  m->lset_off[0] = m->lset_off[1] = 0; /* set 0: empty (never looked up) */
  m->n_lsets = 1;
  if ((r = fm_add_profile(&c, cur, 0, NULL))) goto fail;
  if (base && (r = fm_add_profile(&c, base, 1, m->base_type))) goto fail;
  r = -ENOMEM;
  fm_priv_free(p, false); /* the tables: the node table dies with preorder */
  if (fm_preorder(m)) goto fail;
  *out = m;
  return 0;
fail:
  if (r == -ENOMEM) pt_errf(err, errlen, "out of memory building the call tree");
  pt_flame_model_free(m);
  return r;
}
