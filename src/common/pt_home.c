/* pt_home.c - finding and preparing the state root. See pt_home.h. */
#include "common/pt_home.h"
#include "common/pt_file.h"

#include <errno.h>
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

int pt_home_prepare(const char *home, mode_t *was_mode, char *err, size_t errlen) {
  if (was_mode) *was_mode = (mode_t)-1;
  int r = pt_mkdir_p(home, 0700);
  if (r < 0) {
    SETERR("cannot create %s: %s", home, strerror(-r));
    return r;
  }
  struct stat st;
  if (stat(home, &st) != 0) {
    r = -errno;
    SETERR("cannot stat %s: %s", home, strerror(errno));
    return r;
  }
  if (!S_ISDIR(st.st_mode)) {
    SETERR("%s is not a directory", home);
    return -ENOTDIR;
  }
  if (st.st_uid == geteuid() && (st.st_mode & 077)) {
    if (chmod(home, 0700) != 0) {
      r = -errno;
      SETERR("cannot make %s private (chmod 0700): %s", home, strerror(errno));
      return r;
    }
    if (was_mode) *was_mode = st.st_mode & 07777;
  }
  return 0;
}
