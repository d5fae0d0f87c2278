/*
 * pd_catalog_profile.c - the catalog's profile entries (units:
 * pd_catalog_internal.h; contract: pd_catalog.h): each snapshot's window
 * and sample count, and the merged artifact of a kind's kept snapshots.
 *
 * DESIGN
 *  - Runs in the refresh worker, after a kind's snapshots were listed and
 *    hashed. A snapshot is decoded (common/pt_gunzip.h, pt_pprof_read.h)
 *    only when its content is new: summaries are cached by SHA-256
 *    (prof_sum, built aside in the job and swapped in by refresh_end, like
 *    the hash cache).
 *  - The merged artifact (two or more snapshots) is built from exactly the
 *    listed bytes: each file is read again beneath the profiling
 *    directory and must hash to what was listed, else no merged artifact
 *    this time (a snapshot replaced in between). Its bytes
 *    (common/pt_pprof_merge.h, pt_pprof_write.h, pt_gzip.h: deterministic)
 *    live in a refcounted blob; the same inputs (key: the SHA-256 of their
 *    digests, newest first) reuse the last blob, so an unchanged session
 *    keeps its merged artifact, id and generation.
 *  - Its id hashes its kind, root, name and content, so a different merge
 *    is a different id.
 * Threads: the refresh worker; touches only its job and the frozen cache.
 */
#include "daemon/pd_catalog_internal.h"

#include "common/pt_file.h"
#include "common/pt_gunzip.h"
#include "common/pt_gzip.h"
#include "common/pt_pprof_merge.h"
#include "common/pt_pprof_read.h"
#include "common/pt_pprof_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Reads the listed snapshot e (in profdir) whole and checks its digest. 0
 * with *data (malloc'd), -ESTALE when the file changed since listing,
 * -ENOMEM, or another negative errno. */
static int read_listed(int profdir, const pd_catalog_entry *e, uint8_t **data) {
  *data = NULL;
  if (e->size > PD_CATALOG_FETCH_MAX) return -EFBIG;
  int fd = pt_open_beneath(profdir, base_name(e->path), O_RDONLY | O_NONBLOCK);
  if (fd < 0) return fd;
  struct stat st;
  int r = 0;
  if (fstat(fd, &st) != 0) r = -errno;
  else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size) r = -ESTALE;
  uint8_t *buf = r == 0 ? malloc(e->size ? e->size : 1) : NULL;
  if (r == 0 && !buf) r = -ENOMEM;
  size_t got = 0;
  while (r == 0 && got < e->size) {
    ssize_t n = pread(fd, buf + got, e->size - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) r = -errno;
    else if (n == 0) r = -ESTALE;
    else got += (size_t)n;
  }
  close(fd);
  char hex[PT_SHA256_HEX];
  if (r == 0 && (r = pt_sha256_hex(buf, e->size, hex)) == 0 && strcmp(hex, e->sha256) != 0)
    r = -ESTALE;
  if (r < 0) {
    free(buf);
    return r;
  }
  *data = buf;
  return 0;
}

/* Decodes a snapshot's bytes; 0 with *out, or a negative code. */
static int decode(const uint8_t *d, size_t n, pt_pprof **out) {
  uint8_t *raw = (uint8_t *)d;
  size_t rawn = n;
  int r = 0;
  if (pt_is_gzip(d, n) && (r = pt_gunzip(d, n, 0, &raw, &rawn)) < 0) return r;
  r = pt_pprof_read(raw, rawn, NULL, out, NULL, 0);
  if (raw != d) free(raw);
  return r;
}

static const prof_sum *sum_find(const prof_sum *v, size_t n, const char *sha) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i].sha256, sha) == 0) return &v[i];
  return NULL;
}

static int sum_add(builder *b, const prof_sum *s) {
  if (sum_find(b->sums, b->n_sums, s->sha256)) return 0;
  if (b->n_sums == b->cap_sums) {
    size_t cap = b->cap_sums ? b->cap_sums * 2 : 16;
    prof_sum *v = realloc(b->sums, cap * sizeof *v);
    if (!v) return -ENOMEM;
    b->sums = v;
    b->cap_sums = cap;
  }
  b->sums[b->n_sums++] = *s;
  return 0;
}

static void set_profile(pd_catalog_entry *e, const prof_sum *s) {
  e->has_profile = 1;
  e->samples = s->samples;
  e->time_ns = s->time_ns;
  e->duration_ns = s->duration_ns;
}

/* The merge of entries [first, last) (newest first; merged oldest first).
 * NULL when a file changed or does not decode (no merged artifact then);
 * *r = -ENOMEM on out of memory. */
