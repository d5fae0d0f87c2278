/* pd_sessions.c - the daemon's session store. See pd_sessions.h. */
#include "pt_config.h"
#include "daemon/pd_sessions.h"
#include "daemon/pd_log.h"
#include "daemon/pd_writer.h"
#include "common/pt_file.h"
#include "common/pt_jsonl.h"
#include "common/pt_quarantine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SESSION_JSON_MAX ((size_t)64 << 10)
/* session.json touches wait this long on the writer, so a turn's two (its
 * start and its end) make one write; a crash loses at most this much of
 * last_activity, never the file. */
#define PD_SESSIONS_TOUCH_DELAY_MS 1000

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
  pd_sessions_repair repair; /* what pd_sessions_open repaired */
  pd_writer *writer;         /* session.json rewrites off the loop (NULL: at once) */
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

/* s's session.json text, with a trailing newline (friendlier to humans
 * and tools), malloc'd; NULL when out of memory. */
static char *session_json_text(const pd_session *s, size_t *len) {
  json_t *j = json_pack("{s:s, s:s, s:s}", "name", s->name, "created", s->created,
                        "last_activity", s->last_activity);
  if (!j) return NULL;
  char *txt = json_dumps(j, JSON_INDENT(2));
  json_decref(j);
  if (!txt) return NULL;
  size_t n = strlen(txt);
  char *buf = malloc(n + 2);
  if (buf) {
    memcpy(buf, txt, n);
    buf[n] = '\n';
    buf[n + 1] = 0;
    *len = n + 1;
  }
  free(txt);
  return buf;
}

/* Writes s's session.json into dir (its own directory, or the temporary
 * one a new session is built in), at once; with `writer`, queued there. */
static int save_session_json_via(const pd_session *s, const char *dir, pd_writer *writer) {
  size_t n = 0;
  char *buf = session_json_text(s, &n);
  char *path = path_join(dir, "session.json");
  int r = -ENOMEM;
  if (buf && path)
    r = writer ? pd_writer_put(writer, path, buf, n, 0600) : pt_write_atomic(path, buf, n, 0600);
  free(buf);
  free(path);
  return r;
}

static int save_session_json_in(const pd_session *s, const char *dir) {
  return save_session_json_via(s, dir, NULL);
}

static int save_session_json(const pd_session *s) { return save_session_json_in(s, s->dir); }

/* session.json and transcript.jsonl of one session directory, read and
 * checked. */
typedef struct {
  json_t *j; /* owns the strings below */
  const char *name, *created, *last;
  int max_turn;
} session_files;

/* Reads and checks dir's session.json and transcript.jsonl (a missing
 * transcript is an empty one). 0 with *sf filled (json_decref(sf->j)
 * after); -ENOMEM; or another negative code with the reason in err
 * ("session.json: ...", "transcript.jsonl: ..."). */
static int read_session_files(const char *dir, session_files *sf, char *err, size_t errlen) {
  memset(sf, 0, sizeof *sf);
  char *sj = path_join(dir, "session.json"), *tj = path_join(dir, "transcript.jsonl");
  char *data = NULL;
  size_t len = 0;
  int r = -ENOMEM;
  if (!sj || !tj) goto out;
  r = pt_read_all(sj, SESSION_JSON_MAX, &data, &len);
  if (r < 0) {
    if (r != -ENOMEM) snprintf(err, errlen, "session.json: %s", strerror(-r));
    goto out;
  }
  json_error_t je;
  sf->j = json_loadb(data, len, 0, &je);
  r = -EBADMSG;
  if (!sf->j) {
    snprintf(err, errlen, "session.json: invalid JSON at line %d: %s", je.line, je.text);
    goto out;
  }
  if (json_unpack(sf->j, "{s:s, s:s, s:s}", "name", &sf->name, "created", &sf->created,
                  "last_activity", &sf->last) != 0) {
    snprintf(err, errlen, "session.json: missing or non-string name/created/last_activity");
    goto out;
  }
  if (pd_session_name_ok(sf->name) != 0 || !is_rfc3339(sf->created) || !is_rfc3339(sf->last)) {
    snprintf(err, errlen, "session.json: bad name or timestamp");
    goto out;
  }
  struct stat tst;
  if (stat(tj, &tst) == 0) {
    char terr[256];
    r = pd_transcript_read(tj, NULL, &sf->max_turn, terr, sizeof terr);
    if (r < 0) {
      snprintf(err, errlen, "transcript.jsonl: %s", terr);
      goto out;
    }
  } else if (errno != ENOENT) {
    r = -errno;
    snprintf(err, errlen, "transcript.jsonl: %s", strerror(errno));
    goto out;
  }
  r = 0;
out:
  if (r < 0) {
    json_decref(sf->j);
    memset(sf, 0, sizeof *sf);
  }
  free(data);
  free(sj);
  free(tj);
  return r;
}

