/* pd_sessions.c - the daemon's session store. See pd_sessions.h. */
#include "pt_config.h"
#include "daemon/pd_sessions.h"
#include "daemon/pd_log.h"
#include "common/pt_file.h"
#include "common/pt_jsonl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SESSION_JSON_MAX ((size_t)64 << 10)

typedef struct skipped {
  char *id, *error;
  struct skipped *next;
} skipped;

typedef struct {
  pd_active_session_fn cb;
  void *ctx;
} active_listener;

struct pd_sessions {
  char *home;
  char *sessions_dir;
  pd_session *sessions;   /* list, unordered */
  size_t count;
  skipped *skipped;
  pd_session *active;
  active_listener listeners[PD_SESSIONS_MAX_LISTENERS];
  int nlisteners;
};

/* ---- active-session callbacks (seam 4), per store ---- */

static void fire_active(pd_sessions *st, const char *dir) {
  for (int i = 0; i < st->nlisteners; i++) st->listeners[i].cb(dir, st->listeners[i].ctx);
}

int pd_sessions_on_active(pd_sessions *st, pd_active_session_fn cb, void *ctx) {
  if (!cb) return -EINVAL;
  if (st->nlisteners >= PD_SESSIONS_MAX_LISTENERS) return -ENOSPC;
  st->listeners[st->nlisteners].cb = cb;
  st->listeners[st->nlisteners].ctx = ctx;
  st->nlisteners++;
  if (st->active) cb(st->active->dir, ctx);
  return 0;
}

/* ---- helpers ---- */

static char *path_join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", a, b);
  return p;
}

static int is_session_id(const char *s) {
  if (strlen(s) != PD_SESSION_ID_LEN) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
  return 1;
}

/* Shape check of our own timestamps: YYYY-MM-DDTHH:MM:SS[.fff]Z */
static int is_rfc3339(const char *s) {
  size_t n = strlen(s);
  if (n < 20 || n > 30 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
      s[16] != ':' || s[n - 1] != 'Z')
    return 0;
  return 1;
}

int pd_session_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > PD_SESSION_NAME_MAX) return -EINVAL;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    if (*p < 0x20 || *p == 0x7f) return -EINVAL;
  return 0;
}

static void session_free(pd_session *s) {
  if (!s) return;
  pd_transcript_del(s->transcript);
  free(s->name);
  free(s->dir);
  free(s);
}

static int add_skipped(pd_sessions *st, const char *id, const char *error) {
  skipped *k = calloc(1, sizeof *k);
  if (!k) return -ENOMEM;
  k->id = strdup(id);
  k->error = strdup(error);
  if (!k->id || !k->error) {
    free(k->id);
    free(k->error);
    free(k);
    return -ENOMEM;
  }
  k->next = st->skipped;
  st->skipped = k;
  pd_warn("session %s skipped: %s", id, error);
  return 0;
}

/* ---- session.json ---- */

static int save_session_json(const pd_session *s) {
  json_t *j = json_pack("{s:s, s:s, s:s}", "name", s->name, "created", s->created,
                        "last_activity", s->last_activity);
  if (!j) return -ENOMEM;
  char *txt = json_dumps(j, JSON_INDENT(2));
  json_decref(j);
  if (!txt) return -ENOMEM;
  size_t n = strlen(txt);
  char *path = path_join(s->dir, "session.json");
  if (!path) {
    free(txt);
    return -ENOMEM;
  }
  /* keep a trailing newline: friendlier to humans and tools */
  char *buf = malloc(n + 2);
  int r = -ENOMEM;
  if (buf) {
    memcpy(buf, txt, n);
    buf[n] = '\n';
    r = pt_write_atomic(path, buf, n + 1, 0600);
    free(buf);
  }
  free(txt);
  free(path);
  return r;
}

