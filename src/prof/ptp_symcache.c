/*
 * ptp_symcache.c - see ptp_symcache.h.
 *
 * In memory: one vector of intervals (loaded ones first, added ones
 * appended; sorted and de-overlapped lazily before a lookup), one vector of
 * frames they index, and the strings: the loaded file's string table (one
 * heap buffer, never moved) plus interned copies of added strings in a
 * ptp_strarena (chunks that never move). So a frame's string pointers stay
 * valid until del while the vectors grow.
 */
#include "prof/ptp_symcache.h"
#include "prof/ptp_cachefile.h"
#include "prof/ptp_sym_map.h"
#include "prof/ptp_store.h"
#include "prof/ptp_strarena.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define SC_MAGIC "PTPSYMC\n"
#define SC_VERSION 1u
#define SC_BID_MAX 128
#define SC_SUFFIX ".sym"
#define SC_TMP_AGE_S 3600

typedef struct sc_header {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint32_t nivals, nframes, strbytes;
  uint32_t crc;                 /* CRC-32 (zlib) of everything after the header */
  char build_id[SC_BID_MAX + 8];/* NUL-padded */
} sc_header;

typedef struct sc_ival_disk { uint64_t lo, hi; uint32_t first, n; } sc_ival_disk;
typedef struct sc_frame_disk { uint32_t name, sys, file, start_line, line, column; } sc_frame_disk;

typedef struct sc_ival { uint64_t lo, hi; uint32_t first, n; } sc_ival;

struct ptp_symcache {
  char *dir;
  char build_id[SC_BID_MAX + 1];
  ptp_symcache_state state;
  unsigned flags;
  bool dirty, sorted;
  sc_ival *iv;
  size_t niv, capiv;
  size_t nsorted;               /* iv[0..nsorted) sorted, non-overlapping */
  ptp_sym_frame *fr;
  size_t nfr, capfr;
  char *file_strs;              /* the loaded string table */
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
    const char **ni = realloc(c->interned, nc * sizeof *ni);
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
  void *n = realloc(*v, nc * elem);
  if (!n) return -ENOMEM;
  *v = n;
  *cap = nc;
  return 0;
}

static int ival_cmp(const void *a, const void *b) {
  const sc_ival *x = a, *y = b;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  /* equal starts: the earlier entry (lower frame index: loaded first) wins */
  return x->first < y->first ? -1 : x->first > y->first;
}

/* Sorts and drops intervals overlapping an earlier kept one. Invariant:
 * iv[0..nsorted) is sorted and non-overlapping; only the tail added since
 * is sorted here, then merged in one linear pass (a symbolizer filling CU
 * after CU would otherwise re-sort everything per CU). Dropped intervals'
 * frames stay in the vector (unreferenced) until the next save. */
