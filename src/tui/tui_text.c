/* tui_text.c - UTF-8 width, word wrap, relative time (see tui_text.h). */
#include "tui/tui_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* Well-formed UTF-8 (Unicode Table 3-7): the lead byte fixes the length
 * and the allowed range of the second byte, which is what rules out
 * overlong forms (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code
 * points above U+10FFFF (F4 90..BF); later bytes are 80..BF. Returns the
 * number of continuation bytes, or -1 for a byte that cannot start a
 * character (80..C1, F5..FF). */
static int utf8_lead(unsigned char c, unsigned char *lo, unsigned char *hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (c < 0x80) return 0;
  if (c >= 0xC2 && c <= 0xDF) return 1;
  if (c >= 0xE0 && c <= 0xEF) {
    if (c == 0xE0) *lo = 0xA0;
    if (c == 0xED) *hi = 0x9F;
    return 2;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (c == 0xF0) *lo = 0x90;
    if (c == 0xF4) *hi = 0x8F;
    return 3;
  }
  return -1;
}

size_t tui_utf8_len(const char *s, size_t n) {
  unsigned char lo, hi;
  int more = utf8_lead((unsigned char)s[0], &lo, &hi);
  if (more <= 0 || (size_t)more + 1 > n) return 1;
  for (int i = 1; i <= more; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < lo || c > hi) return 1;
    lo = 0x80;
    hi = 0xBF;
  }
  return (size_t)more + 1;
}

void tui_utf8_dec_init(tui_utf8_dec *d) { memset(d, 0, sizeof *d); }

int tui_utf8_dec_pending(const tui_utf8_dec *d) { return d->need != 0; }

/* Starts a character at byte b (no sequence pending). Returns 1 with *out
 * set when b is complete by itself (ASCII, or U+FFFD for a byte that cannot
 * start one), 0 when continuation bytes must follow. */
static int dec_start(tui_utf8_dec *d, unsigned char b, uint32_t *out) {
  int more = utf8_lead(b, &d->lo, &d->hi);
  if (more == 0) { *out = b; return 1; }
  if (more < 0) { *out = TUI_UTF8_REPLACEMENT; return 1; }
  d->need = (unsigned)more;
  d->cp = b & (0x3Fu >> more); /* 2-byte: 5 bits, 3-byte: 4, 4-byte: 3 */
  return 0;
}

int tui_utf8_dec_byte(tui_utf8_dec *d, unsigned char b, uint32_t out[2]) {
  if (d->need == 0) return dec_start(d, b, &out[0]);
  if (b < d->lo || b > d->hi) {
    /* The sequence so far is a maximal ill-formed subpart: one U+FFFD,
     * then b starts afresh (it is not lost). */
    d->need = 0;
    out[0] = TUI_UTF8_REPLACEMENT;
    return 1 + dec_start(d, b, &out[1]);
  }
  d->cp = (d->cp << 6) | (b & 0x3Fu);
  d->lo = 0x80;
  d->hi = 0xBF;
  if (--d->need > 0) return 0;
  out[0] = d->cp;
  return 1;
}

int tui_utf8_dec_flush(tui_utf8_dec *d, uint32_t *out) {
  if (d->need == 0) return 0;
  d->need = 0;
  *out = TUI_UTF8_REPLACEMENT;
  return 1;
}

