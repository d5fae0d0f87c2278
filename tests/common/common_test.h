/* common_test.h - small helpers shared by the unit tests of src/common. */
#ifndef COMMON_TEST_H
#define COMMON_TEST_H

#include "pt_test.h"

/* "a/b", malloc'd (the test aborts on out of memory). */
static inline char *ptt_path2(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  PT_ASSERT(p);
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

/* Runs argv; the test fails unless it exits 0. */
static inline void ptt_run_ok(char *const argv[]) {
  char *out = NULL;
  int st = pt_run(argv, &out, 30000);
  PT_ASSERT_MSG(st == 0, "%s failed (%d): %s", argv[0], st, out ? out : "");
  free(out);
}

/* Writes a profile with tests/mkprofile.py: path, then its arguments
 * (FUNC=COUNT..., --duration-ms N), NULL-terminated. */
#define ptt_mkprofile(path, ...)                                                   \
  do {                                                                             \
    char *script_ = pt_source_path("tests/mkprofile.py");                          \
    char *argv_[] = {"python3", script_, (char *)(path), __VA_ARGS__, NULL};       \
    ptt_run_ok(argv_);                                                             \
    free(script_);                                                                 \
  } while (0)

#endif