static void sc_sort(ptp_symcache *c) {
  if (c->sorted) return;
  size_t a = c->nsorted, n = c->niv;
  qsort(c->iv + a, n - a, sizeof *c->iv, ival_cmp);
  sc_ival *m = a ? malloc(n * sizeof *m) : NULL;
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
    if (k && x.lo < dst[k - 1].hi) continue;
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

static bool bid_ok(const char *b) {
  size_t n = strlen(b);
  if (n < 2 || n > SC_BID_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f'))) return false;
  return true;
}

static int sc_path(const ptp_symcache *c, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s/%s" SC_SUFFIX, c->dir, c->build_id);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Reads and checks the file into a malloc'd buffer. 0 with *buf (caller
 * frees), -ENOENT (no file), -EBADMSG (invalid in any way), -ENOMEM. */
static int sc_read(const ptp_symcache *c, uint8_t **buf, size_t *len) {
  char path[PATH_MAX];
  if (sc_path(c, path, sizeof path)) return -EBADMSG;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT ? -ENOENT : -EBADMSG;
  struct stat st;
  int r = -EBADMSG;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      st.st_size < (off_t)sizeof(sc_header) || st.st_size > (off_t)PTP_SYMCACHE_FILE_MAX)
    goto out;
  size_t n = (size_t)st.st_size;
  uint8_t *b = malloc(n + 1);
  if (!b) { r = -ENOMEM; goto out; }
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, b + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  if (got != n) { free(b); goto out; }
  *buf = b;
  *len = n;
  r = 0;
out:
  close(fd);
  return r;
}

/* Validates buf as a cache file of c->build_id; on success the header. */
static int sc_validate(const ptp_symcache *c, const uint8_t *buf, size_t len, sc_header *h) {
  if (len < sizeof *h) return -EBADMSG;
  memcpy(h, buf, sizeof *h);
  if (memcmp(h->magic, SC_MAGIC, 8) != 0 || h->version != SC_VERSION) return -EBADMSG;
  h->build_id[sizeof h->build_id - 1] = 0;
  if (strcmp(h->build_id, c->build_id) != 0) return -EBADMSG;
  uint64_t want = sizeof *h + (uint64_t)h->nivals * sizeof(sc_ival_disk) +
                  (uint64_t)h->nframes * sizeof(sc_frame_disk) + h->strbytes;
  if (want != len) return -EBADMSG;
  if ((uint32_t)crc32(0, buf + sizeof *h, (uInt)(len - sizeof *h)) != h->crc) return -EBADMSG;
  const uint8_t *p = buf + sizeof *h;
  const sc_ival_disk *iv = (const sc_ival_disk *)p;
  const sc_frame_disk *fr = (const sc_frame_disk *)(p + h->nivals * sizeof *iv);
  const char *strs = (const char *)(fr + h->nframes);
  if (h->strbytes == 0 || strs[h->strbytes - 1] != 0) return -EBADMSG;
  uint64_t prev_hi = 0;
  for (uint32_t i = 0; i < h->nivals; i++) {
    sc_ival_disk v;
    memcpy(&v, &iv[i], sizeof v);
    if (v.lo >= v.hi || v.lo < prev_hi || (uint64_t)v.first + v.n > h->nframes) return -EBADMSG;
    prev_hi = v.hi;
  }
  for (uint32_t i = 0; i < h->nframes; i++) {
    sc_frame_disk f;
    memcpy(&f, &fr[i], sizeof f);
    if (f.name >= h->strbytes || f.sys >= h->strbytes || f.file >= h->strbytes) return -EBADMSG;
  }
  return 0;
}

/* Appends the file's content to c (strings pointing into strs, which the
 * caller keeps alive). Assumes sc_validate passed. */
static int sc_ingest(ptp_symcache *c, const uint8_t *buf, const sc_header *h, const char *strs) {
  const uint8_t *p = buf + sizeof *h;
  const sc_ival_disk *iv = (const sc_ival_disk *)p;
  const sc_frame_disk *fr = (const sc_frame_disk *)(p + h->nivals * sizeof *iv);
  if (sc_reserve((void **)&c->iv, &c->capiv, c->niv + h->nivals, sizeof *c->iv) ||
      sc_reserve((void **)&c->fr, &c->capfr, c->nfr + h->nframes, sizeof *c->fr))
    return -ENOMEM;
  size_t base = c->nfr;
  for (uint32_t i = 0; i < h->nframes; i++) {
    sc_frame_disk f;
    memcpy(&f, &fr[i], sizeof f);
    c->fr[c->nfr++] = (ptp_sym_frame){strs + f.name, strs + f.sys, strs + f.file,
                                      f.start_line, f.line, f.column};
  }
  for (uint32_t i = 0; i < h->nivals; i++) {
    sc_ival_disk v;
    memcpy(&v, &iv[i], sizeof v);
    c->iv[c->niv++] = (sc_ival){v.lo, v.hi, (uint32_t)(base + v.first), v.n};
  }
  c->sorted = false;
  c->bytes += h->nivals * sizeof(sc_ival_disk) + h->nframes * sizeof(sc_frame_disk) + h->strbytes;
  return 0;
}

int ptp_symcache_open(ptp_symcache **out, const char *dir, const char *build_id) {
  if (!out || !dir || !*dir || !build_id || !bid_ok(build_id)) return -EINVAL;
  ptp_symcache *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  c->dir = strdup(dir);
  if (!c->dir) { free(c); return -ENOMEM; }
  snprintf(c->build_id, sizeof c->build_id, "%s", build_id);
  c->sorted = true;
  ptp_strarena_init(&c->strs, 16384);
  c->bytes = sizeof(sc_header);
  uint8_t *buf = NULL;
  size_t len = 0;
  int r = sc_read(c, &buf, &len);
  if (r == -ENOMEM) { ptp_symcache_del(c); return r; }
  if (r == 0) {
    sc_header h;
    if (sc_validate(c, buf, len, &h) == 0) {
      const char *strs = (const char *)buf + (len - h.strbytes);
      if (sc_ingest(c, buf, &h, strs)) { free(buf); ptp_symcache_del(c); return -ENOMEM; }
      c->file_strs = (char *)buf;   /* kept whole: the frames' strings point into it */
      buf = NULL;
      c->flags = h.flags;
      c->state = PTP_SYMCACHE_LOADED;
    } else {
      c->state = PTP_SYMCACHE_REJECTED;
    }
  } else if (r != -ENOENT) {
    c->state = PTP_SYMCACHE_REJECTED;
  }
  free(buf);
  *out = c;
  return 0;
}

void ptp_symcache_del(ptp_symcache *c) {
  if (!c) return;
  free(c->dir);
  free(c->iv);
  free(c->fr);
  free(c->file_strs);
  ptp_strarena_free(&c->strs);
  ptp_u64map_free(&c->intern);
  free(c->interned);
  free(c);
}

ptp_symcache_state ptp_symcache_file_state(const ptp_symcache *c) { return c->state; }
size_t ptp_symcache_size(const ptp_symcache *c) { return c->niv; }
unsigned ptp_symcache_flags(const ptp_symcache *c) { return c->flags; }
bool ptp_symcache_dirty(const ptp_symcache *c) { return c->dirty; }

void ptp_symcache_set_flags(ptp_symcache *c, unsigned flags) {
  flags |= PTP_SYMCACHE_FLAGS_SET;
  if (c->flags != flags) {
    c->flags = flags;
    c->dirty = true;
  }
}

int ptp_symcache_find(ptp_symcache *c, uint64_t rel, const ptp_sym_frame **frames, uint32_t *n) {
  const sc_ival *v = sc_search(c, rel);
  if (!v) return 0;
  *frames = v->n ? &c->fr[v->first] : NULL;
  *n = v->n;
  return 1;
}

int ptp_symcache_add(ptp_symcache *c, uint64_t lo, uint64_t hi, const ptp_sym_frame *frames,
                     uint32_t n) {
  if (lo >= hi) return -EINVAL;
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
  /* appended after everything loaded: ival_cmp lets an older equal-start
   * interval win; sc_sort drops overlaps */
  c->iv[c->niv++] = (sc_ival){lo, hi, (uint32_t)first, n};
  c->sorted = false;
  c->dirty = true;
  c->bytes += grow;
  return 0;
}

/* ---- writing ---- */

typedef struct sc_out {
  uint8_t *strs;
  size_t nstrs, capstrs;
  ptp_u64map map;            /* hash -> offset + 1 */
} sc_out;

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

int ptp_symcache_save(ptp_symcache *c) {
  if (!c->dirty) return 0;
  int r;
  /* merge what another process wrote since we read (ours win on overlap:
   * they are sorted first by frame index only among equal starts, and the
   * on-disk ones are appended after ours here) */
  uint8_t *disk = NULL;
  size_t dlen = 0;
  if (sc_read(c, &disk, &dlen) == 0) {
    sc_header h;
    if (sc_validate(c, disk, dlen, &h) == 0) {
      const char *strs = (const char *)disk + (dlen - h.strbytes);
      /* strings must outlive this call only through interning: copy them */
      const uint8_t *p = disk + sizeof h;
      const sc_ival_disk *iv = (const sc_ival_disk *)p;
      const sc_frame_disk *fr = (const sc_frame_disk *)(p + h.nivals * sizeof *iv);
      sc_sort(c);
      size_t nsorted = c->niv;
      for (uint32_t i = 0; i < h.nivals; i++) {
        sc_ival_disk v;
        memcpy(&v, &iv[i], sizeof v);
        if (v.n > 64 || sc_overlaps(c, nsorted, v.lo, v.hi)) continue;   /* keep ours */
        ptp_sym_frame tmp[64];
        for (uint32_t j = 0; j < v.n; j++) {
          sc_frame_disk f;
          memcpy(&f, &fr[v.first + j], sizeof f);
          tmp[j] = (ptp_sym_frame){strs + f.name, strs + f.sys, strs + f.file, f.start_line, f.line, f.column};
        }
        if (ptp_symcache_add(c, v.lo, v.hi, tmp, v.n) != 0) break;
      }
    }
  }
  free(disk);
  sc_sort(c);

  sc_out o = {0};
  size_t nfr = 0;
  for (size_t i = 0; i < c->niv; i++) nfr += c->iv[i].n;
  sc_ival_disk *iv = malloc((c->niv ? c->niv : 1) * sizeof *iv);
  sc_frame_disk *fr = malloc((nfr ? nfr : 1) * sizeof *fr);
  r = -ENOMEM;
  if (!iv || !fr) goto fail_bufs;
  uint32_t empty;
  if ((r = out_str(&o, "", &empty))) goto fail_bufs;
  size_t k = 0;
  for (size_t i = 0; i < c->niv; i++) {
    const sc_ival *v = &c->iv[i];
    iv[i] = (sc_ival_disk){v->lo, v->hi, (uint32_t)k, v->n};
    for (uint32_t j = 0; j < v->n; j++, k++) {
      const ptp_sym_frame *f = &c->fr[v->first + j];
      sc_frame_disk d = {0, 0, 0, (uint32_t)f->start_line, (uint32_t)f->line, (uint32_t)f->column};
      if ((r = out_str(&o, f->name, &d.name)) || (r = out_str(&o, f->system_name, &d.sys)) ||
          (r = out_str(&o, f->file, &d.file)))
        goto fail_bufs;
      fr[k] = d;
    }
  }
  sc_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, SC_MAGIC, 8);
  h.version = SC_VERSION;
  h.flags = c->flags;
  h.nivals = (uint32_t)c->niv;
  h.nframes = (uint32_t)nfr;
  h.strbytes = (uint32_t)o.nstrs;
  snprintf(h.build_id, sizeof h.build_id, "%s", c->build_id);
  uLong crc = crc32(0, NULL, 0);
  crc = crc32(crc, (const Bytef *)iv, (uInt)(c->niv * sizeof *iv));
  crc = crc32(crc, (const Bytef *)fr, (uInt)(nfr * sizeof *fr));
  crc = crc32(crc, o.strs, (uInt)o.nstrs);
  h.crc = (uint32_t)crc;
  if (sizeof h + c->niv * sizeof *iv + nfr * sizeof *fr + o.nstrs > PTP_SYMCACHE_FILE_MAX) {
    r = -E2BIG;
    goto fail_bufs;
  }

  if ((r = ptp_cachefile_prepare_dir(c->dir))) goto fail_bufs;
  char name[SC_BID_MAX + 16];
  snprintf(name, sizeof name, "%s" SC_SUFFIX, c->build_id);
  struct iovec parts[4] = {
    { &h, sizeof h }, { iv, c->niv * sizeof *iv }, { fr, nfr * sizeof *fr }, { o.strs, o.nstrs },
  };
  if ((r = ptp_cachefile_writev(c->dir, name, parts, 4))) goto fail_bufs;
  (void)ptp_cachefile_bound(c->dir, SC_SUFFIX, PTP_SYMCACHE_DIR_MAX, name, SC_TMP_AGE_S);
  c->dirty = false;
  free(iv);
  free(fr);
  free(o.strs);
  ptp_u64map_free(&o.map);
  return 0;

fail_bufs:
  free(iv);
  free(fr);
  free(o.strs);
  ptp_u64map_free(&o.map);
  return r;
}
