/* Allocation-failure test of the IPC core (src/daemon/pd_ipc.c), in the
 * nghttp2/curl tradition: one conversation (create the core, connect,
 * hello, a request with params, an unknown method, bad JSON, an
 * asynchronous call, an event, EOF, close) is run again and again with the
 * Nth allocation failing, for N = 1, 2, ... until a run sees no failure.
 * Every run must end without a crash and without a leak, and every request
 * gets exactly one answer: the one it gets without failures, or a clear
 * "internal" error (a failed hello leaves the connection before hello, so
 * later requests may get "the first request must be hello").
 *
 * Mechanism (CONTRIBUTING.md, "Allocation-failure tests"): the core takes
 * its allocator in pd_ipc_options.mem (like nghttp2_mem); jansson's
 * allocations go through the daemon's jansson allocator (pd_json_alloc.h,
 * installed process-wide: the test runs in its own forked child), whose
 * backend a test build (-Dfault_injection=true) may replace. Both go
 * through fail_malloc below, which counts live blocks, so a leak of either
 * shows as live != 0 in every test variant; the asan variant also runs
 * LeakSanitizer's check. The framer's own buffer (src/common/pt_jsonl.c)
 * uses plain malloc and is not failed here.
 */
#include "pt_test.h"
#include "pt_config.h"
#include "ipc_harness.h"
#include "daemon/pd_json_alloc.h"

#include <errno.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

static long g_count, g_fail_at, g_live;
static int g_fired;

static void *fail_malloc(size_t n) {
  if (g_fail_at && ++g_count == g_fail_at) {
    g_fired = 1;
    return NULL;
  }
  void *p = malloc(n);
  if (p) g_live++;
  return p;
}

static void fail_free(void *p) {
  if (!p) return;
  g_live--;
  free(p);
}

static void *mem_malloc(size_t n, void *u) {
  (void)u;
  return fail_malloc(n);
}
static void mem_free(void *p, void *u) {
  (void)u;
  fail_free(p);
}

static pd_call *g_kept;

static void m_echo(pd_call *call, json_t *params, void *ctx) {
  (void)ctx;
  pd_call_reply(call, json_pack("{s:O}", "params", params));
}

static void m_keep(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  (void)ctx;
  g_kept = call;
}

#define REQUESTS                                                                  \
  "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1,\"client\":\"t\"}}\n" \
  "{\"id\":2,\"method\":\"echo\",\"params\":{\"a\":[1,2,{\"b\":\"c\"}],\"d\":\"e\"}}\n" \
  "{\"id\":3,\"method\":\"nope\"}\n"                                              \
  "{\"id\":4,}\n"                                                                 \
  "{\"id\":5,\"method\":\"keep\"}\n"

/* One conversation; returns the output, or NULL when the core or the
 * connection could not be created (checked here: -ENOMEM, nothing sent). */
static char *run_once(th_log *log) {
  static const pd_ipc_mem mem = {mem_malloc, mem_free, NULL};
  pd_ipc_options o;
  pd_ipc_options_init(&o);
  o.mem = &mem;
  th_options(&o, log);
  pd_ipc *ipc = NULL;
  int r = pd_ipc_new(&ipc, &o, &th_callbacks);
  if (r < 0) {
    PT_ASSERT_INT_EQ(r, -ENOMEM);
    return NULL;
  }
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "echo", m_echo, NULL), 0);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "keep", m_keep, NULL), 0);
  th_conn a = {0};
  r = th_open(ipc, &a, 0);
  if (r < 0) {
    PT_ASSERT_INT_EQ(r, -ENOMEM);
    PT_ASSERT_UINT_EQ(pd_ipc_client_count(ipc), 0);
    pd_ipc_del(ipc);
    return NULL;
  }
  g_kept = NULL;
  PT_ASSERT_INT_EQ(th_feed(&a, REQUESTS, 1), 0);
  pd_conn_event(a.c, "turn.started", json_pack("{s:i}", "turn_id", 1));
  pd_conn_eof(a.c, 2);
  if (g_kept) pd_call_reply(g_kept, json_pack("{s:b}", "done", 1));
  th_flush(&a, 3);
  PT_ASSERT_INT_EQ(a.close_calls, 1);
  pd_conn_closed(a.c, 4);
  pd_ipc_del(ipc);
  char *out = strdup(a.out ? a.out : "");
  th_conn_free(&a);
  return out;
}

static const char *expected(void) {
  static char buf[2048];
  const char *hello = th_hello_reply(1);
  snprintf(buf, sizeof buf,
           "%s"
           "{\"id\":2,\"result\":{\"params\":{\"a\":[1,2,{\"b\":\"c\"}],\"d\":\"e\"}}}\n"
           "{\"id\":3,\"error\":{\"code\":\"unknown_method\",\"message\":\"unknown method \\\"nope\\\"\"}}\n"
           "{\"id\":null,\"error\":{\"code\":\"bad_json\",\"message\":\"invalid JSON at column 9: string or '}' expected near '}'\"}}\n"
           "{\"event\":\"turn.started\",\"params\":{\"turn_id\":1}}\n"
           "{\"id\":5,\"result\":{\"done\":true}}\n",
           hello);
  return buf;
}