/* Loads one session directory; on damage records it as skipped. */
static int load_session(pd_sessions *st, const char *id) {
  char err[256];
  char *dir = path_join(st->sessions_dir, id);
  if (!dir) return -ENOMEM;
  char *sj = path_join(dir, "session.json");
  char *tj = path_join(dir, "transcript.jsonl");
  char *data = NULL;
  size_t len = 0;
  json_t *j = NULL;
  pd_session *s = NULL;
  int r = -ENOMEM;
  if (!sj || !tj) goto out;

  r = pt_read_all(sj, SESSION_JSON_MAX, &data, &len);
  if (r < 0) {
    snprintf(err, sizeof err, "session.json: %s", strerror(-r));
    r = add_skipped(st, id, err);
    goto out;
  }
  json_error_t je;
  j = json_loadb(data, len, 0, &je);
  const char *name = NULL, *created = NULL, *last = NULL;
  if (!j) {
    snprintf(err, sizeof err, "session.json: invalid JSON at line %d: %s", je.line, je.text);
  } else if (json_unpack(j, "{s:s, s:s, s:s}", "name", &name, "created", &created,
                         "last_activity", &last) != 0) {
    snprintf(err, sizeof err, "session.json: missing or non-string name/created/last_activity");
    name = NULL;
  } else if (pd_session_name_ok(name) != 0 || !is_rfc3339(created) || !is_rfc3339(last)) {
    snprintf(err, sizeof err, "session.json: bad name or timestamp");
    name = NULL;
  }
  if (!name) {
    r = add_skipped(st, id, err);
    goto out;
  }
  int max_turn = 0;
  struct stat tst;
  if (stat(tj, &tst) == 0) {
    r = pd_transcript_read(tj, NULL, &max_turn, err, sizeof err);
    if (r < 0) {
      char e2[300];
      snprintf(e2, sizeof e2, "transcript.jsonl: %s", err);
      r = add_skipped(st, id, e2);
      goto out;
    }
  } else if (errno != ENOENT) {
    snprintf(err, sizeof err, "transcript.jsonl: %s", strerror(errno));
    r = add_skipped(st, id, err);
    goto out;
  }
  r = -ENOMEM;
  s = calloc(1, sizeof *s);
  if (!s) goto out;
  snprintf(s->id, sizeof s->id, "%s", id);
  s->name = strdup(name);
  snprintf(s->created, sizeof s->created, "%s", created);
  snprintf(s->last_activity, sizeof s->last_activity, "%s", last);
  s->dir = dir;
  dir = NULL;
  if (!s->name || pd_transcript_new(tj, max_turn, &s->transcript) < 0) goto out;
  /* A valid session always has its profiling/ directory. */
  char *pd = path_join(s->dir, "profiling");
  if (pd) {
    if (mkdir(pd, 0700) != 0 && errno != EEXIST) pd_warn("session %s: mkdir profiling: %s", id, strerror(errno));
    free(pd);
  }
  s->next = st->sessions;
  st->sessions = s;
  st->count++;
  s = NULL;
  r = 0;
out:
  session_free(s);
  json_decref(j);
  free(data);
  free(sj);
  free(tj);
  free(dir);
  return r;
}

static void load_active(pd_sessions *st) {
  char *path = path_join(st->home, "active_session");
  char *data = NULL;
  size_t len = 0;
  if (!path) return;
  int r = pt_read_all(path, 256, &data, &len);
  if (r == 0) {
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' ')) data[--len] = 0;
    pd_session *s = pd_sessions_find(st, data);
    if (s) {
      st->active = s;
      pd_info("active session: %s", s->id);
    } else {
      pd_warn("active_session names %s, which is not a loadable session; none active", data);
    }
  } else if (r != -ENOENT) {
    pd_warn("cannot read %s: %s", path, strerror(-r));
  }
  free(data);
  free(path);
}

