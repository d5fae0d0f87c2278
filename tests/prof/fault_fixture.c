/*
 * fault_fixture.c - see fault_fixture.h.
 */
#include "pt_test.h"
#include "fault_fixture.h"
#include "pt_config.h"
#include "prof/ptp_alloc.h"

#include <dirent.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

void ptt_fault_require(void) {
  if (!PT_FAULT_INJECTION) PT_SKIP("built without -Dfault_injection");
}

#if PT_FAULT_INJECTION
uint64_t ptt_fault_loop(ptt_fault_op op, ptt_fault_check check, void *ctx, uint64_t max_n) {
  for (uint64_t n = 1; n < max_n; n++) {
    ptp_alloc_fail_at(n);
    int rc = op(ctx);
    int failed = ptp_alloc_failed();
    ptp_alloc_fail_at(0);
    if (!failed)
      PT_ASSERT_MSG(rc == 0, "with no allocation failing (%llu made) the operation failed: %d",
                    (unsigned long long)(n - 1), rc);
    check(ctx, rc, n, failed);
    if (!failed) return n;
  }
  PT_ASSERT_MSG(0, "the operation still allocated after %llu runs", (unsigned long long)max_n);
  return 0;
}
#else
uint64_t ptt_fault_loop(ptt_fault_op op, ptt_fault_check check, void *ctx, uint64_t max_n) {
  (void)op; (void)check; (void)ctx; (void)max_n;
  PT_SKIP("built without -Dfault_injection");
}
#endif

void ptt_no_leaks(void) {
#if defined(__SANITIZE_ADDRESS__)
  PT_ASSERT_MSG(__lsan_do_recoverable_leak_check() == 0, "LeakSanitizer found leaks (above)");
#else
  static int said;
  if (!said++) printf("# leaks are checked in the asan variant only\n");
#endif
}

int ptt_has_temp_file(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  int found = 0;
  while ((e = readdir(d)) && !found) {
    size_t n = strlen(e->d_name);
    found = e->d_name[0] == '.' && n > 4 && strcmp(e->d_name + n - 4, ".tmp") == 0;
  }
  closedir(d);
  return found;
}
