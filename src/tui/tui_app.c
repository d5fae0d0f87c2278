/*
 * tui_app.c - session picker and conversation screen (see tui_app.h).
 *
 * Structure: all state lives in struct tui_app; input handlers and daemon
 * callbacks only change state and call request_render(); the render unit
 * redraws the whole screen from state on a coalescing 0 ms timer, so a burst
 * of token deltas costs one redraw per loop iteration, not one per token.
 *
 * Daemon connection: the pt_client fd is watched with a tui_poll (readable,
 * plus writable while requests are queued). When the daemon goes away the
 * client is closed, the poll handle is closed and freed, the status shows
 * "disconnected" and Ctrl-R reconnects (blocking for at most the daemon
 * start timeout, which is acceptable for an explicit user action).
 */
#include "tui/tui_app.h"
#include "tui/tui_editkey.h"
#include "tui/tui_feedback.h"
#include "tui/tui_lineedit.h"
#include "tui/tui_loop.h"
#include "tui/tui_term.h"
#include "tui/tui_text.h"
#include "common/pt_jsonl.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define KEY_CTRL(c) ((c) & 0x1f)
#define CALL_TIMEOUT_MS 10000
#define MAX_ENTRY_BYTES (4u << 20) /* cap on one scrollback entry */
#define MAX_ENTRIES 20000          /* oldest scrollback entries dropped beyond */
/* Cap on the input line: what one IPC line (PT_JSONL_MAX_LINE, newline
 * included) leaves for the text once the turn.send request around it is
 * counted (`{"id":N,"method":"turn.send","params":{"session":ID,"text":""}}`
 * is under 160 bytes with a 20-digit id and a 63-byte session id). Text that
 * needs JSON escapes (quotes, backslashes) can still be too long once
 * escaped: Enter checks that and keeps the text (conv_submit). */
#define INPUT_MAX_BYTES (PT_JSONL_MAX_LINE - 256)
#define PROMPT_MAX_BYTES 200

typedef enum { SCR_PICKER, SCR_CONV } screen_t;
typedef enum { PM_NORMAL, PM_NEW, PM_RENAME, PM_DELETE } picker_mode;

typedef struct entry {
  char role; /* 'u' user, 'a' assistant, 'e' error, 's' system note */
  char *text;
  size_t len, cap;
  char turn_id[64];
} entry;

typedef struct conn_watch {
  tui_poll poll;
  tui_app *app;
} conn_watch;

struct tui_app {
  uv_loop_t loop;
  pt_client *client;
  screen_t screen;
  int running;  /* loop handles initialised (tui_app_run) */
  int quitting;
  int exit_code;

  tui_reached_fn on_reached;
  tui_teardown_fn after_teardown;
  void *hook_ud;
  int reached_fired;

  /* units of work */
  tui_unit u_input, u_render, u_conn, u_resize, u_signals, u_refresh;
  tui_poll stdin_poll;
  tui_timer render_timer;
  tui_timer refresh_timer; /* keeps relative times and the list current */
  tui_signal sig_winch, sig_int, sig_term, sig_hup;
  conn_watch *conn;

  /* picker */
  json_t *sessions; /* array of session objects, or NULL while loading */
  int sel, top;
  picker_mode pmode;
  tui_lineedit *prompt;
  char message[512];
  char pending_select[64]; /* id to select once the next list arrives */

  /* conversation */
  char session_id[64];
  char session_name[256];
  entry *entries;
  size_t n_entries, cap_entries;
  int streaming;
  int awaiting_own_turn; /* sent turn.send, its turn.started not seen yet */
  int foreign_turn;      /* the running turn was started by another client */
  char turn_id[64];
  int scroll; /* wrapped lines scrolled up from the bottom */
  size_t last_total; /* wrapped lines at the last draw (to hold the view) */
  tui_lineedit *input;
  char *unconfirmed; /* text of the turn.send awaiting its reply, put back
                        into an empty input line if the send fails */

  /* keyboard and paste input */
  tui_utf8_dec dec;     /* terminal bytes -> code points, kept across reads */
  tui_lineedit *cut_le; /* the line that refused text (input or prompt) */
  size_t cut_bytes;     /* bytes of typed/pasted text it refused since it
                           was last empty: shown on screen, never silent */

  tui_feedback *feedback; /* F3 overlay (tui_feedback.h), created in run */
};

static void request_render(tui_app *app);
static void conn_watch_start(tui_app *app);
static void conn_update(tui_app *app);
static void picker_reload(tui_app *app);
static int send_req(tui_app *app, const char *method, json_t *params, pt_client_reply_cb cb);
static void attach_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud);

/* ---- scrollback entries ---- */

/* Appends text to an entry, replacing control characters that would break
 * the layout (tab -> space; other C0 except '\n' -> '?'). */
