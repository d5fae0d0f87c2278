/*
 * pt_jsonl.c - newline-delimited JSON framer with a line cap. See pt_jsonl.h.
 *
 * Invariant: buf[start, len) holds bytes not yet returned. Every complete
 * line in it ends with '\n'; the bytes after the last '\n' form at most
 * max_line - 1 bytes (a longer tail is dropped at feed time and `skipping`
 * is set so the rest of that line is discarded when it arrives).
 * `scan` is where the next '\n' search starts (>= start) and `tail` where
 * the unterminated tail begins (start <= tail <= len), so each byte is
 * scanned a bounded number of times whatever the read sizes.
 */
#include "common/pt_jsonl.h"

#include "common/pt_alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pt_jsonl {
  char *buf;
  size_t cap, start, len, scan, tail;
  size_t max_line;
  int skipping;          /* discarding the rest of an oversize line */
  int oversize_pending;  /* report EOVERSIZE when start reaches oversize_at */
  size_t oversize_at;    /* where the dropped line was (lines before it first) */
};

pt_jsonl *pt_jsonl_new(size_t max_line) {
  pt_jsonl *f = pt_calloc(1, sizeof *f);
  if (!f) return NULL;
  if (max_line == 0) max_line = PT_JSONL_MAX_LINE;
  if (max_line < 2) max_line = 2;
  f->max_line = max_line;
  return f;
}

void pt_jsonl_del(pt_jsonl *f) {
  if (!f) return;
  free(f->buf);
  free(f);
}

size_t pt_jsonl_pending(const pt_jsonl *f) {
  size_t tail = f->tail < f->start ? f->start : f->tail;
  size_t n = f->len - tail;
  /* Inside a dropped oversize line: bytes are pending even if none are kept. */
  return n ? n : (f->skipping ? 1 : 0);
}

/* Makes room for `extra` more bytes (+1 for the NUL terminator we keep). */
static int reserve(pt_jsonl *f, size_t extra) {
  if (f->start > 0) {
    memmove(f->buf, f->buf + f->start, f->len - f->start);
    f->len -= f->start;
    f->scan = f->scan > f->start ? f->scan - f->start : 0;
    f->tail = f->tail > f->start ? f->tail - f->start : 0;
    f->oversize_at = f->oversize_at > f->start ? f->oversize_at - f->start : 0;
    f->start = 0;
  }
  if (f->len + extra + 1 <= f->cap) return 0;
  size_t ncap = f->cap ? f->cap : 4096;
  while (ncap < f->len + extra + 1) {
    if (ncap > ((size_t)-1) / 2) return -ENOMEM;
    ncap *= 2;
  }
  char *nb = pt_realloc(f->buf, ncap);
  if (!nb) return -ENOMEM;
  f->buf = nb;
  f->cap = ncap;
  return 0;
}

int pt_jsonl_feed(pt_jsonl *f, const void *data, size_t n) {
  const char *p = data;
  int ended_skip = 0;
  if (f->skipping) {
    const char *nl = memchr(p, '\n', n);
    if (!nl) return 0;           /* still inside the oversize line */
    n -= (size_t)(nl - p) + 1;
    p = nl + 1;
    ended_skip = 1;
  }
  if (n > 0) {
    int r = reserve(f, n);
    if (r < 0) return r;         /* state untouched: the caller may retry */
  }
  if (ended_skip) f->skipping = 0;
  if (n == 0) return 0;
  memcpy(f->buf + f->len, p, n);
  size_t old_len = f->len;
  f->len += n;
  f->buf[f->len] = 0;
  /* Only the new bytes can move the start of the unterminated tail. */
  if (f->tail < f->start) f->tail = f->start;
  for (size_t i = f->len; i > old_len; i--) {
    if (f->buf[i - 1] == '\n') { f->tail = i; break; }
  }
  if (f->len - f->tail > f->max_line - 1) {
    /* Unterminated line already too long: drop it now, discard the rest of
     * it as it arrives, and report once the lines before it are consumed. */
    f->len = f->tail;
    f->buf[f->len] = 0;
    if (f->scan > f->len) f->scan = f->len;
    f->skipping = 1;
    f->oversize_pending = 1;
    f->oversize_at = f->len;
  }
  return 0;
}

int pt_jsonl_next(pt_jsonl *f, const char **line, size_t *len) {
  for (;;) {
    if (f->oversize_pending && f->start >= f->oversize_at) {
      f->oversize_pending = 0;
      return PT_JSONL_EOVERSIZE;
    }
    if (f->scan < f->start) f->scan = f->start;
    char *nl = f->scan < f->len ? memchr(f->buf + f->scan, '\n', f->len - f->scan) : NULL;
    if (!nl) {
      f->scan = f->len;
      return 0;
    }
    size_t end = (size_t)(nl - f->buf);
    size_t s = f->start;
    f->start = end + 1;
    f->scan = f->start;
    size_t l = end - s;
    if (l + 1 > f->max_line) return PT_JSONL_EOVERSIZE; /* complete but too long */
    if (l == 0) continue;                               /* blank line */
    f->buf[end] = 0;   /* the '\n' becomes the terminator */
    *line = f->buf + s;
    *len = l;
    return 1;
  }
}

int pt_jsonl_parse(const char *line, size_t len, json_t **out, char *err, size_t errlen) {
  json_error_t je;
  *out = NULL;
  json_t *j = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
  if (!j && json_error_code(&je) == json_error_out_of_memory) {
    /* not the peer's fault: say so (the caller must not answer "invalid") */
    if (err && errlen) snprintf(err, errlen, "out of memory parsing a message");
    return -ENOMEM;
  }
  if (!j) {
    if (err && errlen) snprintf(err, errlen, "invalid JSON at column %d: %s", je.column, je.text);
    return -EINVAL;
  }
  if (!json_is_object(j)) {
    json_decref(j);
    if (err && errlen) snprintf(err, errlen, "message is not a JSON object");
    return -EINVAL;
  }
  *out = j;
  return 0;
}

int pt_jsonl_dump(const json_t *obj, size_t max_line, char **out, size_t *len) {
  if (max_line == 0) max_line = PT_JSONL_MAX_LINE;
  *out = NULL;
  *len = 0;
  size_t need = json_dumpb(obj, NULL, 0, JSON_COMPACT);
  if (need == 0) return -EINVAL;
  if (need + 1 > max_line) return PT_JSONL_EOVERSIZE;
  char *b = pt_malloc(need + 2);
  if (!b) return -ENOMEM;
  size_t got = json_dumpb(obj, b, need, JSON_COMPACT);
  if (got != need) { free(b); return -EINVAL; }
  b[need] = '\n';
  b[need + 1] = 0;
  *out = b;
  *len = need + 1;
  return 0;
}
