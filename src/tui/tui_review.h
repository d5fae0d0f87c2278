/*
 * tui_review.h - the review text of a feedback attachment, one text for
 * both front ends: the TUI's review screen (tui_feedback.c) and
 * `polytoken feedback show` (cli_feedback.c). Kept out of both so that
 * neither front end depends on the other.
 *
 * Threads: any (no state; the notice is constant).
 */
#ifndef TUI_REVIEW_H
#define TUI_REVIEW_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The review text of one attachment: label, kind, file, size, SHA-256 and,
 * for a CPU profile, sample count, duration and top functions (decoded with
 * pt_pprof_summary.h), ending with the raw-and-unsanitized notice. entry:
 * catalog entry (BORROWED); data/len: its bytes (BORROWED). Returns a
 * malloc'd, '\n'-separated text (caller frees) or NULL on out of memory. */
char *tui_review_describe(json_t *entry, const uint8_t *data, size_t len);

/* The one-paragraph notice shown before anything is sent. */
extern const char tui_review_notice[];

#endif