static void entry_append(entry *e, const char *s, size_t n) {
  if (e->len + n > MAX_ENTRY_BYTES) n = MAX_ENTRY_BYTES - e->len;
  if (e->len + n + 1 > e->cap) {
    size_t nc = e->cap ? e->cap : 64;
    while (nc < e->len + n + 1) nc *= 2;
    char *nb = realloc(e->text, nc);
    if (!nb) return;
    e->text = nb;
    e->cap = nc;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    e->text[e->len++] = c == '\t' ? ' ' : (c < 0x20 && c != '\n') || c == 0x7f ? '?' : (char)c;
  }
  e->text[e->len] = '\0';
}

static entry *add_entry(tui_app *app, char role, const char *text, const char *turn_id) {
  if (app->n_entries == MAX_ENTRIES) {
    free(app->entries[0].text);
    memmove(app->entries, app->entries + 1, (app->n_entries - 1) * sizeof *app->entries);
    app->n_entries--;
  }
  if (app->n_entries == app->cap_entries) {
    size_t nc = app->cap_entries ? app->cap_entries * 2 : 64;
    entry *ne = realloc(app->entries, nc * sizeof *ne);
    if (!ne) return NULL;
    app->entries = ne;
    app->cap_entries = nc;
  }
  entry *e = &app->entries[app->n_entries++];
  memset(e, 0, sizeof *e);
  e->role = role;
  if (turn_id) snprintf(e->turn_id, sizeof e->turn_id, "%s", turn_id);
  entry_append(e, text ? text : "", text ? strlen(text) : 0);
  return e;
}

