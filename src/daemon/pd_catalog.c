/*
 * pd_catalog.c - artifact catalog (see pd_catalog.h for the contract).
 *
 * Invariants:
 *  - c->entries is the list served by the last successful refresh; a refresh
 *    builds a new list aside and swaps it in only when complete.
 *  - c->generation only ever increases; it is bumped when the fingerprint of
 *    the new list differs from the stored one, and persisted right away.
 *  - The hash cache holds exactly the files seen by the last refresh, keyed
 *    by (dev, ino, size, mtime_ns, ctime_ns); a file whose key is unchanged is not
 *    re-read.
 * Threads: see the header: the *_work functions run on a libuv threadpool
 * thread and touch only their job (plus the frozen hash cache, see
 * struct pd_catalog_job); everything else runs on the loop thread.
 */
#include "daemon/pd_catalog.h"

#include "pt_config.h"
#include "common/pt_file.h"
#include "common/pt_sha256.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DAEMON_PREFIX "daemon-profile-"
#define TUI_PREFIX "tui-profile-"
#define PROFILE_SUFFIX ".pb.gz"
#define BMAP_MAX 16 /* block maps kept (struct block_map) */
#define MAX_SNAPSHOTS 256 /* per kind; the store keeps 8, this is a safety cap */

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
 * listed hash (whole range or block digests, see "fetch"), so it would fail
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

static void incs_free(inc_hash *v, size_t n) {
  for (size_t i = 0; i < n; i++) pt_sha256_del(v[i].state);
  free(v);
}

/* Block digests of one listed artifact (see "fetch" below). */
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
  int refreshing; /* a refresh job is in flight: cache is frozen (see below) */
  inc_hash *incs; /* one per append-only file seen by the last refresh */
  size_t n_incs;
  struct block_map *bmaps; /* BMAP_MAX slots: block digests learned by fetches */
  size_t n_bmaps;
  uint64_t bmap_clock;
};

/* ---------- small helpers ---------- */

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int r = vasprintf(&s, fmt, ap);
  va_end(ap);
  return r < 0 ? NULL : s;
}

