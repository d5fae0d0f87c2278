/*
 * ptp_alloc.h - the library's allocation calls, and the test-only fault
 * injection behind them (the nghttp2/curl tradition: fail the Nth
 * allocation in turn, N = 1, 2, ..., and check that nothing crashes,
 * leaks, or is written half).
 *
 * Every allocation of src/prof goes through ptp_malloc, ptp_calloc,
 * ptp_realloc, ptp_strdup, ptp_strndup, ptp_asprintf or ptp_vasprintf
 * (signal/ allocates nothing at all); memory is freed with free(). zlib
 * allocates through them too (ptp_gzip.c's zalloc); libdw and libelf
 * allocate on their own and are not covered (libdw's own out-of-memory
 * handler ends the process).
 *
 * In a normal build the wrappers are libc's functions. In a build
 * configured with -Dfault_injection=true (the test variants dev, profile,
 * asan and tsan of scripts/build.sh; meson refuses it for a release
 * build) each first asks ptp_alloc_should_fail(), and a test may make one
 * allocation of the calling thread fail:
 *   ptp_alloc_fail_at(n)  count this thread's allocations from now on and
 *                         fail the nth (n >= 1); 0 stops counting;
 *   ptp_alloc_count()     allocations counted since;
 *   ptp_alloc_failed()    whether the nth came (and failed);
 *   ptp_alloc_fail_all(1) every allocation of every thread fails until
 *                         ptp_alloc_fail_all(0) (for a path another
 *                         thread may run, e.g. the consumer's drain).
 * The per-thread state is thread-local: allocations of other threads (the sampler's
 * consumer thread, a console) are neither counted nor failed, so an
 * operation run on the test's thread sees the same sequence every time.
 * The loop of a test: for n = 1, 2, ...: arm n, run the operation, check
 * it failed cleanly (an error, no partial file) or succeeded; stop at the
 * first n the operation did not reach (ptp_alloc_failed() == 0). Leaks are
 * found by LeakSanitizer in the asan variant (tests/prof/fault_fixture.h).
 *
 * Threads: any; the wrappers are as thread-safe as libc's. Never from a
 * signal handler.
 */
#ifndef PTP_ALLOC_H
#define PTP_ALLOC_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The build's configuration (PT_FAULT_INJECTION). A file compiled alone,
 * outside meson (a fuzz harness without the build directory on its
 * include path), has none: then no injection. */
#if __has_include("pt_config.h")
#include "pt_config.h"
#endif
#ifndef PT_FAULT_INJECTION
#define PT_FAULT_INJECTION 0
#endif

#if PT_FAULT_INJECTION
int ptp_alloc_should_fail(void);
void ptp_alloc_fail_at(uint64_t n);
uint64_t ptp_alloc_count(void);
int ptp_alloc_failed(void);
void ptp_alloc_fail_all(int on);
#define PTP_ALLOC_FAIL_NOW() ptp_alloc_should_fail()
#else
#define PTP_ALLOC_FAIL_NOW() 0
#endif

static inline void *ptp_malloc(size_t n) {
  return PTP_ALLOC_FAIL_NOW() ? NULL : malloc(n);
}

static inline void *ptp_calloc(size_t n, size_t size) {
  return PTP_ALLOC_FAIL_NOW() ? NULL : calloc(n, size);
}

/* On failure p is left as it was (realloc's contract). */
static inline void *ptp_realloc(void *p, size_t n) {
  return PTP_ALLOC_FAIL_NOW() ? NULL : realloc(p, n);
}

static inline char *ptp_strdup(const char *s) {
  return PTP_ALLOC_FAIL_NOW() ? NULL : strdup(s);
}

static inline char *ptp_strndup(const char *s, size_t n) {
  return PTP_ALLOC_FAIL_NOW() ? NULL : strndup(s, n);
}

/* -1 (and *out unspecified, as vasprintf) when out of memory. */
static inline int ptp_vasprintf(char **out, const char *fmt, va_list ap) {
  if (PTP_ALLOC_FAIL_NOW()) return -1;
  return vasprintf(out, fmt, ap);
}

static inline int ptp_asprintf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int ptp_asprintf(char **out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = ptp_vasprintf(out, fmt, ap);
  va_end(ap);
  return r;
}

#endif
