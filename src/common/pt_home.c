/* pt_home.c - finding and preparing the state root. See pt_home.h. */
#include "common/pt_home.h"
#include "common/pt_file.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* err may be NULL (callers that only want the code) */
#define SETERR(...) \
  do { \
    if (err && errlen) snprintf(err, errlen, __VA_ARGS__); \
  } while (0)

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

int pt_home_resolve(const char *explicit_home, char **out, char *err, size_t errlen) {
  *out = NULL;
  if (err && errlen) err[0] = '\0';
  const char *base = NULL, *suffix = "", *from = "--home";
  if (explicit_home) {
    if (!*explicit_home) {
      SETERR("the state root given is empty");
      return -EINVAL;
    }
    base = explicit_home;
  } else if ((base = env("POLYTOKEN_HOME"))) {
    from = "POLYTOKEN_HOME";
  } else if ((base = env("XDG_STATE_HOME"))) {
    from = "XDG_STATE_HOME";
    suffix = "/polytoken";
  } else if ((base = env("HOME"))) {
    from = "HOME";
    suffix = "/.local/state/polytoken";
  } else {
    SETERR("cannot determine the state directory (set POLYTOKEN_HOME or HOME)");
    return -ENOENT;
  }
  size_t n = strlen(base) + strlen(suffix);
  if (n > PT_HOME_MAX) {
    SETERR("the state directory from %s is %zu bytes long, over the limit of %d",
           from, n, PT_HOME_MAX);
    return -ENAMETOOLONG;
  }
  char *p = malloc(n + 1);
  if (!p) {
    SETERR("out of memory");
    return -ENOMEM;
  }
  size_t bl = strlen(base);
  memcpy(p, base, bl);
  memcpy(p + bl, suffix, n - bl + 1); /* with the NUL */
  *out = p;
  return 0;
}

/* ---- the safety check ---- */

typedef struct {
  uid_t uid;         /* the caller's effective uid */
  const char *home;  /* as given, for messages */
  char *err;
  size_t errlen;
} home_check;

/* "uid 1001, bob" (the name when the user database knows it). */
static void owner_text(uid_t uid, char *buf, size_t n) {
  struct passwd pw, *res = NULL;
  char tmp[1024];
  if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &res) == 0 && res && res->pw_name)
    snprintf(buf, n, "uid %u, %s", (unsigned)uid, res->pw_name);
  else
    snprintf(buf, n, "uid %u", (unsigned)uid);
}

/* Judges the directory p (stat st) as an ancestor or as the root itself
 * (rules in pt_home.h). 0, or -EPERM / -ENOTDIR with the reason. */
static int judge(const home_check *k, const char *p, const struct stat *st, int is_root) {
  char *err = k->err;
  size_t errlen = k->errlen;
  if (!S_ISDIR(st->st_mode)) {
    SETERR("the state root %s is not usable: %s is not a directory", k->home, p);
    return -ENOTDIR;
  }
  int foreign = st->st_uid != k->uid && (is_root || st->st_uid != 0);
  int writable = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
  /* sticky: others may add entries but not rename or remove ours */
  int shielded = !is_root && (st->st_mode & S_ISVTX);
  if (!foreign && (!writable || shielded)) return 0;
  char owner[320] = "", wr[80] = "";
  if (foreign) {
    char who[280];
    owner_text(st->st_uid, who, sizeof who);
    snprintf(owner, sizeof owner, "owned by another user (%s)", who);
  }
  if (writable && !shielded)
    snprintf(wr, sizeof wr, "writable by %s (mode %04o)",
             (st->st_mode & S_IWOTH) ? "others" : "its group", (unsigned)(st->st_mode & 07777));
  SETERR("the state root %s is not safe: %s is %s%s%s; use a directory that nobody else can "
         "write to or replace (docs/daemon.md, \"State root\")",
         k->home, p, owner, owner[0] && wr[0] ? " and " : "", wr);
  return -EPERM;
}

static int stat_err(const home_check *k, const char *what, const char *p) {
  int e = errno;
  char *err = k->err;
  size_t errlen = k->errlen;
  SETERR("the state root %s cannot be checked: %s %s: %s", k->home, what, p, strerror(e));
  return -e;
}

/* Judges every directory of the real (resolved, absolute) path `real`,
 * from "/" down; the last one as the root when last_is_root. */