static int64_t stat_ctime_ns(const struct stat *st) {
  return (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
}

static int64_t stat_mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

static void fmt_rfc3339(int64_t t, char out[32]) {
  time_t tt = (time_t)t;
  struct tm tm;
  gmtime_r(&tt, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void entry_free(pd_catalog_entry *e) {
  free(e->label);
  free(e->path);
}

static void entries_free(pd_catalog_entry *v, size_t n) {
  for (size_t i = 0; i < n; i++) entry_free(&v[i]);
  free(v);
}

static int persist(pd_catalog *c) {
  json_t *o = json_pack("{s:i, s:I, s:s}", "schema", PD_CATALOG_SCHEMA, "generation",
                        (json_int_t)c->generation, "fingerprint", c->fingerprint);
  if (!o) return -ENOMEM;
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!s) return -ENOMEM;
  size_t len = strlen(s);
  char *line = realloc(s, len + 2);
  if (!line) { free(s); return -ENOMEM; }
  line[len] = '\n';
  line[len + 1] = '\0';
  char *path = xasprintf("%s/catalog.json", c->home);
  /* temp file + fsync + rename + fsync of the directory */
  int r = path ? pt_write_atomic(path, line, len + 1, 0600) : -ENOMEM;
  free(path);
  free(line);
  return r;
}

static void load_persisted(pd_catalog *c) {
  char *path = xasprintf("%s/catalog.json", c->home);
  if (!path) return;
  json_error_t jerr;
  json_t *o = json_load_file(path, 0, &jerr);
  int missing = access(path, F_OK) != 0 && errno == ENOENT;
  free(path);
  json_t *g = o ? json_object_get(o, "generation") : NULL;
  json_t *f = o ? json_object_get(o, "fingerprint") : NULL;
  if (g && json_is_integer(g) && json_integer_value(g) >= 0 && f && json_is_string(f)) {
    c->generation = (uint64_t)json_integer_value(g);
    snprintf(c->fingerprint, sizeof c->fingerprint, "%s", json_string_value(f));
  } else if (!missing) {
    /* Damaged: we cannot know the last generation. Milliseconds since the
     * epoch exceed any count of content changes, so clients never see it
     * go back. The fingerprint stays empty: the first refresh bumps. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->generation = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
  }
  json_decref(o);
}

/* ---------- public: lifecycle ---------- */

int pd_catalog_new(pd_catalog **out, const char *home) {
  *out = NULL;
  if (!home || !*home) return -EINVAL;
  pd_catalog *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  c->home = strdup(home);
  c->bmaps = calloc(BMAP_MAX, sizeof *c->bmaps);
  if (!c->home || !c->bmaps) { free(c->home); free(c->bmaps); free(c); return -ENOMEM; }
  load_persisted(c);
  *out = c;
  return 0;
}

static void bmaps_free(pd_catalog *c);

void pd_catalog_del(pd_catalog *c) {
  if (!c) return;
  entries_free(c->entries, c->n_entries);
  free(c->cache);
  incs_free(c->incs, c->n_incs);
  bmaps_free(c);
  free(c->bmaps);
  free(c->session_dir);
  free(c->home);
  free(c);
}

int pd_catalog_set_session(pd_catalog *c, const char *session_dir) {
  char *d = NULL;
  if (session_dir && !(d = strdup(session_dir))) return -ENOMEM;
  free(c->session_dir);
  c->session_dir = d;
  return 0;
}

uint64_t pd_catalog_generation(const pd_catalog *c) { return c->generation; }
size_t pd_catalog_count(const pd_catalog *c) { return c->n_entries; }

const pd_catalog_entry *pd_catalog_entry_at(const pd_catalog *c, size_t i) {
  return i < c->n_entries ? &c->entries[i] : NULL;
}

static int valid_id(const char *id) {
  if (!id || strlen(id) != 16) return 0;
  for (int i = 0; i < 16; i++)
    if (!isxdigit((unsigned char)id[i]) || isupper((unsigned char)id[i])) return 0;
  return 1;
}

const pd_catalog_entry *pd_catalog_find(const pd_catalog *c, const char *id) {
  if (!valid_id(id)) return NULL;
  for (size_t i = 0; i < c->n_entries; i++)
    if (strcmp(c->entries[i].id, id) == 0) return &c->entries[i];
  return NULL;
}

void pd_catalog_get_stats(const pd_catalog *c, pd_catalog_stats *out) { *out = c->stats; }

/* ---------- refresh ---------- */

static const char *cache_lookup(const hash_cache_ent *cache, size_t n_cache,
                                const struct stat *st, uint64_t size) {
  for (size_t i = 0; i < n_cache; i++) {
    const hash_cache_ent *h = &cache[i];
    if (h->dev == st->st_dev && h->ino == st->st_ino && h->size == size &&
        h->mtime_ns == stat_mtime_ns(st) && h->ctime_ns == stat_ctime_ns(st))
      return h->sha256;
  }
  return NULL;
}

typedef struct snap {
  char name[256];
  int64_t t;     /* from the filename, else mtime seconds */
  uint64_t seq;
  int64_t mtime_ns;
} snap;

static int snap_cmp_newest_first(const void *a, const void *b) {
  const snap *x = a, *y = b;
  if (x->t != y->t) return x->t > y->t ? -1 : 1;
  if (x->seq != y->seq) return x->seq > y->seq ? -1 : 1;
  if (x->mtime_ns != y->mtime_ns) return x->mtime_ns > y->mtime_ns ? -1 : 1;
  return strcmp(y->name, x->name);
}

/* Parses "<prefix>yyyymmddThhmmssZ-<seq>.pb.gz"; returns 1 when it matches. */
static int parse_snapshot_name(const char *rest, int64_t *t, uint64_t *seq) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  const char *e = strptime(rest, "%Y%m%dT%H%M%SZ", &tm);
  if (!e) return 0;
  *t = (int64_t)timegm(&tm);
  *seq = 0;
  if (*e == '-') *seq = strtoull(e + 1, NULL, 10);
  return 1;
}

typedef struct builder {
  pd_catalog_entry *v;
  size_t n, cap;
  hash_cache_ent *cache;
  size_t n_cache, cap_cache;
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
  inc_hash *new_incs;          /* built by the worker, swapped in by end */
  size_t n_new_incs, cap_new_incs;
  uint64_t bytes_hashed;
  builder b;
  char fp[65];
  int r;
  uint64_t files_hashed, cache_hits;
};

static pd_catalog_entry *builder_add(builder *b) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 16;
    pd_catalog_entry *v = realloc(b->v, cap * sizeof *v);
    if (!v) return NULL;
    b->v = v;
    b->cap = cap;
  }
  pd_catalog_entry *e = &b->v[b->n++];
  memset(e, 0, sizeof *e);
  return e;
}

static int builder_cache(builder *b, const pd_catalog_entry *e) {
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

/* Stable id: hash of what identifies this file (not its content, so that
 * listing needs no hash to name it): kind, root, path, device, inode, and for
 * immutable files their size and mtime (a rewritten snapshot is a new id). */
static int make_id(pd_catalog_entry *e) {
  char key[1024];
  if (e->append_only)
    snprintf(key, sizeof key, "%s|%d|%s|%ju|%ju", e->kind, (int)e->root, e->path,
             (uintmax_t)e->dev, (uintmax_t)e->ino);
  else
    snprintf(key, sizeof key, "%s|%d|%s|%ju|%ju|%" PRIu64 "|%" PRId64, e->kind, (int)e->root,
             e->path, (uintmax_t)e->dev, (uintmax_t)e->ino, e->size, e->mtime_ns);
  char hex[PT_SHA256_HEX];
  int r = pt_sha256_hex(key, strlen(key), hex);
  if (r < 0) return r;
  memcpy(e->id, hex, 16);
  e->id[16] = '\0';
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
static int hash_incremental(pd_catalog_job *j, int fd, pd_catalog_entry *e) {
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

/* Adds the file `name` in directory fd `dirfd` (path `relpath` from root) if
 * it is a regular file. Returns 0 (added or skipped) or -ENOMEM. */
static int add_file(pd_catalog_job *j, builder *b, int dirfd, const char *name, const char *relpath,
                    pd_catalog_root root, const char *kind, const char *source, int append_only,
                    char *label /* stolen */, int64_t created) {
  int fd = pt_open_beneath(dirfd, name, O_RDONLY | O_NONBLOCK);
  if (fd < 0) { free(label); return 0; } /* gone, symlink, unreadable: not listed */
  struct stat st;
  /* Only regular files of ours with no other name: a hard link planted in
   * the state root (to a file readable by us but not meant to leave the
   * machine) or a file someone else put there is not offered. */
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
      st.st_uid != geteuid()) {
    close(fd);
    free(label);
    return 0;
  }
  pd_catalog_entry *e = builder_add(b);
  if (!e) { close(fd); free(label); return -ENOMEM; }
  e->kind = kind;
  e->source = source;
  e->label = label;
  e->path = strdup(relpath);
  e->root = root;
  e->append_only = append_only;
  e->size = (uint64_t)st.st_size;
  e->dev = st.st_dev;
  e->ino = st.st_ino;
  e->mtime_ns = stat_mtime_ns(&st);
  e->ctime_ns = stat_ctime_ns(&st);
  e->created_unix = created ? created : (int64_t)st.st_mtim.tv_sec;
  fmt_rfc3339(e->created_unix, e->created);
  if (!e->path || !e->label) { close(fd); b->n--; entry_free(e); return -ENOMEM; }
  const char *cached = cache_lookup(j->cache, j->n_cache, &st, e->size);
  int r = 0;
  if (cached) {
    memcpy(e->sha256, cached, sizeof e->sha256);
    j->cache_hits++;
  } else if (append_only) {
    r = hash_incremental(j, fd, e);
    j->files_hashed++;
  } else {
    size_t got = 0;
    /* Hash exactly st_size bytes: an append-only file that grows meanwhile
     * is described by this prefix, which is what fetch serves. */
    r = pt_sha256_fd(fd, (size_t)e->size, e->sha256, &got);
    j->files_hashed++;
    j->bytes_hashed += got;
    if (r == 0 && got != e->size) r = -EIO; /* shrank under us: skip it */
  }
  if (cached && append_only) {
    /* Unchanged: carry its running state over to the next refresh. */
    const inc_hash *old = inc_lookup(j, e);
    if (old && old->len == e->size) {
      pt_sha256 *dup = pt_sha256_dup(old->state);
      int k = dup ? inc_keep(j, e, dup, fd) : -ENOMEM;
      if (k < 0) pt_sha256_del(dup);
      if (k == -ENOMEM) r = k; /* -EIO: just no state kept; next time from 0 */
    }
  }
  close(fd);
  if (r == 0) r = make_id(e);
  if (r == 0) r = builder_cache(b, e);
  if (r < 0) {
    b->n--;
    entry_free(e);
    return r == -ENOMEM ? r : 0;
  }
  return 0;
}

static void fmt_label_time(int64_t t, char *out, size_t cap) {
  time_t tt = (time_t)t;
  struct tm tm;
  gmtime_r(&tt, &tm);
  strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

static int scan_profiles(pd_catalog_job *j, builder *b, int profdir, pd_catalog_root root,
                         const char *prefix,
                         const char *kind, const char *source, const char *newest_label,
                         const char *older_label) {
  int dfd = dup(profdir);
  if (dfd < 0) return 0;
  DIR *d = fdopendir(dfd);
  if (!d) { close(dfd); return 0; }
  /* dup() shares the file offset: a previous scan of the same directory
   * left it at the end. */
  rewinddir(d);
  snap *snaps = NULL;
  size_t n = 0, cap = 0;
  int r = 0;
  struct dirent *de;
  size_t plen = strlen(prefix), slen = strlen(PROFILE_SUFFIX);
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len >= sizeof snaps->name || len <= plen + slen) continue;
    if (strncmp(de->d_name, prefix, plen) != 0) continue;
    if (strcmp(de->d_name + len - slen, PROFILE_SUFFIX) != 0) continue;
    struct stat st;
    if (fstatat(profdir, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      snap *v = realloc(snaps, ncap * sizeof *v);
      if (!v) { r = -ENOMEM; break; }
      snaps = v;
      cap = ncap;
    }
    snap *s = &snaps[n++];
    snprintf(s->name, sizeof s->name, "%s", de->d_name);
    s->mtime_ns = stat_mtime_ns(&st);
    if (!parse_snapshot_name(de->d_name + plen, &s->t, &s->seq)) {
      s->t = (int64_t)st.st_mtim.tv_sec;
      s->seq = 0;
    }
  }
  closedir(d);
  if (r == 0 && n) {
    qsort(snaps, n, sizeof *snaps, snap_cmp_newest_first);
    size_t first = b->n;
    for (size_t i = 0; i < n && i < MAX_SNAPSHOTS && r == 0; i++) {
      char when[64];
      fmt_label_time(snaps[i].t, when, sizeof when);
      /* The newest label is assigned after the loop: a file that vanished
       * between readdir and open must not take the "newest" label away. */
      char *label = xasprintf("%s, %s", older_label, when);
      char *rel = xasprintf("profiling/%s", snaps[i].name);
      if (!label || !rel) { free(label); free(rel); r = -ENOMEM; break; }
      r = add_file(j, b, profdir, snaps[i].name, rel, root, kind, source, 0,
                   label, snaps[i].t);
      free(rel);
    }
    if (r == 0 && b->n > first) {
      char *l = strdup(newest_label);
      if (!l) r = -ENOMEM;
      else { free(b->v[first].label); b->v[first].label = l; }
    }
  }
  free(snaps);
  return r;
}

/* The active session's directory RELATIVE to the state root
 * ("sessions/<id>"): the hook's absolute path with the root stripped, else
 * the id read from <home>/active_session (plain id or a JSON object with
 * "id"). Returns 0 with *rel malloc'd or NULL (no active session), -EXDEV
 * when the hook names a directory outside the root (then no profile is
 * listed: nothing outside the root is ever opened), or -ENOMEM. The
 * result is opened beneath the root's fd with no symlink allowed
 * (pt_open_beneath), so a sessions/<id> that is a symlink is refused. */
static int session_rel_of(const char *home, const char *hook_sdir, char **rel) {
  *rel = NULL;
  if (hook_sdir) {
    size_t n = strlen(home);
    if (strncmp(hook_sdir, home, n) != 0 || hook_sdir[n] != '/' || !hook_sdir[n + 1])
      return -EXDEV;
    return (*rel = strdup(hook_sdir + n + 1)) ? 0 : -ENOMEM;
  }
  int hfd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = hfd >= 0 ? pt_open_beneath(hfd, "active_session", O_RDONLY | O_NONBLOCK) : -1;
  if (hfd >= 0) close(hfd);
  if (fd < 0) return 0;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0) n = 0;
  buf[n] = '\0';
  char id[80] = "";
  if (buf[0] == '{') {
    json_t *o = json_loads(buf, 0, NULL);
    json_t *v = o ? json_object_get(o, "id") : NULL;
    if (v && json_is_string(v)) snprintf(id, sizeof id, "%s", json_string_value(v));
    json_decref(o);
  } else {
    size_t k = 0;
    for (ssize_t i = 0; i < n && k < sizeof id - 1; i++) {
      if (isspace((unsigned char)buf[i])) break;
      id[k++] = buf[i];
    }
    id[k] = '\0';
  }
  /* Only plain names: the id becomes a path component. */
  if (!id[0]) return 0;
  for (char *q = id; *q; q++)
    if (!isalnum((unsigned char)*q) && *q != '-' && *q != '_') return 0;
  return (*rel = xasprintf("sessions/%s", id)) ? 0 : -ENOMEM;
}

/* Opens the directory profiles of `root` are relative to, beneath the state
 * root's fd hfd: the session directory `rel`, or (rel NULL) the root
 * itself. Returns an O_DIRECTORY fd or a negative errno. */
static int open_base(int hfd, const char *rel) {
  if (!rel) {
    int fd = dup(hfd);
    return fd >= 0 ? fd : -errno;
  }
  return pt_open_beneath(hfd, rel, O_RDONLY | O_DIRECTORY);
}

static int compute_fingerprint(const builder *b, char out[65]) {
  pt_sha256 *h = pt_sha256_new();
  if (!h) return -ENOMEM;
  for (size_t i = 0; i < b->n; i++) {
    const pd_catalog_entry *e = &b->v[i];
    char line[2048];
    int n = snprintf(line, sizeof line, "%s\t%s\t%s\t%s\t%d\t%s\t%" PRIu64 "\t%s\t%s\n", e->id,
                     e->kind, e->source, e->label, (int)e->root, e->path, e->size, e->created,
                     e->sha256);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof line) n = sizeof line - 1;
    pt_sha256_update(h, line, (size_t)n);
  }
  int r = pt_sha256_final(h, out);
  pt_sha256_del(h);
  return r;
}

int pd_catalog_refresh_begin(pd_catalog *c, pd_catalog_job **out) {
  *out = NULL;
  if (c->refreshing) return -EBUSY;
  pd_catalog_job *j = calloc(1, sizeof *j);
  if (!j) return -ENOMEM;
  j->home = c->home;
  if (c->session_dir && !(j->hook_sdir = strdup(c->session_dir))) { free(j); return -ENOMEM; }
  j->cache = c->cache;
  j->n_cache = c->n_cache;
  j->incs = c->incs;
  j->n_incs = c->n_incs;
  c->refreshing = 1;
  c->stats.refreshes++;
  *out = j;
  return 0;
}

void pd_catalog_refresh_work(pd_catalog_job *j) {
  builder b;
  memset(&b, 0, sizeof b);
  int r = 0;

  /* Profiles of the active session; with no active session, the state
   * root's profiling/ directory, where the profiling daemon writes until a
   * session is attached (docs/profiling.md). */
  char *srel = NULL;
  int sr = session_rel_of(j->home, j->hook_sdir, &srel);
  if (sr == -ENOMEM) r = sr;
  pd_catalog_root proot = srel ? PD_CATALOG_ROOT_SESSION : PD_CATALOG_ROOT_STATE;
  int hfd0 = sr == 0 ? open(j->home, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (hfd0 >= 0) {
    int sfd = open_base(hfd0, srel);
    int pfd = sfd >= 0 ? pt_open_beneath(sfd, "profiling", O_RDONLY | O_DIRECTORY) : -1;
    if (pfd >= 0) {
      r = scan_profiles(j, &b, pfd, proot, DAEMON_PREFIX, "cpu-profile", "daemon",
                        "CPU profile (pprof)", "CPU profile (pprof)");
#if PT_PROFILING
      /* TUI snapshots only in a profiling daemon: a normal build refreshes no
       * TUI profile artifacts (brief: restart the daemon with the profiling
       * build to see the TUI dump). */
      if (r == 0)
        r = scan_profiles(j, &b, pfd, proot, TUI_PREFIX, "tui-cpu-profile", "tui",
                          "TUI CPU profile (pprof)", "TUI CPU profile (pprof)");
#endif
      close(pfd);
    }
    if (sfd >= 0) close(sfd);
    close(hfd0);
  }
  free(srel);

  /* Daemon log and telemetry below the state root. */
  int hfd = open(j->home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (hfd >= 0 && r == 0) {
    int lfd = pt_open_beneath(hfd, "logs", O_RDONLY | O_DIRECTORY);
    if (lfd >= 0) {
      char *label = strdup("Daemon log");
      r = label ? add_file(j, &b, lfd, "daemon.log", "logs/daemon.log", PD_CATALOG_ROOT_STATE,
                           "daemon-log", "daemon", 1, label, 0)
                : -ENOMEM;
      close(lfd);
    }
    int tfd = r == 0 ? pt_open_beneath(hfd, "telemetry", O_RDONLY | O_DIRECTORY) : -1;
    if (tfd >= 0) {
      int dfd = dup(tfd);
      DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
      if (!d && dfd >= 0) close(dfd);
      /* Sorted by name so the list (and fingerprint) is deterministic. */
      char **names = NULL;
      size_t nn = 0;
      struct dirent *de;
      while (d && (de = readdir(d)) && r == 0) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 7 || strcmp(de->d_name + len - 6, ".jsonl") != 0)
          continue;
        char **v = realloc(names, (nn + 1) * sizeof *v);
        if (!v) { r = -ENOMEM; break; }
        names = v;
        if (!(names[nn] = strdup(de->d_name))) { r = -ENOMEM; break; }
        nn++;
      }
      if (d) closedir(d);
      for (size_t i = 0; i < nn; i++)
        for (size_t k = i + 1; k < nn; k++)
          if (strcmp(names[i], names[k]) > 0) { char *t = names[i]; names[i] = names[k]; names[k] = t; }
      for (size_t i = 0; i < nn; i++) {
        if (r == 0) {
          char *label = xasprintf("Telemetry (%s)", names[i]);
          char *rel = xasprintf("telemetry/%s", names[i]);
          if (!label || !rel) { free(label); r = -ENOMEM; }
          else r = add_file(j, &b, tfd, names[i], rel, PD_CATALOG_ROOT_STATE, "telemetry",
                            "daemon", 1, label, 0);
          free(rel);
        }
        free(names[i]);
      }
      free(names);
      close(tfd);
    }
  }
  if (hfd >= 0) close(hfd);

  if (r == 0) r = compute_fingerprint(&b, j->fp);
  if (r < 0) {
    entries_free(b.v, b.n);
    free(b.cache);
    memset(&b, 0, sizeof b);
  }
  j->b = b;
  j->r = r;
}

int pd_catalog_refresh_end(pd_catalog *c, pd_catalog_job *j) {
  int r = j->r;
  c->refreshing = 0;
  c->stats.files_hashed += j->files_hashed;
  c->stats.cache_hits += j->cache_hits;
  c->stats.bytes_hashed += j->bytes_hashed;
  free(j->hook_sdir);
  if (r < 0) {
    incs_free(j->new_incs, j->n_new_incs);
    free(j);
    return r;
  }
  incs_free(c->incs, c->n_incs);
  c->incs = j->new_incs;
  c->n_incs = j->n_new_incs;
  entries_free(c->entries, c->n_entries);
  c->entries = j->b.v;
  c->n_entries = j->b.n;
  free(c->cache);
  c->cache = j->b.cache;
  c->n_cache = j->b.n_cache;
  if (strcmp(j->fp, c->fingerprint) != 0) {
    c->generation++;
    memcpy(c->fingerprint, j->fp, sizeof c->fingerprint);
    c->stats.persist_error = persist(c);
  }
  free(j);
  return 0;
}

int pd_catalog_refresh(pd_catalog *c) {
  pd_catalog_job *j;
  int r = pd_catalog_refresh_begin(c, &j);
  if (r < 0) return r;
  pd_catalog_refresh_work(j);
  return pd_catalog_refresh_end(c, j);
}

/* ---------- fetch ---------- */

/* Block digests of one listed artifact, learned by the first fetch that
 * read it whole (pd_catalog_read_keep), so that every later chunk is
 * checked against the listed bytes without re-hashing the whole artifact:
 * the served range is cut into PD_CATALOG_BLOCK blocks and a chunk is
 * served only from blocks whose SHA-256 matches. Keyed by (id, sha256,
 * size); at most BMAP_MAX kept (least recently used goes). */

static size_t blocks_of(uint64_t size) {
  return (size_t)((size + PD_CATALOG_BLOCK - 1) / PD_CATALOG_BLOCK);
}

static struct block_map *bmap_find(pd_catalog *c, const char *id, const char *sha, uint64_t size) {
  for (size_t i = 0; i < c->n_bmaps; i++) {
    struct block_map *m = &c->bmaps[i];
    if (m->size == size && strcmp(m->id, id) == 0 && strcmp(m->sha256, sha) == 0) {
      m->used = ++c->bmap_clock;
      return m;
    }
  }
  return NULL;
}

static void bmaps_free(pd_catalog *c) {
  for (size_t i = 0; i < c->n_bmaps; i++) free(c->bmaps[i].h);
  c->n_bmaps = 0;
}

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
  block_hex *blocks; /* known digests (copy), or NULL: verify the whole range */
  block_hex *learned; /* digests computed by a whole-range pass, for keep */
  uint8_t *data;
  size_t len;
  int r;
};

