/* pd_turn.c - turns. See pd_turn.h. */
#include "daemon/pd_turn.h"
#include "daemon/pd_log.h"
#include "daemon/pd_loop.h"
#include "daemon/pd_responder.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct piece {
  struct piece *next;
  size_t len;
  char text[];
} piece;

/* A turn's phases. Saving: an append of the transcript is on the
 * session's writer thread; the turn waits for its commit. */
enum { T_SAVING_USER, T_RUNNING, T_SAVING_OUTCOME };

struct pd_turn {
  pt_task task; /* "turn" */
  uv_async_t async;
  uv_loop_t *loop;
  pd_session *s;
  int turn_id;
  int phase;
  atomic_int saved;       /* set by the writer's thread: the append is done */
  pd_turn_saved_fn saved_cb;
  void *saved_ctx;
  const char *outcome;    /* T_SAVING_OUTCOME: "ok", "cancelled" or "error" */
  char msg[1024];         /* and the error said with it, or "" */
  pd_conn *sender;        /* held; NULL if none */
  char *user_text;
  const pd_responder_vt *vt;
  void *handle;           /* responder state until done */
  int started;            /* turn.started sent and responder running */
  int cancel_requested;
  /* queued by the responder callbacks, consumed by async_cb */
  piece *head, *tail;
  int done_pending;
  pd_resp_status status;
  char *error;
  /* the reply so far */
  char *reply;
  size_t reply_len, reply_cap;
  int finished;
};

/* pd_turn_configure; zero: events dropped, built-in responder, varying
 * delay, default timeout */
static pd_turn_config g_cfg = {.resp = {NULL, -1, PD_RESP_TIMEOUT_MS_DEFAULT}};
static size_t g_running;
static uint64_t g_total;
static void (*g_idle_cb)(void *);
static void *g_idle_ctx;

void pd_turn_configure(const pd_turn_config *cfg) { g_cfg = *cfg; }

/* Sends one event of turn t through the configured sink (steals params). */
static void emit(pd_turn *t, const char *name, json_t *params) {
  if (g_cfg.emit) g_cfg.emit(g_cfg.ctx, t->s->id, t->sender, name, params);
  else json_decref(params);
}

size_t pd_turn_running(void) { return g_running; }
uint64_t pd_turn_total(void) { return g_total; }

static void on_async_closed(uv_handle_t *h) {
  pd_turn *t = h->data;
  PD_TASK_END(&t->task);
  while (t->head) {
    piece *p = t->head;
    t->head = p->next;
    free(p);
  }
  free(t->user_text);
  free(t->error);
  free(t->reply);
  free(t);
}

/* ---- responder sink: runs inside the responder's callbacks ---- */

static void sink_delta(void *ctx, const char *text, size_t len) {
  pd_turn *t = ctx;
  piece *p = malloc(sizeof *p + len + 1);
  if (!p) return; /* the reply loses a piece; the transcript gets what was sent */
  p->next = NULL;
  p->len = len;
  memcpy(p->text, text, len);
  p->text[len] = 0;
  if (t->tail) t->tail->next = p;
  else t->head = p;
  t->tail = p;
  pd_task_wake(&t->task);
  uv_async_send(&t->async);
}

static void sink_done(void *ctx, pd_resp_status st, const char *error) {
  pd_turn *t = ctx;
  t->handle = NULL; /* the responder frees itself now */
  t->done_pending = 1;
  t->status = st;
  if (error) t->error = strdup(error);
  pd_task_wake(&t->task);
  uv_async_send(&t->async);
}

/* ---- the turn's own callback ---- */

static json_t *build_messages(pd_turn *t) {
  char err[256];
  json_t *entries = NULL;
  /* The in-memory transcript (pd_transcript.h): read from disk once per
   * session, not on every turn. */
  if (pd_transcript_history(t->s->transcript, &entries, err, sizeof err) == 0) {
    json_incref(entries);
  } else {
    pd_warn("session %s: reading transcript for the responder: %s", t->s->id, err);
    entries = json_array();
    json_array_append_new(entries, json_pack("{s:s, s:s}", "role", "user", "text", t->user_text));
  }
  json_t *msgs = json_array();
  size_t i;
  json_t *e;
  json_array_foreach(entries, i, e) {
    const char *role = json_string_value(json_object_get(e, "role"));
    if (!role || strcmp(role, "error") == 0) continue; /* errors are not conversation */
    json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", role, "text",
                                          json_object_get(e, "text")));
  }
  json_decref(entries);
  return msgs;
}

