/*
 * pt_alloc.h - the allocator of src/common's parsers of outside input, with
 * a test-only way to make the Nth allocation fail.
 *
 * The units that parse bytes from outside (the pprof reader, gunzip, the
 * pprof summary, the IPC line framer, base64, the artifact fetch) allocate
 * through pt_malloc / pt_calloc / pt_realloc and free with plain free().
 *
 * In normal and release builds these are inline calls of malloc, calloc and
 * realloc: no state, no symbol, no cost. In builds configured with
 * -Dfault_injection=true (the test variants dev, profile, asan and tsan of
 * scripts/build.sh; never release, which meson refuses) they are functions
 * that count allocations and can be told to fail one, so a test can check
 * every allocation-failure path of a parser in turn (nghttp2/curl style):
 *
 *   for (unsigned long n = 1;; n++) {
 *     pt_alloc_fail_at(n);          // the nth allocation from here fails
 *     int r = parse(...);
 *     int hit = pt_alloc_fail_at(0); // disarm; 1 if the failure happened
 *     if (!hit) { assert r == 0; break; }   // ran to the end: done
 *     assert r == -ENOMEM (a clear error), nothing leaked (ASan)
 *   }
 *
 * (tests/common/alloc_fail.h wraps that loop.) The countdown is per thread:
 * only allocations of the thread that armed it count, so a helper thread of
 * the test (a fake daemon) is never hit.
 *
 * The library (src/prof, src/console) cannot include src/common (layering)
 * and has its own way (see its tests).
 */
#ifndef PT_ALLOC_H
#define PT_ALLOC_H

#include <stddef.h>
#include <stdlib.h>

#include "pt_config.h"

#if PT_FAULT_INJECTION
void *pt_malloc(size_t n);
void *pt_calloc(size_t n, size_t size);
void *pt_realloc(void *p, size_t n);

/* Test builds only. n > 0: the nth allocation through pt_malloc, pt_calloc
 * or pt_realloc made by this thread from now on fails (returns NULL; a
 * failed pt_realloc leaves p untouched), and the countdown is then off
 * again. n == 0: disarms. Returns 1 when the previously armed failure
 * happened since the last call, else 0. */
int pt_alloc_fail_at(unsigned long n);

/* Test builds only: suspends this thread's countdown (returns what was
 * left) and resumes it, around set-up code of a test that is not under
 * test. */
unsigned long pt_alloc_suspend(void);
void pt_alloc_resume(unsigned long left);

/* Test builds only: a malloc-compatible function that goes through the
 * countdown (for json_set_alloc_funcs and zlib's zalloc in tests). */
void *pt_alloc_malloc_hook(size_t n);
#else
static inline void *pt_malloc(size_t n) { return malloc(n); }
static inline void *pt_calloc(size_t n, size_t size) { return calloc(n, size); }
static inline void *pt_realloc(void *p, size_t n) { return realloc(p, n); }
#endif

#endif
