/* tui_editkey.c - shared editing keys. See tui_editkey.h. */
#include "tui/tui_editkey.h"

#include "tui/tui_text.h"

#include <curses.h>

int tui_edit_key(tui_lineedit *le, int is_key, wint_t ch) {
  if (is_key) {
    switch (ch) {
    case KEY_LEFT: tui_le_left(le); return 1;
    case KEY_RIGHT: tui_le_right(le); return 1;
    case KEY_HOME: tui_le_home(le); return 1;
    case KEY_END: tui_le_end(le); return 1;
    case KEY_BACKSPACE: tui_le_backspace(le); return 1;
    case KEY_DC: tui_le_delete(le); return 1;
    default: return 0;
    }
  }
  switch (ch) {
  case TUI_CTRL('u'): tui_le_kill_to_start(le); return 1;
  case TUI_CTRL('w'): tui_le_kill_word(le); return 1;
  case TUI_CTRL('h'): case 127: tui_le_backspace(le); return 1;
  default: break;
  }
  if (ch < 0x20) return 0;
  /* Encoded by hand, not with wcrtomb: the line holds UTF-8 whatever the
   * locale (JSON carries UTF-8 only), and ch comes from tui_utf8_dec. */
  char buf[4];
  size_t n = tui_utf8_encode((uint32_t)ch, buf);
  tui_le_insert(le, buf, n); /* -ENOSPC: the line is full */
  return 1;
}
