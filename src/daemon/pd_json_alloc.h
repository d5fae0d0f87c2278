/*
 * pd_json_alloc.h - jansson's allocator in the daemon: plain malloc/free,
 * plus a count of the allocations that failed, per thread.
 *
 * Why: jansson does not always say "out of memory" when an allocation
 * fails while parsing: a string token it cannot allocate comes back as a
 * syntax error ("string or '}' expected"). Code that must not tell a
 * client its JSON is bad when the daemon is short of memory (the IPC core)
 * compares pd_json_alloc_failures() before and after the parse.
 *
 * Threads: install once, before any jansson call and before other threads
 * start (json_set_alloc_funcs is process-wide); the count is per thread
 * (thread-local), so work threads do not disturb the loop thread's.
 */
#ifndef PD_JSON_ALLOC_H
#define PD_JSON_ALLOC_H

#include <stddef.h>

/* Makes jansson allocate through this unit (json_set_alloc_funcs).
 * Idempotent. */
void pd_json_alloc_install(void);
/* Failed jansson allocations on this thread since it started (0 when
 * pd_json_alloc_install was never called). */
unsigned long pd_json_alloc_failures(void);

/* Tests only (builds with -Dfault_injection=true; elsewhere it does
 * nothing): jansson's allocations go to malloc_fn/free_fn instead of
 * malloc/free (NULL, NULL: back to those), so a test can fail the Nth one
 * and count live blocks. Set it while no jansson value is alive, or with
 * a free_fn that accepts blocks from malloc. */
void pd_json_alloc_set_backend(void *(*malloc_fn)(size_t), void (*free_fn)(void *));

#endif
