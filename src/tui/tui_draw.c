/*
 * tui_draw.c - drawing the TUI's screens from state with curses (units:
 * tui_app_internal.h).
 *
 * DESIGN
 *  - Reads struct tui_app and draws; changes only what drawing owns (the
 *    scroll clamp, last_total, the on_reached seam flag). Calls no other
 *    unit of the app, so any handler may change state and ask for a frame.
 *  - Widths are display columns (tui_text.h); a tab in the input line is
 *    drawn as one space, as the line editor counts it.
 */
#include "tui/tui_app_internal.h"
#include "tui/tui_term.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX_W 5

/* Draws s[0..n) at (y, x), clipped to `width` columns. */
static void put_clipped(int y, int x, const char *s, size_t n, int width) {
  size_t i = tui_fit_bytes(s, n, width);
  if (i > 0) mvaddnstr(y, x, s, (int)i);
}

static void put_str(int y, int x, const char *s, int width) { put_clipped(y, x, s, strlen(s), width); }

/* As put_clipped for the input line, which may hold tabs: each is drawn as
 * one space (curses would jump to the next tab stop, and the widths here
 * count a tab as one column). */
static void put_input(int y, int x, const char *s, size_t n, int width) {
  size_t end = tui_fit_bytes(s, n, width), i = 0;
  move(y, x);
  while (i < end) {
    const char *tab = memchr(s + i, '\t', end - i);
    size_t k = tab ? (size_t)(tab - (s + i)) : end - i;
    if (k > 0) addnstr(s + i, (int)k);
    i += k;
    if (tab) {
      addch(' ');
      i++;
    }
  }
}

/* Says on row y that the line refused typed or pasted text, and how much;
 * nothing when it refused none. */
static void draw_cut_notice(tui_app *app, tui_lineedit *le, int y) {
  if (app->cut_le != le || app->cut_bytes == 0) return;
  char msg[256];
  snprintf(msg, sizeof msg,
           "Line full: %zu bytes not inserted (the line holds at most %zu bytes)",
           app->cut_bytes, tui_le_max_bytes(le));
  attron(A_REVERSE | A_BOLD);
  mvhline(y, 0, ' ', COLS);
  put_str(y, 1, msg, COLS - 2);
  attroff(A_REVERSE | A_BOLD);
}

static const char *daemon_state(const tui_app *app) {
  if (!pt_client_connected(app->client)) return "disconnected";
  return app->streaming ? "streaming" : "connected";
}

static void draw_bar(int y, const char *left, const char *right) {
  int cols = COLS;
  attron(A_REVERSE);
  mvhline(y, 0, ' ', cols);
  /* whole key items only: one cut in the middle ("F10 /qu") helps nobody */
  put_clipped(y, 1, left, tui_fit_items(left, strlen(left), cols - 2), cols - 2);
  int rw = tui_str_width(right, strlen(right));
  if (rw + 2 < cols) put_str(y, cols - rw - 1, right, rw);
  attroff(A_REVERSE);
}

/* The bar's right side: the daemon state, after the standing notice (the
 * whole text when it fits beside `left`, else its short form). */
static void bar_right(const tui_app *app, const char *left, char *right, size_t cap) {
  const char *st = daemon_state(app);
  int room = COLS - 4 - tui_str_width(left, strlen(left));
  if (app->notice[0]) {
    snprintf(right, cap, "[%s] [%s]", app->notice, st);
    if (tui_str_width(right, strlen(right)) <= room) return;
  }
  if (app->notice_short[0]) snprintf(right, cap, "[%s] [%s]", app->notice_short, st);
  else snprintf(right, cap, "[%s]", st);
}

