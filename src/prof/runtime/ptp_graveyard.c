/*
 * ptp_graveyard.c - names of exited threads (see ptp_graveyard.h).
 *
 * Process-wide state (runtime/ptp_process.h): `grave`, a ring of the names
 * remembered since the oldest unreleased cut, in exit order, guarded by
 * grave.mu. Entry k (a running count) lives at ring[k % cap]; [head, next)
 * are live. Each entry carries the epoch it was put in; a cut returns the
 * current epoch and starts the next, a release drops the entries of epochs
 * up to its token (a prefix: epochs only grow along the ring). While a
 * sampler runs the ring grows by doubling up to PTP_GRAVEYARD_MAX entries
 * (full at the max, the oldest entry is overwritten and counted); while
 * none runs at most 256 are live, the oldest overwritten. The array is
 * never freed (nor shrunk).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof/runtime/ptp_graveyard.h"
#include "prof/ptp_alloc.h"

#define GRAVE_INIT 256u

typedef struct grave_ent {
  uint32_t tid;
  uint64_t epoch;
  char name[16];
} grave_ent;

static struct {
  pthread_mutex_t mu;
  pthread_once_t once;
  grave_ent *ring;
  size_t cap;                    /* 0 or a power of two */
  uint64_t head, next;           /* live entries: [head, next) */
  uint64_t epoch;                /* of the entries put now */
  uint64_t dropped;
  int keep_all;                  /* a sampler runs: grow up to the max */
} grave = { .mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

static void fork_prepare(void) { pthread_mutex_lock(&grave.mu); }
static void fork_release(void) { pthread_mutex_unlock(&grave.mu); }
static void init_once(void) { (void)pthread_atfork(fork_prepare, fork_release, fork_release); }

/* Room for one more entry: grows the ring (copying the live entries in
 * order), or at the max (or without memory) drops the oldest. grave.mu held. */
static int make_room(void) {
  size_t live = (size_t)(grave.next - grave.head);
  size_t limit = grave.keep_all ? PTP_GRAVEYARD_MAX : GRAVE_INIT;
  if (live < grave.cap && live < limit) return 0;
  if (live < limit && grave.cap < PTP_GRAVEYARD_MAX) {
    size_t nc = grave.cap ? grave.cap * 2 : GRAVE_INIT;
    grave_ent *r = ptp_malloc(nc * sizeof *r);
    if (r) {
      for (size_t i = 0; i < live; i++) r[i] = grave.ring[(grave.head + i) & (grave.cap - 1)];
      free(grave.ring);
      grave.ring = r;
      grave.cap = nc;
      grave.head = 0;
      grave.next = live;
      return 0;
    }
  }
  if (!grave.cap) return -ENOMEM;
  grave.head++;                  /* full: the oldest name goes */
  if (grave.keep_all) grave.dropped++;
  return 0;
}

void ptp_graveyard_keep(int on) {
  pthread_once(&grave.once, init_once);
  pthread_mutex_lock(&grave.mu);
  grave.keep_all = on;
  pthread_mutex_unlock(&grave.mu);
}

void ptp_graveyard_put(uint32_t tid, const char *name) {
  pthread_once(&grave.once, init_once);
  pthread_mutex_lock(&grave.mu);
  if (make_room() == 0) {
    grave_ent *e = &grave.ring[grave.next & (grave.cap - 1)];
    e->tid = tid;
    e->epoch = grave.epoch;
    snprintf(e->name, sizeof e->name, "%s", name);
    grave.next++;
  } else {
    grave.dropped++;
  }
  pthread_mutex_unlock(&grave.mu);
}

uint64_t ptp_graveyard_cut(void) {
  pthread_once(&grave.once, init_once);
  pthread_mutex_lock(&grave.mu);
  uint64_t t = grave.epoch++;
  pthread_mutex_unlock(&grave.mu);
  return t;
}

void ptp_graveyard_release(uint64_t token) {
  pthread_once(&grave.once, init_once);
  pthread_mutex_lock(&grave.mu);
  while (grave.head < grave.next && grave.ring[grave.head & (grave.cap - 1)].epoch <= token)
    grave.head++;
  pthread_mutex_unlock(&grave.mu);
}

int ptp_graveyard_get(uint32_t tid, char name[16]) {
  name[0] = 0;
  int rc = -ENOENT;
  pthread_once(&grave.once, init_once);
  pthread_mutex_lock(&grave.mu);
  for (uint64_t k = grave.next; k > grave.head; k--) {   /* newest first */
    const grave_ent *e = &grave.ring[(k - 1) & (grave.cap - 1)];
    if (e->tid == tid) {
      memcpy(name, e->name, 16);
      rc = 0;
      break;
    }
  }
  pthread_mutex_unlock(&grave.mu);
  return rc;
}

typedef struct tid_idx { uint32_t tid; uint32_t i; } tid_idx;

static int cmp_tid_idx(const void *a, const void *b) {
  const tid_idx *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

void ptp_graveyard_get_many(const uint32_t *tids, size_t n, char (*names)[16]) {
  size_t want = 0;
  for (size_t i = 0; i < n; i++) want += names[i][0] == 0;
  if (!want) return;
  pthread_once(&grave.once, init_once);
  pthread_mutex_lock(&grave.mu);
  size_t live = (size_t)(grave.next - grave.head);
  tid_idx *ix = live > 8 ? ptp_malloc(live * sizeof *ix) : NULL;
  if (!ix) {
    /* few names (or no memory for the index): one scan per thread */
    pthread_mutex_unlock(&grave.mu);
    for (size_t i = 0; i < n; i++)
      if (!names[i][0]) (void)ptp_graveyard_get(tids[i], names[i]);
    return;
  }
  for (size_t k = 0; k < live; k++)
    ix[k] = (tid_idx){ grave.ring[(grave.head + k) & (grave.cap - 1)].tid, (uint32_t)k };
  qsort(ix, live, sizeof *ix, cmp_tid_idx);
  for (size_t i = 0; i < n; i++) {
    if (names[i][0]) continue;
    /* the last entry of tids[i] in (tid, age) order is its newest */
    size_t lo = 0, hi = live;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (ix[mid].tid <= tids[i]) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0 && ix[lo - 1].tid == tids[i])
      memcpy(names[i], grave.ring[(grave.head + ix[lo - 1].i) & (grave.cap - 1)].name, 16);
  }
  pthread_mutex_unlock(&grave.mu);
  free(ix);
}

uint64_t ptp_graveyard_dropped(void) {
  pthread_mutex_lock(&grave.mu);
  uint64_t d = grave.dropped;
  pthread_mutex_unlock(&grave.mu);
  return d;
}