int pd_catalog_read_begin(pd_catalog *c, const char *id, uint64_t offset, size_t max_len,
                          pd_catalog_read_job **out) {
  *out = NULL;
  const pd_catalog_entry *e = pd_catalog_find(c, id);
  if (!e) return -ENOENT;
  if (e->size > PD_CATALOG_FETCH_MAX) return -EFBIG;
  if (offset > e->size) return -EINVAL;
  pd_catalog_read_job *j = calloc(1, sizeof *j);
  if (!j) return -ENOMEM;
  j->bfd = -1;
  if (!(j->path = strdup(e->path))) { free(j); return -ENOMEM; }
  memcpy(j->id, e->id, sizeof j->id);
  memcpy(j->sha256, e->sha256, sizeof j->sha256);
  j->size = e->size;
  j->dev = e->dev;
  j->ino = e->ino;
  j->mtime_ns = e->mtime_ns;
  j->append_only = e->append_only;
  j->offset = offset;
  j->max_len = max_len;
  struct block_map *m = bmap_find(c, e->id, e->sha256, e->size);
  if (m && m->n) {
    j->blocks = malloc(m->n * sizeof *j->blocks);
    if (!j->blocks) { free(j->path); free(j); return -ENOMEM; }
    memcpy(j->blocks, m->h, m->n * sizeof *j->blocks);
  }
  /* The base is resolved now (loop thread): the session directory may
   * change later, the entry belongs to the one listed. It is opened
   * beneath the state root with no symlink on the way. */
  int hfd = open(c->home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char *rel = NULL;
  int r = e->root == PD_CATALOG_ROOT_SESSION ? session_rel_of(c->home, c->session_dir, &rel) : 0;
  if (hfd >= 0 && r == 0 && (e->root != PD_CATALOG_ROOT_SESSION || rel))
    j->bfd = open_base(hfd, rel);
  free(rel);
  if (hfd >= 0) close(hfd);
  if (j->bfd < 0) {
    int e2 = j->bfd == -ELOOP ? -ELOOP : -ENOENT;
    j->bfd = -1;
    free(j->blocks);
    free(j->path);
    free(j);
    return e2;
  }
  *out = j;
  return 0;
}

/* Reads exactly len bytes at off. 0, -ESTALE (file shorter), -errno. */
static int pread_all(int fd, uint8_t *buf, size_t len, uint64_t off) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return -ESTALE;
    got += (size_t)n;
  }
  return 0;
}