static void note(tui_app *app, char role, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(tui_app *app, char role, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  add_entry(app, role, buf, NULL);
  request_render(app);
}

static void clear_entries(tui_app *app) {
  for (size_t i = 0; i < app->n_entries; i++) free(app->entries[i].text);
  app->n_entries = 0;
  app->scroll = 0;
}

static entry *find_turn(tui_app *app, const char *turn_id) {
  for (size_t i = app->n_entries; i-- > 0;)
    if (app->entries[i].role == 'a' && strcmp(app->entries[i].turn_id, turn_id) == 0)
      return &app->entries[i];
  return NULL;
}

static void set_message(tui_app *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_message(tui_app *app, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(app->message, sizeof app->message, fmt, ap);
  va_end(ap);
  request_render(app);
}

/* ---- drawing ---- */

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
           "Line full: %zu bytes of typed/pasted text were not inserted (at most %zu bytes)",
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
  put_str(y, 1, left, cols - 2);
  int rw = tui_str_width(right, strlen(right));
  if (rw + 2 < cols) put_str(y, cols - rw - 1, right, rw);
  attroff(A_REVERSE);
}

static void draw_picker(tui_app *app) {
  int rows = LINES, cols = COLS;
  char right[64];
  snprintf(right, sizeof right, "[%s]", daemon_state(app));
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
#define PREFIX_W 5

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

static int conv_view_height(void) {
  int h = LINES - 3;
  return h < 1 ? 1 : h;
}

static void draw_conv(tui_app *app) {
  int rows = LINES, cols = COLS;
  char left[512], right[64];
  snprintf(left, sizeof left, "%s (%s)", app->session_name, app->session_id);
  snprintf(right, sizeof right, "[%s]", daemon_state(app));
  draw_bar(0, left, right);
  int view_h = conv_view_height();
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
                     : "Enter send  PgUp/PgDn scroll  Up/Down history  F2 /sessions  F3 feedback  F10 /quit  Ctrl-C quit";
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

static void render_now(tui_app *app) {
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

static void render_cb(void *ud) { render_now(ud); }
static void request_render(tui_app *app);
static void feedback_redraw(void *ud) { request_render(ud); }

static void request_render(tui_app *app) {
  /* Before tui_app_run set up the loop handles there is nothing to wake;
   * the first frame is requested there. */
  if (!app->running || app->quitting || tui_timer_pending(&app->render_timer)) return;
  tui_unit_wake(&app->u_render);
  tui_timer_start(&app->render_timer, 0, 0);
}

/* ---- quitting ---- */

static void close_cb_noop(uv_handle_t *h) { (void)h; }
/* h->data is the tui_poll, the first member of the heap-allocated
 * conn_watch: freeing it frees the watch. */
static void conn_close_cb(uv_handle_t *h) { free(h->data); }

static void conn_watch_stop(tui_app *app) {
  if (!app->conn) return;
  tui_poll_close(&app->conn->poll, conn_close_cb);
  app->conn = NULL;
  tui_unit_end(&app->u_conn);
}

static void app_quit(tui_app *app, int code) {
  if (app->quitting) return;
  app->quitting = 1;
  app->exit_code = code;
  conn_watch_stop(app);
  pt_client_close(app->client);
  /* uv_run returns only once the upload worker is done: make it quick. */
  tui_feedback_cancel_upload(app->feedback);
  tui_poll_close(&app->stdin_poll, close_cb_noop);
  tui_timer_close(&app->render_timer, close_cb_noop);
  tui_timer_close(&app->refresh_timer, close_cb_noop);
  tui_signal_close(&app->sig_winch, close_cb_noop);
  tui_signal_close(&app->sig_int, close_cb_noop);
  tui_signal_close(&app->sig_term, close_cb_noop);
  tui_signal_close(&app->sig_hup, close_cb_noop);
  tui_unit_end(&app->u_input);
  tui_unit_end(&app->u_render);
  tui_unit_end(&app->u_resize);
  tui_unit_end(&app->u_signals);
  tui_unit_end(&app->u_refresh);
}

/* ---- daemon connection ---- */

static void on_daemon_closed(pt_client *c, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  conn_watch_stop(app);
  app->streaming = 0;
  if (app->screen == SCR_CONV)
    note(app, 's', "Lost the connection to the daemon (%s). Press Ctrl-R to reconnect.",
         err->message);
  else
    set_message(app, "Lost the connection to the daemon (%s). Press Ctrl-R to reconnect.",
                err->message);
  request_render(app);
}

static void on_daemon_event(pt_client *c, const char *name, json_t *params, void *ud) {
  tui_app *app = ud;
  (void)c;
  if (!name || app->screen != SCR_CONV) return;
  const char *session = json_string_value(json_object_get(params, "session"));
  if (!session || strcmp(session, app->session_id) != 0) return;
  char turn_id[64];
  if (pt_client_id_str(json_object_get(params, "turn_id"), turn_id, sizeof turn_id) < 0) return;
  if (strcmp(name, "turn.started") == 0) {
    /* A turn we did not send (another client attached to this session):
     * its user text is not on screen; reload the transcript when it ends. */
    if (!app->awaiting_own_turn && strcmp(app->turn_id, turn_id) != 0) app->foreign_turn = 1;
    app->awaiting_own_turn = 0;
    app->streaming = 1;
    snprintf(app->turn_id, sizeof app->turn_id, "%s", turn_id);
    if (!find_turn(app, turn_id)) add_entry(app, 'a', "", turn_id);
  } else if (strcmp(name, "turn.delta") == 0) {
    const char *text = json_string_value(json_object_get(params, "text"));
    entry *e = find_turn(app, turn_id);
    if (!e) e = add_entry(app, 'a', "", turn_id);
    if (e && text) entry_append(e, text, strlen(text));
  } else if (strcmp(name, "turn.done") == 0) {
    const char *status = json_string_value(json_object_get(params, "status"));
    const char *error = json_string_value(json_object_get(params, "error"));
    if (strcmp(app->turn_id, turn_id) == 0) app->streaming = 0;
    if (app->foreign_turn) {
      app->foreign_turn = 0;
      send_req(app, "sessions.attach", json_pack("{s:s}", "id", app->session_id), attach_reply);
    }
    if (status && strcmp(status, "cancelled") == 0) {
      add_entry(app, 's', "(reply cancelled)", NULL);
    } else if (status && strcmp(status, "error") == 0) {
      char buf[1024];
      snprintf(buf, sizeof buf, "the reply failed: %s", error ? error : "unknown error");
      add_entry(app, 'e', buf, NULL);
    }
  }
  request_render(app);
}

static void conn_poll_cb(void *ud, int status, int events) {
  tui_app *app = ud;
  if (status < 0) {
    pt_client_close(app->client);
    on_daemon_closed(app->client, &(pt_client_error){"disconnected", "poll error"}, app);
    return;
  }
  if (events & UV_WRITABLE) {
    if (pt_client_flush(app->client) < 0) return; /* closed callback ran */
  }
  if (events & UV_READABLE) {
    if (pt_client_pump(app->client) < 0) return;
  }
  conn_update(app);
}

/* Keeps the poll's event mask in step with queued output. */
static void conn_update(tui_app *app) {
  if (!app->conn || app->quitting) return;
  int ev = UV_READABLE | (pt_client_wants_write(app->client) ? UV_WRITABLE : 0);
  tui_poll_start(&app->conn->poll, ev);
}

static void conn_watch_start(tui_app *app) {
  if (app->conn || !pt_client_connected(app->client)) return;
  conn_watch *w = calloc(1, sizeof *w);
  if (!w) return;
  w->app = app;
  tui_unit_start(&app->u_conn, "tui.daemon_conn");
  if (tui_poll_init(&app->loop, &w->poll, pt_client_fd(app->client), &app->u_conn, conn_poll_cb,
                    app) != 0) {
    free(w);
    return;
  }
  app->conn = w;
  conn_update(app);
}

/* Sends a request and updates the poll mask; reports failure in the UI. */
static int send_req(tui_app *app, const char *method, json_t *params, pt_client_reply_cb cb) {
  if (!pt_client_connected(app->client)) {
    json_decref(params);
    if (app->screen == SCR_CONV) note(app, 's', "Not connected to the daemon. Press Ctrl-R to reconnect.");
    else set_message(app, "Not connected to the daemon. Press Ctrl-R to reconnect.");
    return -ENOTCONN;
  }
  int rc = pt_client_request(app->client, method, params, cb, app);
  if (rc < 0) {
    if (app->screen == SCR_CONV) note(app, 'e', "could not send %s: %s", method, strerror(-rc));
    return rc;
  }
  conn_update(app);
  return 0;
}

/* ---- conversation screen ---- */

static void load_attach(tui_app *app, json_t *res) {
  json_t *s = json_object_get(res, "session");
  const char *id = json_string_value(json_object_get(s, "id"));
  const char *name = json_string_value(json_object_get(s, "name"));
  snprintf(app->session_id, sizeof app->session_id, "%s", id ? id : "?");
  snprintf(app->session_name, sizeof app->session_name, "%s", name ? name : "?");
  clear_entries(app);
  app->streaming = 0;
  app->turn_id[0] = '\0';
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(res, "transcript"), i, t) {
    const char *role = json_string_value(json_object_get(t, "role"));
    const char *text = json_string_value(json_object_get(t, "text"));
    char tidbuf[64];
    const char *tid = pt_client_id_str(json_object_get(t, "turn_id"), tidbuf, sizeof tidbuf) == 0
                        ? tidbuf : NULL;
    char r = !role ? 's' : strcmp(role, "user") == 0 ? 'u' : strcmp(role, "assistant") == 0 ? 'a' : 'e';
    add_entry(app, r, text ? text : "", tid);
    const char *status = json_string_value(json_object_get(t, "status"));
    if (r == 'a' && status && strcmp(status, "cancelled") == 0) add_entry(app, 's', "(reply cancelled)", NULL);
    else if (r == 'a' && status) add_entry(app, 's', "(reply incomplete)", NULL);
  }
  long long omitted = json_integer_value(json_object_get(res, "omitted"));
  if (omitted > 0) {
    char buf[128];
    snprintf(buf, sizeof buf, "(%lld older entries not shown)", omitted);
    /* Shown first: insert at the front by rotating the just-added entry. */
    if (add_entry(app, 's', buf, NULL) && app->n_entries > 1) {
      entry e = app->entries[app->n_entries - 1];
      memmove(app->entries + 1, app->entries, (app->n_entries - 1) * sizeof *app->entries);
      app->entries[0] = e;
    }
  }
  app->screen = SCR_CONV;
  app->message[0] = '\0';
  request_render(app);
}

static void attach_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  if (err) {
    if (app->screen == SCR_CONV) note(app, 'e', "cannot attach: %s", err->message);
    else set_message(app, "Cannot attach: %s", err->message);
    return;
  }
  load_attach(app, result);
}

/* After a reconnect: reload the transcript (the daemon's copy is the truth;
 * a reply that was streaming when the connection broke is shown as stored). */
static void reattach_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  attach_reply(c, result, err, ud);
  if (!err) note(ud, 's', "Reconnected to the daemon.");
}

static void send_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  char *text = app->unconfirmed;
  app->unconfirmed = NULL;
  if (err) {
    app->streaming = 0;
    app->awaiting_own_turn = 0;
    /* The daemon did not take it: give the text back unless the user has
     * started typing something else meanwhile. */
    int back = text && tui_le_len(app->input) == 0 && tui_le_set(app->input, text) == 0;
    free(text);
    note(app, 'e', "the message was not sent: %s%s", err->message,
         back ? " (your text is back in the input line)" : "");
    return;
  }
  free(text);
  if (!app->turn_id[0])
    pt_client_id_str(json_object_get(result, "turn_id"), app->turn_id, sizeof app->turn_id);
  request_render(app);
}

