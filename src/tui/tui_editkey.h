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

/* Applies one key from get_wch() to `le` if it is a common editing key:
 *   function keys (is_key != 0): Left, Right, Home, End, Backspace, Delete;
 *   characters: Ctrl-U (kill to start), Ctrl-W (kill word), Ctrl-H and DEL
 *   (backspace), and any printable character (inserted as UTF-8; a line at
 *   its size cap keeps its text).
 * Returns 1 when the key was consumed, 0 when the caller should handle it
 * (Enter, Esc, Up/Down, other control keys...). */
int tui_edit_key(tui_lineedit *le, int is_key, wint_t ch);

#endif
