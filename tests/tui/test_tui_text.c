/* Unit tests for word wrapping, UTF-8 width and relative time (tui_text.c). */
#include "pt_test.h"
#include "tui/tui_text.h"

#include <errno.h>
#include <locale.h>

/* Wraps and renders the lines joined by '|' into out. */
static int wrap_join(const char *text, int width, char *out, size_t cap) {
  tui_span *sp = NULL;
  int n = tui_wrap(text, strlen(text), width, &sp);
  PT_ASSERT(n >= 1);
  size_t o = 0;
  for (int i = 0; i < n; i++) {
    int k = snprintf(out + o, cap - o, "%s%.*s", i ? "|" : "", (int)sp[i].len, text + sp[i].off);
    PT_ASSERT(k >= 0 && (size_t)k < cap - o);
    o += (size_t)k;
  }
  free(sp);
  return n;
}

PT_TEST(tui_wrap_words_and_breaks) {
  char out[512];
  PT_ASSERT_INT_EQ(wrap_join("the quick brown fox jumps", 10, out, sizeof out), 3);
  PT_ASSERT_STR_EQ(out, "the quick|brown fox|jumps");
  /* exact fit, no trailing empty line */
  PT_ASSERT_INT_EQ(wrap_join("abcde fghij", 5, out, sizeof out), 2);
  PT_ASSERT_STR_EQ(out, "abcde|fghij");
  /* a word longer than the line is split hard */
  PT_ASSERT_INT_EQ(wrap_join("abcdefghijkl xy", 5, out, sizeof out), 3);
  PT_ASSERT_STR_EQ(out, "abcde|fghij|kl xy");
  /* explicit newlines, empty paragraphs kept */
  PT_ASSERT_INT_EQ(wrap_join("one\n\ntwo", 20, out, sizeof out), 3);
  PT_ASSERT_STR_EQ(out, "one||two");
  /* runs of spaces at a soft break are dropped */
  PT_ASSERT_INT_EQ(wrap_join("aaaa     bbbb", 6, out, sizeof out), 2);
  PT_ASSERT_STR_EQ(out, "aaaa|bbbb");
  /* empty text: one empty line; width < 1 behaves as 1 */
  PT_ASSERT_INT_EQ(wrap_join("", 10, out, sizeof out), 1);
  PT_ASSERT_STR_EQ(out, "");
  PT_ASSERT_INT_EQ(wrap_join("ab", 0, out, sizeof out), 2);
  PT_ASSERT_STR_EQ(out, "a|b");
}

PT_TEST(tui_wrap_utf8_width) {
  if (!setlocale(LC_CTYPE, "C.UTF-8")) PT_SKIP("no C.UTF-8 locale");
  char out[512];
  /* 2-byte characters count one column each */
  PT_ASSERT_INT_EQ(wrap_join("\xc3\xa9\xc3\xa9\xc3\xa9 \xc3\xa9\xc3\xa9", 4, out, sizeof out), 2);
  PT_ASSERT_STR_EQ(out, "\xc3\xa9\xc3\xa9\xc3\xa9|\xc3\xa9\xc3\xa9");
  /* wide CJK characters count two: 3 of them do not fit in 5 columns */
  PT_ASSERT_INT_EQ(tui_str_width("\xe4\xbd\xa0\xe5\xa5\xbd", 6), 4);
  PT_ASSERT_INT_EQ(wrap_join("\xe4\xbd\xa0\xe5\xa5\xbd\xe5\x90\x97", 5, out, sizeof out), 2);
  PT_ASSERT_STR_EQ(out, "\xe4\xbd\xa0\xe5\xa5\xbd|\xe5\x90\x97");
  /* a multi-byte character is never split; invalid bytes count as one */
  PT_ASSERT_INT_EQ(tui_str_width("a\xff" "b", 3), 3);
  PT_ASSERT_UINT_EQ(tui_utf8_prev("a\xc3\xa9", 3), 1);
  PT_ASSERT_UINT_EQ(tui_utf8_prev("a\xc3\xa9", 1), 0);
  /* truncated sequence: one byte at a time */
  PT_ASSERT_UINT_EQ(tui_utf8_len("\xe4\xbd", 2), 1);
}

