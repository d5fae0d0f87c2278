/*
 * cli_feedback.h - the `polytoken artifacts [--json]` and
 * `polytoken feedback send|show ...` subcommands, and the attachment review
 * text shared with the TUI's feedback screens (tui_feedback.h).
 *
 * Output contract as in tui_cli.h: results on stdout; a failure prints one
 * line "polytoken: ..." on stderr and returns non-zero (1 runtime, 2 usage).
 *
 * Threads: main thread only.
 */
#ifndef CLI_FEEDBACK_H
#define CLI_FEEDBACK_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* `polytoken artifacts [--json]`: argv[1] is "artifacts". Returns the exit
 * code. */
int cli_artifacts_main(int argc, char **argv);

/* `polytoken feedback send --message TEXT [--attach KIND_OR_ID]...` and
 * `polytoken feedback show KIND_OR_ID`: argv[1] is "feedback". Returns the
 * exit code. */
int cli_feedback_main(int argc, char **argv);

/* The review text of one attachment: label, kind, file, size, SHA-256 and,
 * for a CPU profile, sample count, duration and top functions (decoded with
 * pt_feedback_pprof.h), ending with the raw-and-unsanitized notice. entry:
 * catalog entry (BORROWED); data/len: its bytes. Returns a malloc'd,
 * '\n'-separated text (caller frees) or NULL on out of memory. */
char *cli_feedback_describe(json_t *entry, const uint8_t *data, size_t len);

/* The one-paragraph notice shown before anything is sent. */
extern const char cli_feedback_notice[];

#endif