/* Loads one session directory; on damage records it as skipped. */
static int load_session(pd_sessions *st, const char *id) {
  char err[400];
  char *dir = path_join(st->sessions_dir, id);
  char *tj = dir ? path_join(dir, "transcript.jsonl") : NULL;
  session_files sf = {0};
  pd_session *s = NULL;
  int r = -ENOMEM;
  if (!dir || !tj) goto out;
  r = read_session_files(dir, &sf, err, sizeof err);
  if (r == -ENOMEM) goto out;
  if (r < 0) {
    r = add_skipped(st, id, err);
    goto out;
  }
  r = -ENOMEM;
  s = calloc(1, sizeof *s);
  if (!s) goto out;
  snprintf(s->id, sizeof s->id, "%s", id);
  s->name = strdup(sf.name);
  snprintf(s->created, sizeof s->created, "%s", sf.created);
  snprintf(s->last_activity, sizeof s->last_activity, "%s", sf.last);
  s->dir = dir;
  s->writer = st->writer;
  dir = NULL;
  if (!s->name || pd_transcript_new(tj, sf.max_turn, &s->transcript) < 0) goto out;
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
  json_decref(sf.j);
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

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return remove(path) == 0 ? 0 : -1;
}

static int rm_rf(const char *path) {
  return nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -errno;
}

/* ---- repair at start ----
 *
 * What a killed daemon can leave in sessions/ (a new session is built in
 * .create-<id>/ and renamed into place; a deleted one is renamed to
 * .deleted-<id>/ and then removed), and what an older daemon, which built
 * sessions in place, left:
 *   .create-<id>/  complete (valid session.json and transcript, the id
 *                  free): renamed into place, i.e. the creation is
 *                  finished; else moved to quarantine/sessions/.
 *   .deleted-<id>/ the user asked for its deletion: removed.
 *   <id>/          with no session.json and nothing but an empty
 *                  transcript, an empty profiling/ and a session.json
 *                  temporary: the creation never finished, no turn was
 *                  ever saved; moved to quarantine/sessions/. A session
 *                  with anything more stays where it is and is skipped
 *                  as damaged (the user's data, never moved).
 * Nothing is deleted but what the user deleted. */

#define CREATE_PREFIX ".create-"
#define DELETED_PREFIX ".deleted-"

/* 1 when the session directory `name` (in sfd) is what an unfinished
 * creation of an older daemon leaves (see above). */
static int unfinished_in_place(int sfd, const char *name) {
  struct stat st;
  int dfd = pt_open_beneath(sfd, name, O_RDONLY | O_DIRECTORY);
  if (dfd < 0) return 0;
  if (fstatat(dfd, "session.json", &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
    close(dfd);
    return 0;
  }
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return 0;
  }
  int ok = 1;
  struct dirent *de;
  while (ok && (de = readdir(d)) != NULL) {
    const char *n = de->d_name;
    if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
    if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0) ok = 0;
    else if (!strcmp(n, "transcript.jsonl")) ok = S_ISREG(st.st_mode) && st.st_size == 0;
    else if (!strncmp(n, ".session.json.tmp.", 18)) ok = S_ISREG(st.st_mode);
    else if (!strcmp(n, "profiling")) {
      ok = 0;
      int pfd = S_ISDIR(st.st_mode) ? pt_open_beneath(dirfd(d), n, O_RDONLY | O_DIRECTORY) : -1;
      DIR *pd = pfd >= 0 ? fdopendir(pfd) : NULL;
      if (!pd && pfd >= 0) close(pfd);
      if (pd) {
        ok = 1;
        struct dirent *pe;
        while ((pe = readdir(pd)) != NULL)
          if (strcmp(pe->d_name, ".") && strcmp(pe->d_name, "..")) ok = 0;
        closedir(pd);
      }
    } else {
      ok = 0;
    }
  }
  closedir(d);
  return ok;
}