static void cancel_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  (void)c;
  (void)result;
  /* not_found: the turn finished before the cancel arrived; nothing to say. */
  if (err && strcmp(err->code, "not_found") != 0) note(ud, 'e', "cancel failed: %s", err->message);
}

static void go_picker(tui_app *app) {
  app->screen = SCR_PICKER;
  app->pmode = PM_NORMAL;
  picker_reload(app);
  request_render(app);
}

static void reconnect(tui_app *app) {
  if (pt_client_connected(app->client)) return;
  pt_client_error err;
  if (pt_client_connect(app->client, 1, CALL_TIMEOUT_MS, &err) < 0) {
    if (app->screen == SCR_CONV) note(app, 'e', "reconnect failed: %s", err.message);
    else set_message(app, "Reconnect failed: %s", err.message);
    return;
  }
  conn_watch_start(app);
  if (app->screen == SCR_CONV) {
    send_req(app, "sessions.attach", json_pack("{s:s}", "id", app->session_id), reattach_reply);
  } else {
    set_message(app, "Reconnected to the daemon.");
    picker_reload(app);
  }
}

static void cancel_turn(tui_app *app) {
  send_req(app, "turn.cancel", json_pack("{s:s}", "session", app->session_id), cancel_reply);
}

static void conv_submit(tui_app *app) {
  const char *raw = tui_le_text(app->input);
  if (strcmp(raw, "/quit") == 0) {
    free(tui_le_submit(app->input));
    app_quit(app, 0);
    return;
  }
  if (strcmp(raw, "/sessions") == 0) {
    free(tui_le_submit(app->input));
    go_picker(app);
    return;
  }
  if (tui_le_len(app->input) == 0) return;
  if (!pt_client_connected(app->client)) {
    note(app, 's', "Not connected to the daemon. Press Ctrl-R to reconnect; your text is kept.");
    return;
  }
  if (app->streaming) {
    note(app, 's', "A reply is still streaming; wait or press Esc to cancel it. Your text is kept.");
    return;
  }
  /* The line is cleared only once the request is queued: a text that
   * cannot be sent stays where the user can shorten it. */
  const char *text = tui_le_text(app->input);
  json_t *params = json_pack("{s:s, s:s}", "session", app->session_id, "text", text);
  if (!params) {
    /* The line holds UTF-8 only (tui_utf8_dec), so this is out of memory. */
    note(app, 'e', "the message was not sent: out of memory. Your text is kept.");
    return;
  }
  int rc = pt_client_request(app->client, "turn.send", params, send_reply, app);
  if (rc == PT_JSONL_EOVERSIZE) {
    json_t *js = json_string(text);
    size_t esc = js ? json_dumpb(js, NULL, 0, JSON_ENCODE_ANY | JSON_COMPACT) : 0;
    json_decref(js);
    note(app, 'e',
         "the message was not sent: JSON-escaped it takes %zu bytes (quotes and backslashes take "
         "two), more than one request line holds (%zu bytes); shorten it by about %zu bytes. "
         "Your text is kept.",
         esc, (size_t)PT_JSONL_MAX_LINE,
         esc + (PT_JSONL_MAX_LINE - INPUT_MAX_BYTES) > PT_JSONL_MAX_LINE
           ? esc + (PT_JSONL_MAX_LINE - INPUT_MAX_BYTES) - PT_JSONL_MAX_LINE : 0);
    return;
  }
  if (rc < 0) {
    /* Lost the connection while sending: send_reply and on_daemon_closed
     * have said so; the text is still in the line. */
    if (pt_client_connected(app->client)) note(app, 'e', "could not send turn.send: %s", strerror(-rc));
    return;
  }
  conn_update(app);
  char *sent = tui_le_submit(app->input); /* history + clear */
  add_entry(app, 'u', sent ? sent : "", NULL);
  free(app->unconfirmed);
  app->unconfirmed = sent;
  app->cut_bytes = 0;
  app->streaming = 1;
  app->awaiting_own_turn = 1;
  app->turn_id[0] = '\0';
  app->scroll = 0;
  request_render(app);
}

