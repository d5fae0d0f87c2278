/*
 * tui_text.h - pure text helpers of the TUI (no curses, no I/O): UTF-8 display
 * width, word wrapping, relative time formatting, RFC 3339 parsing.
 *
 * All functions are thread-safe (no shared state) except that display width
 * depends on the process locale (LC_CTYPE must be a UTF-8 locale for
 * non-ASCII text; the TUI calls setlocale(LC_ALL, "") at start). Invalid
 * UTF-8 bytes count as one column each, so nothing is ever lost or hangs.
 */
#ifndef TUI_TEXT_H
#define TUI_TEXT_H

#include <stddef.h>
#include <time.h>

/* Length in bytes of the UTF-8 sequence starting at s[0] (1 for invalid bytes
 * and for a sequence truncated by n). n must be > 0. */
size_t tui_utf8_len(const char *s, size_t n);

/* Display columns of the character at s (0 for combining marks, 2 for wide
 * CJK, 1 for invalid bytes and unprintables); *bytes gets its byte length. */
int tui_char_width(const char *s, size_t n, size_t *bytes);

/* Display columns of s[0..n). */
int tui_str_width(const char *s, size_t n);

/* Bytes of the longest prefix of s[0..n) made of whole characters that fits
 * in `width` display columns (0 when width <= 0). */
size_t tui_fit_bytes(const char *s, size_t n, int width);

/* Byte offset of the start of the character before byte offset `off`
 * (0 stays 0). */
size_t tui_utf8_prev(const char *s, size_t off);

/* A wrapped line: bytes [off, off+len) of the input. */
typedef struct tui_span {
  size_t off, len;
} tui_span;

/* Word-wraps text[0..len) to lines of at most `width` display columns
 * (width < 1 is treated as 1). Breaks at spaces; a word longer than a line is
 * split at the column limit; '\n' forces a break; the spaces at a soft break
 * are dropped. Empty text gives one empty line.
 * Returns the number of lines (>= 1) and a malloc'd array in *spans (caller
 * frees), or -ENOMEM. */
int tui_wrap(const char *text, size_t len, int width, tui_span **spans);

/* Parses an RFC 3339 timestamp ("2026-11-29T21:33:13Z", optional fractional
 * seconds, 'Z' or a +hh:mm/-hh:mm offset) to a time_t. Returns 0 or
 * -EINVAL. */
int tui_parse_rfc3339(const char *s, time_t *out);

/* Formats how long ago `then` was relative to `now`: "just now" (under a
 * minute, or in the future), "1 min ago", "42 min ago", "3 h ago",
 * "1 day ago", "6 days ago", else the date "2026-11-02". Always
 * NUL-terminates buf (n > 0). */
void tui_reltime(time_t then, time_t now, char *buf, size_t n);

#endif
