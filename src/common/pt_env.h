/*
 * pt_env.h - reading numeric knobs from the environment
 * (POLYTOKEN_PROFILE_HZ and friends) the same way in every program.
 * Header-only; no allocation; any thread (getenv is not synchronised with
 * setenv: call it before starting threads that change the environment).
 */
#ifndef PT_ENV_H
#define PT_ENV_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Returns the value of the environment variable `name` as a number in
 * [min, max] (decimals allowed), or def when it is unset or empty. When it
 * is set but malformed or out of range, returns def and writes a one-line
 * explanation into err (if errlen > 0); otherwise err is set to "". */
static inline double pt_env_number(const char *name, double def, double min, double max,
                                   char *err, size_t errlen) {
  if (errlen) err[0] = 0;
  const char *s = getenv(name);
  if (!s || !*s) return def;
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || !end || *end || !(v >= min && v <= max)) {
    if (errlen)
      snprintf(err, errlen, "ignoring %s=%s (expected a number from %g to %g)", name, s, min, max);
    return def;
  }
  return v;
}

#endif
