/*
 * tui_app.h - the interactive TUI: session picker and conversation screen on
 * ncurses, driven by a libuv loop (stdin poll, daemon connection poll,
 * SIGWINCH, a coalescing render timer).
 *
 * Seams for the profiling build (docs/tui.md):
 *  - "conversation screen reached": on_reached(session_id, session_dir, ud)
 *    is called once per process, the first time the conversation screen is
 *    shown (drawn) for a session. session_dir is $POLYTOKEN_HOME/sessions/<id>.
 *  - "final profile" slot: after_teardown(ud) runs when tui_app_run
 *    returns (the TUI quit, or its setup failed), AFTER endwin() restored
 *    the terminal.
 *  - event loop: every unit of work goes through tui_loop.h (pt_task seam).
 *
 * Threads: everything runs on the calling (main) thread.
 */
#ifndef TUI_APP_H
#define TUI_APP_H

#include <uv.h>
#include "common/pt_client.h"
#include "tui/tui_feedback.h"

typedef struct tui_app tui_app;

typedef void (*tui_reached_fn)(const char *session_id, const char *session_dir, void *ud);
typedef void (*tui_teardown_fn)(void *ud);

/* Creates the app around a CONNECTED client (ownership of `client` passes to
 * the app, also on failure). Returns NULL on out of memory / libuv failure. */
tui_app *tui_app_new(pt_client *client);
void tui_app_del(tui_app *app);

/* The loop the app runs on (for tui_profiling_init). Borrowed. */
uv_loop_t *tui_app_loop(tui_app *app);

/* Installs the seam callbacks (each may be NULL). */
void tui_app_set_hooks(tui_app *app, tui_reached_fn on_reached, tui_teardown_fn after_teardown,
                       void *ud);

/* The profiling build's own-sampler dump for the feedback picker's `p`
 * (tui_feedback_set_self_dump, handed over when tui_app_run creates the
 * picker: call before it). fn may be NULL. */
void tui_app_set_self_dump(tui_app *app, tui_feedback_dump_fn fn, void *ud);

/* A standing notice for the status bar of both screens (e.g. "TUI console
 * off: ... set POLYTOKEN_CONSOLE_TUI_BIND ..."): text when the bar is wide
 * enough, else short_text (e.g. "console off"); the picker's message line
 * shows text at start. Both copied; NULL or "" clears. */
void tui_app_set_notice(tui_app *app, const char *text, const char *short_text);

/* Starts on the conversation screen of a session instead of the picker.
 * attach_result: the sessions.attach result (BORROWED; copied). Returns 0 or
 * -EINVAL if it lacks a session. */
int tui_app_start_attached(tui_app *app, json_t *attach_result);

/* Sets up the terminal and the loop's handles, runs until the user quits,
 * tears the terminal down, runs the after-teardown slot, closes the loop.
 * Returns the process exit code (0 normal), or a negative errno / libuv
 * code when the setup failed: the terminal could not be set up, or a loop
 * handle could not be (errbuf then says which, e.g. "cannot start the TUI:
 * the SIGHUP watcher: too many open files"); every handle set up before
 * the failure is closed again and the terminal restored before it
 * returns. Call once. */
int tui_app_run(tui_app *app, char *errbuf, size_t errlen);

#endif
