/* Unit tests of the IPC protocol core (src/daemon/pd_ipc.c), driven directly
 * (tests/daemon/ipc_harness.c) on made-up moments, with the exact bytes it
 * sends: framing, hello, envelope errors, limits, the shutdown deadline,
 * asynchronous calls and holds. */
#include "pt_test.h"
#include "ipc_harness.h"

#include <errno.h>

#define HELLO "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1}}\n"

static void m_echo(pd_call *call, json_t *params, void *ctx) {
  (void)ctx;
  pd_call_reply(call, json_pack("{s:O}", "params", params));
}

static void m_status(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  pd_call_reply(call, json_pack("{s:s}", "who", (const char *)ctx));
}

/* Replies with a string of params.n bytes. */
static void m_big(pd_call *call, json_t *params, void *ctx) {
  (void)ctx;
  size_t n = (size_t)json_integer_value(json_object_get(params, "n"));
  char *s = malloc(n + 1);
  memset(s, 'x', n);
  s[n] = 0;
  pd_call_reply(call, json_pack("{s:s}", "s", s));
  free(s);
}

static void m_null(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  (void)ctx;
  pd_call_reply(call, NULL); /* what a failed json_pack hands in */
}

static pd_call *g_kept;
static void m_keep(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  (void)ctx;
  g_kept = call;
}