/* 0 when the open file is still the one listed: a regular file of ours with
 * one link, the listed device/inode and (unless append-only) size and
 * mtime; else -ESTALE (-EPERM for a file that is not ours or has another
 * name somewhere: a hard link planted into the state root). */
static int check_listed(const pd_catalog_read_job *j, int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (!S_ISREG(st.st_mode) || st.st_dev != j->dev || st.st_ino != j->ino) return -ESTALE;
  if (st.st_nlink != 1 || st.st_uid != geteuid()) return -EPERM;
  if (j->append_only ? (uint64_t)st.st_size < j->size
                     : ((uint64_t)st.st_size != j->size || stat_mtime_ns(&st) != j->mtime_ns))
    return -ESTALE;
  return 0;
}

void pd_catalog_read_work(pd_catalog_read_job *j) {
  int fd = pt_open_beneath(j->bfd, j->path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) { j->r = fd == -EXDEV ? -ELOOP : fd; return; }
  int r = check_listed(j, fd);
  uint8_t *buf = NULL, *blk = NULL;
  pt_sha256 *whole = NULL;
  size_t want = j->max_len < PD_CATALOG_CHUNK_MAX ? j->max_len : PD_CATALOG_CHUNK_MAX;
  if (want > j->size - j->offset) want = (size_t)(j->size - j->offset);
  if (r < 0) goto out;
  buf = malloc(want ? want : 1);
  blk = malloc(PD_CATALOG_BLOCK);
  if (!buf || !blk) { r = -ENOMEM; goto out; }
  /* Every served byte comes from a block whose digest was checked after
   * reading it into memory: a first fetch reads the whole served range
   * once (up to PD_CATALOG_FETCH_MAX: why this runs off the loop thread)
   * and compares it with the listed SHA-256, learning the block digests;
   * later chunks read only their own blocks and compare those. An edit in
   * place that keeps size and mtime fails either way. */
  size_t nb = blocks_of(j->size);
  size_t first = j->blocks ? (size_t)(j->offset / PD_CATALOG_BLOCK) : 0;
  size_t last = j->blocks ? (want ? (size_t)((j->offset + want - 1) / PD_CATALOG_BLOCK) : first)
                          : (nb ? nb - 1 : 0);
  if (!j->blocks) {
    whole = pt_sha256_new();
    j->learned = nb ? malloc(nb * sizeof *j->learned) : NULL;
    if (!whole || (nb && !j->learned)) { r = -ENOMEM; goto out; }
  }
  for (size_t b = first; nb && b <= last && b < nb; b++) {
    uint64_t boff = (uint64_t)b * PD_CATALOG_BLOCK;
    size_t blen = j->size - boff < PD_CATALOG_BLOCK ? (size_t)(j->size - boff) : PD_CATALOG_BLOCK;
    if ((r = pread_all(fd, blk, blen, boff)) < 0) goto out;
    char hex[PT_SHA256_HEX];
    if ((r = pt_sha256_hex(blk, blen, hex)) < 0) goto out;
    if (j->blocks) {
      if (strcmp(hex, j->blocks[b]) != 0) { r = -ESTALE; goto out; }
    } else {
      memcpy(j->learned[b], hex, sizeof hex);
      if ((r = pt_sha256_update(whole, blk, blen)) < 0) goto out;
    }
    /* copy the overlap of this block with [offset, offset + want) */
    uint64_t lo = boff > j->offset ? boff : j->offset;
    uint64_t hi = boff + blen < j->offset + want ? boff + blen : j->offset + want;
    if (hi > lo) memcpy(buf + (lo - j->offset), blk + (lo - boff), (size_t)(hi - lo));
  }
  if (whole) {
    char hex[PT_SHA256_HEX];
    if ((r = pt_sha256_final(whole, hex)) < 0) goto out;
    if (strcmp(hex, j->sha256) != 0) { r = -ESTALE; goto out; }
  }
  /* replaced or re-linked while we read: do not serve */
  if ((r = check_listed(j, fd)) < 0) goto out;
  j->data = buf;
  j->len = want;
  buf = NULL;
out:
  if (r < 0) {
    free(j->learned);
    j->learned = NULL;
  }
  pt_sha256_del(whole);
  free(blk);
  free(buf);
  close(fd);
  j->r = r;
}