static void draw_picker(tui_app *app) {
  int rows = LINES, cols = COLS;
  char right[640];
  bar_right(app, "Polytoken - sessions", right, sizeof right);
  draw_bar(0, "Polytoken - sessions", right);
  int list_y = 2, list_h = rows - 4;
  if (list_h < 1) list_h = 1;
  attron(A_BOLD);
  char header[128];
  snprintf(header, sizeof header, "%-30.30s %-16s %6s  %s", "NAME", "LAST ACTIVITY", "TURNS", "ID");
  put_str(1, 2, header, cols - 3); /* clipped: printw would wrap onto the list */
  attroff(A_BOLD);
  size_t n = app->sessions ? json_array_size(app->sessions) : 0;
  if (!app->sessions) {
    mvaddstr(list_y, 2, "Loading sessions...");
  } else if (n == 0) {
    mvaddstr(list_y, 2, "No sessions yet. Press n to create one.");
  }
  if (app->sel >= (int)n) app->sel = n ? (int)n - 1 : 0;
  if (app->sel < 0) app->sel = 0;
  if (app->sel < app->top) app->top = app->sel;
  if (app->sel >= app->top + list_h) app->top = app->sel - list_h + 1;
  time_t now = time(NULL);
  for (int i = 0; i < list_h && app->top + i < (int)n; i++) {
    json_t *s = json_array_get(app->sessions, (size_t)(app->top + i));
    const char *name = json_string_value(json_object_get(s, "name"));
    const char *id = json_string_value(json_object_get(s, "id"));
    const char *last = json_string_value(json_object_get(s, "last_activity"));
    long long turns = json_integer_value(json_object_get(s, "turns"));
    char when[32] = "?";
    time_t t;
    if (last && tui_parse_rfc3339(last, &t) == 0) tui_reltime(t, now, when, sizeof when);
    char line[512];
    /* Name padded by display width, not bytes, so UTF-8 names line up. */
    char namecol[256];
    const char *nm = name ? name : "?";
    size_t nlen = strlen(nm);
    int w = 0;
    size_t k = 0;
    while (k < nlen) {
      size_t b;
      int cw = tui_char_width(nm + k, nlen - k, &b);
      if (w + cw > 30 || k + b >= sizeof namecol - 32) break;
      w += cw;
      k += b;
    }
    memcpy(namecol, nm, k);
    while (w < 30) { namecol[k++] = ' '; w++; }
    namecol[k] = '\0';
    snprintf(line, sizeof line, "%s %-16s %6lld  %s", namecol, when, turns, id ? id : "?");
    int y = list_y + i;
    int selected = app->top + i == app->sel;
    if (selected) {
      attron(A_REVERSE);
      mvhline(y, 0, ' ', cols);
    }
    mvaddstr(y, 0, selected ? ">" : " ");
    put_str(y, 2, line, cols - 3);
    if (selected) attroff(A_REVERSE);
  }
  /* Prompt / message line. */
  int py = rows - 2;
  if (app->pmode == PM_NEW || app->pmode == PM_RENAME) {
    const char *label = app->pmode == PM_NEW ? "New session name: " : "Rename to: ";
    int lw = (int)strlen(label);
    mvaddstr(py, 1, label);
    const char *t = tui_le_text(app->prompt);
    put_clipped(py, 1 + lw, t, tui_le_len(app->prompt), cols - lw - 2);
    draw_cut_notice(app, app->prompt, py - 1);
    int cx = 1 + lw + tui_str_width(t, tui_le_cursor(app->prompt));
    move(py, cx < cols ? cx : cols - 1);
  } else if (app->pmode == PM_DELETE) {
    json_t *s = json_array_get(app->sessions, (size_t)app->sel);
    char q[512];
    snprintf(q, sizeof q, "Delete session \"%s\"? (y/n)",
             json_string_value(json_object_get(s, "name")) ?: "?");
    put_str(py, 1, q, cols - 2);
  } else {
    put_str(py, 1, app->message, cols - 2);
  }
  const char *hint = app->pmode == PM_NORMAL
    ? (pt_client_connected(app->client)
         ? "n new  r rename  d delete  Enter attach  Up/Down select  q quit"
         : "Ctrl-R reconnect  q quit")
    : app->pmode == PM_DELETE ? "y delete  n/Esc keep" : "Enter confirm  Esc cancel";
  draw_bar(rows - 1, hint, "");
  curs_set(app->pmode == PM_NEW || app->pmode == PM_RENAME ? 1 : 0);
}

typedef struct sb_line {
  size_t entry;
  size_t off, len;
  int first;
} sb_line;

static const char *role_prefix(char role) {
  switch (role) {
  case 'u': return "you> ";
  case 'a': return "bot> ";
  case 'e': return "err> ";
  default: return "---  ";
  }
}

/* Wraps every entry to the screen width; returns the lines (malloc'd). */
static sb_line *layout(tui_app *app, int width, size_t *nout) {
  size_t n = 0, cap = 256;
  sb_line *v = malloc(cap * sizeof *v);
  if (!v) { *nout = 0; return NULL; }
  for (size_t i = 0; i < app->n_entries; i++) {
    entry *e = &app->entries[i];
    tui_span *sp = NULL;
    int k = tui_wrap(e->text ? e->text : "", e->len, width - PREFIX_W, &sp);
    if (k < 0) continue;
    for (int j = 0; j <= k; j++) { /* k lines + one blank separator */
      if (n == cap) {
        cap *= 2;
        sb_line *nv = realloc(v, cap * sizeof *nv);
        if (!nv) { free(sp); *nout = n; return v; }
        v = nv;
      }
      if (j < k) v[n++] = (sb_line){i, sp[j].off, sp[j].len, j == 0};
      else v[n++] = (sb_line){(size_t)-1, 0, 0, 0};
    }
    free(sp);
  }
  if (n > 0) n--; /* no separator after the last entry */
  *nout = n;
  return v;
}

