/*
 * pd_catalog_scan.c - the catalog refresh's work: directory scans, snapshot
 * names, ids and the fingerprint (units: pd_catalog_internal.h).
 *
 * DESIGN
 *  - pd_catalog_refresh_work runs on a threadpool thread and touches only its
 *    job: it builds a complete new list (profiles of the active session, or
 *    of <home>/profiling/ with none; the daemon log; telemetry) aside in
 *    job->b, which pd_catalog_refresh_end swaps in on the loop thread.
 *  - Snapshots are named "<prefix>yyyymmddThhmmssZ-<seq>.pb.gz" with the
 *    prefixes of common/pt_snapshot_names.h; at most MAX_SNAPSHOTS per kind,
 *    newest first (name time, then seq, then mtime); then each kind's
 *    windows and merged artifact (pd_catalog_profile.c).
 *  - Ids hash what identifies a file, not its content (make_id); contents
 *    are hashed through pd_catalog_hash.c.
 *  - Only regular files of ours with one link, opened beneath the state root
 *    with no symlink (pt_open_beneath), are listed.
 */
#include "daemon/pd_catalog_internal.h"

#include "pt_config.h"
#include "common/pt_file.h"
#include "common/pt_snapshot_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void fmt_rfc3339(int64_t t, char out[32]) {
  time_t tt = (time_t)t;
  struct tm tm;
  gmtime_r(&tt, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
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
  pd_catalog_entry *e = pd_cat_builder_add(b);
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
  e->mtime_ns = pd_cat_mtime_ns(&st);
  e->ctime_ns = pd_cat_ctime_ns(&st);
  e->created_unix = created ? created : (int64_t)st.st_mtim.tv_sec;
  fmt_rfc3339(e->created_unix, e->created);
  if (!e->path || !e->label) { close(fd); b->n--; pd_cat_entry_free(e); return -ENOMEM; }
  const char *cached = pd_cat_cache_lookup(j->cache, j->n_cache, &st, e->size);
  int r = 0;
  if (cached) {
    memcpy(e->sha256, cached, sizeof e->sha256);
    j->cache_hits++;
  } else if (append_only) {
    r = pd_cat_hash_append(j, fd, e);
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
    int k = pd_cat_inc_carry(j, e, fd);
    if (k == -ENOMEM) r = k; /* -EIO: just no state kept; next time from 0 */
  }
  close(fd);
  if (r == 0) r = make_id(e);
  if (r == 0) r = pd_cat_builder_cache(b, e);
  if (r < 0) {
    b->n--;
    pd_cat_entry_free(e);
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
                         const char *older_label, int slot, const char *merged_kind) {
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
  size_t plen = strlen(prefix), slen = strlen(PT_SNAPSHOT_SUFFIX);
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len >= sizeof snaps->name || len <= plen + slen) continue;
    if (strncmp(de->d_name, prefix, plen) != 0) continue;
    if (strcmp(de->d_name + len - slen, PT_SNAPSHOT_SUFFIX) != 0) continue;
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
    s->mtime_ns = pd_cat_mtime_ns(&st);
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
      char *label = pd_cat_asprintf("%s, %s", older_label, when);
      char *rel = pd_cat_asprintf("profiling/%s", snaps[i].name);
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
    /* windows and samples; the merged artifact of two or more */
    if (r == 0 && b->n > first)
      r = pd_cat_profiles(j, b, profdir, first, slot, merged_kind, older_label);
  }
  free(snaps);
  return r;
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

void pd_catalog_refresh_work(pd_catalog_job *j) {
  builder b;
  memset(&b, 0, sizeof b);
  int r = 0;

  /* Profiles of the active session; with no active session, the state
   * root's profiling/ directory, where the profiling daemon writes until a
   * session is attached (docs/profiling.md). */
  char *srel = NULL;
  int sr = pd_cat_session_rel(j->home, j->hook_sdir, &srel);
  if (sr == -ENOMEM) r = sr;
  pd_catalog_root proot = srel ? PD_CATALOG_ROOT_SESSION : PD_CATALOG_ROOT_STATE;
  int hfd0 = sr == 0 ? open(j->home, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (hfd0 >= 0) {
    int sfd = pd_cat_open_base(hfd0, srel);
    int pfd = sfd >= 0 ? pt_open_beneath(sfd, "profiling", O_RDONLY | O_DIRECTORY) : -1;
    if (pfd >= 0) {
      r = scan_profiles(j, &b, pfd, proot, PT_SNAPSHOT_DAEMON_PREFIX, "cpu-profile", "daemon",
                        "CPU profile (pprof)", "CPU profile (pprof)", 0, "cpu-profile-merged");
#if PT_PROFILING
      /* TUI snapshots only in a profiling daemon: a normal build refreshes no
       * TUI profile artifacts (brief: restart the daemon with the profiling
       * build to see the TUI dump). */
      if (r == 0)
        r = scan_profiles(j, &b, pfd, proot, PT_SNAPSHOT_TUI_PREFIX, "tui-cpu-profile", "tui",
                          "TUI CPU profile (pprof)", "TUI CPU profile (pprof)", 1,
                          "tui-cpu-profile-merged");
#endif
      close(pfd);
    }
    if (sfd >= 0) close(sfd);
    close(hfd0);
  }
  j->srel = srel; /* the session listed (the list result names it) */

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
          char *label = pd_cat_asprintf("Telemetry (%s)", names[i]);
          char *rel = pd_cat_asprintf("telemetry/%s", names[i]);
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
    pd_cat_entries_free(b.v, b.n);
    free(b.cache);
    pd_cat_builder_profiles_free(&b);
    memset(&b, 0, sizeof b);
  }
  j->b = b;
  j->r = r;
}

int pd_catalog_refresh(pd_catalog *c) {
  pd_catalog_job *j;
  int r = pd_catalog_refresh_begin(c, &j);
  if (r < 0) return r;
  pd_catalog_refresh_work(j);
  return pd_catalog_refresh_end(c, j);
}
