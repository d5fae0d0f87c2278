/* Unit tests for the input line editor and its history (tui_lineedit.c). */
#include "pt_test.h"
#include "tui/tui_lineedit.h"

#include <errno.h>

static void type(tui_lineedit *le, const char *s) {
  PT_ASSERT_INT_EQ(tui_le_insert(le, s, strlen(s)), 0);
}

PT_TEST(tui_lineedit_editing) {
  tui_lineedit *le = tui_lineedit_new(0, 0);
  PT_ASSERT(le);
  type(le, "hello world");
  PT_ASSERT_STR_EQ(tui_le_text(le), "hello world");
  PT_ASSERT_UINT_EQ(tui_le_cursor(le), 11);
  tui_le_home(le);
  type(le, ">");
  PT_ASSERT_STR_EQ(tui_le_text(le), ">hello world");
  tui_le_delete(le); /* deletes 'h' under the cursor */
  PT_ASSERT_STR_EQ(tui_le_text(le), ">ello world");
  tui_le_end(le);
  tui_le_backspace(le);
  PT_ASSERT_STR_EQ(tui_le_text(le), ">ello worl");
  tui_le_left(le);
  tui_le_left(le);
  type(le, "X");
  PT_ASSERT_STR_EQ(tui_le_text(le), ">ello woXrl");
  tui_le_right(le);
  tui_le_right(le);
  tui_le_right(le); /* past the end: stays at the end */
  PT_ASSERT_UINT_EQ(tui_le_cursor(le), tui_le_len(le));
  /* Ctrl-W removes the word before the cursor and the spaces after it */
  tui_le_set(le, "one two  three   ");
  tui_le_kill_word(le);
  PT_ASSERT_STR_EQ(tui_le_text(le), "one two  ");
  tui_le_kill_word(le);
  PT_ASSERT_STR_EQ(tui_le_text(le), "one ");
  /* Ctrl-U removes from the start to the cursor only */
  tui_le_set(le, "abc def");
  tui_le_left(le);
  tui_le_left(le);
  tui_le_kill_to_start(le);
  PT_ASSERT_STR_EQ(tui_le_text(le), "ef");
  PT_ASSERT_UINT_EQ(tui_le_cursor(le), 0);
  /* at the edges nothing happens */
  tui_le_backspace(le);
  tui_le_left(le);
  PT_ASSERT_STR_EQ(tui_le_text(le), "ef");
  tui_lineedit_del(le);
}

PT_TEST(tui_lineedit_utf8_cursor) {
  tui_lineedit *le = tui_lineedit_new(0, 0);
  type(le, "a\xc3\xa9\xe4\xbd\xa0" "b"); /* a é 你 b */
  tui_le_left(le);
  PT_ASSERT_UINT_EQ(tui_le_cursor(le), 6);
  tui_le_left(le);
  PT_ASSERT_UINT_EQ(tui_le_cursor(le), 3);
  tui_le_backspace(le); /* removes é as a whole */
  PT_ASSERT_STR_EQ(tui_le_text(le), "a\xe4\xbd\xa0" "b");
  tui_le_delete(le); /* removes 你 as a whole */
  PT_ASSERT_STR_EQ(tui_le_text(le), "ab");
  tui_lineedit_del(le);
}

PT_TEST(tui_lineedit_cap) {
  tui_lineedit *le = tui_lineedit_new(8, 0);
  type(le, "12345678");
  PT_ASSERT_INT_EQ(tui_le_insert(le, "9", 1), -ENOSPC);
  PT_ASSERT_STR_EQ(tui_le_text(le), "12345678"); /* nothing lost, nothing added */
  PT_ASSERT_INT_EQ(tui_le_set(le, "123456789"), -ENOSPC);
  PT_ASSERT_STR_EQ(tui_le_text(le), "12345678");
  tui_lineedit_del(le);
}

