/*
 * pd_catalog.c - artifact catalog: the model and its persistence (see
 * pd_catalog.h for the contract, pd_catalog_internal.h for the units).
 *
 * DESIGN
 *  - c->entries is the list served by the last successful refresh; a refresh
 *    builds a new list aside (pd_catalog_scan.c) and pd_catalog_refresh_end
 *    swaps it in only when complete.
 *  - c->generation only ever increases; it is bumped when the fingerprint of
 *    the new list differs from the stored one, and persisted right away
 *    (<home>/catalog.json, atomic write). A damaged file restarts the count
 *    at the epoch milliseconds, so clients never see it go back.
 *  - Paths: pd_cat_session_rel and pd_cat_open_base resolve the session
 *    directory beneath the state root for the scan and for fetches; nothing
 *    outside the root is ever opened.
 * Threads: loop thread only; the refresh job is frozen between begin and end
 * (c->refreshing), see struct pd_catalog_job.
 */
#include "daemon/pd_catalog_internal.h"

#include "common/pt_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *pd_cat_asprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int r = vasprintf(&s, fmt, ap);
  va_end(ap);
  return r < 0 ? NULL : s;
}

void pd_cat_entry_free(pd_catalog_entry *e) {
  free(e->label);
  free(e->path);
  pd_cat_blob_unref(e->blob);
}

pd_catalog_entry *pd_cat_builder_add(builder *b) {
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

pd_cat_blob *pd_cat_blob_ref(pd_cat_blob *b) {
  if (b) atomic_fetch_add(&b->refs, 1);
  return b;
}

void pd_cat_blob_unref(pd_cat_blob *b) {
  if (b && atomic_fetch_sub(&b->refs, 1) == 1) free(b);
}

void pd_cat_entries_free(pd_catalog_entry *v, size_t n) {
  for (size_t i = 0; i < n; i++) pd_cat_entry_free(&v[i]);
  free(v);
}

int pd_cat_persist(pd_catalog *c) {
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
  char *path = pd_cat_asprintf("%s/catalog.json", c->home);
  /* temp file + fsync + rename + fsync of the directory */
  int r = path ? pt_write_atomic(path, line, len + 1, 0600) : -ENOMEM;
  free(path);
  free(line);
  return r;
}

static void load_persisted(pd_catalog *c) {
  char *path = pd_cat_asprintf("%s/catalog.json", c->home);
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

static void bmaps_free(pd_catalog *c) {
  for (size_t i = 0; i < c->n_bmaps; i++) free(c->bmaps[i].h);
  c->n_bmaps = 0;
}

void pd_catalog_del(pd_catalog *c) {
  if (!c) return;
  pd_cat_entries_free(c->entries, c->n_entries);
  free(c->cache);
  pd_cat_incs_free(c->incs, c->n_incs);
  bmaps_free(c);
  free(c->bmaps);
  free(c->session_dir);
  free(c->sums);
  for (int i = 0; i < PD_CAT_MERGED_KINDS; i++) pd_cat_blob_unref(c->merged[i]);
  free(c->listed_srel);
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

/* ---------- refresh: begin and end (the work is pd_catalog_scan.c) ---------- */

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
  j->sums = c->sums;
  j->n_sums = c->n_sums;
  for (int i = 0; i < PD_CAT_MERGED_KINDS; i++) j->old_merged[i] = c->merged[i];
  c->refreshing = 1;
  c->stats.refreshes++;
  *out = j;
  return 0;
}

int pd_catalog_refresh_end(pd_catalog *c, pd_catalog_job *j) {
  int r = j->r;
  c->refreshing = 0;
  c->stats.files_hashed += j->files_hashed;
  c->stats.cache_hits += j->cache_hits;
  c->stats.bytes_hashed += j->bytes_hashed;
  free(j->hook_sdir);
  if (r < 0) {
    pd_cat_incs_free(j->new_incs, j->n_new_incs);
    free(j->srel);
    free(j);
    return r;
  }
  free(c->listed_srel);
  c->listed_srel = j->srel;
  free(c->sums);
  c->sums = j->b.sums;
  c->n_sums = j->b.n_sums;
  for (int i = 0; i < PD_CAT_MERGED_KINDS; i++) {
    pd_cat_blob_unref(c->merged[i]);
    c->merged[i] = j->b.merged[i]; /* the builder's refs, taken over */
  }
  pd_cat_incs_free(c->incs, c->n_incs);
  c->incs = j->new_incs;
  c->n_incs = j->n_new_incs;
  pd_cat_entries_free(c->entries, c->n_entries);
  c->entries = j->b.v;
  c->n_entries = j->b.n;
  free(c->cache);
  c->cache = j->b.cache;
  c->n_cache = j->b.n_cache;
  if (strcmp(j->fp, c->fingerprint) != 0) {
    c->generation++;
    memcpy(c->fingerprint, j->fp, sizeof c->fingerprint);
    c->stats.persist_error = pd_cat_persist(c);
  }
  free(j);
  return 0;
}

/* ---------- paths beneath the state root ---------- */

/* The active session's directory RELATIVE to the state root
 * ("sessions/<id>"): the hook's absolute path with the root stripped, else
 * the id read from <home>/active_session (plain id or a JSON object with
 * "id"). Returns 0 with *rel malloc'd or NULL (no active session), -EXDEV
 * when the hook names a directory outside the root (then no profile is
 * listed: nothing outside the root is ever opened), or -ENOMEM. The
 * result is opened beneath the root's fd with no symlink allowed
 * (pt_open_beneath), so a sessions/<id> that is a symlink is refused. */
int pd_cat_session_rel(const char *home, const char *hook_sdir, char **rel) {
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
  return (*rel = pd_cat_asprintf("sessions/%s", id)) ? 0 : -ENOMEM;
}

/* Opens the directory profiles of `root` are relative to, beneath the state
 * root's fd hfd: the session directory `rel`, or (rel NULL) the root
 * itself. Returns an O_DIRECTORY fd or a negative errno. */
int pd_cat_open_base(int hfd, const char *rel) {
  if (!rel) {
    int fd = dup(hfd);
    return fd >= 0 ? fd : -errno;
  }
  return pt_open_beneath(hfd, rel, O_RDONLY | O_DIRECTORY);
}
