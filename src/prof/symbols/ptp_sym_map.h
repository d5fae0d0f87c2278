/*
 * ptp_sym_map.h - a small open-addressing hash map from a nonzero 64-bit key
 * to a 32-bit value, shared by the symbolizer (PC cache) and the pprof
 * encoder (location, function and string dedup). Header-only, internal.
 *
 * Key 0 is reserved as "empty slot": callers map their keys so that 0 never
 * occurs (addresses are stored as addr + 1, hashes are forced odd...).
 * Not thread-safe; allocates; never call from a signal handler.
 */
#ifndef PTP_SYM_MAP_H
#define PTP_SYM_MAP_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "prof/ptp_alloc.h"

typedef struct ptp_u64map {
  uint64_t *keys;   /* 0 = empty */
  uint32_t *vals;
  size_t cap;       /* power of two, or 0 */
  size_t n;
} ptp_u64map;

static inline uint64_t ptp_mix64(uint64_t x) {
  /* splitmix64 finalizer: good avalanche for addresses that differ in a few bits */
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27; x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

static inline uint64_t ptp_hash_bytes(const void *p, size_t n, uint64_t seed) {
  /* FNV-1a over bytes, then mixed; used for strings and small tuples. */
  const unsigned char *c = p;
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (size_t i = 0; i < n; i++) { h ^= c[i]; h *= 0x100000001b3ULL; }
  return ptp_mix64(h);
}

static inline void ptp_u64map_free(ptp_u64map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static inline void ptp_u64map_clear(ptp_u64map *m) {
  if (m->keys) memset(m->keys, 0, m->cap * sizeof *m->keys);
  m->n = 0;
}

/* Slot of key (found or the empty slot where it would go). cap must be > 0. */
static inline size_t ptp_u64map_slot(const ptp_u64map *m, uint64_t key) {
  size_t mask = m->cap - 1;
  size_t i = (size_t)ptp_mix64(key) & mask;
  while (m->keys[i] != 0 && m->keys[i] != key) i = (i + 1) & mask;
  return i;
}

/* Returns 1 and *val if found, 0 if not. */
static inline int ptp_u64map_get(const ptp_u64map *m, uint64_t key, uint32_t *val) {
  if (!m->cap) return 0;
  size_t i = ptp_u64map_slot(m, key);
  if (m->keys[i] != key) return 0;
  *val = m->vals[i];
  return 1;
}

static inline int ptp_u64map_grow(ptp_u64map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  uint64_t *ok = m->keys;
  uint32_t *ov = m->vals;
  size_t ocap = m->cap;
  uint64_t *nk = ptp_calloc(ncap, sizeof *nk);
  uint32_t *nv = ptp_malloc(ncap * sizeof *nv);
  if (!nk || !nv) { free(nk); free(nv); return -ENOMEM; }
  m->keys = nk; m->vals = nv; m->cap = ncap;
  for (size_t i = 0; i < ocap; i++) {
    if (!ok[i]) continue;
    size_t j = ptp_u64map_slot(m, ok[i]);
    nk[j] = ok[i];
    nv[j] = ov[i];
  }
  free(ok);
  free(ov);
  return 0;
}

/* Inserts or overwrites. Returns 0 or -ENOMEM. key must be nonzero. */
static inline int ptp_u64map_put(ptp_u64map *m, uint64_t key, uint32_t val) {
  if ((m->n + 1) * 4 > m->cap * 3) {   /* keep load <= 3/4 */
    int r = ptp_u64map_grow(m);
    if (r) return r;
  }
  size_t i = ptp_u64map_slot(m, key);
  if (m->keys[i] != key) { m->keys[i] = key; m->n++; }
  m->vals[i] = val;
  return 0;
}

#endif
