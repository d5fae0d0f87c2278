/* tui_lineedit.c - input line editing and history (see tui_lineedit.h). */
#include "tui/tui_lineedit.h"
#include "tui/tui_text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct tui_lineedit {
  char *buf;
  size_t len, cap, cursor, max_bytes;
  char **hist;
  size_t hist_len, hist_max, hist_bytes;
  /* Browsing: hist_pos == hist_len means "editing the draft". */
  size_t hist_pos;
  char *draft;
};

tui_lineedit *tui_lineedit_new(size_t max_bytes, size_t history_max) {
  tui_lineedit *le = calloc(1, sizeof *le);
  if (!le) return NULL;
  le->max_bytes = max_bytes ? max_bytes : 65536;
  le->hist_max = history_max ? history_max : 500;
  le->cap = 64;
  le->buf = calloc(1, le->cap);
  le->hist = calloc(le->hist_max, sizeof *le->hist);
  if (!le->buf || !le->hist) {
    tui_lineedit_del(le);
    return NULL;
  }
  return le;
}

void tui_lineedit_del(tui_lineedit *le) {
  if (!le) return;
  for (size_t i = 0; i < le->hist_len; i++) free(le->hist[i]);
  free(le->hist);
  free(le->draft);
  free(le->buf);
  free(le);
}

const char *tui_le_text(const tui_lineedit *le) { return le->buf; }
size_t tui_le_len(const tui_lineedit *le) { return le->len; }
size_t tui_le_cursor(const tui_lineedit *le) { return le->cursor; }
size_t tui_le_max_bytes(const tui_lineedit *le) { return le->max_bytes; }
size_t tui_le_history_len(const tui_lineedit *le) { return le->hist_len; }
const char *tui_le_history_at(const tui_lineedit *le, size_t i) {
  return i < le->hist_len ? le->hist[i] : NULL;
}

static int reserve(tui_lineedit *le, size_t need) {
  if (need + 1 <= le->cap) return 0;
  size_t nc = le->cap;
  while (nc < need + 1) nc *= 2;
  char *nb = realloc(le->buf, nc);
  if (!nb) return -ENOMEM;
  le->buf = nb;
  le->cap = nc;
  return 0;
}

int tui_le_insert(tui_lineedit *le, const char *s, size_t n) {
  if (le->len + n > le->max_bytes) return -ENOSPC;
  if (reserve(le, le->len + n) < 0) return -ENOMEM;
  memmove(le->buf + le->cursor + n, le->buf + le->cursor, le->len - le->cursor + 1);
  memcpy(le->buf + le->cursor, s, n);
  le->len += n;
  le->cursor += n;
  return 0;
}

long tui_le_insert_fit(tui_lineedit *le, const char *s, size_t n) {
  size_t room = le->max_bytes - le->len, k = n;
  if (k > room) {
    /* Back off to a character boundary: never insert half a character. */
    k = 0;
    while (k < n) {
      size_t b = tui_utf8_len(s + k, n - k);
      if (k + b > room) break;
      k += b;
    }
  }
  if (k == 0) return 0;
  int rc = tui_le_insert(le, s, k);
  return rc < 0 ? rc : (long)k;
}

void tui_le_left(tui_lineedit *le) { le->cursor = tui_utf8_prev(le->buf, le->cursor); }

void tui_le_right(tui_lineedit *le) {
  if (le->cursor < le->len) le->cursor += tui_utf8_len(le->buf + le->cursor, le->len - le->cursor);
}

void tui_le_home(tui_lineedit *le) { le->cursor = 0; }
void tui_le_end(tui_lineedit *le) { le->cursor = le->len; }

/* Removes bytes [a, b) and puts the cursor at a. */
static void cut(tui_lineedit *le, size_t a, size_t b) {
  memmove(le->buf + a, le->buf + b, le->len - b + 1);
  le->len -= b - a;
  le->cursor = a;
}

void tui_le_backspace(tui_lineedit *le) {
  if (le->cursor > 0) cut(le, tui_utf8_prev(le->buf, le->cursor), le->cursor);
}

void tui_le_delete(tui_lineedit *le) {
  if (le->cursor < le->len)
    cut(le, le->cursor, le->cursor + tui_utf8_len(le->buf + le->cursor, le->len - le->cursor));
}

void tui_le_kill_to_start(tui_lineedit *le) { cut(le, 0, le->cursor); }

void tui_le_kill_word(tui_lineedit *le) {
  size_t a = le->cursor;
  while (a > 0 && (le->buf[a - 1] == ' ' || le->buf[a - 1] == '\t')) a--;
  while (a > 0 && le->buf[a - 1] != ' ' && le->buf[a - 1] != '\t') a--;
  cut(le, a, le->cursor);
}

int tui_le_set(tui_lineedit *le, const char *s) {
  size_t n = strlen(s);
  if (n > le->max_bytes) return -ENOSPC;
  if (reserve(le, n) < 0) return -ENOMEM;
  memcpy(le->buf, s, n + 1);
  le->len = le->cursor = n;
  return 0;
}

void tui_le_clear(tui_lineedit *le) {
  le->buf[0] = '\0';
  le->len = le->cursor = 0;
  le->hist_pos = le->hist_len;
  free(le->draft);
  le->draft = NULL;
}

int tui_le_history_prev(tui_lineedit *le) {
  if (le->hist_pos > le->hist_len) le->hist_pos = le->hist_len;
  if (le->hist_pos == 0) return 0;
  if (le->hist_pos == le->hist_len) {
    free(le->draft);
    le->draft = strdup(le->buf);
    if (!le->draft) return 0;
  }
  le->hist_pos--;
  tui_le_set(le, le->hist[le->hist_pos]);
  return 1;
}

int tui_le_history_next(tui_lineedit *le) {
  if (le->hist_pos >= le->hist_len) return 0;
  le->hist_pos++;
  if (le->hist_pos == le->hist_len) {
    tui_le_set(le, le->draft ? le->draft : "");
    free(le->draft);
    le->draft = NULL;
  } else {
    tui_le_set(le, le->hist[le->hist_pos]);
  }
  return 1;
}

char *tui_le_submit(tui_lineedit *le) {
  char *line = strdup(le->buf);
  if (!line) return NULL;
  if (le->len > 0 && (le->hist_len == 0 || strcmp(le->hist[le->hist_len - 1], line) != 0)) {
    char *copy = strdup(line);
    if (copy) {
      while (le->hist_len > 0 &&
             (le->hist_len == le->hist_max || le->hist_bytes + le->len > TUI_LE_HISTORY_BYTES)) {
        le->hist_bytes -= strlen(le->hist[0]);
        free(le->hist[0]);
        memmove(le->hist, le->hist + 1, (le->hist_len - 1) * sizeof *le->hist);
        le->hist_len--;
      }
      le->hist[le->hist_len++] = copy;
      le->hist_bytes += le->len;
    }
  }
  tui_le_clear(le);
  return line;
}
