/*
 * pd_resp_builtin.c - the offline responder.
 *
 * Where the work runs: the model is built and the whole reply generated on
 * a libuv work thread (uv_queue_work), because tokenizing a long transcript
 * takes real CPU time and the loop must keep serving other clients
 * meanwhile. The tokens then stream from a loop timer, one every 15-40 ms
 * (or the settings' delay_ms, POLYTOKEN_RESPONDER_DELAY_MS), like a model
 * producing them.
 *
 * The work thread only touches the `job` fields it owns until after_work
 * runs (texts copied beforehand, result written into tokens/ntokens/err);
 * `cancelled` is an atomic flag it polls so a cancel stops generation early.
 */
#include "daemon/pd_responder.h"
#include "common/pt_thread_name.h"
#include "daemon/pd_loop.h"
#include "daemon/pd_log.h"
#include "daemon/pd_ngram.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct builtin {
  pt_task task;       /* "responder.builtin": the stream, on the loop thread */
  pt_task model_task; /* "responder.builtin.model": kind "blocking", the
                         model job on a work thread (polled there) */
  uv_work_t work;
  uv_timer_t timer;
  pd_resp_sink sink;
  /* inputs (copied; read by the work thread) */
  char **texts;
  size_t ntexts;
  char *prompt;
  char *session;      /* the turn's session id: a label on the model's CPU */
  uint64_t seed;
  /* outputs (written by the work thread, read after after_work) */
  char **tokens;
  int ntokens;
  int err;
  size_t vocab, contexts;
  /* loop-thread state */
  atomic_int cancelled;
  int next;        /* next token to stream */
  int delay_ms;    /* -1: varying per token */
  int done_called;
} builtin;

static void free_job(builtin *b) {
  for (size_t i = 0; i < b->ntexts; i++) free(b->texts[i]);
  free(b->texts);
  free(b->prompt);
  free(b->session);
  pd_ngram_free_tokens(b->tokens, b->ntokens);
  free(b);
}

static void on_closed(uv_handle_t *h) {
  builtin *b = h->data;
  PD_TASK_END(&b->task);
  free_job(b);
}

static void finish(builtin *b, pd_resp_status st, const char *err) {
  if (b->done_called) return;
  b->done_called = 1;
  uv_timer_stop(&b->timer);
  pd_task_disarm(&b->task);
  b->sink.done(b->sink.ctx, st, err);
  uv_close((uv_handle_t *)&b->timer, on_closed);
}

/* Work thread: the CPU part. */
static void work_cb(uv_work_t *w) {
  PT_THREAD_JOB(PT_THREAD_DAEMON_RESPONDER, PT_THREAD_DAEMON_POOL);
  builtin *b = w->data;
  /* the blocking task runs on this work thread: poll it here */
  PD_POLL(&b->model_task);
  PD_LABEL("session", b->session);
  pd_ngram *m = pd_ngram_new();
  if (!m) {
    b->err = -ENOMEM;
    return;
  }
  int r = pd_ngram_add_text(m, pd_ngram_seed_corpus());
  for (size_t i = 0; r == 0 && i < b->ntexts; i++) {
    if (atomic_load(&b->cancelled)) break;
    r = pd_ngram_add_text(m, b->texts[i]);
  }
  if (r == 0 && !atomic_load(&b->cancelled)) {
    int max_tokens = 24 + (int)(b->seed % 40);
    r = pd_ngram_generate(m, b->seed, b->prompt, 12, max_tokens, &b->tokens, &b->ntokens);
  }
  b->vocab = pd_ngram_vocab(m);
  b->contexts = pd_ngram_contexts(m);
  b->err = r;
  pd_ngram_del(m);
}

static int token_delay(builtin *b) {
  if (b->delay_ms >= 0) return b->delay_ms;
  /* 15..40 ms, varying deterministically per token */
  uint64_t h = b->seed ^ ((uint64_t)(b->next + 1) * 0x9e3779b97f4a7c15ull);
  h ^= h >> 29;
  return 15 + (int)(h % 26);
}

