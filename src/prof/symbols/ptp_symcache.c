/*
 * ptp_symcache.c - see ptp_symcache.h.
 *
 * In memory: an anonymous mapping of the file's size (never moved, freed
 * at del) into which the segments' headers and indexes are read at open
 * and their blocks as lookups need them, each checked once (a warm process
 * that looks up 50 addresses reads a few dozen KB of a 2.5 MB file), plus
 * one vector of the intervals added since (sorted and de-overlapped lazily
 * before a lookup) with the frames they index and interned copies of their
 * strings in a ptp_strarena (chunks that never move). So a frame's string
 * pointers stay valid until del (or evict) while the vectors grow, and
 * after the file is dropped (sc_drop: a corrupt block, a file that cannot
 * be read again): its memory stays, only its segments are forgotten.
 * A file replaced after a release (another process's rewrite, which holds
 * what it held and more) is followed (sc_follow): the new one is read as
 * at open, the old one's memory kept aside (retired) until evict or del.
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
#define SC_VERSION 5u           /* 1: one block, rewritten whole at every save;
                                 * 2: segments, zlib crc32; 3: one checksum
                                 * per segment (the file read and checked
                                 * whole at open); 4: a checksum per block,
                                 * blocks read as lookups need them, a
                                 * NOT_WHOLE mark without the limits it was
                                 * decided under */
/* Why a new version for the recorded limits, rather than reading a
 * version-4 file's NOT_WHOLE as expired: the limits live in the segment
 * header (the part its checksum covers), so a version-4 segment is laid
 * out differently. Reading both layouts would keep a second header
 * format in this reader, the independent Python reader, the fuzz target
 * and the docs for good, and a version-4 library would call a new file
 * corrupt (a segment magic it does not know) instead of stale. As a new
 * version, every version-4 file is stale: ignored and rewritten by the
 * next save, which costs each object one whole fill, once (what a cold
 * cache costs; versions 1 to 3 went the same way). */
#define SC_SEG_MAGIC 0x35474553u /* "SEG5" */
#define SC_IDX_CRC_BLOCK 16384u /* ptp_crc_blocks cut of the header+index checksum */
#define SC_IV_BLK 170u          /* intervals per checksum block (4080 bytes) */
#define SC_FR_BLK 170u          /* frames per checksum block (4080 bytes) */
#define SC_STR_BLK 4096u        /* string bytes per checksum block */
#define SC_SEGS_MAX PTP_SYMCACHE_SEGS_MAX
#define SC_BID_MAX 128
#define SC_SUFFIX ".sym"
#define SC_TMP_AGE_S 3600
#define SC_FOLLOW_TRIES 2       /* a lookup looks again after a replaced file was
                                 * followed (sc_follow) at most this often */
#define SC_FRAMES_MAX PTP_SYMCACHE_FRAMES_MAX   /* frames per interval (inline depth) we keep */

typedef struct sc_fhdr {
  char magic[8];
  uint32_t version;
  uint32_t algo;                /* checksum algorithm of every segment (ptp_crc.h id) */
  char build_id[SC_BID_MAX + 8];/* NUL-padded */
} sc_fhdr;

/* One segment: this header (nw: the limits of its NOT_WHOLE mark, zero
 * without one); its index: the first lo of each block of
 * intervals (u64 each), the checksum of each block (u32 each: the
 * intervals' blocks, the frames', the strings'), zero padding to 8 bytes;
 * then nivals intervals, nframes frames, strbytes of NUL-terminated
 * strings, zero padding to 8 bytes. crc = the file's algorithm
 * (sc_fhdr.algo) over the header's first 28 bytes and the index (without
 * its padding), each cut into SC_IDX_CRC_BLOCK-byte blocks from its own
 * start; each block's checksum is ptp_crc_block over that block alone.
 * Blocks: SC_IV_BLK intervals, SC_FR_BLK frames, SC_STR_BLK string bytes,
 * the last of each part shorter. Why blocks: a lookup reads and checks
 * only the blocks it touches (one of intervals, one or two of frames, the
 * strings' ones), not the whole file, so a process that symbolizes 50
 * addresses against a 2.5 MB file reads a few dozen KB. */
typedef struct sc_shdr {
  uint32_t magic, flags, nivals, nframes, strbytes;
  uint32_t nw_points, nw_file_max;   /* ptp_symcache_limits of the NOT_WHOLE mark */
  uint32_t crc;
} sc_shdr;
typedef struct sc_ival_disk { uint64_t lo, hi; uint32_t first, n; } sc_ival_disk;
typedef struct sc_frame_disk { uint32_t name, sys, file, start_line, line, column; } sc_frame_disk;

_Static_assert(sizeof(sc_fhdr) % 8 == 0 && sizeof(sc_shdr) % 8 == 0 &&
               sizeof(sc_ival_disk) % 8 == 0 && sizeof(sc_frame_disk) % 8 == 0,
               "segments keep 8-byte alignment");

/* A segment as read: its header and index (read and checked at open),
 * and its parts in the reader's buffer at their file offsets, each block
 * read and checked on first use (loaded[b], b counting the intervals'
 * blocks, then the frames', then the strings'). */
typedef struct sc_seg {
  const sc_ival_disk *iv;
  const sc_frame_disk *fr;
  const char *strs;
  uint32_t niv, nfr, strbytes, flags;
  const uint64_t *blo;          /* first lo of each block of intervals */
  const uint32_t *bcrc;         /* each block's checksum */
  uint32_t nbiv, nbfr, nbstr;
  uint64_t off;                 /* file offset of the intervals */
  uint8_t *loaded;
  ptp_symcache_limits nw;       /* of its NOT_WHOLE mark (zero without) */
} sc_seg;

/* Where a file's bytes come from: fd >= 0: read on demand (pread) into
 * base at their offsets; fd < 0: base holds the whole file already. len:
 * the file's size when opened. */
