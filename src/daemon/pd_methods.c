/*
 * pd_methods.c - the built-in IPC methods (docs/ipc.md), registered through
 * the same registry the profiling build uses (pd_ipc_register_method).
 * All are synchronous: they complete their call before returning.
 */
#include "daemon/pd_methods.h"
#include "daemon/pd_ipc.h"
#include "daemon/pd_log.h"
#include "daemon/pd_turn.h"
#include "common/pt_jsonl.h"
#include "common/pt_version.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Fetches a required string param; on failure answers bad_request. */
static const char *need_str(pd_call *call, json_t *params, const char *key) {
  json_t *v = json_object_get(params, key);
  if (!json_is_string(v)) {
    pd_call_error(call, "bad_request", "params.%s is required and must be a string", key);
    return NULL;
  }
  return json_string_value(v);
}

/* Finds the session named by params[key]; on failure answers. */
static pd_session *need_session(const pd_methods_ctx *mc, pd_call *call, json_t *params,
                                const char *key) {
  const char *id = need_str(call, params, key);
  if (!id) return NULL;
  pd_session *s = pd_sessions_find(mc->sessions, id);
  if (!s) pd_call_error(call, "not_found", "no session %s", id);
  return s;
}

/* Completes a sessions.create/rename call from the store's result r:
 * {session} on success, bad_request for a bad name, io_error otherwise. */
static void reply_session(pd_call *call, int r, const pd_session *s, const char *verb) {
  if (r == -EINVAL)
    pd_call_error(call, "bad_request", "a session name has 1..%d bytes and no control characters",
                  PD_SESSION_NAME_MAX);
  else if (r < 0)
    pd_call_error(call, "io_error", "could not %s the session: %s", verb, strerror(-r));
  else
    pd_call_reply(call, json_pack("{s:o}", "session", pd_session_json(s)));
}

void pd_methods_set_status_section(pd_methods_ctx *ctx, const char *key,
                                   json_t *(*fn)(void *ud), void *ud) {
  ctx->status_key = key;
  ctx->status_section = fn;
  ctx->status_section_ud = ud;
}

static void m_status(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  const pd_methods_ctx *mc = ctx;
  pd_session *a = mc->sessions ? pd_sessions_active(mc->sessions) : NULL;
  json_t *r = json_pack("{s:i, s:s, s:b, s:I, s:I, s:o, s:I, s:b}", "pid", (int)getpid(),
                        "version", pt_version(), "profiling", pt_is_profiling_build(),
                        "uptime_ms", (json_int_t)mc->uptime_ms(), "sessions",
                        (json_int_t)(mc->sessions ? pd_sessions_count(mc->sessions) : 0),
                        "active_session", a ? json_string(a->id) : json_null(), "clients",
                        (json_int_t)pd_ipc_client_count(mc->ipc), "stopping", mc->stopping());
  if (r && mc->status_section && mc->status_key) {
    json_t *extra = mc->status_section(mc->status_section_ud);
    if (extra) json_object_set_new(r, mc->status_key, extra);
  }
  pd_call_reply(call, r);
}

static void m_stop(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  const pd_methods_ctx *mc = ctx;
  char why[64];
  pd_conn *c = pd_call_conn(call);
  snprintf(why, sizeof why, "daemon.stop from client %u", c ? pd_conn_id(c) : 0);
  pd_call_reply(call, json_object());
  mc->request_stop(why);
}

static void m_list(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  const pd_methods_ctx *mc = ctx;
  json_t *l = pd_sessions_list_json(mc->sessions);
  if (!l) pd_call_error(call, "internal", "out of memory");
  else pd_call_reply(call, l);
}

static void m_create(pd_call *call, json_t *params, void *ctx) {
  const pd_methods_ctx *mc = ctx;
  json_t *jn = json_object_get(params, "name");
  if (jn && !json_is_string(jn) && !json_is_null(jn)) {
    pd_call_error(call, "bad_request", "params.name must be a string");
    return;
  }
  const char *name = json_string_value(jn);
  pd_session *s = NULL;
  int r = pd_sessions_create(mc->sessions, name, &s);
  reply_session(call, r, s, "create");
}

static void m_rename(pd_call *call, json_t *params, void *ctx) {
  const pd_methods_ctx *mc = ctx;
  pd_session *s = need_session(mc, call, params, "id");
  if (!s) return;
  const char *name = need_str(call, params, "name");
  if (!name) return;
  int r = pd_session_rename(s, name);
  reply_session(call, r, s, "rename");
}

