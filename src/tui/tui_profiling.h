/*
 * tui_profiling.h - what the profiling build does in the TUI process. Called
 * from main.c only inside `#if PT_PROFILING`; compiled only in the profiling
 * build (src/tui/meson.build).
 *
 * Threads: all are called on the main (loop) thread.
 */
#ifndef TUI_PROFILING_H
#define TUI_PROFILING_H

#include <stddef.h>
#include <uv.h>

#include "common/pt_client.h"

/* Called once after the client connected, before the app takes it: asks
 * the daemon for daemon.status (blocking, bounded) to learn whether its
 * task console listens (the daemon may have been started by this TUI, so
 * its log is the only other place that would say). c is BORROWED. */
void tui_profiling_daemon_status(pt_client *c);

/* The status-bar notice (tui_app_set_notice) when a task console, the
 * TUI's own or the daemon's, could not listen: why, and the setting that
 * would let it. Returns 1 with text/short_text filled, 0 when both listen.
 * Call after tui_profiling_init. */
int tui_profiling_notice(char *text, size_t textlen, char *short_text, size_t shortlen);

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

/* The feedback picker's `p` (tui_app_set_self_dump): a snapshot of the
 * TUI's window so far, now. 0 and the path written; -ENOTCONN before the
 * sampler started (the picker is reached from the conversation screen, so
 * it has), or ptprof_dump's error; err says why (ptprof_strerror). ud
 * unused. */
int tui_profiling_dump_now(char *path, size_t cap, char *err, size_t errcap, void *ud);

/* The "final profile" slot: called after the terminal was torn down (endwin
 * done, terminal restored) when the TUI quits normally. Writes the final
 * snapshot and prints its path on stdout ("TUI CPU profile: PATH"), now
 * that the terminal is the shell's again. */
void tui_profiling_after_teardown(void);

#endif
