/*
 * cli_profile.h - `polytoken profile`: the command group over CPU profile
 * snapshots (docs/profiling.md, docs/tui.md):
 *   list [--session ID | --all] [--json]   the snapshots and their windows
 *   dump                                   a snapshot of the running daemon
 *   merge FILE... -o OUT | --session ID -o OUT   windows as one profile
 *   view FILE | --session ID [-o OUT.html] [--base FILE]   a flame graph page
 * Output contract as tui_cli.h: results on stdout, one "polytoken: ..."
 * line on stderr per failure; exit 1 for a failure, 2 for a usage error
 * (unknown option, argument too many, missing value), 0 for --help.
 * list, merge and view read files only (every build, no daemon needed);
 * dump never starts a daemon.
 * Threads: main thread only.
 */
#ifndef CLI_PROFILE_H
#define CLI_PROFILE_H

/* Runs `polytoken profile ...` (argv[1] == "profile"); returns the exit
 * code. */
int cli_profile_main(int argc, char **argv);

/* Prints the group's usage to stdout. */
void cli_profile_usage(void);

#endif