typedef struct sc_rd {
  int fd;
  uint8_t *base;
  size_t len;
  unsigned algo;
} sc_rd;

/* ord: who wins between intervals of equal start (lower: read from the
 * file, then added earlier). saved: already in the file on disk. */
typedef struct sc_ival { uint64_t lo, hi; uint32_t first, n, ord; bool saved; } sc_ival;

/* The memory of a file read before the current one (sc_follow): strings
 * returned from it may still be in use until evict or del. */
typedef struct sc_retired { uint8_t *file; size_t len; } sc_retired;

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
  ptp_symcache_limits nw;       /* recorded with PTP_SYMCACHE_NOT_WHOLE (zero
                                   without the mark) */
  bool dirty, sorted;
  uint8_t *file;                /* the file's size of anonymous memory, its
                                   bytes read in at their offsets as used
                                   (segments point in; kept until del, so
                                   strings returned stay valid) */
  size_t file_len;
  sc_rd rd;                     /* reads into file; fd open from open (or
                                   the first lookup after a release) to
                                   ptp_symcache_release */
  dev_t file_dev;               /* the file read: a reopen must find it */
  ino_t file_ino;
  sc_seg *segs;                 /* its segments, looked up first, in order */
  size_t nsegs;                 /* 0 once dropped (sc_drop) */
  size_t nsegs_alloc;           /* segs[0..nsegs_alloc) to free */
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
  size_t resident;              /* bytes of the segments' blocks read into
                                   file (ptp_symcache_resident) */
  unsigned gen;                 /* the file read changed (sc_follow): a
                                   lookup under way looks again */
  sc_retired *old;              /* files read before this one (sc_follow);
                                   their mappings count whole as held
                                   (ptp_symcache_resident), so the
                                   symbolizer's bound gives them back at the
                                   next snapshot and neither memory nor
                                   address space piles up while another
                                   process keeps rewriting a file */
  size_t nold, capold;
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

/* ---- segments: headers, index, blocks ---- */

static uint32_t div_up(uint64_t n, uint64_t d) { return (uint32_t)((n + d - 1) / d); }

/* The checksum of a segment's header and index: the header's first 28
 * bytes (all but the checksum), then the blocks' first los, then their checksums, each cut into
 * SC_IDX_CRC_BLOCK-byte blocks from its own start. Reader and writer both
 * call this. */
static uint32_t seg_head_crc(unsigned algo, const sc_shdr *h, const uint64_t *blo, uint32_t nbiv,
                             const uint32_t *bcrc, uint32_t nb) {
  uint32_t crc = ptp_crc_blocks(algo, 0, h, offsetof(sc_shdr, crc), SC_IDX_CRC_BLOCK);
  crc = ptp_crc_blocks(algo, crc, blo, (size_t)nbiv * sizeof *blo, SC_IDX_CRC_BLOCK);
  return ptp_crc_blocks(algo, crc, bcrc, (size_t)nb * sizeof *bcrc, SC_IDX_CRC_BLOCK);
}

/* Bytes of a segment's index (padded) for these counts. */
static uint64_t seg_index_bytes(uint32_t nbiv, uint32_t nb) {
  return pad8((size_t)nbiv * 8 + (size_t)nb * 4);
}

/* Makes rd->base[off, off + n) hold the file's bytes (pread, unless base
 * holds the whole file). 0; 1: past the file's size as opened (a torn
 * tail); -EBADMSG: the file is shorter than that now (cut since); or
 * pread's -errno. */
static int rd_get(const sc_rd *rd, uint64_t off, uint64_t n) {
  if (off > rd->len || n > rd->len - off) return 1;
  if (rd->fd < 0) return 0;
  uint64_t got = 0;
  while (got < n) {
    ssize_t k = pread(rd->fd, rd->base + off + got, (size_t)(n - got), (off_t)(off + got));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return k < 0 ? -errno : -EBADMSG;
    got += (uint64_t)k;
  }
  return 0;
}

static uint32_t seg_nblocks(const sc_seg *g) { return g->nbiv + g->nbfr + g->nbstr; }

/* Block b of g (intervals' blocks, then frames', then strings'): its file
 * offset and length. */
static void seg_block_span(const sc_seg *g, uint32_t b, uint64_t *off, uint64_t *len) {
  uint64_t fr_off = g->off + (uint64_t)g->niv * sizeof(sc_ival_disk);
  uint64_t str_off = fr_off + (uint64_t)g->nfr * sizeof(sc_frame_disk);
  if (b < g->nbiv) {
    uint64_t i = (uint64_t)b * SC_IV_BLK, k = g->niv - i < SC_IV_BLK ? g->niv - i : SC_IV_BLK;
    *off = g->off + i * sizeof(sc_ival_disk);
    *len = k * sizeof(sc_ival_disk);
  } else if ((b -= g->nbiv) < g->nbfr) {
    uint64_t i = (uint64_t)b * SC_FR_BLK, k = g->nfr - i < SC_FR_BLK ? g->nfr - i : SC_FR_BLK;
    *off = fr_off + i * sizeof(sc_frame_disk);
    *len = k * sizeof(sc_frame_disk);
  } else {
    b -= g->nbfr;
    uint64_t i = (uint64_t)b * SC_STR_BLK;
    *off = str_off + i;
    *len = g->strbytes - i < SC_STR_BLK ? g->strbytes - i : SC_STR_BLK;
  }
}

/* Checks block b of g, in rd->base: its checksum, then what it holds:
 * intervals ordered, non-empty, within the frames, their block's first lo
 * the index's and their last hi below the next block's first lo (so the
 * blocks together are ordered); frames' string offsets inside the
 * strings; the strings' last byte a NUL. 0 or -EBADMSG. */