static void conv_key(tui_app *app, int is_key, wint_t ch) {
  tui_lineedit *le = app->input;
  if (tui_edit_key(le, is_key, ch)) return;
  if (is_key) {
    switch (ch) {
    case KEY_UP: tui_le_history_prev(le); break;
    case KEY_DOWN: tui_le_history_next(le); break;
    case KEY_PPAGE: app->scroll += conv_view_height() - 1; break;
    case KEY_NPAGE: app->scroll -= conv_view_height() - 1; if (app->scroll < 0) app->scroll = 0; break;
    case KEY_ENTER: conv_submit(app); break;
    case KEY_F(2): go_picker(app); break;
    case KEY_F(3):
      if (app->feedback) tui_feedback_open(app->feedback);
      break;
    case KEY_F(10): app_quit(app, 0); break;
    default: break;
    }
    return;
  }
  switch (ch) {
  case '\r': case '\n': conv_submit(app); break;
  case 27: /* Esc */
    if (app->streaming) cancel_turn(app);
    break;
  case KEY_CTRL('c'):
    if (app->streaming) cancel_turn(app);
    else app_quit(app, 0);
    break;
  case KEY_CTRL('r'): reconnect(app); break;
  case KEY_CTRL('a'): tui_le_home(le); break;
  case KEY_CTRL('e'): tui_le_end(le); break;
  default: break;
  }
}

/* ---- picker ---- */

static void list_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  if (err) {
    set_message(app, "Cannot list sessions: %s", err->message);
    return;
  }
  json_decref(app->sessions);
  app->sessions = json_incref(json_object_get(result, "sessions"));
  if (!json_is_array(app->sessions)) {
    json_decref(app->sessions);
    app->sessions = json_array();
  }
  size_t skipped = json_array_size(json_object_get(result, "skipped"));
  if (skipped) set_message(app, "%zu damaged session(s) skipped (see polytoken sessions)", skipped);
  request_render(app);
}

static void picker_reload(tui_app *app) {
  send_req(app, "sessions.list", NULL, list_reply);
}

/* After create/rename: reload, and select the affected session. */
static void select_pending(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  list_reply(c, result, err, ud);
  if (err || !app->pending_select[0]) return;
  size_t i;
  json_t *s;
  json_array_foreach(app->sessions, i, s) {
    const char *id = json_string_value(json_object_get(s, "id"));
    if (id && strcmp(id, app->pending_select) == 0) app->sel = (int)i;
  }
  app->pending_select[0] = '\0';
}