PT_TEST(daemon_ipc_hello_and_envelope_errors) {
  th_log log = {0};
  pd_ipc *ipc = th_core(NULL, &log);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "daemon.status", m_status, "first"), 0);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "daemon.status", m_status, "second"), 0);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "echo", m_echo, NULL), 0);
  th_conn a = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &a, 100), 0);
  PT_ASSERT_UINT_EQ(pd_conn_id(a.c), 1);
  PT_ASSERT_UINT_EQ(pd_ipc_client_count(ipc), 1);
  PT_ASSERT_STR_EQ(th_take(&a), "");

  /* before hello */
  th_feed(&a, "{\"id\":3,\"method\":\"daemon.status\"}\n", 101);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":3,\"error\":{\"code\":\"bad_request\",\"message\":"
                                "\"the first request must be hello\"}}\n");
  /* not JSON, not an object: id null, the connection stays */
  th_feed(&a, "{\"id\":1,\"method\":\n", 102);
  const char *o = th_take(&a);
  PT_ASSERT_MSG(strncmp(o, "{\"id\":null,\"error\":{\"code\":\"bad_json\",\"message\":\"invalid JSON at column ", 70) == 0, "%s", o);
  th_feed(&a, "[1,2]\n", 103);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":null,\"error\":{\"code\":\"bad_json\",\"message\":"
                                "\"message is not a JSON object\"}}\n");
  th_feed(&a, "{\"id\":1,\"id\":2,\"method\":\"hello\"}\n", 103); /* duplicate keys */
  PT_ASSERT(strstr(th_take(&a), "\"bad_json\"") != NULL);
  /* ids */
  static const char *bad_ids[] = {
      "{\"method\":\"hello\",\"params\":{\"protocol\":1}}\n",
      "{\"id\":0,\"method\":\"hello\"}\n", "{\"id\":-4,\"method\":\"hello\"}\n",
      "{\"id\":\"7\",\"method\":\"hello\"}\n", "{\"id\":1.5,\"method\":\"hello\"}\n"};
  for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
    th_feed(&a, bad_ids[i], 104);
    PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":null,\"error\":{\"code\":\"bad_request\",\"message\":"
                                  "\"a request needs \\\"id\\\": a positive integer\"}}\n");
  }
  /* methods: missing, empty, not a string, 64 bytes */
  static const char *bad_methods[] = {
      "{\"id\":5}\n", "{\"id\":5,\"method\":\"\"}\n", "{\"id\":5,\"method\":7}\n",
      "{\"id\":5,\"method\":\"mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm\"}\n"};
  for (size_t i = 0; i < sizeof bad_methods / sizeof bad_methods[0]; i++) {
    th_feed(&a, bad_methods[i], 105);
    PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":5,\"error\":{\"code\":\"bad_request\",\"message\":"
                                  "\"a request needs \\\"method\\\": a string\"}}\n");
  }
  th_feed(&a, "{\"id\":6,\"method\":\"hello\",\"params\":[1]}\n", 106);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":6,\"error\":{\"code\":\"bad_request\",\"message\":"
                                "\"\\\"params\\\" must be an object\"}}\n");
  th_feed(&a, "{\"id\":7,\"method\":\"hello\",\"params\":{\"protocol\":\"1\"}}\n", 107);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":7,\"error\":{\"code\":\"bad_request\",\"message\":"
                                "\"hello needs params.protocol (an integer)\"}}\n");
  /* hello: the reply, and the client's name in the log made printable */
  th_feed(&a, "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1,\"client\":\"a\\nb\\u001b[2J\"}}\n", 108);
  PT_ASSERT_STR_EQ(th_take(&a), th_hello_reply(1));
  PT_ASSERT_MSG(strstr(log.text, "INFO client 1: hello from a?b?[2J\n") != NULL, "%s", log.text);
  th_feed(&a, HELLO, 109);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":1,\"error\":{\"code\":\"bad_request\",\"message\":"
                                "\"hello was already done\"}}\n");
  /* dispatch: the latest registration wins; params default to {} */
  th_feed(&a, "{\"id\":8,\"method\":\"daemon.status\"}\n{\"id\":9,\"method\":\"echo\"}\n", 110);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":8,\"result\":{\"who\":\"second\"}}\n"
                                "{\"id\":9,\"result\":{\"params\":{}}}\n");
  /* unknown and reserved names; a 63-byte name passes the envelope */
  th_feed(&a, "{\"id\":10,\"method\":\"nope\"}\n{\"id\":11,\"method\":\"profile.dump\"}\n"
              "{\"id\":12,\"method\":\"artifacts.list\"}\n", 111);
  PT_ASSERT_STR_EQ(th_take(&a),
                   "{\"id\":10,\"error\":{\"code\":\"unknown_method\",\"message\":\"unknown method \\\"nope\\\"\"}}\n"
                   "{\"id\":11,\"error\":{\"code\":\"not_profiling\",\"message\":\"profile.dump needs a profiling build (this daemon was built without profiling)\"}}\n"
                   "{\"id\":12,\"error\":{\"code\":\"not_profiling\",\"message\":\"artifacts.list needs a profiling build (this daemon was built without profiling)\"}}\n");
  th_feed(&a, "{\"id\":13,\"method\":\"mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm\"}\n", 112);
  PT_ASSERT(strstr(th_take(&a), "\"unknown_method\"") != NULL);
  /* shutting down: only daemon.status */
  pd_ipc_set_shutting_down(ipc);
  th_feed(&a, "{\"id\":14,\"method\":\"echo\"}\n{\"id\":15,\"method\":\"daemon.status\"}\n", 113);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":14,\"error\":{\"code\":\"shutting_down\",\"message\":\"the daemon is shutting down\"}}\n"
                                "{\"id\":15,\"result\":{\"who\":\"second\"}}\n");
  PT_ASSERT_INT_EQ(a.stop_calls, 0);
  PT_ASSERT_INT_EQ(a.close_calls, 0);
  pd_conn_eof(a.c, 114);
  PT_ASSERT_INT_EQ(a.close_calls, 0); /* output not written yet */
  th_flush(&a, 115);
  PT_ASSERT_INT_EQ(a.close_calls, 1);
  PT_ASSERT_INT_EQ(a.stop_calls, 0); /* the driver stops reading at EOF itself */
  pd_conn_closed(a.c, 116);
  PT_ASSERT_UINT_EQ(pd_ipc_client_count(ipc), 0);
  th_conn_free(&a);
  pd_ipc_del(ipc);
}

PT_TEST(daemon_ipc_protocol_mismatch_closes_after_flush) {
  pd_ipc *ipc = th_core(NULL, NULL);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "echo", m_echo, NULL), 0);
  th_conn a = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &a, 0), 0);
  /* the line after the mismatch, in the same read, is not served */
  th_feed(&a, "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":2}}\n{\"id\":2,\"method\":\"echo\"}\n", 1);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":1,\"error\":{\"code\":\"protocol_mismatch\",\"message\":"
                                "\"this daemon speaks protocol 1, the client asked for 2\"}}\n");
  PT_ASSERT_INT_EQ(a.stop_calls, 1);
  PT_ASSERT_INT_EQ(a.close_calls, 0);
  th_feed(&a, HELLO, 2); /* late input is ignored */
  PT_ASSERT_STR_EQ(th_take(&a), "");
  th_flush(&a, 3);
  PT_ASSERT_INT_EQ(a.close_calls, 1);
  pd_conn_closed(a.c, 4);
  th_conn_free(&a);
  pd_ipc_del(ipc);
}