static int seg_block_check(const sc_rd *rd, const sc_seg *g, uint32_t b) {
  uint64_t off, len;
  seg_block_span(g, b, &off, &len);
  const uint8_t *p = rd->base + off;
  if (ptp_crc_block(rd->algo, 0, p, (size_t)len) != g->bcrc[b]) return -EBADMSG;
  if (b < g->nbiv) {
    const sc_ival_disk *iv = (const sc_ival_disk *)p;
    size_t k = (size_t)len / sizeof *iv;
    if (iv[0].lo != g->blo[b]) return -EBADMSG;
    for (size_t i = 0; i < k; i++)
      if (iv[i].lo >= iv[i].hi || (i && iv[i].lo < iv[i - 1].hi) || iv[i].n > SC_FRAMES_MAX ||
          (uint64_t)iv[i].first + iv[i].n > g->nfr)
        return -EBADMSG;
    if (b + 1 < g->nbiv && iv[k - 1].hi > g->blo[b + 1]) return -EBADMSG;
  } else if (b < g->nbiv + g->nbfr) {
    const sc_frame_disk *fr = (const sc_frame_disk *)p;
    for (size_t i = 0; i < (size_t)len / sizeof *fr; i++)
      if (fr[i].name >= g->strbytes || fr[i].sys >= g->strbytes || fr[i].file >= g->strbytes)
        return -EBADMSG;
  } else if (b + 1 == seg_nblocks(g) && p[len - 1] != 0) {
    return -EBADMSG;
  }
  return 0;
}

/* Reads (if needed) and checks block b of g once. 0, -EBADMSG (corrupt, or
 * cut short since it was opened), or pread's -errno. */
static int seg_load(const sc_rd *rd, sc_seg *g, uint32_t b) {
  if (g->loaded[b]) return 0;
  uint64_t off, len;
  seg_block_span(g, b, &off, &len);
  int r = rd_get(rd, off, len);
  if (r) return r == 1 ? -EBADMSG : r;
  if ((r = seg_block_check(rd, g, b))) return r;
  g->loaded[b] = 1;
  return 0;
}

/* Reads and checks a segment's header and index at off: 0 and *g (its
 * loaded[] malloc'd, nothing of its body read yet) and *next (its padded
 * end, which passes the file's size when only padding is missing); 1: it does
 * not fit in the file (a torn tail: an append cut short, or one in
 * progress); -EBADMSG: anything else wrong; -ENOMEM; pread's -errno. */
static int seg_head(const sc_rd *rd, uint64_t off, sc_seg *g, uint64_t *next) {
  sc_shdr h;
  int r = rd_get(rd, off, sizeof h);
  if (r) return r;
  memcpy(&h, rd->base + off, sizeof h);
  if (h.magic != SC_SEG_MAGIC) return -EBADMSG;
  if (h.strbytes == 0) return -EBADMSG;   /* we always write "" */
  uint32_t nbiv = div_up(h.nivals, SC_IV_BLK), nbfr = div_up(h.nframes, SC_FR_BLK),
           nbstr = div_up(h.strbytes, SC_STR_BLK), nb = nbiv + nbfr + nbstr;
  uint64_t idx = seg_index_bytes(nbiv, nb);
  uint64_t body = (uint64_t)h.nivals * sizeof(sc_ival_disk) + (uint64_t)h.nframes * sizeof(sc_frame_disk) +
                  h.strbytes;
  if (off + sizeof h + idx + body > rd->len) return 1;   /* checked before reading the index */
  if ((r = rd_get(rd, off + sizeof h, idx))) return r == 1 ? 1 : r;
  const uint64_t *blo = (const uint64_t *)(rd->base + off + sizeof h);
  const uint32_t *bcrc = (const uint32_t *)(blo + nbiv);
  if (seg_head_crc(rd->algo, &h, blo, nbiv, bcrc, nb) != h.crc) return -EBADMSG;
  for (uint32_t i = 1; i < nbiv; i++)
    if (blo[i] <= blo[i - 1]) return -EBADMSG;
  uint8_t *loaded = ptp_calloc(nb ? nb : 1, 1);
  if (!loaded) return -ENOMEM;
  uint64_t boff = off + sizeof h + idx;
  const uint8_t *p = rd->base + boff;
  *g = (sc_seg){(const sc_ival_disk *)p,
                (const sc_frame_disk *)(p + (uint64_t)h.nivals * sizeof(sc_ival_disk)),
                (const char *)(p + (uint64_t)h.nivals * sizeof(sc_ival_disk) +
                               (uint64_t)h.nframes * sizeof(sc_frame_disk)),
                h.nivals, h.nframes, h.strbytes, h.flags, blo, bcrc, nbiv, nbfr, nbstr, boff, loaded,
                {0, 0}};
  if (h.flags & PTP_SYMCACHE_NOT_WHOLE) g->nw = (ptp_symcache_limits){h.nw_points, h.nw_file_max};
  /* may pass the file's size: a segment whole but for its padding (a file
   * cut there) is read, and the caller takes the file as torn */
  *next = boff + pad8((size_t)body);
  return 0;
}

static void segs_free(sc_seg *v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i].loaded);
  free(v);
}

/* Reads a cache file of c->build_id through rd: its header, then each
 * segment's header and index (and, if whole, every block, checked). 0
 * and *segs and *n (n >= 1) and *torn (the last segment did not fit, or
 * only its padding did not: an append there would be misplaced);
 * -ESTALE (another format version or checksum algorithm: not corrupt, not
 * ours to read); -EBADMSG (corrupt: a check failed, or cut short while
 * read); -ENOMEM; pread's -errno. The segments point into rd->base. */