PT_TEST(tui_reltime_formats) {
  char b[32];
  time_t now = 1800000000;
  tui_reltime(now - 5, now, b, sizeof b);
  PT_ASSERT_STR_EQ(b, "just now");
  tui_reltime(now + 30, now, b, sizeof b); /* clock skew: future */
  PT_ASSERT_STR_EQ(b, "just now");
  tui_reltime(now - 60, now, b, sizeof b);
  PT_ASSERT_STR_EQ(b, "1 min ago");
  tui_reltime(now - 3 * 60 - 59, now, b, sizeof b);
  PT_ASSERT_STR_EQ(b, "3 min ago");
  tui_reltime(now - 2 * 3600, now, b, sizeof b);
  PT_ASSERT_STR_EQ(b, "2 h ago");
  tui_reltime(now - 86400, now, b, sizeof b);
  PT_ASSERT_STR_EQ(b, "1 day ago");
  tui_reltime(now - 6 * 86400, now, b, sizeof b);
  PT_ASSERT_STR_EQ(b, "6 days ago");
  tui_reltime(1700000000, now, b, sizeof b); /* 2023-11-14T22:13:20Z */
  PT_ASSERT_STR_EQ(b, "2023-11-14");
  /* small buffer: truncated, terminated */
  tui_reltime(now - 120, now, b, 4);
  PT_ASSERT_STR_EQ(b, "2 m");
}

PT_TEST(tui_rfc3339_parse) {
  time_t t;
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("2023-11-14T22:13:20Z", &t), 0);
  PT_ASSERT_INT_EQ((long long)t, 1700000000LL);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("2023-11-14T22:13:20.123456Z", &t), 0);
  PT_ASSERT_INT_EQ((long long)t, 1700000000LL);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("2023-11-15T00:13:20+02:00", &t), 0);
  PT_ASSERT_INT_EQ((long long)t, 1700000000LL);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("1970-01-01T00:00:00Z", &t), 0);
  PT_ASSERT_INT_EQ((long long)t, 0);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("2024-02-29T12:00:00Z", &t), 0);
  PT_ASSERT_INT_EQ((long long)t, 1709208000LL);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("2023-11-14 22:13:20", &t), -EINVAL);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("2023-13-14T22:13:20Z", &t), -EINVAL);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("garbage", &t), -EINVAL);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339("2023-11-14T22:13:20Zjunk", &t), -EINVAL);
  PT_ASSERT_INT_EQ(tui_parse_rfc3339(NULL, &t), -EINVAL);
}

PT_TEST(tui_fit_bytes_whole_characters) {
  if (!setlocale(LC_CTYPE, "C.UTF-8")) PT_SKIP("no C.UTF-8 locale");
  PT_ASSERT_UINT_EQ(tui_fit_bytes("hello", 5, 3), 3);
  PT_ASSERT_UINT_EQ(tui_fit_bytes("hello", 5, 10), 5);
  PT_ASSERT_UINT_EQ(tui_fit_bytes("hello", 5, 0), 0);
  PT_ASSERT_UINT_EQ(tui_fit_bytes("hello", 5, -4), 0);
  /* "日本" is 2+2 columns, 3+3 bytes: a wide char never gets cut in half */
  const char *jp = "\xe6\x97\xa5\xe6\x9c\xac";
  PT_ASSERT_UINT_EQ(tui_fit_bytes(jp, 6, 3), 3);
  PT_ASSERT_UINT_EQ(tui_fit_bytes(jp, 6, 4), 6);
  PT_ASSERT_UINT_EQ(tui_fit_bytes(jp, 6, 1), 0);
  /* "é" (2 bytes, 1 column) fits whole, never split */
  PT_ASSERT_UINT_EQ(tui_fit_bytes("a\xc3\xa9z", 4, 2), 3);
}