int pd_sessions_open(const char *home, pd_sessions **out) {
  *out = NULL;
  pd_sessions *st = calloc(1, sizeof *st);
  if (!st) return -ENOMEM;
  int r = -ENOMEM;
  st->home = strdup(home);
  st->sessions_dir = path_join(home, "sessions");
  if (!st->home || !st->sessions_dir) goto fail;
  r = pt_mkdir_p(st->sessions_dir, 0700);
  if (r < 0) goto fail;
  DIR *d = opendir(st->sessions_dir);
  if (!d) {
    r = -errno;
    goto fail;
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue; /* ., .., .deleted-* */
    char *p = path_join(st->sessions_dir, de->d_name);
    struct stat sst;
    int isdir = p && stat(p, &sst) == 0 && S_ISDIR(sst.st_mode);
    free(p);
    if (!isdir) continue;
    if (!is_session_id(de->d_name)) {
      add_skipped(st, de->d_name, "not a session id (expected 12 lowercase hex characters)");
      continue;
    }
    r = load_session(st, de->d_name);
    if (r == -ENOMEM) {
      closedir(d);
      goto fail;
    }
  }
  closedir(d);
  load_active(st);
  pd_info("store: %zu session(s) loaded from %s", st->count, st->sessions_dir);
  *out = st;
  return 0;
fail:
  pd_sessions_del(st);
  return r;
}

void pd_sessions_del(pd_sessions *st) {
  if (!st) return;
  while (st->sessions) {
    pd_session *s = st->sessions;
    st->sessions = s->next;
    session_free(s);
  }
  while (st->skipped) {
    skipped *k = st->skipped;
    st->skipped = k->next;
    free(k->id);
    free(k->error);
    free(k);
  }
  free(st->home);
  free(st->sessions_dir);
  free(st);
}

const char *pd_sessions_home(const pd_sessions *st) { return st->home; }
size_t pd_sessions_count(const pd_sessions *st) { return st->count; }
pd_session *pd_sessions_first(pd_sessions *st) { return st->sessions; }

pd_session *pd_sessions_find(pd_sessions *st, const char *id) {
  for (pd_session *s = st->sessions; s; s = s->next)
    if (strcmp(s->id, id) == 0) return s;
  return NULL;
}

static int is_skipped(pd_sessions *st, const char *id) {
  for (skipped *k = st->skipped; k; k = k->next)
    if (strcmp(k->id, id) == 0) return 1;
  return 0;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(path) == 0 ? 0 : -1;
}

static int rm_rf(const char *path) {
  return nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -errno;
}

int pd_sessions_create(pd_sessions *st, const char *name, pd_session **out) {
  char defname[64];
  if (!name) {
    snprintf(defname, sizeof defname, "Session %zu", st->count + 1);
    name = defname;
  }
  if (pd_session_name_ok(name) != 0) return -EINVAL;
  char id[PD_SESSION_ID_LEN + 1];
  for (int tries = 0;; tries++) {
    unsigned char rnd[PD_SESSION_ID_LEN / 2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) return -EIO;
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(id + 2 * i, 3, "%02x", rnd[i]);
    if (!pd_sessions_find(st, id) && !is_skipped(st, id)) break;
    if (tries > 16) return -EEXIST;
  }
  pd_session *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  memcpy(s->id, id, sizeof s->id);
  s->name = strdup(name);
  s->dir = path_join(st->sessions_dir, id);
  char *tr = s->dir ? path_join(s->dir, "transcript.jsonl") : NULL;
  if (!s->name || !tr || pd_transcript_new(tr, 0, &s->transcript) < 0) {
    free(tr);
    session_free(s);
    return -ENOMEM;
  }
  free(tr);
  pd_time_rfc3339(s->created, sizeof s->created);
  memcpy(s->last_activity, s->created, sizeof s->created);
  int r;
  if (mkdir(s->dir, 0700) != 0) {
    r = -errno;
    session_free(s);
    return r;
  }
  char *prof = path_join(s->dir, "profiling");
  r = -ENOMEM;
  if (!prof) goto fail_dir;
  if (mkdir(prof, 0700) != 0) {
    r = -errno;
    goto fail_dir;
  }
  r = pd_transcript_create(s->transcript);
  if (r < 0) goto fail_dir;
  r = save_session_json(s);
  if (r < 0) goto fail_dir;
  r = pt_fsync_dir(st->sessions_dir);
  if (r < 0) goto fail_dir;
  free(prof);
  s->next = st->sessions;
  st->sessions = s;
  st->count++;
  pd_info("session %s created (\"%s\")", s->id, s->name);
  *out = s;
  return 0;
fail_dir:
  /* our own fresh directory: safe to remove */
  rm_rf(s->dir);
  free(prof);
  session_free(s);
  return r;
}

