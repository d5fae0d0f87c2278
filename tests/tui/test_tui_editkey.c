/* Unit tests for the editing keys shared by every TUI input line
 * (tui_editkey.c): what they do to the line, and which keys are left to the
 * caller. No terminal needed: only curses' key codes are used. */
#include "pt_test.h"
#include "tui/tui_editkey.h"

#include <curses.h>
#include <locale.h>

static void type(tui_lineedit *le, const char *ascii) {
  for (const char *p = ascii; *p; p++) PT_ASSERT_INT_EQ(tui_edit_key(le, 0, (wint_t)*p), 1);
}

PT_TEST(tui_editkey_common_keys) {
  if (!setlocale(LC_CTYPE, "C.UTF-8")) PT_SKIP("no C.UTF-8 locale");
  tui_lineedit *le = tui_lineedit_new(0, 0);
  PT_ASSERT(le != NULL);
  type(le, "hello world");
  PT_ASSERT_STR_EQ(tui_le_text(le), "hello world");
  /* Ctrl-W kills the word before the cursor, Ctrl-H and DEL backspace */
  PT_ASSERT_INT_EQ(tui_edit_key(le, 0, TUI_CTRL('w')), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "hello ");
  PT_ASSERT_INT_EQ(tui_edit_key(le, 0, TUI_CTRL('h')), 1);
  PT_ASSERT_INT_EQ(tui_edit_key(le, 0, 127), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "hell");
  /* function keys move and delete */
  PT_ASSERT_INT_EQ(tui_edit_key(le, 1, KEY_HOME), 1);
  PT_ASSERT_INT_EQ(tui_edit_key(le, 1, KEY_DC), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "ell");
  PT_ASSERT_INT_EQ(tui_edit_key(le, 1, KEY_RIGHT), 1);
  PT_ASSERT_INT_EQ(tui_edit_key(le, 1, KEY_BACKSPACE), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "ll");
  PT_ASSERT_INT_EQ(tui_edit_key(le, 1, KEY_END), 1);
  PT_ASSERT_INT_EQ(tui_edit_key(le, 1, KEY_LEFT), 1);
  /* a wide character is inserted as UTF-8 at the cursor */
  PT_ASSERT_INT_EQ(tui_edit_key(le, 0, 0x65e5), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "l\xe6\x97\xa5l");
  /* Ctrl-U kills to the start */
  PT_ASSERT_INT_EQ(tui_edit_key(le, 0, TUI_CTRL('u')), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "l");
  tui_lineedit_del(le);
}

PT_TEST(tui_editkey_leaves_other_keys_to_the_caller) {
  tui_lineedit *le = tui_lineedit_new(0, 0);
  PT_ASSERT(le != NULL);
  type(le, "keep");
  static const wint_t chars[] = {'\r', '\n', 27, TUI_CTRL('c'), TUI_CTRL('r'), TUI_CTRL('a'),
                                 TUI_CTRL('e')};
  for (size_t i = 0; i < sizeof chars / sizeof chars[0]; i++)
    PT_ASSERT_INT_EQ(tui_edit_key(le, 0, chars[i]), 0);
  static const wint_t keys[] = {KEY_ENTER, KEY_UP, KEY_DOWN, KEY_PPAGE, KEY_NPAGE, KEY_F(2),
                                KEY_F(10), KEY_RESIZE};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    PT_ASSERT_INT_EQ(tui_edit_key(le, 1, keys[i]), 0);
  PT_ASSERT_STR_EQ(tui_le_text(le), "keep");
  PT_ASSERT_UINT_EQ(tui_le_cursor(le), 4);
  tui_lineedit_del(le);
}

PT_TEST(tui_editkey_full_line_keeps_text) {
  tui_lineedit *le = tui_lineedit_new(4, 0);
  PT_ASSERT(le != NULL);
  type(le, "abcdef"); /* consumed even when the cap drops them */
  PT_ASSERT_STR_EQ(tui_le_text(le), "abcd");
  tui_lineedit_del(le);
}

PT_TEST(tui_editkey_inserts_utf8_in_any_locale) {
  /* The line is UTF-8 for the daemon even in the C locale, where wcrtomb
   * cannot encode U+FFFD (what invalid input decodes to). */
  if (!setlocale(LC_CTYPE, "C")) PT_SKIP("no C locale");
  tui_lineedit *le = tui_lineedit_new(0, 0);
  PT_ASSERT(le != NULL);
  PT_ASSERT_INT_EQ(tui_edit_key(le, 0, 'a'), 1);
  PT_ASSERT_INT_EQ(tui_edit_key(le, 0, 0xFFFD), 1);
  PT_ASSERT_INT_EQ(tui_edit_key(le, 0, 0x1F600), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "a\xef\xbf\xbd\xf0\x9f\x98\x80");
  setlocale(LC_CTYPE, "C.UTF-8");
  tui_lineedit_del(le);
}