PT_TEST(daemon_ipc_framing) {
  pd_ipc_options o;
  pd_ipc_options_init(&o);
  o.max_line = 64;
  th_log log = {0};
  pd_ipc *ipc = th_core(&o, &log);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "echo", m_echo, NULL), 0);
  th_conn a = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &a, 0), 0);
  /* a request cut anywhere is served once its newline arrives */
  const char *req = "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1}}\n";
  for (const char *p = req; *p; p++) {
    PT_ASSERT_STR_EQ(th_take(&a), "");
    PT_ASSERT_INT_EQ(pd_conn_recv(a.c, p, 1, 1), 0);
  }
  PT_ASSERT_STR_EQ(th_take(&a), th_hello_reply(1));
  /* several in one read, empty lines skipped, \r tolerated */
  th_feed(&a, "\n{\"id\":2,\"method\":\"echo\"}\r\n\n\n{\"id\":3,\"method\":\"echo\"}\n", 2);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":2,\"result\":{\"params\":{}}}\n"
                                "{\"id\":3,\"result\":{\"params\":{}}}\n");
  /* exactly 64 bytes with the newline: served */
  char line[80];
  int n = snprintf(line, sizeof line, "{\"id\":4,\"method\":\"echo\",\"params\":{\"p\":\"%*s\"}}\n", 21, "");
  PT_ASSERT_INT_EQ(n, 64);
  th_feed(&a, line, 3);
  PT_ASSERT(strncmp(th_take(&a), "{\"id\":4,\"result\"", 16) == 0);
  /* 65: oversize, no more input, closed once written; the line after it
   * in the same read is not served */
  n = snprintf(line, sizeof line, "{\"id\":5,\"method\":\"echo\",\"params\":{\"p\":\"%*s\"}}\n", 22, "");
  PT_ASSERT_INT_EQ(n, 65);
  char two[200];
  snprintf(two, sizeof two, "%s{\"id\":6,\"method\":\"echo\"}\n", line);
  th_feed(&a, two, 4);
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":null,\"error\":{\"code\":\"oversize\",\"message\":"
                                "\"message exceeds 64 bytes (newline included); closing\"}}\n");
  PT_ASSERT(strstr(log.text, "WARN client 1: oversize message; closing\n") != NULL);
  PT_ASSERT_INT_EQ(a.stop_calls, 1);
  PT_ASSERT_INT_EQ(a.close_calls, 0);
  th_flush(&a, 5);
  PT_ASSERT_INT_EQ(a.close_calls, 1);
  pd_conn_closed(a.c, 6);
  th_conn_free(&a);

  /* an endless line: refused as soon as it passes the cap, once */
  th_conn b = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &b, 10), 0);
  char chunk[51];
  memset(chunk, 'y', 50);
  chunk[50] = 0;
  th_feed(&b, chunk, 11);
  PT_ASSERT_STR_EQ(th_take(&b), "");
  for (int i = 0; i < 10; i++) th_feed(&b, chunk, 12);
  PT_ASSERT_STR_EQ(th_take(&b), "{\"id\":null,\"error\":{\"code\":\"oversize\",\"message\":"
                                "\"message exceeds 64 bytes (newline included); closing\"}}\n");
  /* a partial line at EOF is logged */
  th_conn c = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &c, 20), 0);
  th_feed(&c, "{\"id\":", 21);
  pd_conn_eof(c.c, 22);
  PT_ASSERT(strstr(log.text, "INFO client 3: hung up in the middle of a message (6 bytes dropped)\n") != NULL);
  PT_ASSERT_INT_EQ(c.close_calls, 1); /* nothing queued, nothing held */
  th_flush(&b, 23);
  pd_conn_closed(b.c, 24);
  pd_conn_closed(c.c, 24);
  th_conn_free(&b);
  th_conn_free(&c);
  pd_ipc_del(ipc);
}

