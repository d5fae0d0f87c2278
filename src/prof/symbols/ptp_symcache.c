/*
 * ptp_symcache.c - see ptp_symcache.h.
 *
 * In memory: the file as mapped at open (read-only, never moved), looked
 * up in place segment by segment (no copy of its intervals or frames: a
 * warm process reads the file, checks it, and binary-searches it), plus one
 * vector of the intervals added since (sorted and de-overlapped lazily
 * before a lookup) with the frames they index and interned copies of their
 * strings in a ptp_strarena (chunks that never move). So a frame's string
 * pointers stay valid until del while the vectors grow.
 *
 * A save appends the added intervals as one new segment when the file is
 * still the one we read or last wrote (same device, inode, size, mtime):
 * nothing else is read, merged or re-serialized. Otherwise (no file, a
 * rejected or torn one, another writer changed it, SC_SEGS_MAX segments)
 * it rewrites the file whole: everything held plus what is on disk now,
 * one segment, through the atomic temp+rename of ptp_cachefile.h.
 */
#include "prof/symbols/ptp_symcache.h"
#include "prof/cache/ptp_cachefile.h"
#include "prof/cache/ptp_crc.h"
#include "prof/symbols/ptp_sym_map.h"
#include "prof/output/ptp_snapstore.h"
#include "prof/symbols/ptp_strarena.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SC_MAGIC "PTPSYMC\n"
#define SC_VERSION 3u           /* 1: one block, rewritten whole at every save;
                                 * 2: segments, zlib crc32 */
#define SC_SEG_MAGIC 0x33474553u /* "SEG3" */
#define SC_CRC_BLOCK 16384u     /* bytes per checksum block (ptp_crc_blocks) */
#define SC_SEGS_MAX PTP_SYMCACHE_SEGS_MAX
#define SC_BID_MAX 128
#define SC_SUFFIX ".sym"
#define SC_TMP_AGE_S 3600
#define SC_FRAMES_MAX 64        /* frames per interval (inline depth) we keep */

typedef struct sc_fhdr {
  char magic[8];
  uint32_t version;
  uint32_t algo;                /* checksum algorithm of every segment (ptp_crc.h id) */
  char build_id[SC_BID_MAX + 8];/* NUL-padded */
} sc_fhdr;

/* One segment: this header, nivals intervals, nframes frames, strbytes of
 * NUL-terminated strings, zero padding to 8 bytes. crc = the file's
 * checksum algorithm (sc_fhdr.algo) continued over four parts, each cut
 * into SC_CRC_BLOCK-byte blocks from its own start (see seg_crc): the
 * header's first 20 bytes, the intervals, the frames, the strings (no
 * padding). Parts, not the body as one run: the writer holds them in
 * separate arrays, the reader in one mapping, and both cut the same
 * blocks. */
typedef struct sc_shdr { uint32_t magic, flags, nivals, nframes, strbytes, crc; } sc_shdr;
typedef struct sc_ival_disk { uint64_t lo, hi; uint32_t first, n; } sc_ival_disk;
typedef struct sc_frame_disk { uint32_t name, sys, file, start_line, line, column; } sc_frame_disk;

_Static_assert(sizeof(sc_fhdr) % 8 == 0 && sizeof(sc_shdr) % 8 == 0 &&
               sizeof(sc_ival_disk) % 8 == 0 && sizeof(sc_frame_disk) % 8 == 0,
               "segments keep 8-byte alignment");

typedef struct sc_seg {
  const sc_ival_disk *iv;
  const sc_frame_disk *fr;
  const char *strs;
  uint32_t niv, nfr, strbytes, flags;
} sc_seg;

/* ord: who wins between intervals of equal start (lower: read from the
 * file, then added earlier). saved: already in the file on disk. */
typedef struct sc_ival { uint64_t lo, hi; uint32_t first, n, ord; bool saved; } sc_ival;

/* The file as we last read or wrote it: a save appends only to that. */
typedef struct sc_ident {
  bool valid;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
} sc_ident;

struct ptp_symcache {
  char *dir;
  char build_id[SC_BID_MAX + 1];
  ptp_symcache_state state;
  int file_err;                 /* why the file was not loaded (see file_error) */
  unsigned flags;
  bool dirty, sorted;
  uint8_t *file;                /* the file mapped at open (segments point in) */
  size_t file_len;
  sc_seg *segs;                 /* its segments, looked up first, in order */
  size_t nsegs;
  sc_ident id;                  /* the file on disk we may append to */
  size_t file_segs;             /* segments it holds */
  sc_ival *iv;                  /* added (and, after a rewrite, absorbed) */
  size_t niv, capiv;
  size_t nsorted;               /* iv[0..nsorted) sorted, non-overlapping */
  uint32_t seq;                 /* next ord of an added interval */
  ptp_sym_frame *fr;
  size_t nfr, capfr;
  ptp_sym_frame *scratch;       /* a segment's frames as find returns them */
  size_t capscratch;
  ptp_strarena strs;            /* interned copies of added strings */
  ptp_u64map intern;            /* hash -> index into interned */
  const char **interned;
  size_t ninterned, capinterned;
  size_t bytes;                 /* estimated file size of what is held */
};

