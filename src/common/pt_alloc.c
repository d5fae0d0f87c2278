/*
 * pt_alloc.c - the counting allocator of test builds (see pt_alloc.h).
 * Compiled to nothing unless -Dfault_injection=true.
 */
#include "common/pt_alloc.h"

#if PT_FAULT_INJECTION
/* Per thread: the allocations left before the failing one (0 = off), and
 * whether the armed failure happened. */
static _Thread_local unsigned long t_countdown;
static _Thread_local int t_hit;

static int should_fail(void) {
  if (t_countdown == 0) return 0;
  if (--t_countdown != 0) return 0;
  t_hit = 1;
  return 1;
}

void *pt_malloc(size_t n) { return should_fail() ? NULL : malloc(n); }
void *pt_calloc(size_t n, size_t size) { return should_fail() ? NULL : calloc(n, size); }
void *pt_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n); }
void *pt_alloc_malloc_hook(size_t n) { return pt_malloc(n); }

unsigned long pt_alloc_suspend(void) {
  unsigned long left = t_countdown;
  t_countdown = 0;
  return left;
}

void pt_alloc_resume(unsigned long left) { t_countdown = left; }

int pt_alloc_fail_at(unsigned long n) {
  int hit = t_hit;
  t_hit = 0;
  t_countdown = n;
  return hit;
}
#endif
