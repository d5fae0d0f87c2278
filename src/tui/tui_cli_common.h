/*
 * tui_cli_common.h - what every `polytoken` subcommand shares: the one-line
 * failure output and the client for the state root. Used by the command
 * dispatcher (tui_cli.c), the feedback subcommands (cli_feedback.c) and
 * main.c; it calls none of them, so they do not call each other in a loop.
 *
 * Threads: main thread only.
 */
#ifndef TUI_CLI_COMMON_H
#define TUI_CLI_COMMON_H

#include "common/pt_client.h"

/* Prints "polytoken: <fmt>\n" to stderr (one line; newlines in the message
 * are replaced by spaces, other control bytes escaped as \xNN: pt_escape.h),
 * after flushing stdout. */
void tui_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A client for the state root the environment names (pt_home_resolve):
 * NULL after printing the reason (no HOME, a path over the length limit,
 * out of memory) with tui_cli_fail. Free with pt_client_del. */
pt_client *tui_cli_client_new(const char *client_name);

#endif