PT_TEST(daemon_ipc_output_cap_and_send_errors) {
  pd_ipc_options o;
  pd_ipc_options_init(&o);
  o.outbuf_max = 200;
  th_log log = {0};
  pd_ipc *ipc = th_core(&o, &log);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "big", m_big, NULL), 0);
  th_conn a = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &a, 0), 0);
  th_feed(&a, HELLO, 1);
  th_flush(&a, 2);
  th_take(&a);
  /* {"id":2,"result":{"s":"x...x"}}\n is 27 + n bytes: 100 + 100 fit the
   * cap of 200 exactly... */
  th_feed(&a, "{\"id\":2,\"method\":\"big\",\"params\":{\"n\":73}}\n", 3);
  th_feed(&a, "{\"id\":3,\"method\":\"big\",\"params\":{\"n\":73}}\n", 3);
  PT_ASSERT_UINT_EQ(a.unsent, 200);
  PT_ASSERT_INT_EQ(a.close_calls, 0);
  /* ...written, so room again; then one byte more than the cap */
  th_flush(&a, 4);
  th_feed(&a, "{\"id\":4,\"method\":\"big\",\"params\":{\"n\":100}}\n", 5);
  th_feed(&a, "{\"id\":5,\"method\":\"big\",\"params\":{\"n\":47}}\n", 5);
  PT_ASSERT_INT_EQ(a.close_calls, 1);
  PT_ASSERT_MSG(strstr(log.text, "WARN client 1: 127 bytes queued and not read (limit 200); disconnecting\n") != NULL, "%s", log.text);
  PT_ASSERT(strstr(log.text, "INFO client 1: closing: output queue over its limit\n") != NULL);
  pd_conn_closed(a.c, 6);
  th_conn_free(&a);

  /* the driver cannot take the bytes: closed with the reason */
  th_conn b = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &b, 10), 0);
  b.send_error = -EPIPE;
  th_feed(&b, HELLO, 11);
  PT_ASSERT_INT_EQ(b.close_calls, 1);
  PT_ASSERT(strstr(log.text, "INFO client 2: closing: Broken pipe\n") != NULL);
  pd_conn_closed(b.c, 12);
  th_conn_free(&b);
  /* a transport error reported by the driver */
  th_conn c = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &c, 20), 0);
  pd_conn_abort(c.c, "connection reset by peer");
  PT_ASSERT_INT_EQ(c.close_calls, 1);
  pd_conn_abort(c.c, "again"); /* once only */
  PT_ASSERT(strstr(log.text, "INFO client 3: closing: connection reset by peer\n") != NULL);
  PT_ASSERT(strstr(log.text, "again") == NULL);
  pd_conn_closed(c.c, 21);
  th_conn_free(&c);
  pd_ipc_del(ipc);
}

PT_TEST(daemon_ipc_client_limit_and_registry_limits) {
  pd_ipc_options o;
  pd_ipc_options_init(&o);
  o.max_clients = 2;
  pd_ipc *ipc = th_core(&o, NULL);
  th_conn c[3] = {{0}};
  for (int i = 0; i < 3; i++) PT_ASSERT_INT_EQ(th_open(ipc, &c[i], 0), 0);
  PT_ASSERT_STR_EQ(th_take(&c[0]), "");
  PT_ASSERT_STR_EQ(th_take(&c[1]), "");
  /* the third: busy, no reading, closed once written */
  PT_ASSERT_STR_EQ(th_take(&c[2]), "{\"id\":null,\"error\":{\"code\":\"busy\",\"message\":\"too many clients\"}}\n");
  PT_ASSERT_INT_EQ(c[2].stop_calls, 1);
  PT_ASSERT_INT_EQ(c[2].close_calls, 0);
  PT_ASSERT_UINT_EQ(pd_ipc_client_count(ipc), 3);
  th_flush(&c[2], 1);
  PT_ASSERT_INT_EQ(c[2].close_calls, 1);
  pd_conn_closed(c[2].c, 2);
  PT_ASSERT_UINT_EQ(pd_ipc_client_count(ipc), 2);
  /* a slot freed: the next one is served */
  pd_conn_eof(c[0].c, 3);
  pd_conn_closed(c[0].c, 3);
  th_conn d = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &d, 4), 0);
  th_feed(&d, HELLO, 4);
  PT_ASSERT_STR_EQ(th_take(&d), th_hello_reply(1));
  PT_ASSERT_UINT_EQ(pd_conn_id(d.c), 4);
  pd_conn_closed(c[1].c, 5);
  pd_conn_closed(d.c, 5);
  for (int i = 0; i < 3; i++) th_conn_free(&c[i]);
  th_conn_free(&d);

  /* the registry: names 1..63 bytes, 64 methods */
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "", m_echo, NULL), -EINVAL);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "x", NULL, NULL), -EINVAL);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm", m_echo, NULL), -EINVAL);
  char name[16];
  for (int i = 0; i < 64; i++) {
    snprintf(name, sizeof name, "m%d", i);
    PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, name, m_echo, NULL), 0);
  }
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "one.more", m_echo, NULL), -ENOSPC);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "m7", m_status, "replaced"), 0); /* replacing: no room needed */
  pd_ipc_del(ipc);
}

