/*
 * alloc_fail.h - allocation-failure tests of src/common's parsers of
 * outside input (nghttp2/curl style), on the countdown of
 * src/common/pt_alloc.h:
 *
 *   ptt_alloc_fail_each("what", op, ctx, flags);
 *
 * runs op(ctx) with its 1st allocation failing, then its 2nd, and so on,
 * until a run ends without reaching the armed allocation: that run must
 * return 0, every earlier one -ENOMEM (a clear error, not a crash and not
 * another error's meaning), and, in the ASan variant, leave nothing
 * leaked (LeakSanitizer is asked after every run).
 *
 * flags: PTT_ALLOC_JANSSON routes jansson's allocations through the
 * countdown too (json_set_alloc_funcs); jansson reports some allocation
 * failures of its parser as syntax errors, which the parsers then return as
 * -EINVAL: PTT_ALLOC_EINVAL_OK accepts that (still no crash, no leak).
 * Set-up inside an op that is not under test runs between
 * ptt_alloc_suspend() and ptt_alloc_resume().
 *
 * Needs a -Dfault_injection=true build (the test variants): without one,
 * the test is skipped.
 */
#ifndef ALLOC_FAIL_H
#define ALLOC_FAIL_H

#include "pt_config.h"
#include "pt_test.h"
#include "common/pt_alloc.h"

#include <errno.h>
#include <jansson.h>

/* LeakSanitizer's on-demand check (ASan builds); NULL elsewhere. */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

typedef int (*ptt_alloc_op)(void *ctx);

#define PTT_ALLOC_JANSSON 1
#define PTT_ALLOC_EINVAL_OK 2

#if PT_FAULT_INJECTION
static unsigned long ptt_alloc_left;
static inline void ptt_alloc_suspend(void) { ptt_alloc_left = pt_alloc_suspend(); }
static inline void ptt_alloc_resume(void) { pt_alloc_resume(ptt_alloc_left); }

/* Returns how many allocations a successful op made. */
static inline unsigned long ptt_alloc_fail_each(const char *what, ptt_alloc_op op, void *ctx,
                                                int flags) {
  if (flags & PTT_ALLOC_JANSSON) json_set_alloc_funcs(pt_alloc_malloc_hook, free);
  unsigned long n;
  for (n = 1;; n++) {
    PT_ASSERT_MSG(n < 100000, "%s: no end to the allocations", what);
    pt_alloc_fail_at(n);
    int r = op(ctx);
    int hit = pt_alloc_fail_at(0);
    if (!hit) {
      PT_ASSERT_MSG(r == 0, "%s: %d without a failed allocation", what, r);
      break;
    }
    PT_ASSERT_MSG(r == -ENOMEM || (r == -EINVAL && (flags & PTT_ALLOC_EINVAL_OK)),
                  "%s: allocation %lu failed, the op returned %d, not -ENOMEM", what, n, r);
    if (__lsan_do_recoverable_leak_check)
      PT_ASSERT_MSG(__lsan_do_recoverable_leak_check() == 0,
                    "%s: a leak after allocation %lu failed (report above)", what, n);
  }
  json_set_alloc_funcs(malloc, free);
  return n - 1;
}
#define PTT_NEED_FAULT_INJECTION() ((void)0)
#else
static inline unsigned long ptt_alloc_fail_each(const char *what, ptt_alloc_op op, void *ctx,
                                                int flags) {
  (void)what; (void)op; (void)ctx; (void)flags;
  return 0;
}
static inline void ptt_alloc_suspend(void) {}
static inline void ptt_alloc_resume(void) {}
#define PTT_NEED_FAULT_INJECTION() PT_SKIP("built without -Dfault_injection")
#endif

#endif
