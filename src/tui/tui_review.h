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

/* The review text of one attachment: label, kind, file (absolute when the
 * catalog gives it), size, SHA-256 and, for a CPU profile, sample count,
 * duration and top functions (decoded with pt_pprof_summary.h) and, for a
 * snapshot under TUI_REVIEW_FEW_SAMPLES samples or TUI_REVIEW_SHORT_NS
 * long, a note that it is nearly empty and that the merged profiles are
 * offered too, ending with the raw-and-unsanitized notice. entry:
 * catalog entry (BORROWED); data/len: its bytes (BORROWED). Returns a
 * malloc'd, '\n'-separated text (caller frees) or NULL on out of memory. */
char *tui_review_describe(json_t *entry, const uint8_t *data, size_t len);

/* 1 when kind is a CPU profile's (a snapshot or the merged profiles). */
int tui_review_is_profile(const char *kind);

/* A profile entry's window and samples as the pickers show them ("60.0 s,
 * 1234 samples"), from the catalog's samples and duration_ns; "" for other
 * entries. Returns buf. */
const char *tui_review_window(json_t *entry, char *buf, size_t n);

/* A snapshot is nearly empty below these (the review says so). */
#define TUI_REVIEW_FEW_SAMPLES 20
#define TUI_REVIEW_SHORT_NS 1000000000LL

/* The one-paragraph notice shown before anything is sent. */
extern const char tui_review_notice[];

#endif
