/*
 * pd_responder.h - the responder interface: something that produces the
 * assistant's reply to a turn, streamed in pieces.
 *
 * Two implementations:
 *   pd_resp_builtin  offline trigram model (pd_ngram.c), CPU work on a libuv
 *                    work thread, tokens streamed from a loop timer;
 *   pd_resp_exec     runs $POLYTOKEN_RESPONDER_CMD with /bin/sh -c per turn,
 *                    conversation JSON on stdin, reply streamed from stdout.
 * The daemon picks one at start from its settings (pd_responder_pick,
 * below; the settings are read once by pd_settings.c) and configures the
 * turns with it.
 *
 * Contract (both implementations; the turn code relies on it):
 *  - start() returns 0 and then calls sink->delta zero or more times and
 *    sink->done exactly once, always from later loop callbacks (never from
 *    inside start() or cancel()); or returns < 0 and calls nothing.
 *  - cancel() may be called any time before done; done then follows with
 *    PD_RESP_CANCELLED (or with the outcome that was already under way).
 *  - after done, the responder frees its own state (closing its handles);
 *    the caller must not touch the handle returned by start any more.
 *  - delta text is valid UTF-8 (the exec responder repairs its input).
 * Threads: loop thread only.
 */
#ifndef PD_RESPONDER_H
#define PD_RESPONDER_H

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

typedef enum { PD_RESP_OK = 0, PD_RESP_ERROR = 1, PD_RESP_CANCELLED = 2 } pd_resp_status;

typedef struct pd_resp_sink {
  void (*delta)(void *ctx, const char *text, size_t len);
  /* error: human-readable reason when status is PD_RESP_ERROR, else NULL */
  void (*done)(void *ctx, pd_resp_status status, const char *error);
  void *ctx;
} pd_resp_sink;

/* The responders' settings (docs/daemon.md, "Environment"; read by
 * pd_settings.c). */
#define PD_RESP_TIMEOUT_MS_DEFAULT 30000
typedef struct pd_resp_settings {
  const char *cmd; /* POLYTOKEN_RESPONDER_CMD: the external command; NULL or
                      "" = none (the built-in responder) */
  int delay_ms;    /* POLYTOKEN_RESPONDER_DELAY_MS: fixed delay between
                      built-in tokens; -1 = 15-40 ms, varying per token */
  int timeout_ms;  /* POLYTOKEN_RESPONDER_TIMEOUT_MS: no-output timeout of
                      the external command (PD_RESP_TIMEOUT_MS_DEFAULT) */
} pd_resp_settings;

typedef struct pd_resp_request {
  const char *session;   /* session id */
  json_t *messages;      /* borrowed for start(): [{"role","text"}...] incl. this turn */
  const char *text;      /* this turn's user text */
  int turn_id;
  /* working directory of an external command (BORROWED for start());
   * NULL: the daemon's current one */
  const char *cwd;
  /* BORROWED for start(); the responder copies what it keeps. NULL: the
   * defaults (no command, varying delay, default timeout). */
  const pd_resp_settings *settings;
} pd_resp_request;

typedef struct pd_responder_vt {
  const char *name; /* "builtin" | "exec" (also the task name suffix) */
  /* Starts producing a reply. *handle receives the per-turn state. */
  int (*start)(uv_loop_t *loop, const pd_resp_request *req, const pd_resp_sink *sink,
               void **handle);
  void (*cancel)(void *handle);
} pd_responder_vt;

extern const pd_responder_vt pd_resp_builtin;
extern const pd_responder_vt pd_resp_exec;

/* Max bytes of one reply; a responder producing more is stopped with an
 * error (keeps transcript lines and attach replies within the IPC limits). */
#define PD_REPLY_MAX ((size_t)256 << 10)

/* pd_resp_exec when the settings name a command, else the built-in one.
 * A static vtable (never NULL); s may be NULL. Any thread. Inline, so that
 * only its callers (the daemon's wiring) refer to both implementations. */
static inline const pd_responder_vt *pd_responder_pick(const pd_resp_settings *s) {
  return s && s->cmd && *s->cmd ? &pd_resp_exec : &pd_resp_builtin;
}

#endif
