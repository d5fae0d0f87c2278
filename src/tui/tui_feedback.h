/*
 * tui_feedback.h - the TUI's feedback flow, a full-screen overlay over the
 * conversation screen, opened by one key (F3 in tui_app.c):
 *
 *   1. message   type the feedback text (Enter: next, Esc: cancel)
 *   2. picker    the daemon's artifact catalog, refreshed on open (labels,
 *                size, age); Space toggles an attachment, r refreshes,
 *                p has the daemon write a CPU profile now (profile.dump),
 *                and the TUI its own (profiling build), and picks them,
 *                Enter: review, Esc: back
 *   3. review    fetches the picked artifacts (SHA-256 checked) and shows
 *                each: file, size, and for a CPU profile the sample count,
 *                duration and top functions, plus the notice that
 *                attachments are sent raw and unsanitized. y sends, n/Esc
 *                goes back. Nothing is sent without y.
 *   4. result    the outbox bundle path and, when POLYTOKEN_FEEDBACK_URL is
 *                set, the upload outcome (the upload runs on a libuv worker
 *                thread so the screen stays live). Any key closes.
 *
 * Integration (tui_app.c): create with tui_feedback_new, call
 * tui_feedback_open on the key, and while tui_feedback_active() route keys
 * to tui_feedback_key and draw with tui_feedback_draw instead of the
 * conversation screen.
 *
 * Threads: loop thread only, except the upload worker, which touches only
 * its own copy of the paths and options and reports through the loop.
 * The daemon calls (artifacts.list/fetch, profile.dump) use the app's client in blocking
 * style for a moment (local socket, at most 512 KiB per reply).
 */
#ifndef TUI_FEEDBACK_H
#define TUI_FEEDBACK_H

#include <uv.h>
#include <wchar.h>
#include "common/pt_client.h"

typedef struct tui_feedback tui_feedback;

/* client: the app's client (BORROWED; must outlive the flow). loop: the app's
 * loop (for the upload worker). redraw(ud): asks the app to render (called
 * when the upload finishes). Returns NULL on out of memory. */
tui_feedback *tui_feedback_new(pt_client *client, uv_loop_t *loop, void (*redraw)(void *ud),
                               void *ud);
/* The profiling build's own sampler (tui_profiling.h): when set, `p` in
 * the picker also has it write a snapshot now (after the daemon wrote
 * one), so the TUI's CPU of what just happened can be attached too.
 * dump(path, cap, err, errcap, ud) returns 0 and the path written, or a
 * negative error and why in err. NULL (normal builds): the daemon's
 * snapshot only. */
typedef int (*tui_feedback_dump_fn)(char *path, size_t cap, char *err, size_t errcap, void *ud);
void tui_feedback_set_self_dump(tui_feedback *f, tui_feedback_dump_fn dump, void *ud);

/* Frees the flow. Must not be called while an upload runs (the app frees it
 * after uv_run returned, which waits for the worker). NULL ok. */
void tui_feedback_del(tui_feedback *f);

/* Asks a running upload to stop (the TUI is quitting: uv_run would wait for
 * the worker, which may be in a 30 s timeout or a backoff wait). The worker
 * ends within about a second; the bundle stays in the outbox, recorded as
 * failed with "upload cancelled". No-op without an upload. Loop thread. */
void tui_feedback_cancel_upload(tui_feedback *f);

/* Opens the flow at the message step (no-op while already open). */
void tui_feedback_open(tui_feedback *f);
/* 1 while the flow is on screen. */
int tui_feedback_active(const tui_feedback *f);
/* Handles one key (is_key: a KEY_* code from get_wch). */
void tui_feedback_key(tui_feedback *f, int is_key, wint_t ch);
/* Draws the current step on the whole screen (after erase()). */
void tui_feedback_draw(tui_feedback *f);

#endif
