/* Unit tests for the daemon's jansson allocator (src/daemon/pd_json_alloc.c):
 * failed allocations are counted per thread, so the IPC core can tell a
 * parse that failed for lack of memory from bad JSON. */
#include "pt_test.h"
#include "pt_config.h"
#include "daemon/pd_json_alloc.h"

#include <jansson.h>
#include <pthread.h>

static void *no_memory(size_t n) {
  (void)n;
  return NULL;
}

static long g_fail_at, g_count;
static void *fail_nth(size_t n) {
  if (++g_count == g_fail_at) return NULL;
  return malloc(n);
}

static void *other_thread(void *arg) {
  unsigned long *out = arg;
  unsigned long before = pd_json_alloc_failures();
  json_t *o = json_object(); /* fails: the backend is no_memory */
  out[0] = before;
  out[1] = pd_json_alloc_failures();
  out[2] = o == NULL;
  return NULL;
}

PT_TEST(daemon_json_alloc_counts_failures_per_thread) {
  if (!PT_FAULT_INJECTION) PT_SKIP("built without -Dfault_injection");
  pd_json_alloc_install();
  unsigned long f0 = pd_json_alloc_failures();
  json_t *ok = json_pack("{s:[i,i]}", "a", 1, 2);
  PT_ASSERT(ok != NULL);
  PT_ASSERT_UINT_EQ(pd_json_alloc_failures(), f0);
  pd_json_alloc_set_backend(no_memory, free);
  PT_ASSERT(json_object() == NULL);
  unsigned long f1 = pd_json_alloc_failures();
  PT_ASSERT(f1 > f0);
  /* another thread's failures are its own */
  unsigned long t[3] = {0};
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, other_thread, t), 0);
  PT_ASSERT_INT_EQ(pthread_join(th, NULL), 0);
  PT_ASSERT_UINT_EQ(t[0], 0);
  PT_ASSERT(t[1] > 0);
  PT_ASSERT(t[2]);
  PT_ASSERT_UINT_EQ(pd_json_alloc_failures(), f1);
  /* a parse that fails for lack of memory is counted, whatever jansson
   * says about it; with memory the same line parses */
  const char line[] = "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1}}";
  int counted = 0;
  for (g_fail_at = 1; g_fail_at < 64; g_fail_at++) {
    g_count = 0;
    pd_json_alloc_set_backend(fail_nth, free);
    unsigned long before = pd_json_alloc_failures();
    json_error_t je;
    json_t *j = json_loadb(line, sizeof line - 1, 0, &je);
    pd_json_alloc_set_backend(NULL, NULL);
    if (g_count < g_fail_at) { /* nothing failed: parsed */
      PT_ASSERT(j != NULL);
      PT_ASSERT_UINT_EQ(pd_json_alloc_failures(), before);
      json_decref(j);
      break;
    }
    if (!j) {
      PT_ASSERT_MSG(pd_json_alloc_failures() == before + 1, "allocation %ld", g_fail_at);
      counted++;
    }
    json_decref(j);
  }
  PT_ASSERT(counted > 0);
  PT_ASSERT(g_fail_at < 64);
  json_decref(ok);
}
