/*
 * tui_profiling.h - what the profiling build does in the TUI process. Called
 * from main.c only inside `#if PT_PROFILING`; compiled only in the profiling
 * build (src/tui/meson.build). The implementation is the lead's
 * (tui_profiling.c).
 *
 * Threads: all three are called on the main (loop) thread.
 */
#ifndef TUI_PROFILING_H
#define TUI_PROFILING_H

#include <uv.h>

/* Called once before the TUI loop runs (e.g. start the task console server
 * on 127.0.0.1:6670). The sampler must NOT start here: time in the session
 * picker is not profiled. Returns 0 or a negative error code (the TUI then
 * runs without profiling). */
int tui_profiling_init(uv_loop_t *loop);

/* The "conversation screen reached" hook: called once per process, the first
 * time the conversation screen is drawn for a session. session_dir is
 * $POLYTOKEN_HOME/sessions/<id> (snapshots go to its profiling/ directory
 * with the tui-profile- prefix). Both strings are borrowed. */
void tui_profiling_conversation_reached(const char *session_id, const char *session_dir);

/* The "final profile" slot: called after the terminal was torn down (endwin
 * done, terminal restored) when the TUI quits normally. */
void tui_profiling_after_teardown(void);

#endif
