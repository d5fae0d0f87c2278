/* Unit tests for both responders through the pd_responder_vt interface, on a
 * real libuv loop: the built-in one (work thread + timer) and the external
 * one (real /bin/sh child processes). */
#include "pt_test.h"
#include "daemon/pd_ngram.h"
#include "daemon/pd_responder.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char text[8192];
  size_t len;
  int deltas, dones;
  pd_resp_status status;
  char error[1024];
} collect;

static void on_delta(void *ctx, const char *t, size_t n) {
  collect *c = ctx;
  PT_ASSERT(c->dones == 0); /* no delta after done */
  if (c->len + n < sizeof c->text) {
    memcpy(c->text + c->len, t, n);
    c->len += n;
    c->text[c->len] = 0;
  }
  c->deltas++;
}

static void on_done(void *ctx, pd_resp_status st, const char *err) {
  collect *c = ctx;
  c->dones++;
  c->status = st;
  snprintf(c->error, sizeof c->error, "%s", err ? err : "");
}

static json_t *conv(const char *user) {
  return json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "role", "user", "text",
                   "What is the loop doing?", "role", "assistant", "text",
                   "The loop waits for input and runs a callback.", "role", "user", "text", user);
}

/* Working directory the next run() puts in the request (NULL: ours), and
 * the responders' settings it puts there (what the daemon reads from
 * POLYTOKEN_RESPONDER_* at start, pd_settings.c). */
static const char *g_cwd;
static pd_resp_settings g_set = {NULL, -1, PD_RESP_TIMEOUT_MS_DEFAULT};

/* Runs one responder turn to completion; cancel_after: cancel once this many
 * deltas arrived (-1 never; 0 = right after start). */
static void run(const pd_responder_vt *vt, const char *user, int cancel_after, collect *c) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  memset(c, 0, sizeof *c);
  json_t *msgs = conv(user);
  pd_resp_request req = {"0123456789ab", msgs, user, 2, g_cwd, &g_set};
  pd_resp_sink sink = {on_delta, on_done, c};
  void *h = NULL;
  PT_ASSERT_INT_EQ(vt->start(&loop, &req, &sink, &h), 0);
  json_decref(msgs);
  PT_ASSERT_INT_EQ(c->dones, 0); /* never from inside start */
  if (cancel_after == 0) {
    vt->cancel(h);
    PT_ASSERT_INT_EQ(c->dones, 0); /* never from inside cancel */
  }
  while (c->dones == 0) {
    uv_run(&loop, UV_RUN_ONCE);
    if (cancel_after > 0 && c->deltas >= cancel_after && c->dones == 0) {
      vt->cancel(h);
      cancel_after = -1;
    }
  }
  /* let the responder close its handles and free itself */
  uv_run(&loop, UV_RUN_DEFAULT);
  PT_ASSERT_INT_EQ(c->dones, 1);
  PT_ASSERT_INT_EQ(uv_loop_close(&loop), 0); /* nothing left behind */
}

PT_TEST(daemon_responder_builtin_streams_deterministic_reply) {
  g_set.delay_ms = 0;
  collect a, b;
  run(&pd_resp_builtin, "How does the loop run a callback?", -1, &a);
  PT_ASSERT_INT_EQ(a.status, PD_RESP_OK);
  PT_ASSERT(a.deltas >= 12);
  run(&pd_resp_builtin, "How does the loop run a callback?", -1, &b);
  PT_ASSERT_STR_EQ(a.text, b.text);
  /* it is exactly what the model generates from the same inputs */
  pd_ngram *m = pd_ngram_new();
  pd_ngram_add_text(m, pd_ngram_seed_corpus());
  pd_ngram_add_text(m, "What is the loop doing?");
  pd_ngram_add_text(m, "The loop waits for input and runs a callback.");
  pd_ngram_add_text(m, "How does the loop run a callback?");
  uint64_t seed = pd_ngram_hash("How does the loop run a callback?");
  char **t;
  int n;
  PT_ASSERT_INT_EQ(pd_ngram_generate(m, seed, "How does the loop run a callback?", 12,
                                     24 + (int)(seed % 40), &t, &n), 0);
  char *j = pd_ngram_join(t, n);
  PT_ASSERT_STR_EQ(a.text, j);
  PT_ASSERT_INT_EQ(a.deltas, n);
  free(j);
  pd_ngram_free_tokens(t, n);
  pd_ngram_del(m);
}

PT_TEST(daemon_responder_builtin_cancel) {
  g_set.delay_ms = 5;
  collect a;
  run(&pd_resp_builtin, "cancel me early", 0, &a);
  PT_ASSERT_INT_EQ(a.status, PD_RESP_CANCELLED);
  run(&pd_resp_builtin, "cancel me after three words", 3, &a);
  PT_ASSERT_INT_EQ(a.status, PD_RESP_CANCELLED);
  PT_ASSERT_INT_EQ(a.deltas, 3);
}