static int judge_real_chain(const home_check *k, const char *real, int last_is_root) {
  char buf[PATH_MAX];
  size_t n = strlen(real);
  if (n >= sizeof buf) return -ENAMETOOLONG;
  struct stat st;
  if (stat("/", &st) != 0) return stat_err(k, "stat", "/");
  int r = judge(k, "/", &st, last_is_root && n == 1);
  for (size_t i = 1; r == 0 && n > 1 && i <= n; i++) {
    if (i < n && real[i] != '/') continue;
    memcpy(buf, real, i);
    buf[i] = '\0';
    if (stat(buf, &st) != 0) return stat_err(k, "stat", buf);
    r = judge(k, buf, &st, last_is_root && i == n);
  }
  return r;
}

/* Checks the absolute path abs: for each prefix of it as written, its real
 * path and every directory above that. *missing = 1 when a prefix does
 * not exist (the check stops there: nothing below it exists). */
static int check_path(const home_check *k, const char *abs, int *missing) {
  char pre[PATH_MAX], real[PATH_MAX], prev[PATH_MAX] = "";
  size_t n = strlen(abs);
  *missing = 0;
  if (n >= sizeof pre) return -ENAMETOOLONG;
  struct stat st;
  if (stat("/", &st) != 0) return stat_err(k, "stat", "/");
  int r = judge(k, "/", &st, n == 1);
  if (r < 0 || n == 1) return r;
  snprintf(prev, sizeof prev, "/");
  for (size_t i = 1; i <= n; i++) {
    if (i < n && abs[i] != '/') continue;
    if (abs[i - 1] == '/') continue; /* "//" */
    memcpy(pre, abs, i);
    pre[i] = '\0';
    int last = 1;
    for (size_t j = i; j < n; j++)
      if (abs[j] != '/') { last = 0; break; }
    if (!realpath(pre, real)) {
      if (errno == ENOENT) {
        *missing = 1;
        return 0;
      }
      if (errno == ENOTDIR) {
        char *err = k->err;
        size_t errlen = k->errlen;
        SETERR("the state root %s is not usable: a component of %s is not a directory",
               k->home, pre);
        return -ENOTDIR;
      }
      return stat_err(k, "realpath", pre);
    }
    /* No link and no "." or "..": the new component is all there is to
     * judge (its parents were judged as the previous prefix). */
    const char *comp = strrchr(pre, '/') + 1;
    size_t pl = strlen(prev);
    int plain = strncmp(real, prev, pl) == 0 &&
                (pl == 1 ? real[1] != '\0' && strcmp(real + 1, comp) == 0
                         : real[pl] == '/' && strcmp(real + pl + 1, comp) == 0);
    if (plain) {
      if (stat(real, &st) != 0) return stat_err(k, "stat", real);
      r = judge(k, real, &st, last);
    } else {
      r = judge_real_chain(k, real, last);
    }
    if (r < 0) return r;
    snprintf(prev, sizeof prev, "%s", real);
    if (last) break;
  }
  return 0;
}

int pt_home_prepare(const char *home, unsigned flags, mode_t *was_mode, char *err, size_t errlen) {
  if (was_mode) *was_mode = (mode_t)-1;
  if (err && errlen) err[0] = '\0';
  home_check k = {geteuid(), home, err, errlen};
  char abs[PATH_MAX];
  if (home[0] == '/') {
    if (snprintf(abs, sizeof abs, "%s", home) >= (int)sizeof abs) {
      SETERR("the state root %s is too long", home);
      return -ENAMETOOLONG;
    }
  } else {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return stat_err(&k, "getcwd for", home);
    if (snprintf(abs, sizeof abs, "%s/%s", cwd, home) >= (int)sizeof abs) {
      SETERR("the state root %s is too long once made absolute", home);
      return -ENAMETOOLONG;
    }
  }
  int missing = 0;
  int r = check_path(&k, abs, &missing);
  if (r < 0) return r;
  if (missing) {
    if (!(flags & PT_HOME_CREATE)) {
      SETERR("the state root %s does not exist", home);
      return -ENOENT;
    }
    r = pt_mkdir_p(abs, 0700);
    if (r < 0) {
      SETERR("cannot create the state root %s: %s", home, strerror(-r));
      return r;
    }
    /* what we created, and anything someone slipped in meanwhile */
    r = check_path(&k, abs, &missing);
    if (r < 0) return r;
    if (missing) {
      SETERR("the state root %s vanished while it was created", home);
      return -ENOENT;
    }
  }
  struct stat st;
  if (stat(abs, &st) != 0) return stat_err(&k, "stat", home);
  if ((flags & PT_HOME_TIGHTEN) && (st.st_mode & 077)) {
    /* ours, writable by nobody else (checked): only read or search bits */
    if (chmod(abs, 0700) != 0) {
      r = -errno;
      SETERR("cannot make %s private (chmod 0700): %s", home, strerror(-r));
      return r;
    }
    if (was_mode) *was_mode = st.st_mode & 07777;
  }
  return 0;
}