static void m_delete(pd_call *call, json_t *params, void *ctx) {
  const pd_methods_ctx *mc = ctx;
  pd_session *s = need_session(mc, call, params, "id");
  if (!s) return;
  if (s->running) {
    pd_call_error(call, "busy", "session %s has a running turn; cancel it first", s->id);
    return;
  }
  char id[PD_SESSION_ID_LEN + 1];
  memcpy(id, s->id, sizeof id);
  int r = pd_sessions_delete(mc->sessions, s);
  if (r < 0) {
    pd_call_error(call, "io_error", "could not delete session %s: %s", id, strerror(-r));
    return;
  }
  pd_ipc_detach_all(mc->ipc, id);
  pd_call_reply(call, json_object());
}

static void m_attach(pd_call *call, json_t *params, void *ctx) {
  const pd_methods_ctx *mc = ctx;
  pd_session *s = need_session(mc, call, params, "id");
  if (!s) return;
  char err[256];
  json_t *hist = NULL, *tr = NULL;
  /* The in-memory transcript (read from disk on first use only); a shallow
   * copy, because entries may be dropped from the reply below. */
  int r = pd_transcript_history(s->transcript, &hist, err, sizeof err);
  if (r < 0) {
    pd_call_error(call, "io_error", "cannot read the transcript of %s: %s", s->id, err);
    return;
  }
  if (!(tr = json_copy(hist))) {
    pd_call_error(call, "internal", "out of memory");
    return;
  }
  r = pd_sessions_set_active(mc->sessions, s);
  if (r < 0) pd_warn("session %s: persisting the active session: %s", s->id, strerror(-r));
  pd_conn *c = pd_call_conn(call);
  if (c) pd_conn_attach(c, s->id);
  json_t *res = json_pack("{s:o, s:o}", "session", pd_session_json(s), "transcript", tr);
  /* Keep the reply within the line limit: drop the oldest entries (the
   * transcript on disk is untouched) and say how many were left out. */
  size_t omitted = 0;
  for (;;) {
    char *line;
    size_t len;
    json_t *probe = json_pack("{s:I, s:O}", "id", (json_int_t)1 << 52, "result", res);
    r = probe ? pt_jsonl_dump(probe, PT_JSONL_MAX_LINE, &line, &len) : -ENOMEM;
    json_decref(probe);
    if (r == 0) {
      free(line);
      break;
    }
    size_t n = json_array_size(tr);
    if (r != PT_JSONL_EOVERSIZE || n == 0) break;
    size_t drop = n / 8 + 1;
    for (size_t i = 0; i < drop; i++) json_array_remove(tr, 0);
    omitted += drop;
  }
  if (omitted) json_object_set_new(res, "omitted", json_integer((json_int_t)omitted));
  pd_call_reply(call, res);
}

/* turn.send's reply: the user entry saved (or not) on the writer thread. */
static void send_saved(void *ctx, const char *session, int r, int turn_id) {
  pd_call *call = ctx;
  if (r == -EFBIG)
    pd_call_error(call, "io_error",
                  "session %s reached the transcript limit of %zu MiB; start a new session",
                  session, PD_TRANSCRIPT_MAX >> 20);
  else if (r < 0)
    pd_call_error(call, "io_error", "could not save your message to the transcript: %s",
                  strerror(-r));
  else
    pd_call_reply(call, json_pack("{s:i}", "turn_id", turn_id));
}

static void m_send(pd_call *call, json_t *params, void *ctx) {
  const pd_methods_ctx *mc = ctx;
  pd_session *s = need_session(mc, call, params, "session");
  if (!s) return;
  const char *text = need_str(call, params, "text");
  if (!text) return;
  if (!*text) {
    pd_call_error(call, "bad_request", "params.text is empty");
    return;
  }
  /* the call is completed by send_saved, once the message is on disk */
  int r = pd_turn_start(mc->loop, s, pd_call_conn(call), text, send_saved, call);
  if (r == -EBUSY)
    pd_call_error(call, "busy", "session %s already has a running turn", s->id);
  else if (r < 0)
    send_saved(call, s->id, r, 0);
}

static void m_cancel(pd_call *call, json_t *params, void *ctx) {
  const pd_methods_ctx *mc = ctx;
  pd_session *s = need_session(mc, call, params, "session");
  if (!s) return;
  if (pd_turn_cancel(s) < 0) pd_call_error(call, "not_found", "no turn is running in session %s", s->id);
  else pd_call_reply(call, json_object());
}

int pd_methods_register(const pd_methods_ctx *ctx) {
  static const struct {
    const char *name;
    pd_method_fn fn;
  } m[] = {
      {"daemon.status", m_status},   {"daemon.stop", m_stop},         {"sessions.list", m_list},
      {"sessions.create", m_create}, {"sessions.rename", m_rename},   {"sessions.delete", m_delete},
      {"sessions.attach", m_attach}, {"turn.send", m_send},           {"turn.cancel", m_cancel},
  };
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
    int r = pd_ipc_register_method(ctx->ipc, m[i].name, m[i].fn, (void *)ctx);
    if (r < 0) return r;
  }
  return 0;
}