static int sc_parse(const ptp_symcache *c, sc_rd *rd, bool whole, sc_seg **segs, size_t *n,
                    bool *torn) {
  sc_fhdr h;
  int r = rd_get(rd, 0, sizeof h);
  if (r) return r == 1 ? -EBADMSG : r;
  memcpy(&h, rd->base, sizeof h);
  /* another version, or a checksum this process does not compute (the
   * file of a CPU with other features, on a shared home): refused, and
   * rewritten at the next save */
  if (memcmp(h.magic, SC_MAGIC, 8) != 0) return -EBADMSG;
  if (h.version != SC_VERSION || h.algo != ptp_crc_algo()) return -ESTALE;
  h.build_id[sizeof h.build_id - 1] = 0;
  if (strcmp(h.build_id, c->build_id) != 0) return -EBADMSG;
  rd->algo = h.algo;
  sc_seg *v = NULL;
  size_t k = 0, cap = 0;
  uint64_t off = sizeof h;
  *torn = false;
  while (off < rd->len) {
    sc_seg g;
    r = k == SC_SEGS_MAX * 2 ? -EBADMSG : seg_head(rd, off, &g, &off);
    if (r == 1) { *torn = true; break; }
    if (r == 0 && sc_reserve((void **)&v, &cap, k + 1, sizeof *v)) {
      free(g.loaded);
      r = -ENOMEM;
    }
    if (r) { segs_free(v, k); return r; }
    v[k++] = g;
    for (uint32_t b = 0; whole && b < seg_nblocks(&g); b++)
      if ((r = seg_load(rd, &v[k - 1], b))) { segs_free(v, k); return r; }
    /* its padding cut off: its bytes are sound, but an append would start
     * at the file's size, not at the 8-byte boundary where a reader looks
     * for the next segment (found by the fuzzer: an appended segment then
     * read as garbage). Torn: read, and rewritten rather than appended to */
    if (off > rd->len) { *torn = true; break; }
  }
  if (k == 0) { free(v); return -EBADMSG; }   /* we never write a file without one */
  *segs = v;
  *n = k;
  return 0;
}

/* ---- the cache's file, read lazily ---- */

/* Whether c->rd.fd still names the file read. The descriptor table is the
 * program's (docs/sampler.md, "Descriptors"): between two lookups it may
 * have closed our number and opened a file of its own there. A number
 * that is not ours any more is forgotten, never read or closed. */
static bool sc_fd_ours(ptp_symcache *c) {
  if (c->rd.fd < 0) return false;
  struct stat st;
  if (fstat(c->rd.fd, &st) == 0 && st.st_dev == c->file_dev && st.st_ino == c->file_ino) return true;
  c->rd.fd = -1;
  return false;
}

/* The file can no longer be read (err: -EBADMSG for a check that failed,
 * else why it could not be read): its segments are forgotten (their
 * memory stays until del, strings returned before stay valid), the file is
 * rewritten at the next save, and the complete mark goes (intervals
 * this process skipped because the file held them are gone with it).
 * A corrupt file counts as rejected. */
static void sc_drop(ptp_symcache *c, int err) {
  c->nsegs = 0;
  c->id.valid = false;
  c->file_segs = 0;
  c->flags &= ~PTP_SYMCACHE_COMPLETE;
  if (err == -EBADMSG) {
    c->state = PTP_SYMCACHE_REJECTED;
    c->file_err = -EBADMSG;
  }
  if (sc_fd_ours(c)) close(c->rd.fd);
  c->rd.fd = -1;
}

/* Opens the cache file for reading (O_NOFOLLOW, O_NONBLOCK) under the
 * cache-file rule (ptp_cachefile_check, then the directory's). same: it
 * must also be the file read before (device, inode, not shorter), checked
 * first. The descriptor (>= 0) and *st, or a negative errno: open's or
 * fstat's (-ENOENT, -ELOOP for a symbolic link, -EACCES, -EMFILE, ...),
 * -ESTALE (same: replaced or cut since), the rule's (-EPERM, -EBADMSG,
 * -EFBIG; the directory's). */
static int sc_open_file(const ptp_symcache *c, bool same, struct stat *st) {
  char path[PATH_MAX];
  int r = sc_path(c, path, sizeof path);
  if (r) return r;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -errno;
  if (fstat(fd, st) != 0) r = -errno;
  else if (same && (st->st_dev != c->file_dev || st->st_ino != c->file_ino ||
                    (uint64_t)st->st_size < c->file_len))
    r = -ESTALE;
  else if (!(r = ptp_cachefile_check(st, sizeof(sc_fhdr), PTP_SYMCACHE_FILE_MAX)))
    r = ptp_cachefile_check_dir(c->dir, 1);
  if (r) { close(fd); return r; }
  return fd;
}

/* c->rd with an open descriptor of ours (checked: sc_fd_ours, one fstat
 * per block read): after ptp_symcache_release, or once the program took
 * the number, the file is opened again by path and must still be the one
 * read (sc_open_file's same). 0 or sc_open_file's negative errno. */
static int sc_reopen(ptp_symcache *c) {
  if (sc_fd_ours(c)) return 0;
  struct stat st;
  int fd = sc_open_file(c, true, &st);
  if (fd < 0) return fd;
  c->rd.fd = fd;
  return 0;
}

/* A cache file opened and its headers and indexes read (sc_read_lazy),
 * not yet the cache's (sc_adopt). */
typedef struct sc_lazy {
  sc_rd rd;          /* its descriptor, and memory of the file's size */
  sc_seg *segs;
  size_t nsegs;
  struct stat st;
  bool torn;
} sc_lazy;

/* Opens the cache file and reads its header and its segments' headers
 * and indexes, nothing of their bodies (blocks are read as lookups need
 * them) into *z: 0, or why not: -ENOENT (no file), open's or fstat's
 * -errno (-ELOOP for a symbolic link, -EACCES, -EMFILE, ...), the
 * cache-file rule's (-EPERM, -EBADMSG for a file shorter than a header,
 * -EFBIG; the directory's), or sc_parse's (-ESTALE, -EBADMSG, -ENOMEM).
 * c is not changed. */
