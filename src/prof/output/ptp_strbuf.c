/*
 * ptp_strbuf.c - see ptp_strbuf.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof/output/ptp_strbuf.h"
#include "prof/ptp_alloc.h"

void ptp_strbuf_printf(ptp_strbuf *b, const char *fmt, ...) {
  if (b->err) return;
  size_t max = b->max ? b->max : PTP_STRBUF_MAX_DEFAULT;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) { b->err = -EINVAL; return; }
  size_t need = b->len + (size_t)n;
  if (need > max) { b->err = -E2BIG; return; }
  if (need + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 128;
    while (cap < need + 1) cap *= 2;
    char *s = ptp_realloc(b->s, cap);
    if (!s) { b->err = -ENOMEM; return; }
    b->s = s;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len = need;
}

char *ptp_strbuf_take(ptp_strbuf *b, int *err) {
  *err = b->err;
  char *s = b->s;
  if (!b->err && !s) {
    s = ptp_malloc(1);
    if (!s) *err = -ENOMEM;
    else s[0] = 0;
  }
  if (*err) {
    ptp_strbuf_free(b);
    return NULL;
  }
  b->s = NULL;
  b->len = b->cap = 0;
  return s;
}

void ptp_strbuf_free(ptp_strbuf *b) {
  free(b->s);
  b->s = NULL;
  b->len = b->cap = 0;
  b->err = 0;
}