static void mutate_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  if (err) {
    set_message(app, "Failed: %s", err->message);
    return;
  }
  const char *id = json_string_value(json_object_get(json_object_get(result, "session"), "id"));
  const char *name = json_string_value(json_object_get(json_object_get(result, "session"), "name"));
  snprintf(app->pending_select, sizeof app->pending_select, "%s", id ? id : "");
  if (name) set_message(app, "Saved \"%s\".", name);
  else set_message(app, "Done.");
  send_req(app, "sessions.list", NULL, select_pending);
}

static const char *selected_id(tui_app *app) {
  json_t *s = app->sessions ? json_array_get(app->sessions, (size_t)app->sel) : NULL;
  return s ? json_string_value(json_object_get(s, "id")) : NULL;
}

static void prompt_key(tui_app *app, int is_key, wint_t ch) {
  tui_lineedit *le = app->prompt;
  if (is_key && ch == KEY_ENTER) {
    ch = '\r';
    is_key = 0;
  }
  if (tui_edit_key(le, is_key, ch) || is_key) return;
  if (ch == 27) { app->pmode = PM_NORMAL; return; }
  if (ch == KEY_CTRL('c')) { app_quit(app, 0); return; }
  if (ch == '\r' || ch == '\n') {
    char *name = tui_le_submit(le);
    if (!name) return;
    if (app->pmode == PM_NEW) {
      json_t *p = json_object();
      if (*name) json_object_set_new(p, "name", json_string(name));
      send_req(app, "sessions.create", p, mutate_reply);
    } else {
      const char *id = selected_id(app);
      if (id && *name)
        send_req(app, "sessions.rename", json_pack("{s:s, s:s}", "id", id, "name", name), mutate_reply);
    }
    free(name);
    app->pmode = PM_NORMAL;
  }
}

static void delete_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  (void)result;
  if (err) {
    set_message(app, "Cannot delete: %s", err->message);
    return;
  }
  set_message(app, "Session deleted.");
  picker_reload(app);
}

static void picker_key(tui_app *app, int is_key, wint_t ch) {
  if (app->pmode == PM_NEW || app->pmode == PM_RENAME) { prompt_key(app, is_key, ch); return; }
  if (app->pmode == PM_DELETE) {
    if (!is_key && (ch == 'y' || ch == 'Y')) {
      const char *id = selected_id(app);
      if (id) send_req(app, "sessions.delete", json_pack("{s:s}", "id", id), delete_reply);
    } else if (!is_key && ch == KEY_CTRL('c')) {
      app_quit(app, 0);
      return;
    }
    app->pmode = PM_NORMAL;
    return;
  }
  int n = app->sessions ? (int)json_array_size(app->sessions) : 0;
  int page = LINES - 5 > 1 ? LINES - 5 : 1;
  if (is_key) {
    switch (ch) {
    case KEY_UP: app->sel--; break;
    case KEY_DOWN: app->sel++; break;
    case KEY_PPAGE: app->sel -= page; break;
    case KEY_NPAGE: app->sel += page; break;
    case KEY_HOME: app->sel = 0; break;
    case KEY_END: app->sel = n - 1; break;
    case KEY_ENTER: ch = '\r'; is_key = 0; break;
    case KEY_F(10): app_quit(app, 0); return;
    default: break;
    }
    if (is_key) return;
  }
  switch (ch) {
  case 'q': case KEY_CTRL('c'): app_quit(app, 0); break;
  case 'k': app->sel--; break;
  case 'j': app->sel++; break;
  case KEY_CTRL('r'): reconnect(app); break;
  case 'n':
    if (!pt_client_connected(app->client)) break;
    tui_le_clear(app->prompt);
    app->pmode = PM_NEW;
    app->message[0] = '\0';
    break;
  case 'r':
    if (selected_id(app)) {
      json_t *s = json_array_get(app->sessions, (size_t)app->sel);
      tui_le_set(app->prompt, json_string_value(json_object_get(s, "name")) ?: "");
      app->pmode = PM_RENAME;
      app->message[0] = '\0';
    }
    break;
  case 'd':
    if (selected_id(app)) app->pmode = PM_DELETE;
    break;
  case '\r': case '\n': {
    const char *id = selected_id(app);
    if (id) send_req(app, "sessions.attach", json_pack("{s:s}", "id", id), attach_reply);
    break;
  }
  default: break;
  }
}

/* ---- input, resize, signals ---- */

static void relayout(tui_app *app) {
  struct winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
    resize_term(ws.ws_row, ws.ws_col);
  app->last_total = (size_t)-1; /* re-wrapped: do not treat as new output */
  clear();
  request_render(app);
}

/* The line that takes runs of typed or pasted text right now, or NULL when
 * printable characters are commands (picker) or go to the feedback overlay
 * (which takes keys one by one). */
static tui_lineedit *text_target(tui_app *app) {
  if (app->feedback && tui_feedback_active(app->feedback)) return NULL;
  if (app->screen == SCR_CONV) return app->input;
  if (app->pmode == PM_NEW || app->pmode == PM_RENAME) return app->prompt;
  return NULL;
}