static int sc_read_lazy(const ptp_symcache *c, sc_lazy *z) {
  int r, fd = sc_open_file(c, false, &z->st);
  if (fd < 0) return fd;
  size_t len = (size_t)z->st.st_size;
  /* not populated: only the pages of what is read are ever touched. Our
   * own memory, never a mapping of the file: a file truncated in place
   * under a mapping faults with SIGBUS (see the top of ptp_symcache.h) */
  uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) { r = -errno; close(fd); return r; }
  z->rd = (sc_rd){fd, p, len, 0};
  r = sc_parse(c, &z->rd, false, &z->segs, &z->nsegs, &z->torn);
  if (r) {
    munmap(p, len);
    close(fd);
    return r;
  }
  return 0;
}

/* Makes *z the file c reads (its descriptor, memory and segments; nothing
 * of it read yet), and the one a save appends to unless torn (a torn file
 * is rewritten, never appended to). What c read before must be freed or
 * retired by the caller. */
static void sc_adopt(ptp_symcache *c, const sc_lazy *z) {
  c->rd = z->rd;
  c->file = z->rd.base;
  c->file_len = z->rd.len;
  c->segs = z->segs;
  c->nsegs = c->nsegs_alloc = c->file_segs = z->nsegs;
  c->file_dev = z->st.st_dev;
  c->file_ino = z->st.st_ino;
  c->resident = 0;
  if (!z->torn) ident_of(&c->id, &z->st);
  else c->id.valid = false;
}

static void sc_set_flags(ptp_symcache *c, unsigned flags, ptp_symcache_limits nw);

/* The file read was replaced since (sc_reopen said -ESTALE: after a
 * release, another process's rewrite renamed a new file over it, holding
 * everything the old one held that it did not replace; or it was cut
 * short in place): the one there now is read as open reads it, and lookups
 * go on from it instead of losing every answer of the old one (which made
 * the symbolizer open the object's debug info again: tens of MB and up to
 * ~100 ms for libc, and a whole fill). The old one's memory is retired,
 * not freed: frames a lookup returned from it may be in use until evict
 * or del. Intervals added and not saved stay; the new file's complete mark
 * is taken (with our own flags kept while they are not saved); a save
 * appends to the new file. Bumps c->gen, so that a lookup under way looks
 * through the new segments. Called after sc_reopen said -ESTALE: no
 * descriptor of the old file is open. 0, or why the new file could not
 * be read (sc_read_lazy's errors; c unchanged: the caller drops the
 * file). */
static int sc_follow(ptp_symcache *c) {
  if (sc_reserve((void **)&c->old, &c->capold, c->nold + 1, sizeof *c->old)) return -ENOMEM;
  sc_lazy z;
  int r = sc_read_lazy(c, &z);
  if (r) return r;
  c->old[c->nold++] = (sc_retired){c->file, c->file_len};
  size_t old_len = c->file_len;
  segs_free(c->segs, c->nsegs_alloc);
  sc_adopt(c, &z);
  const sc_seg *last = &c->segs[c->nsegs - 1];
  if (!c->dirty) {
    c->flags = last->flags;
    c->nw = last->nw;
  } else if (last->flags & PTP_SYMCACHE_COMPLETE) {
    /* as the symbolizer marks it: complete, the NOT_WHOLE mark gone */
    sc_set_flags(c, (c->flags & ~PTP_SYMCACHE_NOT_WHOLE) | PTP_SYMCACHE_COMPLETE,
                 (ptp_symcache_limits){0, 0});
  }
  c->bytes = (c->bytes > old_len ? c->bytes - old_len : 0) + c->file_len;
  c->gen++;
  return 0;
}

/* The size of the mappings of files read before the current one. */
static size_t sc_retired_bytes(const ptp_symcache *c) {
  size_t n = 0;
  for (size_t i = 0; i < c->nold; i++) n += c->old[i].len;
  return n;
}

/* Frees the memory of files read before the current one (sc_follow).
 * Strings returned from them die. Returns the size of their mappings. */
static size_t sc_free_retired(ptp_symcache *c) {
  size_t n = sc_retired_bytes(c);
  for (size_t i = 0; i < c->nold; i++) sc_unmap(c->old[i].file, c->old[i].len);
  c->nold = 0;
  return n;
}

/* Block b of g ready to read. A file replaced since it was read is
 * followed (sc_follow): then b, a block of the old one, is not read and
 * -ESTALE returned with c->gen changed (the caller looks again through the
 * new segments); g is freed by then. On any other failure the file is
 * dropped (sc_drop). */
static int sc_load(ptp_symcache *c, sc_seg *g, uint32_t b) {
  if (g->loaded[b]) return 0;
  int r = sc_reopen(c);
  if (r == -ESTALE) {
    r = sc_follow(c);
    if (!r) return -ESTALE;
  } else if (!r) {
    r = seg_load(&c->rd, g, b);
  }
  if (r) {
    sc_drop(c, r);
    return r;
  }
  uint64_t off, len;
  seg_block_span(g, b, &off, &len);
  c->resident += (size_t)len;
  return 0;
}

/* The interval of segment g holding rel, or NULL (also when its block
 * cannot be read: then the file is dropped). */
static const sc_ival_disk *seg_search(ptp_symcache *c, sc_seg *g, uint64_t rel) {
  size_t a = 0, z = g->nbiv;
  while (a < z) {   /* the last block whose first lo <= rel */
    size_t mid = a + (z - a) / 2;
    if (g->blo[mid] <= rel) a = mid + 1; else z = mid;
  }
  if (a == 0) return NULL;
  uint32_t b = (uint32_t)(a - 1);
  if (sc_load(c, g, b)) return NULL;
  const sc_ival_disk *iv = g->iv + (size_t)b * SC_IV_BLK;
  size_t lo = 0, hi = g->niv - (size_t)b * SC_IV_BLK < SC_IV_BLK ? g->niv - (size_t)b * SC_IV_BLK : SC_IV_BLK;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (iv[mid].lo <= rel) lo = mid + 1; else hi = mid;
  }
  const sc_ival_disk *v = &iv[lo - 1];   /* lo >= 1: iv[0].lo == blo[b] <= rel */
  return rel < v->hi ? v : NULL;
}

