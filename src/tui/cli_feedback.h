/*
 * cli_feedback.h - the `polytoken artifacts [--json]` and
 * `polytoken feedback send|show ...` subcommands (the review text they print
 * comes from tui_review.h, shared with the TUI's feedback screens).
 *
 * Output contract as in tui_cli.h: results on stdout; a failure prints one
 * line "polytoken: ..." on stderr and returns non-zero (1 runtime, 2 usage).
 *
 * Threads: main thread only.
 */
#ifndef CLI_FEEDBACK_H
#define CLI_FEEDBACK_H


/* `polytoken artifacts [--json]`: argv[1] is "artifacts". Returns the exit
 * code. */
int cli_artifacts_main(int argc, char **argv);

/* `polytoken feedback send --message TEXT [--attach KIND_OR_ID]...` and
 * `polytoken feedback show KIND_OR_ID`: argv[1] is "feedback". Returns the
 * exit code. */
int cli_feedback_main(int argc, char **argv);

#endif
