/*
 * tui_editkey.h - the editing keys every input line of the TUI shares (the
 * conversation input, the picker's name prompt, the feedback message), so
 * they behave the same everywhere.
 *
 * Threads: the main (curses) thread, like the line it edits.
 */
#ifndef TUI_EDITKEY_H
#define TUI_EDITKEY_H

#include <wchar.h>

#include "tui/tui_lineedit.h"

/* Control-key code of a letter: TUI_CTRL('u') == 0x15. */
#define TUI_CTRL(c) ((c) & 0x1f)

/* Applies one key to `le` if it is a common editing key. is_key != 0: ch is
 * a curses KEY_* code; else ch is a Unicode code point (the TUI decodes
 * terminal bytes with tui_utf8_dec, tui_text.h; invalid input arrives as
 * U+FFFD). The keys:
 *   function keys (is_key != 0): Left, Right, Home, End, Backspace, Delete;
 *   characters: Ctrl-U (kill to start), Ctrl-W (kill word), Ctrl-H and DEL
 *   (backspace), and any other code point from U+0020 up (inserted as
 *   UTF-8; a line at its size cap keeps its text; callers that insert runs
 *   of text use tui_le_insert_fit and report what did not fit).
 * Returns 1 when the key was consumed, 0 when the caller should handle it
 * (Enter, Esc, Up/Down, other control keys...). */
int tui_edit_key(tui_lineedit *le, int is_key, wint_t ch);

#endif
