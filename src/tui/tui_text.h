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
#include <stdint.h>
#include <time.h>

/* Length in bytes of the well-formed UTF-8 sequence starting at s[0] (1 for
 * an invalid byte, a sequence truncated by n, an overlong form, a surrogate
 * or a code point above U+10FFFF: the same rules as the decoder below).
 * n must be > 0. */
size_t tui_utf8_len(const char *s, size_t n);

/* ---- UTF-8 decoding of raw input (keyboard, paste) ----
 *
 * Everything the user types or pastes reaches the TUI as bytes from the
 * terminal; JSON (and so the daemon) carries only well-formed UTF-8. The
 * decoder turns any byte stream into code points without losing the rest of
 * the stream: each maximal ill-formed subpart (Unicode 15, section 3.9,
 * "U+FFFD substitution of maximal subparts", the same as the WHATWG
 * Encoding Standard's UTF-8 decoder) becomes one U+FFFD, and the byte that
 * proved a sequence broken is decoded afresh. So "a", 0xFF, 0xFE, "(b"
 * decodes to a U+FFFD U+FFFD ( b.
 *
 * The state is a plain struct so callers can keep it between reads: a
 * sequence split across two reads decodes as if it had come in one.
 * Zero-initialise it (or tui_utf8_dec_init) before the first byte. */
#define TUI_UTF8_REPLACEMENT 0xFFFDu

typedef struct tui_utf8_dec {
  uint32_t cp;            /* bits gathered so far */
  unsigned need;          /* continuation bytes still expected (0 = none) */
  unsigned char lo, hi;   /* allowed range of the next continuation byte */
} tui_utf8_dec;

void tui_utf8_dec_init(tui_utf8_dec *d);

/* Feeds one byte. Writes 0, 1 or 2 code points to out[] and returns how
 * many: 0 while a sequence is incomplete; 2 when the byte ended a broken
 * sequence (U+FFFD for it) and is itself a complete character or another
 * invalid byte. */
int tui_utf8_dec_byte(tui_utf8_dec *d, unsigned char b, uint32_t out[2]);

/* Ends the stream (or a run of bytes, e.g. before a function key): an
 * incomplete sequence becomes one U+FFFD. Returns 1 with *out set, or 0 when
 * nothing was pending. */
int tui_utf8_dec_flush(tui_utf8_dec *d, uint32_t *out);

/* 1 while the decoder holds the start of an unfinished sequence. */
int tui_utf8_dec_pending(const tui_utf8_dec *d);

/* Encodes code point cp (<= U+10FFFF, not a surrogate; anything else is
 * encoded as U+FFFD) into buf, which needs 4 bytes. Returns the length. */
size_t tui_utf8_encode(uint32_t cp, char buf[4]);

/* Display columns of the character at s (0 for combining marks, 2 for wide
 * CJK, 1 for invalid bytes and unprintables); *bytes gets its byte length. */
int tui_char_width(const char *s, size_t n, size_t *bytes);

/* Display columns of s[0..n). */
int tui_str_width(const char *s, size_t n);

/* Bytes of the longest prefix of s[0..n) made of whole characters that fits
 * in `width` display columns (0 when width <= 0). */
size_t tui_fit_bytes(const char *s, size_t n, int width);

/* For a key bar of items separated by two spaces ("Enter send  F10 /quit"):
 * bytes of the longest prefix of s[0..n) made of whole items that fits in
 * `width` columns, so an item is dropped rather than cut in the middle;
 * when not even the first item fits, as tui_fit_bytes. */
size_t tui_fit_items(const char *s, size_t n, int width);

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