static void append_reply(pd_turn *t, const char *text, size_t len) {
  if (t->reply_len + len + 1 > t->reply_cap) {
    size_t nc = t->reply_cap ? t->reply_cap : 256;
    while (nc < t->reply_len + len + 1) nc *= 2;
    char *n = realloc(t->reply, nc);
    if (!n) return;
    t->reply = n;
    t->reply_cap = nc;
  }
  memcpy(t->reply + t->reply_len, text, len);
  t->reply_len += len;
  t->reply[t->reply_len] = 0;
}

/* The writer's thread, or the loop when the session has no writer: an
 * append of this turn is done; async_cb commits it. */
static void on_saved(void *ctx) {
  pd_turn *t = ctx;
  atomic_store_explicit(&t->saved, 1, memory_order_release);
  pd_task_wake(&t->task);
  uv_async_send(&t->async);
}

/* Queues t's append of entries on the session's writer; on_saved follows.
 * Returns 0, or the error of an append that could not be queued (then no
 * on_saved). */
static int save(pd_turn *t, const pd_transcript_entry *e, size_t n) {
  atomic_store_explicit(&t->saved, 0, memory_order_relaxed);
  int r = pd_transcript_append_async(t->s->transcript, t->s->writer, e, n, on_saved, t);
  if (r == 0) pd_task_arm(&t->task); /* waiting for the disk */
  return r;
}

/* The turn is over: the session is free for the next, the sender released
 * and a shutdown waiting for turns told. */
static void turn_end(pd_turn *t) {
  t->finished = 1;
  t->s->running = NULL;
  if (t->sender) {
    g_cfg.release(t->sender); /* held only when hold and release are set */
    t->sender = NULL;
  }
  g_running--;
  uv_close((uv_handle_t *)&t->async, on_async_closed);
  if (g_running == 0 && g_idle_cb) {
    void (*cb)(void *) = g_idle_cb;
    g_idle_cb = NULL;
    cb(g_idle_ctx);
  }
}

/* The outcome's append is done (r: its result, or the error that kept it
 * from being queued): say how the turn ended. */
static void finish_end(pd_turn *t, int r) {
  const char *status = t->outcome;
  char *msg = t->msg;
  if (r < 0) {
    /* The outcome could not be recorded: say so to the user. The transcript
     * is unchanged by the failed append (pt_append_durable rolls back). */
    pd_error("session %s turn %d: saving the outcome failed: %s", t->s->id, t->turn_id,
             strerror(-r));
    char m2[1200];
    snprintf(m2, sizeof m2, "could not save the reply to the transcript: %s%s%s", strerror(-r),
             msg[0] ? "; " : "", msg);
    size_t l = strnlen(m2, sizeof t->msg - 1);
    memcpy(msg, m2, l);
    msg[l] = 0;
    status = "error";
  }
  int tr = pd_session_touch(t->s);
  if (tr < 0) pd_warn("session %s: updating session.json: %s", t->s->id, strerror(-tr));
  pd_info("session %s turn %d: %s%s%s", t->s->id, t->turn_id, status, msg[0] ? ": " : "", msg);
  json_t *p = json_pack("{s:s, s:i, s:s}", "session", t->s->id, "turn_id", t->turn_id, "status",
                        status);
  if (msg[0]) json_object_set_new(p, "error", json_string(msg));
  emit(t, "turn.done", p);
  turn_end(t);
}

/* The responder is done: queue the outcome's append (finish_end follows). */
static void finish_begin(pd_turn *t) {
  const char *reply = t->reply ? t->reply : "";
  pd_transcript_entry e[2];
  size_t n = 0;
  t->outcome = "ok";
  if (t->status == PD_RESP_OK) {
    e[n++] = (pd_transcript_entry){t->turn_id, "assistant", reply, NULL};
  } else if (t->status == PD_RESP_CANCELLED) {
    t->outcome = "cancelled";
    e[n++] = (pd_transcript_entry){t->turn_id, "assistant", reply, "cancelled"};
  } else {
    t->outcome = "error";
    snprintf(t->msg, sizeof t->msg, "%s", t->error ? t->error : "responder failed");
    if (t->reply_len) e[n++] = (pd_transcript_entry){t->turn_id, "assistant", reply, "incomplete"};
    e[n++] = (pd_transcript_entry){t->turn_id, "error", t->msg, NULL};
  }
  t->phase = T_SAVING_OUTCOME;
  int r = save(t, e, n);
  if (r < 0) finish_end(t, r);
}

/* The user entry's append is done: reply to the sender's call, then run. */
static int user_saved(pd_turn *t) {
  pd_task_disarm(&t->task);
  int r = pd_transcript_commit(t->s->transcript);
  pd_turn_saved_fn cb = t->saved_cb;
  t->saved_cb = NULL;
  if (r < 0) {
    if (cb) cb(t->saved_ctx, t->s->id, r, 0);
    turn_end(t);
    return r;
  }
  r = pd_session_touch(t->s);
  if (r < 0) pd_warn("session %s: updating session.json: %s", t->s->id, strerror(-r));
  pd_info("session %s turn %d: started (%zu bytes of text)", t->s->id, t->turn_id,
          strlen(t->user_text));
  t->phase = T_RUNNING;
  if (cb) cb(t->saved_ctx, t->s->id, 0, t->turn_id);
  return 0;
}