/* The lines of `out` (no allocation failures any more) against the rules
 * in the header comment. A request whose line could not even be parsed
 * (out of memory in jansson) is answered with id null: such a line stands
 * for one of the requests that got no line of their own. */
static void check_degraded(const char *out, const char *exp, const th_log *log, long n) {
  const char *want[6] = {0}; /* expected line of id 1..5 (4: id null) */
  char *e = strdup(exp);
  int events_expected = 0;
  for (char *save = NULL, *l = strtok_r(e, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(l, 0, NULL);
    json_t *id = json_object_get(j, "id");
    if (json_is_integer(id)) want[json_integer_value(id)] = strstr(exp, l);
    else if (id) want[4] = strstr(exp, l);
    else events_expected++;
    json_decref(j);
  }
  /* pass 1: did hello succeed? */
  const char *hello_line = want[1];
  int hello_ok = strncmp(out, hello_line, strcspn(hello_line, "\n") + 1) == 0;
  /* pass 2: every line */
  int seen[6] = {0}, events = 0, nulls = 0;
  char *o = strdup(out);
  for (char *save = NULL, *l = strtok_r(o, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(l, 0, NULL);
    PT_ASSERT_MSG(json_is_object(j), "N=%ld: not a JSON object: %s", n, l);
    json_t *id = json_object_get(j, "id");
    if (!id) {
      PT_ASSERT_MSG(json_is_string(json_object_get(j, "event")), "N=%ld: %s", n, l);
      events++;
      json_decref(j);
      continue;
    }
    const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    size_t ll = strlen(l);
    if (json_is_null(id)) {
      nulls++;
      int exact = strncmp(want[4], l, ll) == 0 && want[4][ll] == '\n';
      PT_ASSERT_MSG(exact || (code && strcmp(code, "internal") == 0 && strstr(msg, "out of memory")),
                    "N=%ld: %s", n, l);
      json_decref(j);
      continue;
    }
    int k = (int)json_integer_value(id);
    PT_ASSERT_MSG(k >= 1 && k <= 5 && k != 4, "N=%ld: unexpected id: %s", n, l);
    seen[k]++;
    int exact = strncmp(want[k], l, ll) == 0 && want[k][ll] == '\n';
    if (!exact) {
      PT_ASSERT_MSG(code != NULL, "N=%ld: a result that is not the expected one: %s", n, l);
      int ok = strcmp(code, "internal") == 0 ||
               (!hello_ok && strcmp(code, "bad_request") == 0 &&
                strcmp(msg, "the first request must be hello") == 0);
      PT_ASSERT_MSG(ok, "N=%ld: an error that is neither internal nor due to a failed hello: %s",
                    n, l);
    }
    json_decref(j);
  }
  int missing = 0;
  for (int k = 1; k <= 5; k++) {
    if (k == 4) continue;
    PT_ASSERT_MSG(seen[k] <= 1, "N=%ld: request %d got %d answers:\n%s", n, k, seen[k], out);
    missing += seen[k] == 0;
  }
  PT_ASSERT_MSG(nulls == 1 + missing, "N=%ld: %d requests unanswered, %d id-null lines:\n%s", n,
                missing, nulls, out);
  PT_ASSERT(events <= events_expected);
  if (events < events_expected)
    PT_ASSERT_MSG(strstr(log->text, "cannot encode a message (out of memory); dropped") != NULL,
                  "N=%ld: an event was dropped without a log line", n);
  free(o);
  free(e);
}

PT_TEST(daemon_ipc_allocation_failures) {
  if (!PT_FAULT_INJECTION) PT_SKIP("built without -Dfault_injection");
  pd_json_alloc_install();
  pd_json_alloc_set_backend(fail_malloc, fail_free);
  long n;
  int degraded = 0;
  for (n = 1; n < 100000; n++) {
    g_count = 0;
    g_fired = 0;
    g_fail_at = n;
    th_log log = {0};
    char *out = run_once(&log);
    g_fail_at = 0; /* checking allocates too */
    PT_ASSERT_MSG(g_live == 0, "N=%ld: %ld blocks leaked", n, g_live);
#if defined(__SANITIZE_ADDRESS__)
    PT_ASSERT_MSG(__lsan_do_recoverable_leak_check() == 0, "N=%ld: LeakSanitizer found a leak", n);
#endif
    if (!g_fired) {
      /* every allocation succeeded: the conversation is the whole one */
      PT_ASSERT(out != NULL);
      PT_ASSERT_STR_EQ(out, expected());
      free(out);
      break;
    }
    if (out) {
      check_degraded(out, expected(), &log, n);
      degraded++;
    }
    free(out);
    PT_ASSERT_MSG(g_live == 0, "N=%ld: %ld blocks leaked by the checks", n, g_live);
  }
  /* the conversation allocates: many points were failed, most answered */
  PT_ASSERT_MSG(n > 20, "only %ld allocations", n);
  PT_ASSERT(degraded > 10);
  printf("# %ld allocation points failed in turn, %d degraded conversations checked\n", n - 1,
         degraded);
}