static int g_done_calls;
static void on_done(void *ctx) { (*(int *)ctx)++; g_done_calls++; }

PT_TEST(daemon_ipc_close_all_deadline) {
  th_log log = {0};
  pd_ipc *ipc = th_core(NULL, &log);
  /* nobody connected: done at once, no deadline */
  int done = 0;
  pd_ipc_close_all(ipc, 500, 1000, on_done, &done);
  PT_ASSERT_INT_EQ(done, 1);
  PT_ASSERT(pd_ipc_next_deadline(ipc) == PD_IPC_NO_DEADLINE);

  th_conn idle = {0}, slow = {0}, flushing = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &idle, 900), 0);
  PT_ASSERT_INT_EQ(th_open(ipc, &slow, 900), 0);
  PT_ASSERT_INT_EQ(th_open(ipc, &flushing, 900), 0);
  th_feed(&slow, HELLO, 901);      /* its reply is never read */
  th_feed(&flushing, HELLO, 901);  /* its reply is read before the deadline */
  done = 0;
  pd_ipc_close_all(ipc, 1000, 500, on_done, &done);
  PT_ASSERT_UINT_EQ(pd_ipc_next_deadline(ipc), 1500);
  PT_ASSERT_INT_EQ(idle.close_calls, 1); /* nothing to flush */
  PT_ASSERT_INT_EQ(slow.close_calls, 0);
  PT_ASSERT_INT_EQ(slow.stop_calls, 1);
  PT_ASSERT_INT_EQ(flushing.close_calls, 0);
  pd_conn_closed(idle.c, 1001);
  th_flush(&flushing, 1200);
  PT_ASSERT_INT_EQ(flushing.close_calls, 1);
  pd_conn_closed(flushing.c, 1201);
  pd_ipc_tick(ipc, 1499);
  PT_ASSERT_INT_EQ(slow.close_calls, 0);
  PT_ASSERT_INT_EQ(done, 0);
  pd_ipc_tick(ipc, 1500);
  PT_ASSERT_INT_EQ(slow.close_calls, 1);
  PT_ASSERT(strstr(log.text, "INFO client 2: closing: shutdown deadline\n") != NULL);
  PT_ASSERT(strstr(log.text, "client 3: closing: shutdown deadline") == NULL);
  PT_ASSERT(pd_ipc_next_deadline(ipc) == PD_IPC_NO_DEADLINE);
  PT_ASSERT_INT_EQ(done, 0); /* the transport is not gone yet */
  pd_conn_closed(slow.c, 1502);
  PT_ASSERT_INT_EQ(done, 1);
  pd_ipc_tick(ipc, 5000);
  PT_ASSERT_INT_EQ(done, 1);
  th_conn_free(&idle);
  th_conn_free(&slow);
  th_conn_free(&flushing);
  pd_ipc_del(ipc);
}