/* ---- directory ---- */

int ptp_symcache_default_dir(char *buf, size_t cap) {
  const char *v = getenv("PTPROF_SYMCACHE");
  int n;
  if (v) {
    if (!*v || !strcmp(v, "off")) return -ENOENT;
    n = snprintf(buf, cap, "%s", v);
  } else if ((v = getenv("XDG_CACHE_HOME")) && v[0] == '/') {
    n = snprintf(buf, cap, "%s/ptprof/symbols", v);
  } else if ((v = getenv("HOME")) && v[0] == '/') {
    n = snprintf(buf, cap, "%s/.cache/ptprof/symbols", v);
  } else {
    return -ENOENT;
  }
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* ---- strings ---- */

static const char *sc_intern(ptp_symcache *c, const char *s) {
  if (!s) s = "";
  size_t len = strlen(s);
  uint64_t h = ptp_hash_bytes(s, len, 0x5c) | 1;
  uint32_t idx;
  if (ptp_u64map_get(&c->intern, h, &idx) && strcmp(c->interned[idx], s) == 0) return c->interned[idx];
  char *p = ptp_strarena_dup_n(&c->strs, s, len);
  if (!p) return NULL;
  if (c->ninterned == c->capinterned) {
    size_t nc = c->capinterned ? c->capinterned * 2 : 256;
    const char **ni = ptp_realloc(c->interned, nc * sizeof *ni);
    if (!ni) return NULL;
    c->interned = ni;
    c->capinterned = nc;
  }
  c->interned[c->ninterned] = p;
  if (ptp_u64map_put(&c->intern, h, (uint32_t)c->ninterned)) return NULL;
  c->ninterned++;
  c->bytes += len + 1;
  return p;
}

/* ---- vectors ---- */

static int sc_reserve(void **v, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 256;
  while (nc < need) nc *= 2;
  void *n = ptp_realloc(*v, nc * elem);
  if (!n) return -ENOMEM;
  *v = n;
  *cap = nc;
  return 0;
}

static int ival_cmp(const void *a, const void *b) {
  const sc_ival *x = a, *y = b;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  return x->ord < y->ord ? -1 : x->ord > y->ord;   /* equal starts: the older wins */
}

/* Sorts, and trims each interval overlapping an earlier kept one to what
 * lies past it (dropped when nothing does). Invariant:
 * iv[0..nsorted) is sorted and non-overlapping; only the tail added since
 * is sorted here, then merged in one linear pass (a symbolizer filling CU
 * after CU would otherwise re-sort everything per CU). Dropped intervals'
 * frames stay in the vector (unreferenced) until del. */
static void sc_sort(ptp_symcache *c) {
  if (c->sorted) return;
  size_t a = c->nsorted, n = c->niv;
  qsort(c->iv + a, n - a, sizeof *c->iv, ival_cmp);
  sc_ival *m = a ? ptp_malloc(n * sizeof *m) : NULL;
  if (a && !m) {   /* no memory for the merge: sort it all in place */
    qsort(c->iv, n, sizeof *c->iv, ival_cmp);
    a = 0;
  }
  size_t i = 0, j = a, k = 0;
  sc_ival *dst = m ? m : c->iv;
  while (i < a || j < n) {
    sc_ival x;
    if (j >= n || (i < a && ival_cmp(&c->iv[i], &c->iv[j]) <= 0)) x = c->iv[i++];
    else x = c->iv[j++];
    if (k && x.lo < dst[k - 1].hi) {
      /* overlaps the one kept before it: only what lies past that is kept
       * (every address of an interval resolves to its frames, so any part
       * of it is right too). The set of addresses held never shrinks: a
       * cache marked PTP_SYMCACHE_COMPLETE relies on that when a rewrite
       * merges its intervals with the file's, cut elsewhere. */
      if (x.hi <= dst[k - 1].hi) continue;
      x.lo = dst[k - 1].hi;
    }
    dst[k++] = x;
  }
  if (m) {
    memcpy(c->iv, m, k * sizeof *m);
    free(m);
  }
  c->niv = k;
  c->nsorted = k;
  c->sorted = true;
}

/* Whether [lo, hi) overlaps one of the first n (sorted) intervals. */
static bool sc_overlaps(const ptp_symcache *c, size_t n, uint64_t lo, uint64_t hi) {
  size_t a = 0, b = n;
  while (a < b) {   /* first interval with lo >= hi */
    size_t mid = a + (b - a) / 2;
    if (c->iv[mid].lo < hi) a = mid + 1; else b = mid;
  }
  return a > 0 && c->iv[a - 1].hi > lo;
}

static const sc_ival *sc_search(ptp_symcache *c, uint64_t rel) {
  sc_sort(c);
  size_t lo = 0, hi = c->niv;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->iv[mid].lo <= rel) lo = mid + 1; else hi = mid;
  }
  if (lo == 0) return NULL;
  const sc_ival *v = &c->iv[lo - 1];
  return rel < v->hi ? v : NULL;
}

