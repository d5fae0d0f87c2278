/*
 * pd_catalog_internal.h - state shared by the catalog's units (not a public
 * interface: only src/daemon/pd_catalog*.c include it).
 *
 * The catalog is one object (struct pd_catalog) split by concept, listed
 * in call order (each unit calls only those above it):
 *   pd_catalog_hash.c  hash cache and incremental hashes of append-only files
 *   pd_catalog.c       model (entries, generation), persistence of the
 *                      generation, lifecycle, refresh begin/end (the swap),
 *                      paths beneath the state root
 *   pd_catalog_profile.c  profile entries: each snapshot's window and
 *                      samples (cached by content), the merged artifact of
 *                      a kind's snapshots (built bytes, cached by inputs)
 *   pd_catalog_scan.c  refresh work: directory scans, snapshot names, ids,
 *                      fingerprint
 *   pd_catalog_fetch.c chunked, verified reads (block digests)
 *   pd_catalog_json.c  artifacts.* parameters and results (JSON)
 * (pd_catalog_ipc.c, the libuv glue, is above them all.)
 * Threads and invariants: pd_catalog.h and the structs below.
 */
#ifndef PD_CATALOG_INTERNAL_H
#define PD_CATALOG_INTERNAL_H

#include "daemon/pd_catalog.h"
#include "common/pt_sha256.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define BMAP_MAX 16 /* block maps kept (struct block_map) */
#define MAX_SNAPSHOTS 256 /* per kind; the store keeps 8, this is a safety cap */

/* Hash cache entry: the SHA-256 of a file as last listed, valid while the
 * key (dev, ino, size, mtime_ns, ctime_ns) is unchanged. */
typedef struct hash_cache_ent {
  dev_t dev;
  ino_t ino;
  uint64_t size;
  int64_t mtime_ns;
  int64_t ctime_ns; /* an edit that restores mtime (utimensat) still moves ctime */
  char sha256[65];
} hash_cache_ent;

/* Running SHA-256 of an append-only file's first `len` bytes, so that the
 * next refresh hashes only what was appended (O(new bytes), not O(file)).
 * Keyed by (dev, ino); valid while the file only grows. A file that shrank
 * (truncated, rotated to the same inode) is hashed from the start again, and
 * so is one whose last INC_TAIL bytes of the hashed prefix differ from the
 * copy kept here: that catches a partial line cut back and rewritten
 * (telemetry does that on a short write) or a truncate-and-regrow. A rewrite
 * of older bytes in place would go unnoticed here; the files are appended
 * with O_APPEND only, and a fetch checks every byte it serves against the
 * listed hash (whole range or block digests, pd_catalog_fetch.c), so it would fail
 * (`not_found`, changed) rather than serve wrong bytes. */
#define INC_TAIL 4096
typedef struct inc_hash {
  dev_t dev;
  ino_t ino;
  uint64_t len;
  pt_sha256 *state;
  size_t tail_len;
  unsigned char tail[INC_TAIL]; /* bytes [len - tail_len, len) */
} inc_hash;

/* The bytes of a built artifact (the merged profiles), immutable once
 * made, shared by the catalog's entries and fetch jobs on any thread:
 * refcounted. key: the SHA-256 of its inputs' digests (same inputs, same
 * bytes: no rebuild). */
typedef struct pd_cat_blob {
  atomic_int refs;
  char key[65];
  char sha256[65];
  int64_t samples, time_ns, duration_ns;
  size_t len;
  uint8_t data[];
} pd_cat_blob;
pd_cat_blob *pd_cat_blob_ref(pd_cat_blob *b);  /* NULL ok; returns b */
void pd_cat_blob_unref(pd_cat_blob *b);        /* NULL ok; any thread */

/* A snapshot's decoded window and samples, by content (sha256). */
typedef struct prof_sum {
  char sha256[65];
  int64_t samples, time_ns, duration_ns;
} prof_sum;

/* The kinds of merged artifacts (index of pd_catalog.merged). */
#define PD_CAT_MERGED_KINDS 2

/* Block digests of one listed artifact (pd_catalog_fetch.c). */
typedef char block_hex[PT_SHA256_HEX];
struct block_map {
  char id[17];
  char sha256[65];
  uint64_t size;
  size_t n;
  block_hex *h;
  uint64_t used; /* c->bmap_clock at the last use */
};

struct pd_catalog {
  char *home;
  char *session_dir; /* from the hook; NULL: read <home>/active_session */
  pd_catalog_entry *entries;
  size_t n_entries;
  uint64_t generation;
  char fingerprint[65];
  hash_cache_ent *cache;
  size_t n_cache;
  pd_catalog_stats stats;
  int refreshing; /* a refresh job is in flight: cache is frozen (struct pd_catalog_job) */
  inc_hash *incs; /* one per append-only file seen by the last refresh */
  size_t n_incs;
  struct block_map *bmaps; /* BMAP_MAX slots: block digests learned by fetches */
  size_t n_bmaps;
  uint64_t bmap_clock;
  prof_sum *sums;          /* profiles decoded by the last refresh */
  size_t n_sums;
  pd_cat_blob *merged[PD_CAT_MERGED_KINDS]; /* the last merged artifacts (refs) */
  char *listed_srel;       /* the session the list is of ("sessions/<id>"), or NULL */
};

