/* tui_text.c - UTF-8 width, word wrap, relative time (see tui_text.h). */
#include "tui/tui_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

size_t tui_utf8_len(const char *s, size_t n) {
  unsigned char c = (unsigned char)s[0];
  size_t need;
  if (c < 0x80) return 1;
  else if ((c & 0xE0) == 0xC0 && c >= 0xC2) need = 2;
  else if ((c & 0xF0) == 0xE0) need = 3;
  else if ((c & 0xF8) == 0xF0 && c <= 0xF4) need = 4;
  else return 1;
  if (need > n) return 1;
  for (size_t i = 1; i < need; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80) return 1;
  return need;
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