/* Printable text gathered from one read burst, inserted with one
 * tui_le_insert_fit per TEXT_RUN bytes: a paste costs one memmove of the
 * text after the cursor per run, not one per character. */
#define TEXT_RUN 4096
#define STDIN_BURST 65536
typedef struct text_run {
  tui_lineedit *le;
  size_t n;
  char buf[TEXT_RUN];
} text_run;

static void run_flush(tui_app *app, text_run *r) {
  if (r->n == 0) return;
  long k = tui_le_insert_fit(r->le, r->buf, r->n);
  if (k < 0) k = 0; /* out of memory: counted as refused, so it is shown */
  if ((size_t)k < r->n) {
    if (app->cut_le != r->le) app->cut_bytes = 0;
    app->cut_le = r->le;
    app->cut_bytes += r->n - (size_t)k;
  }
  r->n = 0;
}

static void dispatch_key(tui_app *app, int is_key, wint_t ch) {
  if (app->feedback && tui_feedback_active(app->feedback)) tui_feedback_key(app->feedback, is_key, ch);
  else if (app->screen == SCR_PICKER) picker_key(app, is_key, ch);
  else conv_key(app, is_key, ch);
}

/* One decoded character: appended to the run when it is text for a line,
 * else the run goes in first (keys act on the text typed before them) and
 * the character is handled as a key. Keys may switch screens, so the
 * target is looked up again for every character. */
static void take_char(tui_app *app, text_run *r, uint32_t cp) {
  tui_lineedit *le = text_target(app);
  /* A tab is text in a message (pasted code keeps it) but not in a name. */
  if (!(cp >= 0x20 && cp != 0x7f) && !(cp == '\t' && le == app->input)) le = NULL;
  if (le && le == r->le) {
    if (r->n + 4 > sizeof r->buf) run_flush(app, r);
    r->n += tui_utf8_encode(cp, r->buf + r->n);
    return;
  }
  run_flush(app, r);
  r->le = le;
  if (le) r->n = tui_utf8_encode(cp, r->buf);
  else dispatch_key(app, 0, (wint_t)cp);
}

/* stdin readable. Bytes are read with wgetch (curses still decodes function
 * keys and escape sequences) and decoded here rather than by get_wch: on an
 * invalid byte get_wch swallows the bytes after it, up to MB_LEN_MAX, and
 * returns ERR ("a", 0xFF, 0xFE, "(b" typed "a"). tui_utf8_dec makes each bad
 * sequence one U+FFFD and keeps the rest. Its state lives in the app, so a
 * character split across two reads is decoded whole. */
static void stdin_cb(void *ud, int status, int events) {
  tui_app *app = ud;
  (void)events;
  if (status < 0) { app_quit(app, 1); return; }
  text_run run;
  run.le = NULL;
  run.n = 0;
  int c;
  uint32_t cps[2];
  /* At most STDIN_BURST bytes per callback: during a long paste the tty
   * always has more, and returning lets the render timer draw the progress
   * (the poll fires again at once). */
  size_t budget = STDIN_BURST;
  /* `ahead`: bytes known to be waiting (FIONREAD, counted down per byte
   * returned). While it is positive wgetch runs in blocking mode, where
   * ncurses skips the poll() it makes before every byte in nodelay mode:
   * half the system calls of a paste. It cannot block there: each byte
   * counted is in the kernel or already in curses' own buffer (read ahead
   * for a key sequence that did not match). After a key (several bytes)
   * and when the count runs out it is asked again; at 0 nodelay is back,
   * so the loop ends at ERR as before. */
  int ahead = 0;
  if (ioctl(STDIN_FILENO, FIONREAD, &ahead) < 0) ahead = 0;
  for (;;) {
    nodelay(stdscr, ahead <= 0);
    if (app->quitting || budget == 0) break;
    budget--;
    if ((c = wgetch(stdscr)) == ERR) break;
    if (c > 0xFF || --ahead <= 0)
      if (ioctl(STDIN_FILENO, FIONREAD, &ahead) < 0) ahead = 0;
    if (c > 0xFF) { /* a KEY_* code */
      /* A key ends an unfinished sequence: its bytes become U+FFFD first. */
      if (tui_utf8_dec_flush(&app->dec, &cps[0])) take_char(app, &run, cps[0]);
      run_flush(app, &run);
      run.le = NULL;
      if (c == KEY_RESIZE) {
        tui_unit_wake(&app->u_resize);
        relayout(app);
      } else {
        dispatch_key(app, 1, (wint_t)c);
      }
      continue;
    }
    int k = tui_utf8_dec_byte(&app->dec, (unsigned char)c, cps);
    for (int i = 0; i < k; i++) take_char(app, &run, cps[i]);
  }
  nodelay(stdscr, TRUE); /* the loop may stop (budget, quit) while blocking */
  run_flush(app, &run);
  /* The notice about refused text lasts until its line is emptied (sent,
   * Ctrl-U, ...), so it cannot be missed during a long paste. */
  if (app->cut_le && tui_le_len(app->cut_le) == 0) {
    app->cut_le = NULL;
    app->cut_bytes = 0;
  }
  request_render(app);
}