static void async_cb(uv_async_t *a) {
  pd_turn *t = a->data;
  PD_POLL(&t->task);
  PD_LABEL("session", t->s->id);
  if (t->finished) return;
  if (t->phase != T_RUNNING) {
    if (!atomic_load_explicit(&t->saved, memory_order_acquire)) return; /* not yet */
    if (t->phase == T_SAVING_USER) {
      if (user_saved(t) < 0) return;
    } else {
      pd_task_disarm(&t->task);
      finish_end(t, pd_transcript_commit(t->s->transcript));
      return;
    }
  }
  if (!t->started) {
    t->started = 1;
    emit(t, "turn.started",
         json_pack("{s:s, s:i}", "session", t->s->id, "turn_id", t->turn_id));
    if (t->cancel_requested) {
      t->done_pending = 1;
      t->status = PD_RESP_CANCELLED;
    } else {
      json_t *msgs = build_messages(t);
      pd_resp_request req = {t->s->id, msgs, t->user_text, t->turn_id, g_cfg.cwd, &g_cfg.resp};
      pd_resp_sink sink = {sink_delta, sink_done, t};
      t->vt = g_cfg.responder ? g_cfg.responder : &pd_resp_builtin;
      int r = t->vt->start(t->loop, &req, &sink, &t->handle);
      json_decref(msgs);
      if (r < 0) {
        t->done_pending = 1;
        t->status = PD_RESP_ERROR;
        char e[256];
        snprintf(e, sizeof e, "cannot start the %s responder: %s", t->vt->name,
                 r > -1000 ? strerror(-r) : uv_strerror(r));
        t->error = strdup(e);
      } else {
        pd_task_arm(&t->task); /* waiting for the responder */
      }
    }
  }
  while (t->head) {
    piece *p = t->head;
    t->head = p->next;
    if (!t->head) t->tail = NULL;
    append_reply(t, p->text, p->len);
    emit(t, "turn.delta",
         json_pack("{s:s, s:i, s:s%}", "session", t->s->id, "turn_id", t->turn_id, "text",
                   p->text, p->len));
    free(p);
  }
  if (t->done_pending) {
    pd_task_disarm(&t->task);
    finish_begin(t);
  }
}

int pd_turn_start(uv_loop_t *loop, pd_session *s, pd_conn *sender, const char *text,
                  pd_turn_saved_fn saved, void *ctx) {
  if (s->running) return -EBUSY;
  pd_turn *t = calloc(1, sizeof *t);
  if (!t) return -ENOMEM;
  t->user_text = strdup(text);
  if (!t->user_text) {
    free(t);
    return -ENOMEM;
  }
  t->loop = loop;
  t->s = s;
  t->turn_id = pd_transcript_turns(s->transcript) + 1;
  t->phase = T_SAVING_USER;
  t->saved_cb = saved;
  t->saved_ctx = ctx;
  int r = uv_async_init(loop, &t->async, async_cb);
  if (r < 0) {
    free(t->user_text);
    free(t);
    return r;   /* libuv's codes are -errno on Unix: the cause is kept */
  }
  t->async.data = t;
  PD_TASK_START(&t->task, "turn");
  pd_transcript_entry e = {t->turn_id, "user", text, NULL};
  r = save(t, &e, 1);
  if (r < 0) {
    uv_close((uv_handle_t *)&t->async, on_async_closed);
    return r;
  }
  t->sender = sender && g_cfg.hold && g_cfg.release ? g_cfg.hold(sender) : NULL;
  s->running = t;
  g_running++;
  g_total++;
  return 0;
}

int pd_turn_cancel(pd_session *s) {
  pd_turn *t = s->running;
  if (!t || t->finished) return -ENOENT;
  if (t->cancel_requested) return 0;
  t->cancel_requested = 1;
  pd_info("session %s turn %d: cancel requested", s->id, t->turn_id);
  if (t->handle) t->vt->cancel(t->handle);
  return 0;
}

void pd_turn_cancel_all(pd_sessions *st, void (*done)(void *), void *ctx) {
  g_idle_cb = NULL;
  if (g_running == 0) {
    if (done) done(ctx);
    return;
  }
  g_idle_cb = done;
  g_idle_ctx = ctx;
  /* the store's session list is the registry of running turns */
  for (pd_session *s = pd_sessions_first(st); s; s = s->next)
    if (s->running) pd_turn_cancel(s);
}