/* The interval of segment g holding rel, or NULL. */
static const sc_ival_disk *seg_search(const sc_seg *g, uint64_t rel) {
  size_t lo = 0, hi = g->niv;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->iv[mid].lo <= rel) lo = mid + 1; else hi = mid;
  }
  if (lo == 0) return NULL;
  const sc_ival_disk *v = &g->iv[lo - 1];
  return rel < v->hi ? v : NULL;
}

static ptp_sym_frame seg_frame(const sc_seg *g, uint32_t i) {
  const sc_frame_disk *f = &g->fr[i];
  return (ptp_sym_frame){g->strs + f->name, g->strs + f->sys, g->strs + f->file,
                         f->start_line, f->line, f->column};
}

/* ---- reading ---- */

static bool bid_ok(const char *b) { return ptp_cachefile_hex_name_ok(b, SC_BID_MAX); }

static int sc_path(const ptp_symcache *c, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s/%s" SC_SUFFIX, c->dir, c->build_id);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static void ident_of(sc_ident *id, const struct stat *st) {
  *id = (sc_ident){true, st->st_dev, st->st_ino, st->st_size, st->st_mtim};
}

static bool ident_same(const sc_ident *id, const struct stat *st) {
  return id->valid && id->dev == st->st_dev && id->ino == st->st_ino && id->size == st->st_size &&
         id->mtime.tv_sec == st->st_mtim.tv_sec && id->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Reads the open file fd into memory of its own (ptp_cachefile_read_fd:
 * a private anonymous mapping, so sc_unmap frees it), under its rules (a
 * regular file of ours, one link, not writable by others, in a directory
 * of ours, within the size bound). A copy rather than a mapping of the
 * file: a file truncated in place while mapped would fault with SIGBUS at
 * a dump (any process of our uid can do it, `: > file`); the copy costs
 * one read from the page cache. 0 with *buf (sc_unmap it) and *st, or
 * ptp_cachefile_read_fd's error (-EBADMSG only for a file cut short). */
static int sc_map_fd(const ptp_symcache *c, int fd, uint8_t **buf, struct stat *st) {
  void *p;
  int r = ptp_cachefile_read_fd(fd, c->dir, 1, sizeof(sc_fhdr), PTP_SYMCACHE_FILE_MAX, &p, st);
  if (r == 0) *buf = p;
  return r;
}

static void sc_unmap(uint8_t *buf, size_t len) {
  if (buf) munmap(buf, len);
}

/* sc_map_fd of the cache file; -ENOENT when there is none, the errno of
 * open otherwise (-EACCES, -EMFILE, -ELOOP for a symbolic link, ...). */
static int sc_map(const ptp_symcache *c, uint8_t **buf, struct stat *st) {
  char path[PATH_MAX];
  int r = sc_path(c, path, sizeof path);
  if (r) return r;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -errno;
  r = sc_map_fd(c, fd, buf, st);
  close(fd);
  return r;
}

#define SC_LOCK_TRIES 200       /* x 100 us: how long a save waits for another */

/* Opens the cache file (flags: O_RDONLY, or O_WRONLY | O_APPEND) and takes
 * its exclusive flock(2), checking afterwards that the path still names
 * the locked inode. Writers hold it from reading the file to renaming its
 * replacement over it (rewrite) or for the append: so no append lands in a
 * file that is being merged and replaced (it would be lost), and two
 * rewriters merge each other's work. Waits ~20 ms at most (ours hold it
 * for one write and an fsync; one holding it longer is not waited for).
 * Returns the fd (the lock goes with close), -ENOENT (no file), -EAGAIN
 * (still busy), or the errno of open or flock. */
static int sc_lock_open(const ptp_symcache *c, int flags) {
  char path[PATH_MAX];
  int r = sc_path(c, path, sizeof path);
  if (r) return r;
  for (int tries = 0; tries < SC_LOCK_TRIES; tries++) {
    int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      struct stat a, b;
      if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return fd;
      close(fd);   /* replaced while we waited: lock the new one */
      continue;
    }
    int e = errno;
    close(fd);
    if (e != EWOULDBLOCK && e != EINTR) return -e;
    struct timespec ts = {0, 100 * 1000};
    nanosleep(&ts, NULL);
  }
  return -EAGAIN;
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The checksum of a segment: its header's first 20 bytes, then each part
 * of the body (an empty one adds nothing), each blockwise from its own
 * start. The reader and the writer both call this. */
static uint32_t seg_crc(unsigned algo, const sc_shdr *h, const void *iv, const void *fr,
                        const void *strs) {
  uint32_t crc = ptp_crc_blocks(algo, 0, h, offsetof(sc_shdr, crc), SC_CRC_BLOCK);
  crc = ptp_crc_blocks(algo, crc, iv, (size_t)h->nivals * sizeof(sc_ival_disk), SC_CRC_BLOCK);
  crc = ptp_crc_blocks(algo, crc, fr, (size_t)h->nframes * sizeof(sc_frame_disk), SC_CRC_BLOCK);
  return ptp_crc_blocks(algo, crc, strs, h->strbytes, SC_CRC_BLOCK);
}

/* Checks one segment at buf[off..len). 0 and *g, *next; 1: it does not fit
 * in the file (a torn tail: an append cut short, or one in progress);
 * -EBADMSG: anything else wrong. */
static int seg_parse(unsigned algo, const uint8_t *buf, size_t len, size_t off, sc_seg *g,
                     size_t *next) {
  sc_shdr h;
  if (len - off < sizeof h) return 1;
  memcpy(&h, buf + off, sizeof h);
  if (h.magic != SC_SEG_MAGIC) return -EBADMSG;
  uint64_t body = (uint64_t)h.nivals * sizeof(sc_ival_disk) + (uint64_t)h.nframes * sizeof(sc_frame_disk) +
                  h.strbytes;
  if (body > len - off - sizeof h) return 1;
  const uint8_t *p = buf + off + sizeof h;
  const sc_ival_disk *iv = (const sc_ival_disk *)p;
  const sc_frame_disk *fr = (const sc_frame_disk *)(iv + h.nivals);
  const char *strs = (const char *)(fr + h.nframes);
  if (seg_crc(algo, &h, iv, fr, strs) != h.crc) return -EBADMSG;
  if (h.strbytes == 0 || strs[h.strbytes - 1] != 0) return -EBADMSG;
  uint64_t prev_hi = 0;
  for (uint32_t i = 0; i < h.nivals; i++) {
    if (iv[i].lo >= iv[i].hi || iv[i].lo < prev_hi || iv[i].n > SC_FRAMES_MAX ||
        (uint64_t)iv[i].first + iv[i].n > h.nframes)
      return -EBADMSG;
    prev_hi = iv[i].hi;
  }
  for (uint32_t i = 0; i < h.nframes; i++)
    if (fr[i].name >= h.strbytes || fr[i].sys >= h.strbytes || fr[i].file >= h.strbytes) return -EBADMSG;
  *g = (sc_seg){iv, fr, strs, h.nivals, h.nframes, h.strbytes, h.flags};
  size_t end = off + sizeof h + pad8((size_t)body);
  *next = end < len ? end : len;
  return 0;
}

/* Parses buf as a cache file of c->build_id into a malloc'd segment array.
 * 0 and *segs and *n (n >= 1) and *torn (the last segment did not fit);
 * -ESTALE (another format version or checksum algorithm: not corrupt, not
 * ours to read); -EBADMSG (corrupt: a check failed); -ENOMEM. The segments
 * point into buf. */
static int sc_parse(const ptp_symcache *c, const uint8_t *buf, size_t len, sc_seg **segs, size_t *n,
                    bool *torn) {
  sc_fhdr h;
  if (len < sizeof h) return -EBADMSG;
  memcpy(&h, buf, sizeof h);
  /* another version, or a checksum this process does not compute (the
   * file of a CPU with other features, on a shared home): refused, and
   * rewritten at the next save */
  if (memcmp(h.magic, SC_MAGIC, 8) != 0) return -EBADMSG;
  if (h.version != SC_VERSION || h.algo != ptp_crc_algo()) return -ESTALE;
  h.build_id[sizeof h.build_id - 1] = 0;
  if (strcmp(h.build_id, c->build_id) != 0) return -EBADMSG;
  sc_seg *v = NULL;
  size_t k = 0, cap = 0, off = sizeof h;
  *torn = false;
  while (off < len) {
    sc_seg g;
    int r = seg_parse(h.algo, buf, len, off, &g, &off);
    if (r == 1) { *torn = true; break; }
    if (r < 0 || k == SC_SEGS_MAX * 2) { free(v); return -EBADMSG; }
    if (sc_reserve((void **)&v, &cap, k + 1, sizeof *v)) { free(v); return -ENOMEM; }
    v[k++] = g;
  }
  if (k == 0) { free(v); return -EBADMSG; }   /* we never write a file without one */
  *segs = v;
  *n = k;
  return 0;
}

int ptp_symcache_open(ptp_symcache **out, const char *dir, const char *build_id) {
  if (!out || !dir || !*dir || !build_id || !bid_ok(build_id)) return -EINVAL;
  ptp_symcache *c = ptp_calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  c->dir = ptp_strdup(dir);
  if (!c->dir) { free(c); return -ENOMEM; }
  snprintf(c->build_id, sizeof c->build_id, "%s", build_id);
  c->sorted = true;
  c->seq = 1u << 16;   /* above any segment index (ord of absorbed intervals) */
  ptp_strarena_init(&c->strs, 16384);
  c->bytes = sizeof(sc_fhdr);
  uint8_t *buf = NULL;
  struct stat st;
  int r = sc_map(c, &buf, &st);
  if (r == -ENOMEM) { ptp_symcache_del(c); return r; }
  if (r == 0) {
    bool torn;
    r = sc_parse(c, buf, (size_t)st.st_size, &c->segs, &c->nsegs, &torn);
    if (r == -ENOMEM) { sc_unmap(buf, (size_t)st.st_size); ptp_symcache_del(c); return r; }
    c->file_err = r;
    if (r == 0) {
      c->file = buf;   /* kept whole: the segments and their strings point into it */
      c->file_len = (size_t)st.st_size;
      buf = NULL;
      c->flags = c->segs[c->nsegs - 1].flags;
      c->state = PTP_SYMCACHE_LOADED;
      c->bytes = (size_t)st.st_size;
      c->file_segs = c->nsegs;
      if (!torn) ident_of(&c->id, &st);   /* a torn file is rewritten, never appended to */
    } else {
      c->state = r == -ESTALE ? PTP_SYMCACHE_STALE : PTP_SYMCACHE_REJECTED;
    }
  } else {
    /* not read: missing, cut short (corrupt), or not usable for a reason
     * its errno says (unreadable, refused by the cache-file rule) */
    c->file_err = r;
    c->state = r == -ENOENT    ? PTP_SYMCACHE_MISSING
               : r == -EBADMSG ? PTP_SYMCACHE_REJECTED
                               : PTP_SYMCACHE_UNUSABLE;
  }
  if (buf) sc_unmap(buf, (size_t)st.st_size);
  *out = c;
  return 0;
}

void ptp_symcache_del(ptp_symcache *c) {
  if (!c) return;
  free(c->dir);
  free(c->segs);
  sc_unmap(c->file, c->file_len);
  free(c->iv);
  free(c->fr);
  free(c->scratch);
  ptp_strarena_free(&c->strs);
  ptp_u64map_free(&c->intern);
  free(c->interned);
  free(c);
}

ptp_symcache_state ptp_symcache_file_state(const ptp_symcache *c) { return c->state; }
int ptp_symcache_file_error(const ptp_symcache *c) { return c->file_err; }
unsigned ptp_symcache_flags(const ptp_symcache *c) { return c->flags; }
bool ptp_symcache_dirty(const ptp_symcache *c) { return c->dirty; }

size_t ptp_symcache_size(const ptp_symcache *c) {
  size_t n = c->niv;
  for (size_t i = 0; i < c->nsegs; i++) n += c->segs[i].niv;
  return n;
}

size_t ptp_symcache_file_segments(const ptp_symcache *c) { return c->id.valid ? c->file_segs : 0; }

void ptp_symcache_set_flags(ptp_symcache *c, unsigned flags) {
  flags |= PTP_SYMCACHE_FLAGS_SET;
  if (c->flags != flags) {
    c->flags = flags;
    c->dirty = true;
  }
}

int ptp_symcache_find(ptp_symcache *c, uint64_t rel, const ptp_sym_frame **frames, uint32_t *n) {
  /* the file's segments in order, then what was added: the oldest answer
   * wins (any of them is right: every interval holds only addresses that
   * resolve to its frames) */
  for (size_t s = 0; s < c->nsegs; s++) {
    const sc_seg *g = &c->segs[s];
    const sc_ival_disk *v = seg_search(g, rel);
    if (!v) continue;
    if (sc_reserve((void **)&c->scratch, &c->capscratch, v->n ? v->n : 1, sizeof *c->scratch))
      return 0;   /* no memory: a miss, resolved the slow way */
    for (uint32_t i = 0; i < v->n; i++) c->scratch[i] = seg_frame(g, v->first + i);
    *frames = v->n ? c->scratch : NULL;
    *n = v->n;
    return 1;
  }
  const sc_ival *v = sc_search(c, rel);
  if (!v) return 0;
  *frames = v->n ? &c->fr[v->first] : NULL;
  *n = v->n;
  return 1;
}

/* Whether one interval of the file's segments holds all of [lo, hi). */
static bool segs_cover(const ptp_symcache *c, uint64_t lo, uint64_t hi) {
  for (size_t s = 0; s < c->nsegs; s++) {
    const sc_ival_disk *v = seg_search(&c->segs[s], lo);
    if (v && v->hi >= hi) return true;
  }
  return false;
}

static int sc_add(ptp_symcache *c, uint64_t lo, uint64_t hi, const ptp_sym_frame *frames, uint32_t n,
                  uint32_t ord, bool saved) {
  size_t grow = sizeof(sc_ival_disk) + n * sizeof(sc_frame_disk);
  if (c->bytes + grow > PTP_SYMCACHE_FILE_MAX / 2) return -ENOSPC;   /* room for new strings */
  if (sc_reserve((void **)&c->iv, &c->capiv, c->niv + 1, sizeof *c->iv) ||
      sc_reserve((void **)&c->fr, &c->capfr, c->nfr + n, sizeof *c->fr))
    return -ENOMEM;
  size_t first = c->nfr;
  for (uint32_t i = 0; i < n; i++) {
    ptp_sym_frame f = frames[i];
    if (!(f.name = sc_intern(c, f.name)) || !(f.system_name = sc_intern(c, f.system_name)) ||
        !(f.file = sc_intern(c, f.file))) {
      c->nfr = first;
      return -ENOMEM;
    }
    c->fr[c->nfr++] = f;
  }
  /* sc_sort drops overlaps, the older interval winning */
  c->iv[c->niv++] = (sc_ival){lo, hi, (uint32_t)first, n, ord, saved};
  c->sorted = false;
  c->bytes += grow;
  return 0;
}

int ptp_symcache_add(ptp_symcache *c, uint64_t lo, uint64_t hi, const ptp_sym_frame *frames,
                     uint32_t n) {
  if (lo >= hi || n > SC_FRAMES_MAX) return -EINVAL;
  /* already answered by the file (a process filling a CU that an earlier
   * one cached piece by piece): nothing to add, nothing to write */
  if (segs_cover(c, lo, hi)) return 0;
  int r = sc_add(c, lo, hi, frames, n, c->seq, false);
  if (r) return r;
  c->seq++;
  c->dirty = true;
  return 0;
}

/* ---- writing ---- */

typedef struct sc_out {
  sc_ival_disk *iv;
  size_t niv, capiv;
  sc_frame_disk *fr;
  size_t nfr, capfr;
  uint8_t *strs;
  size_t nstrs, capstrs;
  ptp_u64map map;            /* hash -> offset */
} sc_out;

static void out_free(sc_out *o) {
  free(o->iv);
  free(o->fr);
  free(o->strs);
  ptp_u64map_free(&o->map);
}

static int out_str(sc_out *o, const char *s, uint32_t *off) {
  size_t len = strlen(s);
  uint64_t h = ptp_hash_bytes(s, len, 0x77) | 1;
  uint32_t v;
  if (ptp_u64map_get(&o->map, h, &v) && strcmp((const char *)o->strs + v, s) == 0) {
    *off = v;
    return 0;
  }
  if (o->nstrs + len + 1 > UINT32_MAX) return -E2BIG;
  if (sc_reserve((void **)&o->strs, &o->capstrs, o->nstrs + len + 1, 1)) return -ENOMEM;
  memcpy(o->strs + o->nstrs, s, len + 1);
  *off = (uint32_t)o->nstrs;
  if (ptp_u64map_put(&o->map, h, *off)) return -ENOMEM;
  o->nstrs += len + 1;
  return 0;
}

/* Serializes the sorted intervals of c->iv (all, or only those not saved)
 * into o. */
static int out_ivals(sc_out *o, const ptp_symcache *c, bool only_new) {
  uint32_t empty;
  int r = out_str(o, "", &empty);
  for (size_t i = 0; i < c->niv && !r; i++) {
    const sc_ival *v = &c->iv[i];
    if (only_new && v->saved) continue;
    if (sc_reserve((void **)&o->iv, &o->capiv, o->niv + 1, sizeof *o->iv) ||
        sc_reserve((void **)&o->fr, &o->capfr, o->nfr + v->n, sizeof *o->fr))
      return -ENOMEM;
    o->iv[o->niv++] = (sc_ival_disk){v->lo, v->hi, (uint32_t)o->nfr, v->n};
    for (uint32_t j = 0; j < v->n && !r; j++) {
      const ptp_sym_frame *f = &c->fr[v->first + j];
      sc_frame_disk d = {0, 0, 0, (uint32_t)f->start_line, (uint32_t)f->line, (uint32_t)f->column};
      if (!(r = out_str(o, f->name, &d.name)) && !(r = out_str(o, f->system_name, &d.sys)) &&
          !(r = out_str(o, f->file, &d.file)))
        o->fr[o->nfr++] = d;
    }
  }
  return r;
}

/* The segment header of o (flags: c's) and its padded size. */
static size_t out_seg(const sc_out *o, unsigned flags, sc_shdr *h) {
  *h = (sc_shdr){SC_SEG_MAGIC, flags, (uint32_t)o->niv, (uint32_t)o->nfr, (uint32_t)o->nstrs, 0};
  /* the file's algorithm: a rewrite writes ptp_crc_algo() into the file
   * header, and an append goes only to a file read or written by this
   * process, whose header says the same */
  h->crc = seg_crc(ptp_crc_algo(), h, o->iv, o->fr, o->strs);
  return sizeof *h + o->niv * sizeof *o->iv + o->nfr * sizeof *o->fr + pad8(o->nstrs);
}

static const uint64_t sc_zeros;

/* The iovecs of one segment (5: header, intervals, frames, strings,
 * padding). */
static void seg_iov(struct iovec *v, const sc_shdr *h, const sc_out *o) {
  v[0] = (struct iovec){(void *)h, sizeof *h};
  v[1] = (struct iovec){o->iv, o->niv * sizeof *o->iv};
  v[2] = (struct iovec){o->fr, o->nfr * sizeof *o->fr};
  v[3] = (struct iovec){o->strs, o->nstrs};
  v[4] = (struct iovec){(void *)&sc_zeros, pad8(o->nstrs) - o->nstrs};
}

static void mark_saved(ptp_symcache *c) {
  for (size_t i = 0; i < c->niv; i++) c->iv[i].saved = true;
  c->dirty = false;
}

/* Appends the intervals not yet saved as one segment to the file, if it is
 * still the one c->id describes (nobody replaced, appended to or truncated
 * it since) and the segment and size bounds allow. One writev(2) with
 * O_APPEND under the file's lock (sc_lock_open); no fsync: a segment cut short by
 * a crash fails its length or CRC check, and the next open rewrites the
 * file (never reads a torn segment). Returns 0 (appended), 1 (not
 * appendable: rewrite instead), or a negative errno (the write failed;
 * the file may have a torn tail, which the next save rewrites). */
static int sc_append(ptp_symcache *c) {
  if (!c->id.valid || c->file_segs >= SC_SEGS_MAX) return 1;
  int fd = sc_lock_open(c, O_WRONLY | O_APPEND);
  if (fd < 0) return 1;
  struct stat st;
  int r = 1;
  bool bound = false;
  sc_out o = {0};
  if (fstat(fd, &st) != 0 || !ptp_cachefile_mappable(&st, sizeof(sc_fhdr), PTP_SYMCACHE_FILE_MAX) ||
      !ident_same(&c->id, &st))
    goto out;
  if ((r = out_ivals(&o, c, true))) goto out;
  sc_shdr h;
  size_t len = out_seg(&o, c->flags, &h);
  if ((uint64_t)st.st_size + len > PTP_SYMCACHE_FILE_MAX) { r = 1; goto out; }
  struct iovec v[5];
  seg_iov(v, &h, &o);
  ssize_t w;
  do w = writev(fd, v, 5); while (w < 0 && errno == EINTR);
  if (w != (ssize_t)len) {
    c->id.valid = false;   /* maybe a torn tail now: the next save rewrites */
    r = w < 0 ? -errno : -EIO;
    goto out;
  }
  c->file_segs++;
  uint64_t before = (uint64_t)c->id.size;
  if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == before + len) ident_of(&c->id, &st);
  else c->id.valid = false;   /* someone else appended meanwhile: fine, but rewrite next time */
  mark_saved(c);
  r = 0;
  /* The directory bound after an append too (a file grows by up to 31
   * appends between rewrites, so bounding only at rewrites let a
   * directory of growing files pass PTP_SYMCACHE_DIR_MAX), but cheaply:
   * only when this append carried the file across a multiple of
   * PTP_SYMCACHE_BOUND_STEP. Stateless, so it holds across processes: a
   * directory scan per STEP bytes a file grows, and a directory exceeds
   * its bound by less than one STEP per file at most. */
  bound = before / PTP_SYMCACHE_BOUND_STEP != (before + len) / PTP_SYMCACHE_BOUND_STEP;
out:
  out_free(&o);
  close(fd);   /* unlocked before the scan */
  if (bound) {
    char name[SC_BID_MAX + 16];
    snprintf(name, sizeof name, "%s" SC_SUFFIX, c->build_id);
    (void)ptp_cachefile_bound(c->dir, SC_SUFFIX, PTP_SYMCACHE_DIR_MAX, name, SC_TMP_AGE_S);
  }
  return r;
}

