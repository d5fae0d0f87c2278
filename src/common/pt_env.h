/*
 * pt_env.h - reading numeric settings from the environment (POLYTOKEN_*)
 * the same way in every program: the one parser of integer settings in the
 * application code (daemon, TUI/CLI, common). Strict: a value is the whole
 * string, or it is rejected with a message and the default applies.
 *
 * The libraries (src/prof, src/console) do not include this file: they take
 * their settings through their options structs (CONTRIBUTING.md, layering).
 *
 * Header-only; no allocation; any thread (getenv is not synchronised with
 * setenv: call these before starting threads that change the environment).
 */
#ifndef PT_ENV_H
#define PT_ENV_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Parses s as a decimal integer in [min, max]: an optional sign, then
 * digits, nothing else (no spaces, no "10abc", no "0x10", no "1e3").
 * Returns 0 and *out, -EINVAL (not such an integer; also s NULL or empty)
 * or -ERANGE (outside [min, max] or outside long long); *out is untouched
 * on error. */
static inline int pt_parse_int(const char *s, long long min, long long max, long long *out) {
  if (!s) return -EINVAL;
  const char *d = (*s == '-' || *s == '+') ? s + 1 : s;
  if (*d < '0' || *d > '9') return -EINVAL; /* strtoll would skip spaces */
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!end || *end) return -EINVAL;
  if (errno == ERANGE || v < min || v > max) return -ERANGE;
  *out = v;
  return 0;
}

/* Returns the environment variable `name` as an integer in [min, max], or
 * def when it is unset or empty. When it is set but malformed or out of
 * range, returns def and writes a one-line explanation into err (if
 * errlen > 0; the caller logs it); otherwise err is set to "". */
static inline long long pt_env_int(const char *name, long long def, long long min, long long max,
                                   char *err, size_t errlen) {
  if (errlen) err[0] = 0;
  const char *s = getenv(name);
  if (!s || !*s) return def;
  long long v;
  if (pt_parse_int(s, min, max, &v) < 0) {
    if (errlen)
      snprintf(err, errlen, "ignoring %s=%s (expected an integer from %lld to %lld)", name, s, min,
               max);
    return def;
  }
  return v;
}

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