void pd_catalog_read_keep(pd_catalog *c, pd_catalog_read_job *j) {
  if (j->r < 0 || !j->learned) return;
  if (bmap_find(c, j->id, j->sha256, j->size)) return;
  struct block_map *m = NULL;
  if (c->n_bmaps < BMAP_MAX) {
    m = &c->bmaps[c->n_bmaps++];
  } else {
    m = &c->bmaps[0];
    for (size_t i = 1; i < c->n_bmaps; i++)
      if (c->bmaps[i].used < m->used) m = &c->bmaps[i];
    free(m->h);
  }
  memcpy(m->id, j->id, sizeof m->id);
  memcpy(m->sha256, j->sha256, sizeof m->sha256);
  m->size = j->size;
  m->n = blocks_of(j->size);
  m->h = j->learned; /* taken over */
  j->learned = NULL;
  m->used = ++c->bmap_clock;
}

static void read_job_free(pd_catalog_read_job *j) {
  if (!j) return;
  if (j->bfd >= 0) close(j->bfd);
  free(j->path);
  free(j->data);
  free(j->blocks);
  free(j->learned);
  free(j);
}

int pd_catalog_read_end(pd_catalog_read_job *j, uint8_t **data, size_t *len) {
  int r = j->r;
  *data = NULL;
  *len = 0;
  if (r == 0) {
    *data = j->data;
    *len = j->len;
    j->data = NULL;
  }
  read_job_free(j);
  return r;
}