typedef struct builder {
  pd_catalog_entry *v;
  size_t n, cap;
  hash_cache_ent *cache;
  size_t n_cache, cap_cache;
  prof_sum *sums;
  size_t n_sums, cap_sums;
  pd_cat_blob *merged[PD_CAT_MERGED_KINDS]; /* refs */
} builder;

/* One refresh's work. Filled by begin (loop thread), then read and written
 * only by the worker (pd_catalog_refresh_work), then consumed by end (loop
 * thread). The worker reads `home` and the catalog's hash cache through
 * `cache`/`n_cache`: the catalog does not modify or free either while
 * c->refreshing is set (only end swaps the cache), so no lock is needed. */
struct pd_catalog_job {
  const char *home;            /* borrowed from the catalog (immutable) */
  char *hook_sdir;             /* copy of c->session_dir (NULL: read active_session) */
  const hash_cache_ent *cache; /* borrowed, frozen while the job runs */
  size_t n_cache;
  const inc_hash *incs;        /* borrowed, frozen while the job runs */
  size_t n_incs;
  const prof_sum *sums;        /* borrowed, frozen while the job runs */
  size_t n_sums;
  pd_cat_blob *old_merged[PD_CAT_MERGED_KINDS]; /* borrowed (the catalog's refs) */
  char *srel;                  /* the session listed, set by the worker */
  inc_hash *new_incs;          /* built by the worker, swapped in by end */
  size_t n_new_incs, cap_new_incs;
  uint64_t bytes_hashed;
  builder b;
  char fp[65];
  int r;
  uint64_t files_hashed, cache_hits;
};

/* One fetch's work: a copy of what was listed (the entry may be replaced by
 * a refresh while the worker runs), its block digests if known, and the
 * open base directory. Filled by begin (loop thread), used by the worker
 * only, consumed by keep (loop thread) and end. */
struct pd_catalog_read_job {
  int bfd;           /* the entry's root directory, O_DIRECTORY */
  char *path;
  char id[17];
  char sha256[65];
  uint64_t size;
  dev_t dev;
  ino_t ino;
  int64_t mtime_ns;
  int append_only;
  uint64_t offset;
  size_t max_len;
  pd_cat_blob *blob; /* a built artifact's bytes (ref), or NULL: a file */
  block_hex *blocks; /* known digests (copy), or NULL: verify the whole range */
  block_hex *learned; /* digests computed by a whole-range pass, for keep */
  uint8_t *data;
  size_t len;
  int r;
};

/* A stat's ctime / mtime in ns; any thread. Inline: every unit uses them,
 * and as functions of pd_catalog.c they made pd_catalog_hash.c call back
 * into the file that calls it (tests/build/call_loops_test.sh). */
static inline int64_t pd_cat_ctime_ns(const struct stat *st) {
  return (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
}
static inline int64_t pd_cat_mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

/* pd_catalog.c. Loop thread, except where noted. */
char *pd_cat_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pd_cat_entry_free(pd_catalog_entry *e);     /* any thread, e owned by caller */
void pd_cat_entries_free(pd_catalog_entry *v, size_t n);
/* A zeroed entry appended to b, or NULL (out of memory). Any thread (the
 * builder is the job's). */
pd_catalog_entry *pd_cat_builder_add(builder *b);
/* Writes <home>/catalog.json atomically. 0 or -errno. */
int pd_cat_persist(pd_catalog *c);
/* See the comments at the definitions (pd_catalog.c). Any thread: they read
 * only their arguments and the file system. */
int pd_cat_session_rel(const char *home, const char *hook_sdir, char **rel);
int pd_cat_open_base(int hfd, const char *rel);

/* pd_catalog_profile.c (refresh worker). Fills the profile fields of the
 * entries b->v[first..b->n) (snapshots of one kind, newest first, in the
 * directory fd profdir) from their content, and, with two or more, adds
 * the merged artifact (kind merged_kind, label "<label>, N kept snapshots
 * merged", slot `slot` of the merged cache). A file that cannot be read or
 * decoded just has no profile fields (and no merged artifact is made).
 * 0 or -ENOMEM. */
int pd_cat_profiles(pd_catalog_job *j, builder *b, int profdir, size_t first, int slot,
                    const char *merged_kind, const char *label);
/* Frees a builder's profile parts (sums, merged refs). */
void pd_cat_builder_profiles_free(builder *b);

/* pd_catalog_hash.c. The lookups read the frozen cache (any thread during a
 * refresh job); *_free on the loop thread. */
void pd_cat_incs_free(inc_hash *v, size_t n);
const char *pd_cat_cache_lookup(const hash_cache_ent *cache, size_t n_cache,
                                const struct stat *st, uint64_t size);
int pd_cat_builder_cache(builder *b, const pd_catalog_entry *e);
int pd_cat_hash_append(pd_catalog_job *j, int fd, pd_catalog_entry *e);
int pd_cat_inc_carry(pd_catalog_job *j, const pd_catalog_entry *e, int fd);

#endif