PT_TEST(daemon_responder_exec_ok_crash_hang_cancel) {
  collect c;
  /* echoes the conversation it got on stdin (proves the JSON arrives) */
  g_set.cmd = "python3 -c 'import json,sys; d=json.load(sys.stdin); "
              "print(d[\"session\"], len(d[\"messages\"]), d[\"messages\"][-1][\"text\"], end=\"\")'";
  run(&pd_resp_exec, "hi there", -1, &c);
  PT_ASSERT_INT_EQ(c.status, PD_RESP_OK);
  PT_ASSERT_STR_EQ(c.text, "0123456789ab 3 hi there");

  g_set.cmd = "printf partial; echo 'model exploded' >&2; exit 4";
  run(&pd_resp_exec, "x", -1, &c);
  PT_ASSERT_INT_EQ(c.status, PD_RESP_ERROR);
  PT_ASSERT_STR_EQ(c.text, "partial");
  PT_ASSERT_MSG(strstr(c.error, "exit status 4") && strstr(c.error, "model exploded"), "%s", c.error);

  g_set.cmd = "kill -SEGV $$";
  run(&pd_resp_exec, "x", -1, &c);
  PT_ASSERT_INT_EQ(c.status, PD_RESP_ERROR);
  PT_ASSERT_MSG(strstr(c.error, "SIGSEGV") != NULL, "%s", c.error);

  g_set.cmd = "printf one; sleep 100";
  g_set.timeout_ms = 300;
  run(&pd_resp_exec, "x", -1, &c);
  PT_ASSERT_INT_EQ(c.status, PD_RESP_ERROR);
  PT_ASSERT_STR_EQ(c.text, "one");
  PT_ASSERT_MSG(strstr(c.error, "timed out") && strstr(c.error, "300 ms"), "%s", c.error);

  g_set.timeout_ms = 30000;
  g_set.cmd = "while :; do printf tick; sleep 0.05; done";
  run(&pd_resp_exec, "x", 2, &c);
  PT_ASSERT_INT_EQ(c.status, PD_RESP_CANCELLED);
  PT_ASSERT_STR_EQ(c.error, "");
  g_set.cmd = NULL;
}

/* The working directory travels in the request: the external command runs
 * in req.cwd, not in the process's current directory. */
PT_TEST(daemon_responder_exec_runs_in_request_cwd) {
  char tmpl[] = "/tmp/pt-resp-cwd.XXXXXX";
  PT_ASSERT(mkdtemp(tmpl) != NULL);
  char want[PATH_MAX], here[PATH_MAX];
  PT_ASSERT(realpath(tmpl, want) != NULL);
  PT_ASSERT(getcwd(here, sizeof here) != NULL);
  PT_ASSERT(strcmp(want, here) != 0);
  g_set.cmd = "pwd -P | tr -d '\\n'";
  collect c;
  g_cwd = tmpl;
  run(&pd_resp_exec, "where", -1, &c);
  g_cwd = NULL;
  PT_ASSERT_INT_EQ(c.status, PD_RESP_OK);
  PT_ASSERT_STR_EQ(c.text, want);
  run(&pd_resp_exec, "where", -1, &c); /* without one: our own directory */
  PT_ASSERT_INT_EQ(c.status, PD_RESP_OK);
  PT_ASSERT_STR_EQ(c.text, here);
  g_set.cmd = NULL;
  PT_ASSERT_INT_EQ(rmdir(tmpl), 0);
}

PT_TEST(daemon_responder_pick_follows_settings) {
  PT_ASSERT(pd_responder_pick(NULL) == &pd_resp_builtin);
  pd_resp_settings st = {NULL, -1, PD_RESP_TIMEOUT_MS_DEFAULT};
  PT_ASSERT(pd_responder_pick(&st) == &pd_resp_builtin);
  st.cmd = "";
  PT_ASSERT(pd_responder_pick(&st) == &pd_resp_builtin);
  st.cmd = "echo hi";
  PT_ASSERT(pd_responder_pick(&st) == &pd_resp_exec);
}

/* The exec responder without a command refuses to start (and calls
 * nothing), rather than running an empty shell. */
PT_TEST(daemon_responder_exec_needs_a_command) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  collect c;
  memset(&c, 0, sizeof c);
  json_t *msgs = conv("x");
  pd_resp_request req = {"0123456789ab", msgs, "x", 2, NULL, NULL};
  pd_resp_sink sink = {on_delta, on_done, &c};
  void *h = NULL;
  PT_ASSERT_INT_EQ(pd_resp_exec.start(&loop, &req, &sink, &h), -EINVAL);
  json_decref(msgs);
  uv_run(&loop, UV_RUN_DEFAULT);
  PT_ASSERT_INT_EQ(c.dones, 0);
  PT_ASSERT_INT_EQ(uv_loop_close(&loop), 0);
}