int pd_catalog_read(pd_catalog *c, const char *id, uint64_t offset, size_t max_len,
                    uint8_t **data, size_t *len) {
  *data = NULL;
  *len = 0;
  pd_catalog_read_job *j;
  int r = pd_catalog_read_begin(c, id, offset, max_len, &j);
  if (r < 0) return r;
  pd_catalog_read_work(j);
  return pd_catalog_read_end(j, data, len);
}

/* ---------- IPC ---------- */

const char *pd_catalog_errcode(int err) {
  switch (err) {
  case -ENOENT: case -ESTALE: case -ELOOP: case -ENOTDIR: case -EPERM: case -EXDEV:
    return "not_found";
  case -EINVAL: return "bad_request";
  case -ENOSYS: return "unknown_method";
  case -ENOMEM: return "internal";
  default: return "io_error";
  }
}

static char *base64(const uint8_t *d, size_t n) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *out = malloc((n + 2) / 3 * 4 + 1);
  if (!out) return NULL;
  size_t o = 0, i = 0;
  for (; i + 2 < n; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
    out[o++] = tbl[v >> 18];
    out[o++] = tbl[(v >> 12) & 63];
    out[o++] = tbl[(v >> 6) & 63];
    out[o++] = tbl[v & 63];
  }
  if (i < n) {
    uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
    out[o++] = tbl[v >> 18];
    out[o++] = tbl[(v >> 12) & 63];
    out[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
    out[o++] = '=';
  }
  out[o] = '\0';
  return out;
}

