/* pt_home.c - finding and preparing the state root. See pt_home.h. */
#include "common/pt_home.h"
#include "common/pt_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

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
      seterr(err, errlen, "the state root given is empty");
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
    seterr(err, errlen, "cannot determine the state directory (set POLYTOKEN_HOME or HOME)");
    return -ENOENT;
  }
  size_t n = strlen(base) + strlen(suffix);
  if (n > PT_HOME_MAX) {
    seterr(err, errlen, "the state directory from %s is %zu bytes long, over the limit of %d",
           from, n, PT_HOME_MAX);
    return -ENAMETOOLONG;
  }
  char *p = malloc(n + 1);
  if (!p) {
    seterr(err, errlen, "out of memory");
    return -ENOMEM;
  }
  snprintf(p, n + 1, "%s%s", base, suffix);
  *out = p;
  return 0;
}

int pt_home_prepare(const char *home, mode_t *was_mode, char *err, size_t errlen) {
  if (was_mode) *was_mode = (mode_t)-1;
  int r = pt_mkdir_p(home, 0700);
  if (r < 0) {
    seterr(err, errlen, "cannot create %s: %s", home, strerror(-r));
    return r;
  }
  struct stat st;
  if (stat(home, &st) != 0) {
    r = -errno;
    seterr(err, errlen, "cannot stat %s: %s", home, strerror(errno));
    return r;
  }
  if (!S_ISDIR(st.st_mode)) {
    seterr(err, errlen, "%s is not a directory", home);
    return -ENOTDIR;
  }
  if (st.st_uid == geteuid() && (st.st_mode & 077)) {
    if (chmod(home, 0700) != 0) {
      r = -errno;
      seterr(err, errlen, "cannot make %s private (chmod 0700): %s", home, strerror(errno));
      return r;
    }
    if (was_mode) *was_mode = st.st_mode & 07777;
  }
  return 0;
}