/* Moves the file's segments into the vector, ahead of everything added
 * (their strings stay in c->file): a rewrite serializes one sorted list.
 * 0 or -ENOMEM (nothing moved). */
static int absorb_segs(ptp_symcache *c) {
  if (!c->nsegs) return 0;
  size_t niv = 0, nfr = 0;
  for (size_t s = 0; s < c->nsegs; s++) {
    niv += c->segs[s].niv;
    nfr += c->segs[s].nfr;
  }
  if (sc_reserve((void **)&c->iv, &c->capiv, c->niv + niv, sizeof *c->iv) ||
      sc_reserve((void **)&c->fr, &c->capfr, c->nfr + nfr, sizeof *c->fr))
    return -ENOMEM;
  for (size_t s = 0; s < c->nsegs; s++) {
    const sc_seg *g = &c->segs[s];
    size_t base = c->nfr;
    for (uint32_t i = 0; i < g->nfr; i++) c->fr[c->nfr++] = seg_frame(g, i);
    for (uint32_t i = 0; i < g->niv; i++)
      c->iv[c->niv++] = (sc_ival){g->iv[i].lo, g->iv[i].hi, (uint32_t)(base + g->iv[i].first),
                                  g->iv[i].n, (uint32_t)s, true};
  }
  free(c->segs);
  c->segs = NULL;
  c->nsegs = 0;
  c->nsorted = 0;   /* segments overlap each other and the added ones: sort all */
  c->sorted = false;
  return 0;
}

