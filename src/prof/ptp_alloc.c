/*
 * ptp_alloc.c - the allocation fault injection of test builds (see
 * ptp_alloc.h). Empty in a normal build.
 */
#include "prof/ptp_alloc.h"

#if PT_FAULT_INJECTION
#include <stdatomic.h>

/* Every thread's allocations fail while set. */
static _Atomic int fail_all;

/* This thread's injection: fail allocation number target (0: none). */
static __thread struct {
  uint64_t target, count;
  int failed;
} fi;

int ptp_alloc_should_fail(void) {
  if (atomic_load_explicit(&fail_all, memory_order_relaxed)) return 1;
  if (!fi.target) return 0;
  if (++fi.count != fi.target) return 0;
  fi.failed = 1;
  return 1;
}

void ptp_alloc_fail_at(uint64_t n) {
  fi.target = n;
  fi.count = 0;
  fi.failed = 0;
}

uint64_t ptp_alloc_count(void) { return fi.count; }
int ptp_alloc_failed(void) { return fi.failed; }
void ptp_alloc_fail_all(int on) { atomic_store(&fail_all, on); }
#else
/* ISO C wants a translation unit to declare something. */
typedef int ptp_alloc_unused;
#endif