static void timer_cb(uv_timer_t *t) {
  builtin *b = t->data;
  PD_POLL(&b->task);
  pd_task_wake(&b->task);
  pd_task_disarm(&b->task);
  if (atomic_load(&b->cancelled)) {
    finish(b, PD_RESP_CANCELLED, NULL);
    return;
  }
  if (b->next >= b->ntokens) {
    finish(b, PD_RESP_OK, NULL);
    return;
  }
  const char *tok = b->tokens[b->next];
  char buf[512];
  int n = snprintf(buf, sizeof buf, "%s%s",
                   (b->next > 0 && !pd_ngram_is_punct(tok)) ? " " : "", tok);
  if (n >= (int)sizeof buf) n = (int)sizeof buf - 1;
  b->next++;
  b->sink.delta(b->sink.ctx, buf, (size_t)n);
  if (b->done_called) return;
  /* the last token is followed immediately by done */
  uv_timer_start(&b->timer, timer_cb, b->next >= b->ntokens ? 0 : (uint64_t)token_delay(b), 0);
  pd_task_arm(&b->task);
}

static void after_work_cb(uv_work_t *w, int status) {
  builtin *b = w->data;
  PD_TASK_END(&b->model_task);
  PD_POLL(&b->task);
  pd_task_wake(&b->task);
  if (status == UV_ECANCELED || atomic_load(&b->cancelled)) {
    finish(b, PD_RESP_CANCELLED, NULL);
    return;
  }
  if (b->err < 0) {
    finish(b, PD_RESP_ERROR, "built-in responder: out of memory");
    return;
  }
  pd_debug("builtin responder: vocab %zu, contexts %zu, %d tokens", b->vocab, b->contexts,
           b->ntokens);
  uv_timer_start(&b->timer, timer_cb, (uint64_t)token_delay(b), 0);
  pd_task_arm(&b->task);
}

static int builtin_start(uv_loop_t *loop, const pd_resp_request *req, const pd_resp_sink *sink,
                         void **handle) {
  builtin *b = calloc(1, sizeof *b);
  if (!b) return -ENOMEM;
  b->sink = *sink;
  size_t n = json_array_size(req->messages);
  b->texts = calloc(n + 1, sizeof *b->texts);
  b->prompt = strdup(req->text);
  b->session = strdup(req->session ? req->session : "");
  if (!b->texts || !b->prompt || !b->session) goto fail;
  for (size_t i = 0; i < n; i++) {
    const char *t = json_string_value(json_object_get(json_array_get(req->messages, i), "text"));
    b->texts[b->ntexts] = strdup(t ? t : "");
    if (!b->texts[b->ntexts]) goto fail;
    b->ntexts++;
  }
  b->seed = pd_ngram_hash(req->text);
  b->delay_ms = req->settings ? req->settings->delay_ms : -1;
  atomic_init(&b->cancelled, 0);
  uv_timer_init(loop, &b->timer);
  b->timer.data = b;
  b->work.data = b;
  PD_TASK_START(&b->task, "responder.builtin");
  pt_task_spawn(&b->model_task, "responder.builtin.model", "blocking");
  int r = uv_queue_work(loop, &b->work, work_cb, after_work_cb);
  if (r < 0) {
    PD_TASK_END(&b->model_task);
    b->done_called = 1;
    uv_close((uv_handle_t *)&b->timer, on_closed);
    return r;
  }
  pd_task_arm(&b->task);
  *handle = b;
  return 0;
fail:
  free_job(b);
  return -ENOMEM;
}

static void builtin_cancel(void *handle) {
  builtin *b = handle;
  if (b->done_called) return;
  atomic_store(&b->cancelled, 1);
  /* If the job has not started, uv_cancel makes after_work run with
   * UV_ECANCELED; if it runs, the flag stops it and after_work reports.
   * If we are streaming, a zero timer reports from a later callback. */
  if (uv_cancel((uv_req_t *)&b->work) != 0 && uv_is_active((uv_handle_t *)&b->timer)) {
    uv_timer_start(&b->timer, timer_cb, 0, 0);
  }
}

const pd_responder_vt pd_resp_builtin = {"builtin", builtin_start, builtin_cancel};