PT_TEST(tui_lineedit_history) {
  tui_lineedit *le = tui_lineedit_new(0, 3);
  char *s;
  type(le, "first");
  s = tui_le_submit(le);
  PT_ASSERT_STR_EQ(s, "first");
  free(s);
  PT_ASSERT_STR_EQ(tui_le_text(le), "");
  type(le, "second");
  free(tui_le_submit(le));
  type(le, "second"); /* duplicate of the newest: not added again */
  free(tui_le_submit(le));
  free(tui_le_submit(le)); /* empty: not added */
  PT_ASSERT_UINT_EQ(tui_le_history_len(le), 2);

  type(le, "draft");
  PT_ASSERT_INT_EQ(tui_le_history_prev(le), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "second");
  PT_ASSERT_INT_EQ(tui_le_history_prev(le), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "first");
  PT_ASSERT_INT_EQ(tui_le_history_prev(le), 0); /* oldest: stays */
  PT_ASSERT_STR_EQ(tui_le_text(le), "first");
  PT_ASSERT_INT_EQ(tui_le_history_next(le), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "second");
  PT_ASSERT_INT_EQ(tui_le_history_next(le), 1);
  PT_ASSERT_STR_EQ(tui_le_text(le), "draft"); /* the draft comes back */
  PT_ASSERT_INT_EQ(tui_le_history_next(le), 0);

  /* the cap drops the oldest entry */
  tui_le_clear(le);
  type(le, "third");
  free(tui_le_submit(le));
  type(le, "fourth");
  free(tui_le_submit(le));
  PT_ASSERT_UINT_EQ(tui_le_history_len(le), 3);
  PT_ASSERT_STR_EQ(tui_le_history_at(le, 0), "second");
  PT_ASSERT_STR_EQ(tui_le_history_at(le, 2), "fourth");
  tui_lineedit_del(le);
}

PT_TEST(tui_lineedit_insert_fit_whole_characters) {
  tui_lineedit *le = tui_lineedit_new(8, 0);
  PT_ASSERT(le != NULL);
  PT_ASSERT_INT_EQ(tui_le_insert_fit(le, "abcde", 5), 5);
  /* 3 bytes left: "é" (2) fits, "€" (3) would split, so it stays out */
  PT_ASSERT_INT_EQ(tui_le_insert_fit(le, "\xc3\xa9\xe2\x82\xac", 5), 2);
  PT_ASSERT_STR_EQ(tui_le_text(le), "abcde\xc3\xa9");
  PT_ASSERT_INT_EQ(tui_le_insert_fit(le, "\xe2\x82\xac", 3), 0);
  PT_ASSERT_INT_EQ(tui_le_insert_fit(le, "x", 1), 1);
  PT_ASSERT_UINT_EQ(tui_le_len(le), 8);
  PT_ASSERT_UINT_EQ(tui_le_max_bytes(le), 8);
  /* in the middle: inserted at the cursor */
  tui_le_clear(le);
  PT_ASSERT_INT_EQ(tui_le_insert_fit(le, "ad", 2), 2);
  tui_le_left(le);
  PT_ASSERT_INT_EQ(tui_le_insert_fit(le, "bc", 2), 2);
  PT_ASSERT_STR_EQ(tui_le_text(le), "abcd");
  PT_ASSERT_UINT_EQ(tui_le_cursor(le), 3);
  tui_lineedit_del(le);
}

PT_TEST(tui_lineedit_history_byte_cap) {
  size_t line = (size_t)1 << 20;
  tui_lineedit *le = tui_lineedit_new(line, 0);
  PT_ASSERT(le != NULL);
  char *big = malloc(line + 1);
  PT_ASSERT(big != NULL);
  size_t n = TUI_LE_HISTORY_BYTES / line + 4; /* more than the cap holds */
  for (size_t i = 0; i < n; i++) {
    memset(big, 'a' + (int)(i % 26), line);
    big[line] = '\0';
    PT_ASSERT_INT_EQ(tui_le_set(le, big), 0);
    free(tui_le_submit(le));
  }
  size_t h = tui_le_history_len(le), total = 0;
  for (size_t i = 0; i < h; i++) total += strlen(tui_le_history_at(le, i));
  PT_ASSERT(total <= TUI_LE_HISTORY_BYTES);
  PT_ASSERT_UINT_EQ(h, TUI_LE_HISTORY_BYTES / line);
  /* the newest entry is kept, the oldest went first */
  PT_ASSERT_INT_EQ(tui_le_history_at(le, h - 1)[0], 'a' + (int)((n - 1) % 26));
  PT_ASSERT_INT_EQ(tui_le_history_at(le, 0)[0], 'a' + (int)((n - h) % 26));
  free(big);
  tui_lineedit_del(le);
}
