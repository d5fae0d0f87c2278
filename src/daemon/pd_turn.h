/*
 * pd_turn.h - one turn of a conversation: the user's text is appended to
 * the transcript, a responder produces the reply, the reply streams to the
 * sender and every connection attached to the session (turn.started,
 * turn.delta..., turn.done), and the outcome is appended to the transcript.
 *
 * Each turn is its own unit of work (task "turn") driven by its own
 * uv_async: the responder's callbacks (task "responder.*") only queue
 * pieces and wake the turn; the turn's callback sends them. So polls of the
 * two tasks never nest. Both appends run on the session's writer thread
 * (pd_transcript_append_async); the turn waits for each (its task armed)
 * and is woken by the same uv_async when it is done.
 *
 * One running turn per session (session->running), from the start of the
 * user entry's append to the commit of the outcome's. Threads: loop only,
 * but for the writer's completion (on_saved: an atomic flag and a wake).
 */
#ifndef PD_TURN_H
#define PD_TURN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <jansson.h>

#include "daemon/pd_ipc.h" /* pd_conn, as an opaque type only */
#include "daemon/pd_responder.h"
#include "daemon/pd_sessions.h"

typedef struct pd_turn pd_turn;

/* Where turns send their events and what they need from outside: wired by
 * the daemon (pd_daemon.c) to the IPC core, so this module calls no IPC
 * function itself (and IPC, methods and turns form no loop).
 *  emit(ctx, session, sender, name, params): sends the event to the
 *    session's attached connections and to sender (may be NULL); steals
 *    params.
 *  hold/release: keep the sender connection alive for the turn's events.
 *  cwd: the working directory external responders run in (BORROWED: must
 *    outlive every turn; NULL: the daemon's current directory).
 *  ctx: emit's first argument.
 *  responder: what produces the replies (NULL: the built-in one), with
 *    its settings (resp.cmd BORROWED: must outlive every turn).
 * Without a configuration (unit tests) events are dropped, the sender is
 * not kept and the built-in responder runs with its defaults. */
typedef struct pd_turn_config {
  void (*emit)(void *ctx, const char *session, pd_conn *sender, const char *name,
               json_t *params);
  pd_conn *(*hold)(pd_conn *c);
  void (*release)(pd_conn *c);
  const char *cwd;
  void *ctx;
  const pd_responder_vt *responder;
  pd_resp_settings resp;
} pd_turn_config;

/* Sets the configuration (copied) for turns started from now on. Loop
 * thread; call before the first turn. */
void pd_turn_configure(const pd_turn_config *cfg);

/* Called once a turn's user entry is saved (r 0, the turn's id in
 * turn_id; turn.started follows) or could not be (r -errno: nothing was
 * started, the transcript is unchanged). From a later loop callback. */
typedef void (*pd_turn_saved_fn)(void *ctx, const char *session, int r, int turn_id);

/* Starts a turn: appends the user entry durably on the session's writer
 * thread (s->writer; at once when it has none) and, once saved, tells
 * saved(ctx) and schedules the responder. The session counts as busy from
 * here on. Returns 0 (saved will be called), or an error with nothing
 * started and saved never called: -EBUSY (a turn is running), -EINVAL
 * (text not UTF-8), -EFBIG (text over the transcript limit), -ENOMEM.
 * Errors saved may get: -ENOSPC/-EIO/-EFBIG/... sender may be NULL. */
int pd_turn_start(uv_loop_t *loop, pd_session *s, pd_conn *sender, const char *text,
                  pd_turn_saved_fn saved, void *ctx);

/* Cancels the session's running turn (its turn.done will say "cancelled").
 * Returns 0, or -ENOENT if no turn is running. */
int pd_turn_cancel(pd_session *s);

/* Cancels every running turn; done() runs (from a later callback, or
 * immediately if none is running) once no turn is running. */
void pd_turn_cancel_all(pd_sessions *st, void (*done)(void *), void *ctx);

size_t pd_turn_running(void);   /* turns running now */
uint64_t pd_turn_total(void);   /* turns started since the daemon started */

#endif