static void quarantine(pd_sessions *st, int homefd, int sfd, const char *name, const char *why) {
  char as[NAME_MAX + 1];
  int r = pt_quarantine_move(homefd, "sessions", sfd, name, as, sizeof as);
  if (r == 0) {
    st->repair.quarantined++;
  } else {
    st->repair.failed++;
    pd_warn("sessions: cannot move %s (%s) to quarantine/sessions: %s; left where it is", name, why,
            strerror(-r));
  }
}

/* One entry of sessions/ (see above). */
static void repair_entry(pd_sessions *st, int homefd, int sfd, const char *name) {
  struct stat lst;
  if (fstatat(sfd, name, &lst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(lst.st_mode)) return;
  if (!strncmp(name, DELETED_PREFIX, strlen(DELETED_PREFIX))) {
    char *p = path_join(st->sessions_dir, name);
    int r = p ? rm_rf(p) : -ENOMEM;
    free(p);
    if (r == 0) st->repair.deletions_finished++;
    else {
      st->repair.failed++;
      pd_warn("sessions: cannot finish removing %s: %s", name, strerror(-r));
    }
    return;
  }
  if (!strncmp(name, CREATE_PREFIX, strlen(CREATE_PREFIX))) {
    const char *id = name + strlen(CREATE_PREFIX);
    char *dir = path_join(st->sessions_dir, name);
    char err[400];
    session_files sf;
    int r = !dir ? -ENOMEM : !is_session_id(id) ? -EINVAL : read_session_files(dir, &sf, err, sizeof err);
    free(dir);
    if (r == 0) {
      json_decref(sf.j);
      r = pt_rename_noreplace(sfd, name, sfd, id);
      if (r == 0) {
        (void)fsync(sfd);
        st->repair.completed++;
        return;
      }
    }
    if (r == -ENOMEM) {
      st->repair.failed++;
      return;
    }
    quarantine(st, homefd, sfd, name, "an unfinished session creation");
    return;
  }
  if (is_session_id(name) && unfinished_in_place(sfd, name))
    quarantine(st, homefd, sfd, name, "a session whose creation never finished");
}

static void repair(pd_sessions *st, int homefd, int sfd) {
  /* names first: the directory changes under the walk */
  int dfd = dup(sfd);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d) {
    if (dfd >= 0) close(dfd);
    return;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    if (strncmp(nm, CREATE_PREFIX, strlen(CREATE_PREFIX)) &&
        strncmp(nm, DELETED_PREFIX, strlen(DELETED_PREFIX)) && !is_session_id(nm))
      continue;
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 16;
      char **nn = realloc(names, nc * sizeof *nn);
      if (!nn) break;
      names = nn;
      cap = nc;
    }
    if (!(names[n] = strdup(nm))) break;
    n++;
  }
  closedir(d);
  for (size_t i = 0; i < n; i++) {
    repair_entry(st, homefd, sfd, names[i]);
    free(names[i]);
  }
  free(names);
}

