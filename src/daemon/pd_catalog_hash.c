/*
 * pd_catalog_hash.c - the catalog's hash cache and the incremental hashes of
 * append-only files (units: pd_catalog_internal.h).
 *
 * DESIGN
 *  - The hash cache holds exactly the files seen by the last refresh, keyed
 *    by (dev, ino, size, mtime_ns, ctime_ns); a file whose key is unchanged
 *    is not re-read. The refresh builds the next cache aside
 *    (pd_cat_builder_cache); pd_catalog_refresh_end swaps it in.
 *  - An append-only file (log, telemetry) keeps a running SHA-256 of the
 *    prefix hashed last time (struct inc_hash), so a refresh hashes only
 *    what was appended. A shrunk file or a changed tail starts from 0.
 * Threads: all but pd_cat_incs_free run on the refresh worker and touch only
 * their job plus the cache and running states frozen while it runs.
 */
#include "daemon/pd_catalog_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

void pd_cat_incs_free(inc_hash *v, size_t n) {
  for (size_t i = 0; i < n; i++) pt_sha256_del(v[i].state);
  free(v);
}

const char *pd_cat_cache_lookup(const hash_cache_ent *cache, size_t n_cache,
                                const struct stat *st, uint64_t size) {
  for (size_t i = 0; i < n_cache; i++) {
    const hash_cache_ent *h = &cache[i];
    if (h->dev == st->st_dev && h->ino == st->st_ino && h->size == size &&
        h->mtime_ns == pd_cat_mtime_ns(st) && h->ctime_ns == pd_cat_ctime_ns(st))
      return h->sha256;
  }
  return NULL;
}

int pd_cat_builder_cache(builder *b, const pd_catalog_entry *e) {
  if (b->n_cache == b->cap_cache) {
    size_t cap = b->cap_cache ? b->cap_cache * 2 : 16;
    hash_cache_ent *v = realloc(b->cache, cap * sizeof *v);
    if (!v) return -ENOMEM;
    b->cache = v;
    b->cap_cache = cap;
  }
  hash_cache_ent *h = &b->cache[b->n_cache++];
  h->dev = e->dev;
  h->ino = e->ino;
  h->size = e->size;
  h->mtime_ns = e->mtime_ns;
  h->ctime_ns = e->ctime_ns;
  memcpy(h->sha256, e->sha256, sizeof h->sha256);
  return 0;
}

static const inc_hash *inc_lookup(const pd_catalog_job *j, const pd_catalog_entry *e) {
  for (size_t i = 0; i < j->n_incs; i++)
    if (j->incs[i].dev == e->dev && j->incs[i].ino == e->ino) return &j->incs[i];
  return NULL;
}

/* Reads the last min(INC_TAIL, len) bytes before `len` of fd into tail.
 * Returns the count, or -EIO. */
static ssize_t read_tail(int fd, uint64_t len, unsigned char *tail) {
  size_t want = len < INC_TAIL ? (size_t)len : INC_TAIL;
  size_t got = 0;
  while (got < want) {
    ssize_t n = pread(fd, tail + got, want - got, (off_t)(len - want + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -EIO;
    got += (size_t)n;
  }
  return (ssize_t)got;
}

/* Records `state` (stolen on success) as e's running hash for the next
 * refresh, with the tail of the hashed prefix read from fd. Returns 0,
 * -ENOMEM or -EIO. */
static int inc_keep(pd_catalog_job *j, const pd_catalog_entry *e, pt_sha256 *state, int fd) {
  if (j->n_new_incs == j->cap_new_incs) {
    size_t cap = j->cap_new_incs ? j->cap_new_incs * 2 : 8;
    inc_hash *v = realloc(j->new_incs, cap * sizeof *v);
    if (!v) return -ENOMEM;
    j->new_incs = v;
    j->cap_new_incs = cap;
  }
  inc_hash *h = &j->new_incs[j->n_new_incs];
  ssize_t t = read_tail(fd, e->size, h->tail);
  if (t < 0) return (int)t;
  h->dev = e->dev;
  h->ino = e->ino;
  h->len = e->size;
  h->state = state;
  h->tail_len = (size_t)t;
  j->n_new_incs++;
  return 0;
}

/* Hashes the first e->size bytes of the append-only file fd into
 * e->sha256, starting from the running state of its first `len` bytes when
 * the last refresh left one for this (dev, ino) and the file has not shrunk
 * below it. Returns 0, -ENOMEM, or -EIO (read failed or the file shrank
 * under us: not listed). */
int pd_cat_hash_append(pd_catalog_job *j, int fd, pd_catalog_entry *e) {
  const inc_hash *old = inc_lookup(j, e);
  pt_sha256 *h = NULL;
  uint64_t from = 0;
  unsigned char tail[INC_TAIL];
  if (old && old->len <= e->size &&
      (old->tail_len == 0 || (read_tail(fd, old->len, tail) == (ssize_t)old->tail_len &&
                              memcmp(tail, old->tail, old->tail_len) == 0))) {
    if (!(h = pt_sha256_dup(old->state))) return -ENOMEM;
    from = old->len;
    if (lseek(fd, (off_t)from, SEEK_SET) != (off_t)from) {
      pt_sha256_del(h);
      return -EIO;
    }
  } else if (!(h = pt_sha256_new())) {
    return -ENOMEM;
  }
  size_t got = 0;
  int r = pt_sha256_update_fd(h, fd, (size_t)(e->size - from), &got);
  j->bytes_hashed += got;
  if (r == 0 && got != e->size - from) r = -EIO;
  if (r == 0) r = pt_sha256_peek(h, e->sha256);
  if (r == 0) {
    int k = inc_keep(j, e, h, fd);
    if (k < 0) pt_sha256_del(h); /* -EIO: no state kept; the hash stands */
    return k == -ENOMEM ? k : 0;
  }
  if (r < 0) {
    pt_sha256_del(h);
    return r == -ENOMEM ? r : -EIO;
  }
  return 0;
}

/* Unchanged append-only file (hash cache hit): carries its running state,
 * if the last refresh left one of exactly e->size bytes, over to the next
 * refresh. Returns 0 (carried or nothing to carry), -ENOMEM or -EIO (no
 * state kept; the next refresh hashes from 0). */
int pd_cat_inc_carry(pd_catalog_job *j, const pd_catalog_entry *e, int fd) {
  const inc_hash *old = inc_lookup(j, e);
  if (!old || old->len != e->size) return 0;
  pt_sha256 *dup = pt_sha256_dup(old->state);
  int k = dup ? inc_keep(j, e, dup, fd) : -ENOMEM;
  if (k < 0) pt_sha256_del(dup);
  return k;
}
