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

/* tui_cli_fail and tui_cli_client_new (main.c uses them through this header) */
#include "tui/tui_cli_common.h"

/* Runs the subcommand in argv[1..] and returns the process exit code. */
int tui_cli_main(int argc, char **argv);

/* Prints the top-level usage to stdout. */
void tui_cli_usage(void);

#endif