/* The string at offset off of g's strings (its blocks up to its NUL read). */
static const char *seg_str(ptp_symcache *c, sc_seg *g, uint32_t off) {
  uint32_t base = g->nbiv + g->nbfr;
  for (uint32_t b = off / SC_STR_BLK;; b++) {
    if (b >= g->nbstr) {   /* no NUL to the end: the last block's check forbids it */
      sc_drop(c, -EBADMSG);
      return NULL;
    }
    if (sc_load(c, g, base + b)) return NULL;
    uint64_t from = b == off / SC_STR_BLK ? off : (uint64_t)b * SC_STR_BLK;
    uint64_t end = (uint64_t)(b + 1) * SC_STR_BLK < g->strbytes ? (uint64_t)(b + 1) * SC_STR_BLK : g->strbytes;
    if (memchr(g->strs + from, 0, (size_t)(end - from))) return g->strs + off;
  }
}

/* Frame i of g, its block and strings read. 0 or -1 (dropped). */
static int seg_frame(ptp_symcache *c, sc_seg *g, uint32_t i, ptp_sym_frame *out) {
  if (sc_load(c, g, g->nbiv + i / SC_FR_BLK)) return -1;
  const sc_frame_disk *f = &g->fr[i];
  const char *name = seg_str(c, g, f->name), *sys = name ? seg_str(c, g, f->sys) : NULL,
             *file = sys ? seg_str(c, g, f->file) : NULL;
  if (!file) return -1;
  *out = (ptp_sym_frame){name, sys, file, f->start_line, f->line, f->column};
  return 0;
}

/* Every block of every segment read and checked (a rewrite absorbs them
 * all), of the file there now if it was replaced since (sc_follow). 0, or
 * the error that dropped the file. */
static int sc_load_all(ptp_symcache *c) {
  for (int tries = 0;; tries++) {
    unsigned gen = c->gen;
    int r = 0;
    for (size_t s = 0; !r && s < c->nsegs; s++)
      for (uint32_t b = 0; !r && b < seg_nblocks(&c->segs[s]); b++) r = sc_load(c, &c->segs[s], b);
    if (!r || c->gen == gen) return r;   /* all read, or dropped */
    if (tries == SC_FOLLOW_TRIES) {      /* replaced again and again meanwhile */
      sc_drop(c, r);
      return r;
    }
  }
}

/* Reads the cache file's headers and indexes (sc_read_lazy) and makes it
 * the one c reads, with its flags: 0 (c->segs, c->file, c->rd's
 * descriptor open), or sc_read_lazy's error (c unchanged). */
static int sc_open_lazy(ptp_symcache *c) {
  sc_lazy z;
  int r = sc_read_lazy(c, &z);
  if (r) return r;
  sc_adopt(c, &z);
  c->flags = c->segs[c->nsegs - 1].flags;
  c->nw = c->segs[c->nsegs - 1].nw;
  c->bytes = c->file_len;
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
  c->rd.fd = -1;
  int r = sc_open_lazy(c);
  if (r == -ENOMEM) { ptp_symcache_del(c); return r; }
  c->file_err = r;
  c->state = r == 0         ? PTP_SYMCACHE_LOADED
             : r == -ENOENT  ? PTP_SYMCACHE_MISSING
             : r == -EBADMSG ? PTP_SYMCACHE_REJECTED
             : r == -ESTALE  ? PTP_SYMCACHE_STALE
                             : PTP_SYMCACHE_UNUSABLE;
  *out = c;
  return 0;
}

int ptp_symcache_verify(ptp_symcache *c) {
  int r = sc_load_all(c);
  return r ? r : c->state == PTP_SYMCACHE_REJECTED ? -EBADMSG : 0;
}

size_t ptp_symcache_resident(const ptp_symcache *c) {
  return c ? (c->nsegs ? c->resident : 0) + sc_retired_bytes(c) : 0;
}

/* Bytes of segment g's body (intervals, frames, strings: its blocks), which
 * starts at g->off. */
static uint64_t seg_body_bytes(const sc_seg *g) {
  return (uint64_t)g->niv * sizeof(sc_ival_disk) + (uint64_t)g->nfr * sizeof(sc_frame_disk) + g->strbytes;
}

size_t ptp_symcache_evict(ptp_symcache *c) {
  if (!c) return 0;
  size_t n = sc_free_retired(c);
  /* nsegs == 0: nothing read lazily any more (never loaded, dropped, or
   * absorbed by a rewrite, whose frames point into file for good) */
  if (!c->nsegs || !c->resident || !c->file) return n;
  /* only what can be read again: the file read, open or reopened now; one
   * replaced since is followed, its memory given back whole */
  int r = sc_reopen(c);
  if (r == -ESTALE && sc_follow(c) == 0) return n + sc_free_retired(c);
  if (r) return n;
  uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)c->file;
  for (size_t i = 0; i < c->nsegs; i++) {
    sc_seg *g = &c->segs[i];
    /* whole pages inside the body only: the pages it shares with its own
     * index or the next segment's header keep those (read at open, never
     * again); a block on such a page is read again over identical bytes */
    uintptr_t a = (base + (uintptr_t)g->off + pg - 1) & ~(pg - 1),
              z = (base + (uintptr_t)(g->off + seg_body_bytes(g))) & ~(pg - 1);
    if (z > a) (void)madvise((void *)a, z - a, MADV_DONTNEED);   /* private anonymous: zero-filled */
    memset(g->loaded, 0, seg_nblocks(g));
  }
  n += c->resident;
  c->resident = 0;
  return n;
}

void ptp_symcache_release(ptp_symcache *c) {
  if (c && sc_fd_ours(c)) {
    close(c->rd.fd);
    c->rd.fd = -1;
  }
}

