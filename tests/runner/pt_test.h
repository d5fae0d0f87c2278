/*
 * pt_test.h - the project's unit-test harness (libuv style).
 *
 * One binary (`unit-tests`) holds every test. Each test registers itself from
 * a constructor, so a test file needs no central list: add the file to
 * `unit_test_srcs` in its tests/<area>/meson.build and it is in the binary.
 *
 *   PT_TEST(name) { ... }                 default timeout (30 s)
 *   PT_TEST_T(name, timeout_ms) { ... }   own timeout
 *
 * The runner forks a child per test, so a test may crash, leak fds or call
 * exit(); an assertion failure prints `file:line: message` on stderr and
 * exits the child with status 1. PT_SKIP(reason) exits with 77.
 *
 * Runner usage: unit-tests [--list] [--no-fork] [--filter SUBSTR] [NAME...]
 */
#ifndef PT_TEST_H
#define PT_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>

typedef void (*pt_test_fn)(void);

void pt_test_register(const char *name, const char *file, pt_test_fn fn, int timeout_ms);
_Noreturn void pt_test_fail(const char *file, int line, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));
_Noreturn void pt_test_skip(const char *reason);

#define PT_TEST_T(name, timeout_ms)                                        \
  static void pt_test_##name(void);                                        \
  __attribute__((constructor)) static void pt_test_reg_##name(void) {      \
    pt_test_register(#name, __FILE__, pt_test_##name, (timeout_ms));       \
  }                                                                        \
  static void pt_test_##name(void)

#define PT_TEST(name) PT_TEST_T(name, 30000)

#define PT_ASSERT(cond)                                                    \
  do { if (!(cond)) pt_test_fail(__FILE__, __LINE__, "assertion failed: %s", #cond); } while (0)

#define PT_ASSERT_MSG(cond, ...)                                           \
  do { if (!(cond)) pt_test_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)

#define PT_ASSERT_INT_EQ(a, b)                                             \
  do { long long pt_a_ = (long long)(a), pt_b_ = (long long)(b);           \
    if (pt_a_ != pt_b_) pt_test_fail(__FILE__, __LINE__,                   \
      "%s == %s: %lld != %lld", #a, #b, pt_a_, pt_b_); } while (0)

#define PT_ASSERT_UINT_EQ(a, b)                                            \
  do { unsigned long long pt_a_ = (unsigned long long)(a),                 \
                          pt_b_ = (unsigned long long)(b);                 \
    if (pt_a_ != pt_b_) pt_test_fail(__FILE__, __LINE__,                   \
      "%s == %s: %llu != %llu", #a, #b, pt_a_, pt_b_); } while (0)

#define PT_ASSERT_STR_EQ(a, b)                                             \
  do { const char *pt_a_ = (a), *pt_b_ = (b);                              \
    if (!pt_a_ || !pt_b_ || strcmp(pt_a_, pt_b_) != 0)                     \
      pt_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"",       \
        #a, #b, pt_a_ ? pt_a_ : "(null)", pt_b_ ? pt_b_ : "(null)"); } while (0)

#define PT_ASSERT_MEM_EQ(a, b, n)                                          \
  do { if (memcmp((a), (b), (n)) != 0)                                     \
      pt_test_fail(__FILE__, __LINE__, "memory differs: %s vs %s (%zu bytes)", \
        #a, #b, (size_t)(n)); } while (0)

#define PT_SKIP(reason) pt_test_skip(reason)

/* ---- helpers for tests (pt_testutil.c) ---- */

/* Creates a fresh directory below $TMPDIR (or /tmp) and returns its path
 * (static storage per call site is NOT used: caller frees). Aborts the test
 * on failure. The directory is removed by pt_rm_rf. */
char *pt_tmpdir(const char *tag);
/* rm -rf PATH (best effort). */
void pt_rm_rf(const char *path);
/* Runs argv (argv[0] looked up in PATH), stdin from /dev/null, captures
 * stdout+stderr into a malloc'd NUL-terminated string (*out, may be NULL if
 * not wanted). Returns the exit status (0-255), 128+signal if killed, or -1
 * if it could not run. Kills the child after timeout_ms. */
int pt_run(char *const argv[], char **out, int timeout_ms);
/* Reads a whole file into a malloc'd buffer (NUL-terminated); NULL on error. */
char *pt_read_file(const char *path, size_t *len);
/* Writes a file (creating/truncating); aborts the test on failure. */
void pt_write_file(const char *path, const void *data, size_t len);
/* Path inside the build tree / source tree (malloc'd). */
char *pt_build_path(const char *rel);
char *pt_source_path(const char *rel);
/* Monotonic milliseconds. */
int64_t pt_now_ms(void);

#endif
