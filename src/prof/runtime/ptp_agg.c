/*
 * ptp_agg.c - a hash table of distinct stacks (see ptp_agg.h).
 *
 * Layout: entries in a growing array; their frames in one growing arena
 * (entries hold offsets, so growth never invalidates them); an open-
 * addressing index (linear probing, load <= 1/2) of entry numbers + 1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prof/runtime/ptp_agg.h"
#include "prof/ptp_alloc.h"

typedef struct entry {
  uint64_t hash;
  uint64_t count;
  size_t off;           /* into frames arena */
  uint32_t tid;
  uint32_t nid;         /* thread name: names[nid - 1], 0 = not known */
  uint16_t n, flags;
  ptp_label_ids lb;     /* part of the key: the same stack under two tasks
                           or label sets is two entries */
} entry;

struct ptp_agg {
  entry *ents;
  size_t nents, capents;
  uintptr_t *arena;
  size_t narena, caparena;
  uint32_t *index;      /* entry number + 1, 0 = empty */
  size_t capindex;      /* power of two */
  uint64_t total;
  char names[PTP_AGG_NAMES][16];   /* distinct thread names of the window */
  uint32_t nnames;
};

static uint64_t mix(uint64_t x) {
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27; x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint64_t hash_of(uint32_t tid, uint32_t nid, uint16_t flags, const ptp_label_ids *lb, const uintptr_t *f,
                        uint16_t n) {
  uint64_t h = mix(((uint64_t)tid << 32) | ((uint64_t)flags << 16) | n) ^ nid;
  h = mix(h ^ lb->task) + lb->n;
  for (uint32_t i = 0; i < 2 * lb->n; i++) h = mix(h ^ lb->kv[i]);
  for (uint16_t i = 0; i < n; i++) h = mix(h ^ (uint64_t)f[i]) + i;
  return h;
}

int ptp_agg_new(ptp_agg **out) {
  ptp_agg *a = ptp_calloc(1, sizeof *a);
  if (!a) return -ENOMEM;
  a->capindex = 1024;
  a->index = ptp_calloc(a->capindex, sizeof *a->index);
  if (!a->index) {
    free(a);
    return -ENOMEM;
  }
  *out = a;
  return 0;
}

void ptp_agg_del(ptp_agg *a) {
  if (!a) return;
  free(a->ents);
  free(a->arena);
  free(a->index);
  free(a);
}

void ptp_agg_reset(ptp_agg *a) {
  a->nents = 0;
  a->narena = 0;
  a->total = 0;
  a->nnames = 0;
  memset(a->index, 0, a->capindex * sizeof *a->index);
}

static int grow_index(ptp_agg *a) {
  size_t ncap = a->capindex * 2;
  uint32_t *ni = ptp_calloc(ncap, sizeof *ni);
  if (!ni) return -ENOMEM;
  for (size_t i = 0; i < a->nents; i++) {
    size_t k = a->ents[i].hash & (ncap - 1);
    while (ni[k]) k = (k + 1) & (ncap - 1);
    ni[k] = (uint32_t)(i + 1);
  }
  free(a->index);
  a->index = ni;
  a->capindex = ncap;
  return 0;
}

static int same_labels(const ptp_label_ids *x, const ptp_label_ids *y) {
  if (x->task != y->task || x->n != y->n) return 0;
  for (uint32_t i = 0; i < 2 * x->n; i++)
    if (x->kv[i] != y->kv[i]) return 0;
  return 1;
}

/* The id of a thread name (1-based), interned into a; 0 for none or when
 * the table is full. A window sees few distinct names: a linear scan. */
static uint32_t name_id(ptp_agg *a, const char *name) {
  if (!name || !name[0]) return 0;
  size_t len = strnlen(name, 15);
  for (uint32_t i = 0; i < a->nnames; i++)
    if (strncmp(a->names[i], name, 16) == 0) return i + 1;
  if (a->nnames == PTP_AGG_NAMES) return 0;
  memcpy(a->names[a->nnames], name, len);
  a->names[a->nnames][len] = 0;
  return ++a->nnames;
}

int ptp_agg_add(ptp_agg *a, uint32_t tid, uint16_t flags, const ptp_label_ids *labels,
                const uintptr_t *frames, uint16_t n, uint64_t count) {
  return ptp_agg_add_named(a, tid, NULL, flags, labels, frames, n, count);
}

int ptp_agg_add_named(ptp_agg *a, uint32_t tid, const char *name, uint16_t flags,
                      const ptp_label_ids *labels, const uintptr_t *frames, uint16_t n,
                      uint64_t count) {
  if (n == 0) return -EINVAL;
  uint32_t nid = name_id(a, name);
  /* Normalized copy: ids past n are ignored, so they are zero in the key. */
  ptp_label_ids lb = {0};
  if (labels) {
    lb.task = labels->task;
    lb.n = labels->n <= PTP_LABELS_MAX ? labels->n : PTP_LABELS_MAX;
    for (uint32_t i = 0; i < 2 * lb.n; i++) lb.kv[i] = labels->kv[i];
  }
  uint64_t h = hash_of(tid, nid, flags, &lb, frames, n);
  size_t k = h & (a->capindex - 1);
  for (uint32_t v; (v = a->index[k]); k = (k + 1) & (a->capindex - 1)) {
    entry *e = &a->ents[v - 1];
    if (e->hash == h && e->tid == tid && e->nid == nid && e->flags == flags && e->n == n && same_labels(&e->lb, &lb) &&
        memcmp(a->arena + e->off, frames, n * sizeof *frames) == 0) {
      e->count += count;
      a->total += count;
      return 0;
    }
  }
  /* New entry: make room everywhere first so a failure changes nothing. */
  if ((a->nents + 1) * 2 > a->capindex) {
    if (a->nents + 1 >= UINT32_MAX / 2 || grow_index(a) < 0) return -ENOMEM;
    k = h & (a->capindex - 1);
    while (a->index[k]) k = (k + 1) & (a->capindex - 1);
  }
  if (a->nents == a->capents) {
    size_t ncap = a->capents ? a->capents * 2 : 256;
    entry *ne = ptp_realloc(a->ents, ncap * sizeof *ne);
    if (!ne) return -ENOMEM;
    a->ents = ne;
    a->capents = ncap;
  }
  if (a->narena + n > a->caparena) {
    size_t ncap = a->caparena ? a->caparena * 2 : 4096;
    while (ncap < a->narena + n) ncap *= 2;
    uintptr_t *na = ptp_realloc(a->arena, ncap * sizeof *na);
    if (!na) return -ENOMEM;
    a->arena = na;
    a->caparena = ncap;
  }
  memcpy(a->arena + a->narena, frames, n * sizeof *frames);
  a->ents[a->nents] = (entry){ .hash = h, .count = count, .off = a->narena, .tid = tid,
                               .nid = nid, .n = n, .flags = flags, .lb = lb };
  a->narena += n;
  a->index[k] = (uint32_t)(++a->nents);
  a->total += count;
  return 0;
}

size_t ptp_agg_size(const ptp_agg *a) { return a->nents; }
uint64_t ptp_agg_total(const ptp_agg *a) { return a->total; }

int ptp_agg_samples(const ptp_agg *a, ptp_sample **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (a->nents == 0) return 0;
  ptp_sample *s = ptp_malloc(a->nents * sizeof *s);
  if (!s) return -ENOMEM;
  for (size_t i = 0; i < a->nents; i++) {
    const entry *e = &a->ents[i];
    s[i] = (ptp_sample){ .count = e->count, .tid = e->tid, .nframes = e->n, .flags = e->flags,
                         .frames = a->arena + e->off, .ids = e->lb,
                         .thread_name = e->nid ? a->names[e->nid - 1] : NULL };
  }
  *out = s;
  *n = a->nents;
  return 0;
}

static int cmp_u32(const void *x, const void *y) {
  uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
  return a < b ? -1 : a > b;
}

int ptp_agg_tids(const ptp_agg *a, uint32_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (a->nents == 0) return 0;
  uint32_t *t = ptp_malloc(a->nents * sizeof *t);
  if (!t) return -ENOMEM;
  for (size_t i = 0; i < a->nents; i++) t[i] = a->ents[i].tid;
  qsort(t, a->nents, sizeof *t, cmp_u32);
  size_t w = 0;
  for (size_t i = 0; i < a->nents; i++)
    if (w == 0 || t[w - 1] != t[i]) t[w++] = t[i];
  *out = t;
  *n = w;
  return 0;
}