void ptp_symcache_del(ptp_symcache *c) {
  if (!c) return;
  ptp_symcache_release(c);
  free(c->dir);
  segs_free(c->segs, c->nsegs_alloc);
  sc_unmap(c->file, c->file_len);
  (void)sc_free_retired(c);
  free(c->old);
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

static bool limits_same(const ptp_symcache_limits *a, const ptp_symcache_limits *b) {
  return a->fill_points == b->fill_points && a->file_max == b->file_max;
}

/* Sets flags and the limits of their NOT_WHOLE mark (zero without it);
 * dirty when either changes. */
static void sc_set_flags(ptp_symcache *c, unsigned flags, ptp_symcache_limits nw) {
  flags |= PTP_SYMCACHE_FLAGS_SET;
  if (!(flags & PTP_SYMCACHE_NOT_WHOLE)) nw = (ptp_symcache_limits){0, 0};
  if (c->flags != flags || !limits_same(&c->nw, &nw)) {
    c->flags = flags;
    c->nw = nw;
    c->dirty = true;
  }
}

void ptp_symcache_set_flags(ptp_symcache *c, unsigned flags) {
  /* a mark kept keeps its limits; a new one through here has none (0) */
  sc_set_flags(c, flags, c->flags & PTP_SYMCACHE_NOT_WHOLE ? c->nw : (ptp_symcache_limits){0, 0});
}

void ptp_symcache_set_not_whole(ptp_symcache *c, const ptp_symcache_limits *lim) {
  sc_set_flags(c, c->flags | PTP_SYMCACHE_NOT_WHOLE, *lim);
}

bool ptp_symcache_not_whole(const ptp_symcache *c, const ptp_symcache_limits *now) {
  /* expired when any limit is higher now: the whole fill that failed under
   * the recorded ones may succeed (a library that raised a bound) */
  return (c->flags & PTP_SYMCACHE_NOT_WHOLE) && now->fill_points <= c->nw.fill_points &&
         now->file_max <= c->nw.file_max;
}

int ptp_symcache_not_whole_limits(const ptp_symcache *c, ptp_symcache_limits *out) {
  if (!(c->flags & PTP_SYMCACHE_NOT_WHOLE)) return -ENOENT;
  *out = c->nw;
  return 0;
}

int ptp_symcache_find(ptp_symcache *c, uint64_t rel, const ptp_sym_frame **frames, uint32_t *n) {
  /* the file's segments in order, then what was added: the oldest answer
   * wins (any of them is right: every interval holds only addresses that
   * resolve to its frames). A block that cannot be read drops the file
   * (sc_drop: nsegs becomes 0, ending this loop) and the lookup goes on
   * with what was added; a file replaced since is followed (c->gen
   * changes) and looked through again. */
  for (int tries = 0; tries <= SC_FOLLOW_TRIES; tries++) {
    unsigned gen = c->gen;
    for (size_t s = 0; s < c->nsegs && c->gen == gen; s++) {
      sc_seg *g = &c->segs[s];
      const sc_ival_disk *v = seg_search(c, g, rel);
      if (!v) continue;
      if (sc_reserve((void **)&c->scratch, &c->capscratch, v->n ? v->n : 1, sizeof *c->scratch))
        return 0;   /* no memory: a miss, resolved the slow way */
      uint32_t i = 0;
      while (i < v->n && seg_frame(c, g, v->first + i, &c->scratch[i]) == 0) i++;
      if (i < v->n) break;   /* dropped, or followed */
      *frames = v->n ? c->scratch : NULL;
      *n = v->n;
      return 1;
    }
    if (c->gen == gen) break;
  }
  const sc_ival *v = sc_search(c, rel);
  if (!v) return 0;
  *frames = v->n ? &c->fr[v->first] : NULL;
  *n = v->n;
  return 1;
}

/* Whether one interval of the file's segments holds all of [lo, hi) (of
 * the file there now, if it was replaced since: sc_follow). */
static bool segs_cover(ptp_symcache *c, uint64_t lo, uint64_t hi) {
  for (int tries = 0; tries <= SC_FOLLOW_TRIES; tries++) {
    unsigned gen = c->gen;
    for (size_t s = 0; s < c->nsegs && c->gen == gen; s++) {
      const sc_ival_disk *v = seg_search(c, &c->segs[s], lo);
      if (v && v->hi >= hi) return true;
    }
    if (c->gen == gen) break;
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
  uint8_t *idx;              /* the segment's index (out_seg) */
  size_t nidx;
} sc_out;

static void out_free(sc_out *o) {
  free(o->iv);
  free(o->fr);
  free(o->strs);
  free(o->idx);
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

/* The segment header of o (flags and the NOT_WHOLE mark's limits: c's),
 * its index (o->idx) and its padded size. 0 or -ENOMEM. */
static int out_seg(sc_out *o, const ptp_symcache *c, sc_shdr *h, size_t *len) {
  unsigned flags = c->flags;
  *h = (sc_shdr){SC_SEG_MAGIC, flags, (uint32_t)o->niv, (uint32_t)o->nfr, (uint32_t)o->nstrs,
                 c->nw.fill_points, c->nw.file_max, 0};
  sc_seg g = {o->iv, o->fr, (const char *)o->strs, h->nivals, h->nframes, h->strbytes, flags,
              NULL, NULL, div_up(h->nivals, SC_IV_BLK), div_up(h->nframes, SC_FR_BLK),
              div_up(h->strbytes, SC_STR_BLK), 0, NULL, {0, 0}};
  uint32_t nb = seg_nblocks(&g);
  o->nidx = (size_t)seg_index_bytes(g.nbiv, nb);
  free(o->idx);
  if (!(o->idx = ptp_calloc(o->nidx ? o->nidx : 1, 1))) return -ENOMEM;
  uint64_t *blo = (uint64_t *)o->idx;
  uint32_t *bcrc = (uint32_t *)(blo + g.nbiv);
  for (uint32_t b = 0; b < g.nbiv; b++) blo[b] = o->iv[(size_t)b * SC_IV_BLK].lo;
  /* the file's algorithm: a rewrite writes ptp_crc_algo() into the file
   * header, and an append goes only to a file read or written by this
   * process, whose header says the same. Block offsets as in the file,
   * relative to the intervals' start: the parts are written back to back. */
  size_t fr_at = o->niv * sizeof *o->iv, str_at = fr_at + o->nfr * sizeof *o->fr;
  for (uint32_t b = 0; b < nb; b++) {
    uint64_t off, n;
    seg_block_span(&g, b, &off, &n);
    const uint8_t *p = off < fr_at    ? (const uint8_t *)o->iv + off
                       : off < str_at ? (const uint8_t *)o->fr + (off - fr_at)
                                      : o->strs + (off - str_at);
    bcrc[b] = ptp_crc_block(ptp_crc_algo(), 0, p, (size_t)n);
  }
  h->crc = seg_head_crc(ptp_crc_algo(), h, blo, g.nbiv, bcrc, nb);
  *len = sizeof *h + o->nidx + o->niv * sizeof *o->iv + o->nfr * sizeof *o->fr + pad8(o->nstrs);
  return 0;
}

static const uint64_t sc_zeros;

/* The iovecs of one segment (SC_SEG_IOV: header, index, intervals,
 * frames, strings, padding). */
#define SC_SEG_IOV 6
static void seg_iov(struct iovec *v, const sc_shdr *h, const sc_out *o) {
  v[0] = (struct iovec){(void *)h, sizeof *h};
  v[1] = (struct iovec){o->idx, o->nidx};
  v[2] = (struct iovec){o->iv, o->niv * sizeof *o->iv};
  v[3] = (struct iovec){o->fr, o->nfr * sizeof *o->fr};
  v[4] = (struct iovec){o->strs, o->nstrs};
  v[5] = (struct iovec){(void *)&sc_zeros, pad8(o->nstrs) - o->nstrs};
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
  size_t len;
  if ((r = out_seg(&o, c, &h, &len))) goto out;
  if ((uint64_t)st.st_size + len > PTP_SYMCACHE_FILE_MAX) { r = 1; goto out; }
  struct iovec v[SC_SEG_IOV];
  seg_iov(v, &h, &o);
  ssize_t w;
  do w = writev(fd, v, SC_SEG_IOV); while (w < 0 && errno == EINTR);
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

/* Frame i of g, every block of g read and checked (sc_parse whole, or
 * sc_load_all): its strings are NUL-terminated inside the strings. */
static ptp_sym_frame seg_frame_read(const sc_seg *g, uint32_t i) {
  const sc_frame_disk *f = &g->fr[i];
  return (ptp_sym_frame){g->strs + f->name, g->strs + f->sys, g->strs + f->file,
                         f->start_line, f->line, f->column};
}

/* Moves the file's segments into the vector, ahead of everything added
 * (their strings stay in c->file): a rewrite serializes one sorted list.
 * Reads every block first; a file that fails then is dropped, nothing of
 * it moved. 0 or -ENOMEM (nothing moved). */
static int absorb_segs(ptp_symcache *c) {
  (void)sc_load_all(c);   /* a failure dropped the file: nothing to move */
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
    for (uint32_t i = 0; i < g->nfr; i++) c->fr[c->nfr++] = seg_frame_read(g, i);
    for (uint32_t i = 0; i < g->niv; i++)
      c->iv[c->niv++] = (sc_ival){g->iv[i].lo, g->iv[i].hi, (uint32_t)(base + g->iv[i].first),
                                  g->iv[i].n, (uint32_t)s, true};
  }
  segs_free(c->segs, c->nsegs_alloc);
  c->segs = NULL;
  c->nsegs = c->nsegs_alloc = 0;
  ptp_symcache_release(c);   /* nothing more to read from it */
  c->nsorted = 0;   /* segments overlap each other and the added ones: sort all */
  c->sorted = false;
  return 0;
}

/* Adds what the file on disk (fd: open, locked, or -1: by path) holds now
 * and we do not (another process wrote it since we read it), ours winning
 * on overlap. Read and checked whole. Best effort. */
static void merge_disk(ptp_symcache *c, int fd) {
  uint8_t *buf = NULL;
  struct stat st;
  sc_seg *segs = NULL;
  size_t n = 0;
  bool torn;
  if ((fd >= 0 ? sc_map_fd(c, fd, &buf, &st) : sc_map(c, &buf, &st)) != 0) return;
  sc_rd rd = {-1, buf, (size_t)st.st_size, 0};
  if (ident_same(&c->id, &st) || sc_parse(c, &rd, true, &segs, &n, &torn) != 0) {
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
      for (uint32_t j = 0; j < v->n; j++) tmp[j] = seg_frame_read(g, v->first + j);
      /* strings are interned (copied): buf dies here */
      if (sc_add(c, v->lo, v->hi, tmp, v->n, c->seq++, true) != 0) goto out;
    }
  }
out:
  segs_free(segs, n);
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
  size_t len;
  if ((r = out_seg(&o, c, &h, &len))) goto fail_out;
  len += sizeof fh;
  if (len > PTP_SYMCACHE_FILE_MAX) { r = -E2BIG; goto fail_out; }
  if ((r = ptp_cachefile_prepare_dir(c->dir))) goto fail_out;
  char name[SC_BID_MAX + 16];
  snprintf(name, sizeof name, "%s" SC_SUFFIX, c->build_id);
  struct iovec v[1 + SC_SEG_IOV] = {{&fh, sizeof fh}};
  seg_iov(v + 1, &h, &o);
  sc_fill a = {v, 1 + SC_SEG_IOV, {0}, false};
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