/* Adds what the file on disk (fd: open, locked, or -1: by path) holds now
 * and we do not (another process wrote it since we read it), ours winning
 * on overlap. Best effort. */
static void merge_disk(ptp_symcache *c, int fd) {
  uint8_t *buf = NULL;
  struct stat st;
  sc_seg *segs = NULL;
  size_t n = 0;
  bool torn;
  if ((fd >= 0 ? sc_map_fd(c, fd, &buf, &st) : sc_map(c, &buf, &st)) != 0) return;
  if (ident_same(&c->id, &st) || sc_parse(c, buf, (size_t)st.st_size, &segs, &n, &torn) != 0) {
    sc_unmap(buf, (size_t)st.st_size);   /* unchanged since we read or wrote it, or unusable */
    return;
  }
  sc_sort(c);
  size_t nsorted = c->niv;
  for (size_t s = 0; s < n; s++) {
    const sc_seg *g = &segs[s];
    for (uint32_t i = 0; i < g->niv; i++) {
      const sc_ival_disk *v = &g->iv[i];
      if (sc_overlaps(c, nsorted, v->lo, v->hi)) continue;   /* keep ours */
      ptp_sym_frame tmp[SC_FRAMES_MAX];
      for (uint32_t j = 0; j < v->n; j++) tmp[j] = seg_frame(g, v->first + j);
      /* strings are interned (copied): buf dies here */
      if (sc_add(c, v->lo, v->hi, tmp, v->n, c->seq++, true) != 0) goto out;
    }
  }
out:
  free(segs);
  sc_unmap(buf, (size_t)st.st_size);
}

