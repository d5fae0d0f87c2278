/*
 * tui_lineedit.h - the input line of the conversation screen (and of the
 * picker's name prompt): a UTF-8 buffer with a cursor, readline-like editing
 * and a history of submitted lines. Pure data structure: no curses, no I/O,
 * so it is unit-tested directly.
 *
 * Invariants: the text is always NUL-terminated; 0 <= cursor <= len and the
 * cursor sits on a character boundary; len <= max_bytes; the history holds at
 * most history_max entries and at most TUI_LE_HISTORY_BYTES bytes of text
 * (oldest dropped first; the newest entry is always kept), so a history of
 * long pasted lines cannot grow without bound.
 *
 * The buffer does not check UTF-8: callers insert well-formed text (the TUI
 * decodes terminal input with tui_utf8_dec, tui_text.h).
 *
 * Threads: one thread per instance.
 */
#ifndef TUI_LINEEDIT_H
#define TUI_LINEEDIT_H

#include <stddef.h>

typedef struct tui_lineedit tui_lineedit;

/* Cap on the bytes of text all history entries hold together. */
#define TUI_LE_HISTORY_BYTES ((size_t)16 << 20)

/* max_bytes: cap on the line (0 = 64 KiB); history_max: entries kept
 * (0 = 500). Returns NULL on out of memory. Free with tui_lineedit_del. */
tui_lineedit *tui_lineedit_new(size_t max_bytes, size_t history_max);
void tui_lineedit_del(tui_lineedit *le);

/* Current text (borrowed, valid until the next modifying call), its length
 * in bytes, and the cursor as a byte offset. */
const char *tui_le_text(const tui_lineedit *le);
size_t tui_le_len(const tui_lineedit *le);
size_t tui_le_cursor(const tui_lineedit *le);
/* The cap given to tui_lineedit_new (after defaulting). */
size_t tui_le_max_bytes(const tui_lineedit *le);

/* Inserts n bytes of UTF-8 at the cursor. Returns 0, or -ENOSPC when the line
 * would exceed max_bytes (nothing inserted), -ENOMEM. */
int tui_le_insert(tui_lineedit *le, const char *s, size_t n);

/* Inserts at the cursor the longest prefix of s[0..n) that is made of whole
 * characters and fits under max_bytes (a paste into a line near its cap).
 * Returns the number of bytes inserted (n when all fitted; the caller tells
 * the user about the rest), or -ENOMEM (nothing inserted). */
long tui_le_insert_fit(tui_lineedit *le, const char *s, size_t n);

/* Cursor moves by one character / to the ends. */
void tui_le_left(tui_lineedit *le);
void tui_le_right(tui_lineedit *le);
void tui_le_home(tui_lineedit *le);
void tui_le_end(tui_lineedit *le);

/* Deletes the character before (backspace) / under (delete) the cursor. */
void tui_le_backspace(tui_lineedit *le);
void tui_le_delete(tui_lineedit *le);

/* Ctrl-U: deletes from the start of the line to the cursor. */
void tui_le_kill_to_start(tui_lineedit *le);

/* Ctrl-W: deletes the word before the cursor (and the spaces between it and
 * the cursor). */
void tui_le_kill_word(tui_lineedit *le);

/* Replaces the text (cursor at the end); -ENOSPC / -ENOMEM as insert. */
int tui_le_set(tui_lineedit *le, const char *s);

/* Clears the line (history browsing state too). */
void tui_le_clear(tui_lineedit *le);

/* Up / down through history. The line being edited is kept as a draft and
 * comes back when moving past the newest entry. Returns 1 if the text
 * changed, 0 at either end. */
int tui_le_history_prev(tui_lineedit *le);
int tui_le_history_next(tui_lineedit *le);

/* Enter: returns the line as a malloc'd string (caller frees; NULL on out of
 * memory), appends it to the history unless empty or equal to the newest
 * entry, and clears the line. */
char *tui_le_submit(tui_lineedit *le);

/* Number of history entries, and entry i (0 = oldest; borrowed). */
size_t tui_le_history_len(const tui_lineedit *le);
const char *tui_le_history_at(const tui_lineedit *le, size_t i);

#endif
