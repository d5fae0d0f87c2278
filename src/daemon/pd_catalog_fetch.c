/*
 * pd_catalog_fetch.c - the catalog's chunked, verified reads (units:
 * pd_catalog_internal.h; contract: pd_catalog.h).
 *
 * DESIGN
 *  - A read job copies what was listed (a refresh may replace the list while
 *    the worker runs) and opens the entry's base directory on the loop
 *    thread; pd_catalog_read_work (any one thread) checks the open file is
 *    the one listed, before and after reading.
 *  - A built artifact (the merged profiles) has no file: its job holds a
 *    reference to the immutable bytes, hashed when they were built.
 *  - Every served byte of a file comes from a PD_CATALOG_BLOCK block whose SHA-256 was
 *    checked after reading it into memory: the first fetch re-hashes the
 *    whole served range against the listed hash and learns the block
 *    digests; pd_catalog_read_keep stores them (loop thread, at most
 *    BMAP_MAX maps, least recently used goes) for later chunks.
 */
#include "daemon/pd_catalog_internal.h"

#include "common/pt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
  if (e->blob) {
    /* built bytes (the merged profiles): no file to open or check */
    j->blob = pd_cat_blob_ref(e->blob);
    *out = j;
    return 0;
  }
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
  int r = e->root == PD_CATALOG_ROOT_SESSION ? pd_cat_session_rel(c->home, c->session_dir, &rel) : 0;
  if (hfd >= 0 && r == 0 && (e->root != PD_CATALOG_ROOT_SESSION || rel))
    j->bfd = pd_cat_open_base(hfd, rel);
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
                     : ((uint64_t)st.st_size != j->size || pd_cat_mtime_ns(&st) != j->mtime_ns))
    return -ESTALE;
  return 0;
}

/* A built artifact's chunk: its immutable bytes, hashed when built. */
static void read_blob(pd_catalog_read_job *j) {
  size_t want = j->max_len < PD_CATALOG_CHUNK_MAX ? j->max_len : PD_CATALOG_CHUNK_MAX;
  if (want > j->blob->len - j->offset) want = (size_t)(j->blob->len - j->offset);
  j->data = malloc(want ? want : 1);
  if (!j->data) {
    j->r = -ENOMEM;
    return;
  }
  memcpy(j->data, j->blob->data + j->offset, want);
  j->len = want;
  j->r = 0;
}

void pd_catalog_read_work(pd_catalog_read_job *j) {
  if (j->blob) {
    read_blob(j);
    return;
  }
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
  pd_cat_blob_unref(j->blob);
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