/* Every 30 s: the picker's "3 min ago" texts age, and other clients may have
 * created or renamed sessions, so reload the list (idle picker only). */
static void refresh_cb(void *ud) {
  tui_app *app = ud;
  if (app->screen == SCR_PICKER && app->pmode == PM_NORMAL && pt_client_connected(app->client))
    picker_reload(app);
  request_render(app);
}

static void winch_cb(void *ud, int signum) {
  (void)signum;
  relayout(ud);
}

static void quit_signal_cb(void *ud, int signum) {
  (void)signum;
  app_quit(ud, 128 + signum);
}

/* ---- public ---- */

tui_app *tui_app_new(pt_client *client) {
  tui_app *app = calloc(1, sizeof *app);
  if (!app) { pt_client_del(client); return NULL; }
  app->client = client;
  app->input = tui_lineedit_new(INPUT_MAX_BYTES, 0);
  app->prompt = tui_lineedit_new(PROMPT_MAX_BYTES, 20);
  if (!app->input || !app->prompt || uv_loop_init(&app->loop) != 0) {
    tui_lineedit_del(app->input);
    tui_lineedit_del(app->prompt);
    pt_client_del(client);
    free(app);
    return NULL;
  }
  pt_client_set_callbacks(client, on_daemon_event, on_daemon_closed, app);
  return app;
}

void tui_app_del(tui_app *app) {
  if (!app) return;
  clear_entries(app);
  free(app->entries);
  json_decref(app->sessions);
  free(app->unconfirmed);
  tui_lineedit_del(app->input);
  tui_lineedit_del(app->prompt);
  pt_client_del(app->client);
  free(app);
}

uv_loop_t *tui_app_loop(tui_app *app) { return &app->loop; }

void tui_app_set_hooks(tui_app *app, tui_reached_fn on_reached, tui_teardown_fn after_teardown,
                       void *ud) {
  app->on_reached = on_reached;
  app->after_teardown = after_teardown;
  app->hook_ud = ud;
}

int tui_app_start_attached(tui_app *app, json_t *attach_result) {
  if (!json_is_object(json_object_get(attach_result, "session"))) return -EINVAL;
  load_attach(app, attach_result);
  return 0;
}

int tui_app_run(tui_app *app, char *errbuf, size_t errlen) {
  int rc = tui_term_begin();
  if (rc < 0) {
    snprintf(errbuf, errlen, "%s", rc == -ENOTTY ? "the TUI needs a terminal (stdin and stdout must be a tty)"
                                                 : "cannot initialise the terminal (check TERM)");
    return rc;
  }
  tui_unit_start(&app->u_input, "tui.input");
  tui_unit_start(&app->u_render, "tui.render");
  tui_unit_start(&app->u_resize, "tui.resize");
  tui_unit_start(&app->u_signals, "tui.signals");
  tui_poll_init(&app->loop, &app->stdin_poll, STDIN_FILENO, &app->u_input, stdin_cb, app);
  tui_poll_start(&app->stdin_poll, UV_READABLE);
  tui_timer_init(&app->loop, &app->render_timer, &app->u_render, render_cb, app);
  tui_unit_start(&app->u_refresh, "tui.refresh");
  tui_timer_init(&app->loop, &app->refresh_timer, &app->u_refresh, refresh_cb, app);
  tui_timer_start(&app->refresh_timer, 30000, 30000);
  tui_signal_init(&app->loop, &app->sig_winch, &app->u_resize, winch_cb, app);
  tui_signal_start(&app->sig_winch, SIGWINCH);
  /* Raw mode delivers Ctrl-C as a key; these catch kill(1) and hangups. */
  tui_signal_init(&app->loop, &app->sig_int, &app->u_signals, quit_signal_cb, app);
  tui_signal_start(&app->sig_int, SIGINT);
  tui_signal_init(&app->loop, &app->sig_term, &app->u_signals, quit_signal_cb, app);
  tui_signal_start(&app->sig_term, SIGTERM);
  tui_signal_init(&app->loop, &app->sig_hup, &app->u_signals, quit_signal_cb, app);
  tui_signal_start(&app->sig_hup, SIGHUP);
  /* The feedback overlay is optional: without memory for it F3 does nothing. */
  app->feedback = tui_feedback_new(app->client, &app->loop, feedback_redraw, app);
  app->running = 1;
  conn_watch_start(app);
  if (app->screen == SCR_PICKER) picker_reload(app);
  request_render(app);
  uv_run(&app->loop, UV_RUN_DEFAULT);
  /* Every handle is closed by app_quit; the loop ran their close callbacks. */
  tui_term_end();
  /* uv_run returned, so no upload worker is running (tui_feedback_del rule). */
  tui_feedback_del(app->feedback);
  app->feedback = NULL;
  if (app->after_teardown) app->after_teardown(app->hook_ud);
  uv_loop_close(&app->loop);
  return app->exit_code;
}