static json_t *entry_json(const pd_catalog_entry *e) {
  return json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:s, s:s, s:s}", "id", e->id, "kind",
                   e->kind, "label", e->label, "source", e->source, "size", (json_int_t)e->size,
                   "created", e->created, "created_unix", (json_int_t)e->created_unix, "sha256",
                   e->sha256, "path", e->path, "root",
                   e->root == PD_CATALOG_ROOT_SESSION ? "session" : "state");
}

static int fail(int r, const char **code, char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(int r, const char **code, char *msg, size_t msglen, const char *fmt, ...) {
  *code = pd_catalog_errcode(r);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, msglen, fmt, ap);
  va_end(ap);
  return r;
}

static int only_keys(json_t *params, const char *const *allowed, const char **bad) {
  const char *k;
  json_t *v;
  json_object_foreach(params, k, v) {
    int ok = 0;
    for (const char *const *a = allowed; *a; a++) ok |= strcmp(*a, k) == 0;
    if (!ok) { *bad = k; return 0; }
  }
  return 1;
}

int pd_catalog_list_params(json_t *params, int64_t *since, const char **code, char *msg,
                           size_t msglen) {
  *since = -1;
  if (params && !json_is_object(params))
    return fail(-EINVAL, code, msg, msglen, "params must be an object");
  const char *bad = NULL;
  static const char *const keys[] = {"since_generation", NULL};
  if (params && !only_keys(params, keys, &bad))
    return fail(-EINVAL, code, msg, msglen, "artifacts.list: unknown parameter \"%s\"", bad);
  json_t *js = params ? json_object_get(params, "since_generation") : NULL;
  if (js && !json_is_null(js) && (!json_is_integer(js) || json_integer_value(js) < 0))
    return fail(-EINVAL, code, msg, msglen, "since_generation must be a non-negative integer");
  if (js && json_is_integer(js)) *since = (int64_t)json_integer_value(js);
  return 0;
}

int pd_catalog_list_result(pd_catalog *c, int64_t since, int refresh_err, json_t **result,
                           const char **code, char *msg, size_t msglen) {
  *result = NULL;
  if (refresh_err < 0)
    return fail(refresh_err, code, msg, msglen, "catalog refresh failed: %s",
                strerror(-refresh_err));
  int changed = since < 0 || (uint64_t)since != c->generation;
  json_t *o = json_pack("{s:i, s:I, s:b}", "schema", PD_CATALOG_SCHEMA, "generation",
                        (json_int_t)c->generation, "changed", changed);
  if (!o) return fail(-ENOMEM, code, msg, msglen, "out of memory");
  if (changed) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < c->n_entries; i++) {
      json_t *ej = entry_json(&c->entries[i]);
      if (!ej || json_array_append_new(arr, ej) != 0) { json_decref(arr); arr = NULL; }
    }
    if (!arr || json_object_set_new(o, "entries", arr) != 0) {
      json_decref(o);
      return fail(-ENOMEM, code, msg, msglen, "out of memory");
    }
  }
  *result = o;
  return 0;
}