size_t tui_utf8_encode(uint32_t cp, char buf[4]) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = TUI_UTF8_REPLACEMENT;
  if (cp < 0x80) {
    buf[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    buf[0] = (char)(0xC0 | (cp >> 6));
    buf[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    buf[0] = (char)(0xE0 | (cp >> 12));
    buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    buf[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  buf[0] = (char)(0xF0 | (cp >> 18));
  buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  buf[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

int tui_char_width(const char *s, size_t n, size_t *bytes) {
  size_t b = tui_utf8_len(s, n);
  *bytes = b;
  if (b == 1) return 1; /* ASCII, controls (drawn as one cell) and invalid bytes */
  mbstate_t st;
  memset(&st, 0, sizeof st);
  wchar_t wc;
  size_t r = mbrtowc(&wc, s, b, &st);
  if (r == (size_t)-1 || r == (size_t)-2) return 1;
  int w = wcwidth(wc);
  if (w < 0) return 1;
  return w;
}

int tui_str_width(const char *s, size_t n) {
  int w = 0;
  size_t i = 0;
  while (i < n) {
    size_t b;
    w += tui_char_width(s + i, n - i, &b);
    i += b;
  }
  return w;
}

size_t tui_fit_bytes(const char *s, size_t n, int width) {
  int col = 0;
  size_t i = 0;
  while (i < n) {
    size_t b;
    int w = tui_char_width(s + i, n - i, &b);
    if (col + w > width) break;
    col += w;
    i += b;
  }
  return i;
}

size_t tui_fit_items(const char *s, size_t n, int width) {
  size_t fit = tui_fit_bytes(s, n, width);
  if (fit == n) return n;
  /* the last item boundary at or before the cut: a "  " starting at or
   * before byte `fit` (at `fit` itself: the item before it fits whole) */
  for (size_t i = fit + 1; i-- > 0;)
    if (i + 1 < n && s[i] == ' ' && s[i + 1] == ' ') {
      size_t end = i;
      while (end > 0 && s[end - 1] == ' ') end--;
      if (end > 0) return end;
    }
  return fit;
}

size_t tui_utf8_prev(const char *s, size_t off) {
  if (off == 0) return 0;
  size_t i = off - 1;
  /* Step back over at most 3 continuation bytes, then check that the lead
   * byte really spans up to off; otherwise treat the last byte alone. */
  size_t k = 0;
  while (i > 0 && k < 3 && ((unsigned char)s[i] & 0xC0) == 0x80) { i--; k++; }
  if (tui_utf8_len(s + i, off - i) == off - i) return i;
  return off - 1;
}

/* Growable span array. */
typedef struct spans {
  tui_span *v;
  int n, cap;
} spans;

static int push(spans *a, size_t off, size_t len) {
  if (a->n == a->cap) {
    int nc = a->cap ? a->cap * 2 : 16;
    tui_span *nv = realloc(a->v, (size_t)nc * sizeof *nv);
    if (!nv) return -ENOMEM;
    a->v = nv;
    a->cap = nc;
  }
  a->v[a->n].off = off;
  a->v[a->n].len = len;
  a->n++;
  return 0;
}

/* Wraps one paragraph (no '\n') text[start..end). */
static int wrap_para(const char *t, size_t start, size_t end, int width, spans *a) {
  if (start == end) return push(a, start, 0);
  size_t line = start;
  while (line < end) {
    /* Extend as far as width allows, remembering the last space. */
    int col = 0;
    size_t i = line, last_space = (size_t)-1;
    while (i < end) {
      size_t b;
      int w = tui_char_width(t + i, end - i, &b);
      if (col + w > width && i > line) break;
      if (t[i] == ' ') last_space = i;
      col += w;
      i += b;
    }
    if (i >= end) return push(a, line, end - line);
    size_t brk, next;
    if (t[i] == ' ') {
      brk = i;           /* break exactly at a space */
    } else if (last_space != (size_t)-1 && last_space > line) {
      brk = last_space;
    } else {
      brk = i;           /* word longer than the line: hard split */
    }
    /* Trim spaces at the end of the line and skip them on the next one. */
    size_t e = brk;
    while (e > line && t[e - 1] == ' ') e--;
    if (push(a, line, e - line) < 0) return -ENOMEM;
    next = brk;
    while (next < end && t[next] == ' ') next++;
    line = next;
  }
  return 0;
}

int tui_wrap(const char *text, size_t len, int width, tui_span **out) {
  spans a = {0};
  if (width < 1) width = 1;
  size_t p = 0;
  for (;;) {
    const char *nl = memchr(text + p, '\n', len - p);
    size_t end = nl ? (size_t)(nl - text) : len;
    if (wrap_para(text, p, end, width, &a) < 0) { free(a.v); return -ENOMEM; }
    if (!nl) break;
    p = end + 1;
  }
  *out = a.v;
  return a.n;
}

/* Days since 1970-01-01 of a civil date (proleptic Gregorian). */
static long days_from_civil(long y, unsigned m, unsigned d) {
  y -= m <= 2;
  long era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (long)doe - 719468;
}

static int digits(const char *s, int n, int *v) {
  int x = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    x = x * 10 + (s[i] - '0');
  }
  *v = x;
  return 0;
}

int tui_parse_rfc3339(const char *s, time_t *out) {
  int Y, M, D, h, m, sec;
  if (!s || strlen(s) < 20) return -EINVAL;
  if (digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' ||
      digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' ||
      digits(s + 17, 2, &sec))
    return -EINVAL;
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return -EINVAL;
  const char *p = s + 19;
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9') return -EINVAL;
    while (*p >= '0' && *p <= '9') p++;
  }
  long off = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh, om;
    if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om)) return -EINVAL;
    off = (oh * 60L + om) * 60L * (*p == '+' ? 1 : -1);
    p += 6;
  } else {
    return -EINVAL;
  }
  if (*p) return -EINVAL;
  long days = days_from_civil(Y, (unsigned)M, (unsigned)D);
  *out = (time_t)(days * 86400L + h * 3600L + m * 60L + sec - off);
  return 0;
}

void tui_reltime(time_t then, time_t now, char *buf, size_t n) {
  long d = (long)(now - then);
  if (d < 60) {
    snprintf(buf, n, "just now");
  } else if (d < 3600) {
    snprintf(buf, n, "%ld min ago", d / 60);
  } else if (d < 86400) {
    snprintf(buf, n, "%ld h ago", d / 3600);
  } else if (d < 7 * 86400) {
    long days = d / 86400;
    snprintf(buf, n, "%ld day%s ago", days, days == 1 ? "" : "s");
  } else {
    struct tm tm;
    gmtime_r(&then, &tm);
    snprintf(buf, n, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
  }
}