int pd_session_rename(pd_session *s, const char *name) {
  if (pd_session_name_ok(name) != 0) return -EINVAL;
  char *nn = strdup(name);
  if (!nn) return -ENOMEM;
  char *old = s->name;
  s->name = nn;
  int r = save_session_json(s);
  if (r < 0) {
    s->name = old;
    free(nn);
    return r;
  }
  free(old);
  pd_info("session %s renamed to \"%s\"", s->id, s->name);
  return 0;
}

int pd_session_touch(pd_session *s) {
  pd_time_rfc3339(s->last_activity, sizeof s->last_activity);
  return save_session_json(s);
}

int pd_sessions_delete(pd_sessions *st, pd_session *s) {
  char gone[PATH_MAX];
  snprintf(gone, sizeof gone, "%s/.deleted-%s", st->sessions_dir, s->id);
  if (rename(s->dir, gone) != 0) return -errno;
  (void)pt_fsync_dir(st->sessions_dir);
  int r = rm_rf(gone);
  if (r < 0) pd_warn("session %s: removing %s: %s", s->id, gone, strerror(-r));
  pd_session **pp = &st->sessions;
  while (*pp && *pp != s) pp = &(*pp)->next;
  if (*pp) *pp = s->next;
  st->count--;
  pd_info("session %s deleted", s->id);
  if (st->active == s) pd_sessions_set_active(st, NULL);
  session_free(s);
  return 0;
}

json_t *pd_session_json(const pd_session *s) {
  return json_pack("{s:s, s:s, s:s, s:s, s:i}", "id", s->id, "name", s->name, "created",
                   s->created, "last_activity", s->last_activity, "turns",
                   pd_transcript_turns(s->transcript));
}

static int cmp_newest(const void *a, const void *b) {
  const pd_session *x = *(pd_session *const *)a, *y = *(pd_session *const *)b;
  int c = strcmp(y->last_activity, x->last_activity);
  return c ? c : strcmp(x->id, y->id);
}

json_t *pd_sessions_list_json(pd_sessions *st) {
  pd_session **v = calloc(st->count + 1, sizeof *v);
  if (!v) return NULL;
  size_t n = 0;
  for (pd_session *s = st->sessions; s; s = s->next) v[n++] = s;
  qsort(v, n, sizeof *v, cmp_newest);
  json_t *arr = json_array(), *sk = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(arr, pd_session_json(v[i]));
  free(v);
  for (skipped *k = st->skipped; k; k = k->next)
    json_array_append_new(sk, json_pack("{s:s, s:s}", "id", k->id, "error", k->error));
  return json_pack("{s:o, s:o}", "sessions", arr, "skipped", sk);
}

pd_session *pd_sessions_active(pd_sessions *st) { return st->active; }

int pd_sessions_set_active(pd_sessions *st, pd_session *s) {
  char *path = path_join(st->home, "active_session");
  if (!path) return -ENOMEM;
  int r;
  if (s) {
    char line[PD_SESSION_ID_LEN + 2];
    snprintf(line, sizeof line, "%s\n", s->id);
    r = pt_write_atomic(path, line, strlen(line), 0600);
  } else {
    r = unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
    if (r == 0) (void)pt_fsync_dir(st->home);
  }
  free(path);
  if (r < 0) return r;
  if (st->active != s) {
    st->active = s;
    pd_info("active session: %s", s ? s->id : "(none)");
    fire_active(st, s ? s->dir : NULL);
  }
  return 0;
}