int pd_catalog_fetch_begin(pd_catalog *c, json_t *params, pd_catalog_read_job **job,
                           const char **code, char *msg, size_t msglen) {
  *job = NULL;
  const char *bad = NULL;
  static const char *const keys[] = {"id", "offset", "length", NULL};
  if (!params) return fail(-EINVAL, code, msg, msglen, "artifacts.fetch needs {\"id\"}");
  if (!json_is_object(params)) return fail(-EINVAL, code, msg, msglen, "params must be an object");
  if (!only_keys(params, keys, &bad))
    return fail(-EINVAL, code, msg, msglen,
                "artifacts.fetch: unknown parameter \"%s\" (artifacts are named by id only)", bad);
  json_t *jid = json_object_get(params, "id");
  json_t *joff = json_object_get(params, "offset");
  json_t *jlen = json_object_get(params, "length");
  if (!jid || !json_is_string(jid))
    return fail(-EINVAL, code, msg, msglen, "artifacts.fetch: \"id\" must be a string");
  if ((joff && (!json_is_integer(joff) || json_integer_value(joff) < 0)) ||
      (jlen && (!json_is_integer(jlen) || json_integer_value(jlen) <= 0)))
    return fail(-EINVAL, code, msg, msglen,
                "artifacts.fetch: offset must be >= 0 and length > 0 integers");
  const char *id = json_string_value(jid);
  uint64_t off = joff ? (uint64_t)json_integer_value(joff) : 0;
  size_t want = jlen ? (size_t)json_integer_value(jlen) : PD_CATALOG_CHUNK_MAX;
  const pd_catalog_entry *e = pd_catalog_find(c, id);
  if (!e) return fail(-ENOENT, code, msg, msglen, "no artifact with id \"%.40s\" (list again)", id);
  if (e->size > PD_CATALOG_FETCH_MAX)
    return fail(-EFBIG, code, msg, msglen, "artifact %s is %" PRIu64 " bytes, over the %" PRIu64
                " MiB fetch limit", e->id, e->size, PD_CATALOG_FETCH_MAX >> 20);
  int r = pd_catalog_read_begin(c, id, off, want, job);
  if (r == -ENOENT)
    return fail(r, code, msg, msglen,
                "artifact %s changed or disappeared since it was listed; list again", e->id);
  if (r == -EINVAL)
    return fail(r, code, msg, msglen, "offset %" PRIu64 " is past the end (%" PRIu64 " bytes)",
                off, e->size);
  if (r < 0) return fail(r, code, msg, msglen, "reading artifact %s: %s", e->id, strerror(-r));
  return 0;
}

int pd_catalog_fetch_end(pd_catalog_read_job *j, json_t **result, const char **code, char *msg,
                         size_t msglen) {
  *result = NULL;
  char id[17];
  char sha[65];
  uint64_t size = j->size, off = j->offset;
  memcpy(id, j->id, sizeof id);
  memcpy(sha, j->sha256, sizeof sha);
  uint8_t *data = NULL;
  size_t len = 0;
  int r = pd_catalog_read_end(j, &data, &len);
  if (r == -EPERM)
    return fail(r, code, msg, msglen,
                "artifact %s is not served: not owned by the daemon's user, or it has another "
                "hard link", id);
  if (r == -ESTALE || r == -ELOOP || r == -ENOENT)
    return fail(r, code, msg, msglen,
                "artifact %s changed or disappeared since it was listed; list again", id);
  if (r == -EINVAL)
    return fail(r, code, msg, msglen, "offset %" PRIu64 " is past the end (%" PRIu64 " bytes)",
                off, size);
  if (r < 0) return fail(r, code, msg, msglen, "reading artifact %s: %s", id, strerror(-r));
  char *b64 = base64(data, len);
  free(data);
  if (!b64) return fail(-ENOMEM, code, msg, msglen, "out of memory");
  json_t *o = json_pack("{s:s, s:I, s:s, s:I, s:I, s:b, s:s}", "id", id, "size",
                        (json_int_t)size, "sha256", sha, "offset", (json_int_t)off,
                        "length", (json_int_t)len, "eof", off + len >= size, "data_base64",
                        b64);
  free(b64);
  if (!o) return fail(-ENOMEM, code, msg, msglen, "out of memory");
  *result = o;
  return 0;
}

int pd_catalog_call(pd_catalog *c, const char *method, json_t *params, json_t **result,
                    const char **code, char *msg, size_t msglen) {
  *result = NULL;
  if (params && !json_is_object(params))
    return fail(-EINVAL, code, msg, msglen, "params must be an object");
  if (strcmp(method, "artifacts.list") == 0) {
    int64_t since;
    int r = pd_catalog_list_params(params, &since, code, msg, msglen);
    if (r < 0) return r;
    return pd_catalog_list_result(c, since, pd_catalog_refresh(c), result, code, msg, msglen);
  }
  if (strcmp(method, "artifacts.fetch") == 0) {
    pd_catalog_read_job *j;
    int r = pd_catalog_fetch_begin(c, params, &j, code, msg, msglen);
    if (r < 0) return r;
    pd_catalog_read_work(j);
    pd_catalog_read_keep(c, j);
    return pd_catalog_fetch_end(j, result, code, msg, msglen);
  }
  return fail(-ENOSYS, code, msg, msglen, "unknown method %s", method);
}