static pd_cat_blob *build_merged(int profdir, const pd_catalog_entry *v, size_t first, size_t last,
                                 const char *key, int *r) {
  pt_pprof_merge *m = NULL;
  pd_cat_blob *blob = NULL;
  uint8_t *pb = NULL, *gz = NULL;
  size_t pbn = 0, gzn = 0;
  if ((*r = pt_pprof_merge_new(&m)) < 0) return NULL;
  int ok = 1;
  for (size_t i = last; ok && i-- > first;) {
    uint8_t *d = NULL;
    pt_pprof *p = NULL;
    int k = read_listed(profdir, &v[i], &d);
    if (k == 0) k = decode(d, v[i].size, &p);
    if (k == 0) k = pt_pprof_merge_add(m, p, base_name(v[i].path), NULL, 0);
    free(d);
    pt_pprof_free(p);
    if (k == -ENOMEM) *r = k;
    if (k < 0) ok = 0;
  }
  const pt_pprof *res = NULL;
  int k = ok ? pt_pprof_merge_result(m, &res, NULL, 0) : -1;
  if (k == 0) k = pt_pprof_write(res, &pb, &pbn, NULL, 0);
  if (k == 0) k = pt_gzip(pb, pbn, &gz, &gzn);
  if (k == -ENOMEM) *r = k;
  if (k == 0 && (blob = malloc(sizeof *blob + gzn))) {
    atomic_init(&blob->refs, 1);
    snprintf(blob->key, sizeof blob->key, "%s", key);
    blob->len = gzn;
    memcpy(blob->data, gz, gzn);
    blob->samples = pt_pprof_sample_total(res);
    blob->time_ns = res->time_nanos;
    blob->duration_ns = res->duration_nanos;
    if (pt_sha256_hex(blob->data, blob->len, blob->sha256) < 0) {
      free(blob);
      blob = NULL;
      *r = -ENOMEM;
    }
  } else if (k == 0) {
    *r = -ENOMEM;
  }
  free(pb);
  free(gz);
  pt_pprof_merge_del(m);
  return blob;
}

int pd_cat_profiles(pd_catalog_job *j, builder *b, int profdir, size_t first, int slot,
                    const char *merged_kind, const char *label) {
  size_t last = b->n;
  int r = 0;
  /* Each snapshot's window and samples, by content. */
  for (size_t i = first; i < last; i++) {
    pd_catalog_entry *e = &b->v[i];
    const prof_sum *s = sum_find(j->sums, j->n_sums, e->sha256);
    if (!s) s = sum_find(b->sums, b->n_sums, e->sha256);
    prof_sum fresh;
    if (!s) {
      uint8_t *d = NULL;
      pt_pprof *p = NULL;
      int k = read_listed(profdir, e, &d);
      if (k == 0) k = decode(d, e->size, &p);
      free(d);
      if (k == -ENOMEM) return k;
      if (k < 0) continue; /* unreadable or not a profile: no window shown */
      memset(&fresh, 0, sizeof fresh);
      snprintf(fresh.sha256, sizeof fresh.sha256, "%s", e->sha256);
      fresh.samples = pt_pprof_sample_total(p);
      fresh.time_ns = p->time_nanos;
      fresh.duration_ns = p->duration_nanos;
      pt_pprof_free(p);
      s = &fresh;
    }
    if ((r = sum_add(b, s)) < 0) return r;
    set_profile(e, s);
  }
  if (last - first < 2) return 0;

  /* The merged artifact: the same inputs reuse the last one. */
  pt_sha256 *h = pt_sha256_new();
  if (!h) return -ENOMEM;
  for (size_t i = first; i < last; i++) pt_sha256_update(h, b->v[i].sha256, 64);
  char key[PT_SHA256_HEX];
  r = pt_sha256_final(h, key);
  pt_sha256_del(h);
  if (r < 0) return r;
  pd_cat_blob *blob = NULL;
  if (j->old_merged[slot] && strcmp(j->old_merged[slot]->key, key) == 0)
    blob = pd_cat_blob_ref(j->old_merged[slot]);
  else if (!(blob = build_merged(profdir, b->v, first, last, key, &r)))
    return r; /* 0: not now (a file changed), or -ENOMEM */
  char *elabel = pd_cat_asprintf("%s, %zu kept snapshots merged", label, last - first);
  char *path = pd_cat_asprintf("profiling/%s-profiles-merged.pb.gz", slot ? "tui" : "daemon");
  pd_catalog_entry *e = elabel && path ? pd_cat_builder_add(b) : NULL;
  if (!e) {
    free(elabel);
    free(path);
    pd_cat_blob_unref(blob);
    return -ENOMEM;
  }
  const pd_catalog_entry *newest = &b->v[first];
  e->kind = merged_kind;
  e->source = newest->source;
  e->label = elabel;
  e->path = path;
  e->root = newest->root;
  e->size = blob->len;
  e->created_unix = newest->created_unix;
  memcpy(e->created, newest->created, sizeof e->created);
  memcpy(e->sha256, blob->sha256, sizeof e->sha256);
  e->has_profile = 1;
  e->samples = blob->samples;
  e->time_ns = blob->time_ns;
  e->duration_ns = blob->duration_ns;
  e->blob = blob;
  b->merged[slot] = pd_cat_blob_ref(blob);
  /* Its id: kind, root, name and content. */
  char idkey[256], hex[PT_SHA256_HEX];
  snprintf(idkey, sizeof idkey, "%s|%d|%s|%s", e->kind, (int)e->root, e->path, e->sha256);
  if ((r = pt_sha256_hex(idkey, strlen(idkey), hex)) < 0) return r;
  memcpy(e->id, hex, 16);
  e->id[16] = 0;
  return 0;
}

void pd_cat_builder_profiles_free(builder *b) {
  free(b->sums);
  b->sums = NULL;
  b->n_sums = b->cap_sums = 0;
  for (int i = 0; i < PD_CAT_MERGED_KINDS; i++) {
    pd_cat_blob_unref(b->merged[i]);
    b->merged[i] = NULL;
  }
}