PT_TEST(daemon_ipc_async_calls_holds_and_events) {
  th_log log = {0};
  pd_ipc *ipc = th_core(NULL, &log);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "keep", m_keep, NULL), 0);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "null", m_null, NULL), 0);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "big", m_big, NULL), 0);
  th_conn a = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &a, 0), 0);
  th_feed(&a, HELLO, 1);
  th_take(&a);
  /* a reply that could not be built, one over the line limit: internal */
  th_feed(&a, "{\"id\":2,\"method\":\"null\"}\n{\"id\":3,\"method\":\"big\",\"params\":{\"n\":1048576}}\n", 2);
  PT_ASSERT_STR_EQ(th_take(&a),
                   "{\"id\":2,\"error\":{\"code\":\"internal\",\"message\":\"out of memory building the reply\"}}\n"
                   "{\"id\":3,\"error\":{\"code\":\"internal\",\"message\":\"the reply is over the line limit\"}}\n");
  PT_ASSERT(strstr(log.text, "WARN client 1: big failed: internal: the reply is over the line limit\n") != NULL);
  /* an asynchronous call keeps a half-closed connection open */
  th_feed(&a, "{\"id\":4,\"method\":\"keep\"}\n", 3);
  PT_ASSERT(g_kept != NULL);
  PT_ASSERT_STR_EQ(pd_call_method(g_kept), "keep");
  PT_ASSERT(pd_call_conn(g_kept) == a.c);
  pd_conn_eof(a.c, 4);
  th_flush(&a, 5);
  PT_ASSERT_INT_EQ(a.close_calls, 0);
  pd_call_error(g_kept, "io_error", "disk %s", "full");
  g_kept = NULL;
  PT_ASSERT_STR_EQ(th_take(&a), "{\"id\":4,\"error\":{\"code\":\"io_error\",\"message\":\"disk full\"}}\n");
  PT_ASSERT(strstr(log.text, "WARN client 1: keep failed: io_error: disk full\n") != NULL);
  PT_ASSERT_INT_EQ(a.close_calls, 0); /* its reply is not written yet */
  th_flush(&a, 6);
  PT_ASSERT_INT_EQ(a.close_calls, 1);
  pd_conn_closed(a.c, 7);

  /* holds and events: b started a turn (held), c is attached, d is not */
  th_conn b = {0}, c = {0}, d = {0};
  PT_ASSERT_INT_EQ(th_open(ipc, &b, 10), 0);
  PT_ASSERT_INT_EQ(th_open(ipc, &c, 10), 0);
  PT_ASSERT_INT_EQ(th_open(ipc, &d, 10), 0);
  pd_conn *held = pd_conn_hold(b.c);
  pd_conn_attach(c.c, "0123456789ab");
  pd_conn_attach(d.c, "ffffffffffff");
  pd_ipc_broadcast(ipc, "0123456789ab", held, "turn.started", json_pack("{s:i}", "turn_id", 1));
  const char *ev = "{\"event\":\"turn.started\",\"params\":{\"turn_id\":1}}\n";
  PT_ASSERT_STR_EQ(th_take(&b), ev);
  PT_ASSERT_STR_EQ(th_take(&c), ev);
  PT_ASSERT_STR_EQ(th_take(&d), "");
  pd_conn_attach(b.c, "0123456789ab"); /* attached and the sender: once */
  pd_ipc_broadcast(ipc, "0123456789ab", held, "x", NULL);
  PT_ASSERT_STR_EQ(th_take(&b), "{\"event\":\"x\",\"params\":{}}\n");
  PT_ASSERT_STR_EQ(th_take(&c), "{\"event\":\"x\",\"params\":{}}\n");
  pd_ipc_detach_all(ipc, "0123456789ab");
  pd_ipc_broadcast(ipc, "0123456789ab", NULL, "y", json_object());
  PT_ASSERT_STR_EQ(th_take(&b), "");
  PT_ASSERT_STR_EQ(th_take(&c), "");
  /* the held one half-closes: open until released */
  pd_conn_eof(b.c, 11);
  th_flush(&b, 11);
  PT_ASSERT_INT_EQ(b.close_calls, 0);
  pd_conn_event(held, "turn.done", json_pack("{s:s}", "status", "ok"));
  PT_ASSERT_STR_EQ(th_take(&b), "{\"event\":\"turn.done\",\"params\":{\"status\":\"ok\"}}\n");
  pd_conn_release(held);
  PT_ASSERT_INT_EQ(b.close_calls, 0); /* the event is not written yet */
  th_flush(&b, 12);
  PT_ASSERT_INT_EQ(b.close_calls, 1);
  pd_conn_closed(b.c, 13);

  /* a call completed after its client left, and after the core is gone:
   * dropped, nothing sent (th_send would fail the test), nothing leaks */
  th_feed(&c, HELLO, 14);
  th_feed(&c, "{\"id\":2,\"method\":\"keep\"}\n", 14);
  pd_call *late = g_kept;
  PT_ASSERT(late != NULL);
  pd_conn_abort(c.c, "gone");
  PT_ASSERT(pd_call_conn(late) == NULL);
  pd_conn_closed(c.c, 15);
  pd_conn_closed(d.c, 15);
  PT_ASSERT_UINT_EQ(pd_ipc_client_count(ipc), 0);
  pd_ipc_del(ipc);
  pd_call_reply(late, json_object());
  th_conn_free(&a);
  th_conn_free(&b);
  th_conn_free(&c);
  th_conn_free(&d);
}
