/*
 * tui_cli.h - the scriptable subcommands of `polytoken` (daemon
 * start|stop|status, sessions, new, send, profile dump, --version, --help).
 *
 * Output contract: results go to stdout; every failure prints exactly one
 * line "polytoken: ..." to stderr and returns a non-zero exit code
 * (1 runtime failure, 2 usage error; `daemon status` returns 3 when the
 * daemon is not running, printing "not running" to stdout).
 *
 * Threads: main thread only (installs a SIGINT handler during `send`).
 */
#ifndef TUI_CLI_H
#define TUI_CLI_H

#include "common/pt_client.h"

/* Runs the subcommand in argv[1..] and returns the process exit code. */
int tui_cli_main(int argc, char **argv);

/* Prints the top-level usage to stdout. */
void tui_cli_usage(void);

/* Prints "polytoken: <fmt>\n" to stderr (one line; newlines in the message
 * are replaced by spaces). */
void tui_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A client for the state root the environment names (pt_home_resolve):
 * NULL after printing the reason (no HOME, a path over the length limit,
 * out of memory) with tui_cli_fail. Free with pt_client_del. */
pt_client *tui_cli_client_new(const char *client_name);

#endif