const pd_sessions_repair *pd_sessions_repaired(const pd_sessions *st) { return &st->repair; }

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
  /* without a writer thread, touches write at once (slower, same files) */
  int wr = pd_writer_new(PD_SESSIONS_TOUCH_DELAY_MS, &st->writer);
  if (wr < 0) pd_warn("store: no writer thread (%s): session.json written on the loop", strerror(-wr));
  int homefd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int sfd = homefd >= 0 ? pt_open_beneath(homefd, "sessions", O_RDONLY | O_DIRECTORY) : -errno;
  if (sfd < 0) {
    r = sfd;
    if (homefd >= 0) close(homefd);
    goto fail;
  }
  repair(st, homefd, sfd);
  close(sfd);
  close(homefd);
  DIR *d = opendir(st->sessions_dir);
  if (!d) {
    r = -errno;
    goto fail;
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue; /* ., .., .create-*, .deleted-* */
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
  pd_writer_del(st->writer);   /* everything queued written first */
  st->writer = NULL;
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

/* Test builds only (-Dfault_injection=true; a release daemon contains
 * neither this code nor the variable's name):
 * POLYTOKEN_FAULT_SESSION_CREATE=<step> stops the daemon (SIGSTOP) right
 * after that step of pd_sessions_create, so a test can kill -9 it at that
 * exact point (tests/daemon/crash_repair_test.sh). Steps: dir,
 * transcript, json, rename. */
#if PT_FAULT_INJECTION
static void create_fault(const char *step) {
  const char *v = getenv("POLYTOKEN_FAULT_SESSION_CREATE");
  if (!v || strcmp(v, step) != 0) return;
  pd_warn("fault injection: sessions.create stops after step %s", step);
  raise(SIGSTOP);
}
#else
static void create_fault(const char *step) { (void)step; }
#endif

/* mkdir, then exactly `mode` whatever the umask. */
static int mkdir_exact(const char *path, mode_t mode) {
  if (mkdir(path, mode) != 0) return -errno;
  return chmod(path, mode) == 0 ? 0 : -errno;
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
  s->writer = st->writer;
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
  /* Built complete in sessions/.create-<id>/ (files and directory
   * fsync'd), then renamed into place and sessions/ fsync'd: a crash
   * leaves either no session or a whole one under its id, and a leftover
   * temporary is finished or quarantined at the next start (repair). */
  char tmpname[sizeof CREATE_PREFIX + PD_SESSION_ID_LEN];
  snprintf(tmpname, sizeof tmpname, CREATE_PREFIX "%s", id);
  char *tmp = path_join(st->sessions_dir, tmpname);
  char *tmp_prof = tmp ? path_join(tmp, "profiling") : NULL;
  char *tmp_tr = tmp ? path_join(tmp, "transcript.jsonl") : NULL;
  int r = -ENOMEM, made = 0, placed = 0;
  if (!tmp || !tmp_prof || !tmp_tr) goto fail;
  r = mkdir_exact(tmp, 0700);
  if (r < 0) goto fail;
  made = 1;
  create_fault("dir");
  if ((r = mkdir_exact(tmp_prof, 0700)) < 0 || (r = pd_transcript_create(tmp_tr)) < 0) goto fail;
  create_fault("transcript");
  if ((r = save_session_json_in(s, tmp)) < 0) goto fail;
  create_fault("json");
  if ((r = pt_fsync_dir(tmp)) < 0) goto fail;
  if ((r = pt_rename_noreplace(AT_FDCWD, tmp, AT_FDCWD, s->dir)) < 0) goto fail;
  placed = 1;
  create_fault("rename");
  if ((r = pt_fsync_dir(st->sessions_dir)) < 0) goto fail;
  free(tmp);
  free(tmp_prof);
  free(tmp_tr);
  s->next = st->sessions;
  st->sessions = s;
  st->count++;
  pd_info("session %s created (\"%s\")", s->id, s->name);
  *out = s;
  return 0;
fail:
  /* our own fresh directory, never reported to anyone: safe to remove */
  if (made) rm_rf(placed ? s->dir : tmp);
  free(tmp);
  free(tmp_prof);
  free(tmp_tr);
  session_free(s);
  return r;
}

int pd_session_rename(pd_session *s, const char *name) {
  if (pd_session_name_ok(name) != 0) return -EINVAL;
  char *nn = strdup(name);
  if (!nn) return -ENOMEM;
  char *old = s->name;
  s->name = nn;
  /* written at once (the caller reports a failure), after any queued
   * touch, whose older text would otherwise land on top of it */
  if (s->writer) pd_writer_flush(s->writer);
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
  return save_session_json_via(s, s->dir, s->writer);
}

void pd_sessions_flush(pd_sessions *st) {
  if (st->writer) pd_writer_flush(st->writer);
}

int pd_sessions_delete(pd_sessions *st, pd_session *s) {
  /* a queued session.json of this session would land in a directory
   * being removed (or fail): written first */
  pd_sessions_flush(st);
  char gone[PATH_MAX];
  snprintf(gone, sizeof gone, "%s/" DELETED_PREFIX "%s", st->sessions_dir, s->id);
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
