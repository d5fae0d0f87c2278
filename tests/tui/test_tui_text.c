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

/* Decodes bytes s[0..n) as one stream (then flushes) into code points
 * written as "U+XXXX" joined by spaces, ASCII letters as themselves. */
static void decode_str(const char *s, size_t n, char *out, size_t cap) {
  tui_utf8_dec d;
  tui_utf8_dec_init(&d);
  uint32_t cps[2];
  size_t o = 0;
  out[0] = '\0';
  for (size_t i = 0; i <= n; i++) {
    int k = i < n ? tui_utf8_dec_byte(&d, (unsigned char)s[i], cps) : tui_utf8_dec_flush(&d, cps);
    PT_ASSERT(k >= 0 && k <= 2);
    for (int j = 0; j < k; j++) {
      int w = cps[j] < 0x80 && cps[j] > 0x20
                ? snprintf(out + o, cap - o, "%s%c", o ? " " : "", (char)cps[j])
                : snprintf(out + o, cap - o, "%sU+%04X", o ? " " : "", (unsigned)cps[j]);
      PT_ASSERT(w > 0 && (size_t)w < cap - o);
      o += (size_t)w;
    }
  }
  PT_ASSERT(!tui_utf8_dec_pending(&d));
}
#define DECODES(bytes, want)                                            \
  do {                                                                  \
    char got_[512];                                                     \
    decode_str(bytes, sizeof(bytes) - 1, got_, sizeof got_);            \
    PT_ASSERT_STR_EQ(got_, want);                                       \
  } while (0)

PT_TEST(tui_utf8_decoder_replaces_and_keeps_the_rest) {
  /* issue 9 item 10: the text after the bad bytes is kept */
  DECODES("a\xff\xfe(b", "a U+FFFD U+FFFD ( b");
  /* well-formed 1- to 4-byte characters, including the range ends */
  DECODES("\xc2\x80\xdf\xbf", "U+0080 U+07FF");
  DECODES("\xe0\xa0\x80\xe2\x82\xac\xef\xbf\xbf", "U+0800 U+20AC U+FFFF");
  DECODES("\xf0\x90\x80\x80\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf", "U+10000 U+1F600 U+10FFFF");
  /* Unicode 15 Table 3-8: one U+FFFD per maximal ill-formed subpart */
  DECODES("\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64",
          "a U+FFFD U+FFFD U+FFFD b U+FFFD c U+FFFD U+FFFD d");
  /* overlong forms, surrogates and > U+10FFFF are not characters */
  DECODES("\xc0\xaf", "U+FFFD U+FFFD");
  DECODES("\xe0\x80\xaf", "U+FFFD U+FFFD U+FFFD");
  DECODES("\xed\xa0\x80x", "U+FFFD U+FFFD U+FFFD x");
  DECODES("\xf0\x8f\xbf\xbf", "U+FFFD U+FFFD U+FFFD U+FFFD");
  DECODES("\xf4\x90\x80\x80", "U+FFFD U+FFFD U+FFFD U+FFFD");
  DECODES("\xf5\xff", "U+FFFD U+FFFD");
  /* a truncated sequence is one U+FFFD and the byte that ended it counts */
  DECODES("\xe2\x82x", "U+FFFD x");
  DECODES("\xe2\x82\xe2\x82\xac", "U+FFFD U+20AC");
  /* at the end of the stream, flush turns the unfinished start into U+FFFD */
  DECODES("ok\xf0\x9f", "o k U+FFFD");
}

PT_TEST(tui_utf8_decoder_keeps_state_between_reads) {
  tui_utf8_dec d;
  tui_utf8_dec_init(&d);
  uint32_t cps[2];
  /* "€" split over two reads decodes whole */
  PT_ASSERT_INT_EQ(tui_utf8_dec_byte(&d, 0xe2, cps), 0);
  PT_ASSERT(tui_utf8_dec_pending(&d));
  PT_ASSERT_INT_EQ(tui_utf8_dec_flush(&d, cps), 1); /* a key came: U+FFFD */
  PT_ASSERT_UINT_EQ(cps[0], 0xFFFD);
  PT_ASSERT_INT_EQ(tui_utf8_dec_flush(&d, cps), 0);    /* nothing left */
  PT_ASSERT_INT_EQ(tui_utf8_dec_byte(&d, 0xe2, cps), 0);
  PT_ASSERT_INT_EQ(tui_utf8_dec_byte(&d, 0x82, cps), 0);
  PT_ASSERT_INT_EQ(tui_utf8_dec_byte(&d, 0xac, cps), 1);
  PT_ASSERT_UINT_EQ(cps[0], 0x20AC);
  PT_ASSERT(!tui_utf8_dec_pending(&d));
}

PT_TEST(tui_utf8_encode_round_trip) {
  static const uint32_t cps[] = {0x24, 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfffd, 0xffff,
                                 0x10000, 0x10ffff};
  for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
    char b[4];
    size_t n = tui_utf8_encode(cps[i], b);
    PT_ASSERT_UINT_EQ(tui_utf8_len(b, n), n); /* well-formed by the same rules */
    tui_utf8_dec d;
    tui_utf8_dec_init(&d);
    uint32_t out[2];
    int k = 0;
    for (size_t j = 0; j < n; j++) k = tui_utf8_dec_byte(&d, (unsigned char)b[j], out);
    PT_ASSERT_INT_EQ(k, 1);
    PT_ASSERT_UINT_EQ(out[0], cps[i]);
  }
  /* surrogates and values past U+10FFFF are written as U+FFFD */
  char b[4];
  PT_ASSERT_UINT_EQ(tui_utf8_encode(0xd800, b), 3);
  PT_ASSERT_MEM_EQ(b, "\xef\xbf\xbd", 3);
  PT_ASSERT_UINT_EQ(tui_utf8_encode(0x110000, b), 3);
  PT_ASSERT_MEM_EQ(b, "\xef\xbf\xbd", 3);
  /* tui_utf8_len applies the decoder's rules */
  PT_ASSERT_UINT_EQ(tui_utf8_len("\xed\xa0\x80", 3), 1);
  PT_ASSERT_UINT_EQ(tui_utf8_len("\xe0\x9f\xbf", 3), 1);
  PT_ASSERT_UINT_EQ(tui_utf8_len("\xf4\x90\x80\x80", 4), 1);
  PT_ASSERT_UINT_EQ(tui_utf8_len("\xf4\x8f\xbf\xbf", 4), 4);
}

PT_TEST(tui_fit_items_drops_whole_items) {
  const char *bar = "Enter send  F3 feedback  F10 /quit";
  size_t n = strlen(bar);
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, 80), n);                 /* all fit */
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, (int)n), n);
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, (int)n - 1), strlen("Enter send  F3 feedback"));
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, 24), strlen("Enter send  F3 feedback"));
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, 23), strlen("Enter send  F3 feedback"));
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, 22), strlen("Enter send"));
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, 12), strlen("Enter send"));
  /* not even the first item: cut as tui_fit_bytes does */
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, 7), 7);
  PT_ASSERT_UINT_EQ(tui_fit_items(bar, n, 0), 0);
  /* one space is not a boundary */
  PT_ASSERT_UINT_EQ(tui_fit_items("a b  c", 6, 4), 3);
  /* wide characters count two columns */
  if (!setlocale(LC_CTYPE, "C.UTF-8")) PT_SKIP("no C.UTF-8 locale");
  const char *w = "\xe6\x97\xa5\xe6\x9c\xac  x";   /* two wide chars, 4 columns */
  PT_ASSERT_UINT_EQ(tui_fit_items(w, strlen(w), 6), 6);
}