typedef struct sc_fill { const struct iovec *iov; int n; struct stat st; bool have_st; } sc_fill;

static int fill_file(int fd, void *arg) {
  sc_fill *a = arg;
  for (int i = 0; i < a->n; i++) {
    int r = ptp_cachefile_write_all(fd, a->iov[i].iov_base, a->iov[i].iov_len);
    if (r) return r;
  }
  /* the identity of what we wrote (rename keeps inode and mtime), so that
   * the next save of this process can append to it */
  a->have_st = fstat(fd, &a->st) == 0;
  return 0;
}

/* Writes everything held (merged with the file as it is now) as a new file
 * of one segment, atomically, then applies the directory bound. */
static int sc_rewrite(ptp_symcache *c) {
  int r;
  if ((r = absorb_segs(c))) return r;
  /* locked from the merge to the rename (sc_lock_open); with no file yet,
   * or one another writer keeps locked, unlocked: then at worst one
   * writer's new intervals are lost (recomputed by a later process) */
  int lfd = sc_lock_open(c, O_RDONLY);
  merge_disk(c, lfd);
  sc_sort(c);
  sc_out o = {0};
  if ((r = out_ivals(&o, c, false))) goto fail_out;
  sc_fhdr fh;
  memset(&fh, 0, sizeof fh);
  memcpy(fh.magic, SC_MAGIC, 8);
  fh.version = SC_VERSION;
  fh.algo = ptp_crc_algo();
  snprintf(fh.build_id, sizeof fh.build_id, "%s", c->build_id);
  sc_shdr h;
  size_t len = sizeof fh + out_seg(&o, c->flags, &h);
  if (len > PTP_SYMCACHE_FILE_MAX) { r = -E2BIG; goto fail_out; }
  if ((r = ptp_cachefile_prepare_dir(c->dir))) goto fail_out;
  char name[SC_BID_MAX + 16];
  snprintf(name, sizeof name, "%s" SC_SUFFIX, c->build_id);
  struct iovec v[6] = {{&fh, sizeof fh}};
  seg_iov(v + 1, &h, &o);
  sc_fill a = {v, 6, {0}, false};
  c->id.valid = false;
  if ((r = ptp_cachefile_write_with(c->dir, name, fill_file, &a))) goto fail_out;
  if (a.have_st) ident_of(&c->id, &a.st);
  c->file_segs = 1;
  if (lfd >= 0) close(lfd);
  lfd = -1;
  (void)ptp_cachefile_bound(c->dir, SC_SUFFIX, PTP_SYMCACHE_DIR_MAX, name, SC_TMP_AGE_S);
  mark_saved(c);
  out_free(&o);
  return 0;

fail_out:
  out_free(&o);
  if (lfd >= 0) close(lfd);
  return r;
}

int ptp_symcache_save(ptp_symcache *c) {
  if (!c->dirty) return 0;
  sc_sort(c);
  int r = sc_append(c);
  if (r <= 0) return r;
  return sc_rewrite(c);
}