int tui_draw_conv_height(void) {
  int h = LINES - 3;
  return h < 1 ? 1 : h;
}

static void draw_conv(tui_app *app) {
  int rows = LINES, cols = COLS;
  char left[512], right[640];
  snprintf(left, sizeof left, "%s (%s)", app->session_name, app->session_id);
  bar_right(app, left, right, sizeof right);
  draw_bar(0, left, right);
  int view_h = tui_draw_conv_height();
  size_t n;
  sb_line *v = layout(app, cols, &n);
  /* Scrolled up: keep the same lines in view while output grows below. */
  if (app->scroll > 0 && n > app->last_total) app->scroll += (int)(n - app->last_total);
  app->last_total = n;
  int max_scroll = (int)n > view_h ? (int)n - view_h : 0;
  if (app->scroll > max_scroll) app->scroll = max_scroll;
  if (app->scroll < 0) app->scroll = 0;
  size_t first = n > (size_t)view_h ? n - (size_t)view_h - (size_t)app->scroll : 0;
  for (int y = 0; y < view_h && first + (size_t)y < n; y++) {
    sb_line *l = &v[first + (size_t)y];
    if (l->entry == (size_t)-1) continue;
    entry *e = &app->entries[l->entry];
    int attr = e->role == 'u' ? A_BOLD : e->role == 'e' ? A_BOLD : e->role == 's' ? A_DIM : 0;
    if (l->first) {
      attron(A_BOLD);
      mvaddstr(1 + y, 0, role_prefix(e->role));
      attroff(A_BOLD);
    }
    attron(attr);
    put_clipped(1 + y, PREFIX_W, e->text + l->off, l->len, cols - PREFIX_W);
    attroff(attr);
  }
  free(v);
  if (app->scroll > 0) {
    char more[64];
    snprintf(more, sizeof more, "-- %d more lines below (PgDn) --", app->scroll);
    attron(A_REVERSE);
    put_str(rows - 3, cols > 40 ? cols - 40 : 0, more, 39);
    attroff(A_REVERSE);
  }
  /* Input line with horizontal scrolling that keeps the cursor visible. */
  int iy = rows - 2;
  mvaddstr(iy, 0, "> ");
  const char *t = tui_le_text(app->input);
  size_t len = tui_le_len(app->input), cur = tui_le_cursor(app->input);
  int avail = cols - 3;
  /* Leftmost start that still shows the cursor: walk back from the cursor
   * over what fits (O(screen width), not O(line length) per step: a pasted
   * 1 MiB line made the old forward scan quadratic on every redraw). */
  size_t start = cur;
  int used = 0;
  while (start > 0) {
    size_t p = tui_utf8_prev(t, start);
    int w = tui_str_width(t + p, start - p);
    if (used + w > avail) break;
    used += w;
    start = p;
  }
  put_input(iy, 2, t + start, len - start, avail);
  const char *hint = !pt_client_connected(app->client)
    ? "Ctrl-R reconnect  F2 /sessions  F10 /quit  PgUp/PgDn scroll"
    : app->streaming ? "Esc/Ctrl-C cancel reply  PgUp/PgDn scroll  F2 /sessions  F10 /quit"
                     : "Enter send  F3 feedback  F2 /sessions  F10 /quit  PgUp/PgDn scroll  Up/Down history  Ctrl-C quit";
  /* A line longer than the screen shows its size (and the cap), so a long
   * paste visibly progresses: stdin_cb returns to the loop every
   * STDIN_BURST bytes, and each return draws a frame. */
  char size[64] = "";
  if (start > 0 || tui_fit_bytes(t + start, len - start, avail) < len - start)
    snprintf(size, sizeof size, "line %zu/%zu B", len, tui_le_max_bytes(app->input));
  draw_bar(rows - 1, hint, size);
  draw_cut_notice(app, app->input, rows - 3);
  curs_set(1);
  move(iy, 2 + used);
}

void tui_draw_frame(tui_app *app) {
  if (!tui_term_active()) return;
  erase();
  if (app->feedback && tui_feedback_active(app->feedback)) tui_feedback_draw(app->feedback);
  else if (app->screen == SCR_PICKER) draw_picker(app);
  else draw_conv(app);
  refresh();
  /* Seam: the first time the conversation screen is on the terminal. */
  if (app->screen == SCR_CONV && !app->reached_fired && app->session_id[0]) {
    app->reached_fired = 1;
    if (app->on_reached) {
      char *dir = NULL;
      if (asprintf(&dir, "%s/sessions/%s", pt_client_home_dir(app->client), app->session_id) >= 0) {
        app->on_reached(app->session_id, dir, app->hook_ud);
        free(dir);
      }
    }
  }
}
