/*
 * tui_app_internal.h - state shared by the units of the TUI app (not a
 * public interface: only src/tui/tui_*.c of the app include it; the
 * public one is tui_app.h).
 *
 * DESIGN
 *  - All state lives in struct tui_app; input handlers and daemon callbacks
 *    only change state and call tui_render_request(); the whole screen is
 *    redrawn from state on a coalescing 0 ms timer.
 *  - Units, each calling only the ones listed before it:
 *      tui_draw.c    draws the screens from state (curses only)
 *      tui_state.c   scrollback entries, status message, redraw requests
 *      tui_conn.c    the daemon connection: poll watch, requests, loss
 *      tui_conv.c    conversation screen: transcript, turns, its keys
 *      tui_picker.c  session picker: list, create/rename/delete, its keys
 *      tui_app.c     lifecycle, input decoding, timers and signals, and
 *                    what spans screens (quit, switch, attach, reconnect),
 *                    which key handlers ask for by returning a tui_action
 *  - Threads: the TUI's loop thread only; no locks.
 */
#ifndef TUI_APP_INTERNAL_H
#define TUI_APP_INTERNAL_H

#include "tui/tui_app.h"
#include "tui/tui_feedback.h"
#include "tui/tui_lineedit.h"
#include "tui/tui_loop.h"
#include "tui/tui_text.h"
#include "common/pt_client.h"
#include "common/pt_jsonl.h"

#include <stddef.h>
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
  tui_feedback_dump_fn self_dump;   /* feedback's p: the TUI's sampler */
  void *self_dump_ud;
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

  char notice[512];      /* standing status-bar notice (tui_app_set_notice) */
  char notice_short[64];
};

/* What a screen's key handler asks the app to do (tui_app.c acts on it). */
typedef enum {
  TUI_ACT_NONE,
  TUI_ACT_QUIT,      /* leave with exit code 0 */
  TUI_ACT_PICKER,    /* show the session picker and reload its list */
  TUI_ACT_RECONNECT, /* Ctrl-R: connect again, reload the current screen */
  TUI_ACT_ATTACH,    /* attach to the picker's selected session */
} tui_action;

/* tui_draw.c: draws the current screen (or the feedback overlay) and fires
 * the on_reached seam the first time the conversation is on the terminal. */
void tui_draw_frame(tui_app *app);
int tui_draw_conv_height(void); /* rows of scrollback on the conversation screen */

/* tui_state.c. Entries are owned by app->entries (freed by
 * tui_entries_clear and tui_app_del); add returns a borrowed pointer or NULL
 * when out of memory (the text is then not shown). */
void tui_entry_append(entry *e, const char *s, size_t n);
entry *tui_entry_add(tui_app *app, char role, const char *text, const char *turn_id);
entry *tui_entry_find_turn(tui_app *app, const char *turn_id);
void tui_entries_clear(tui_app *app);
/* A scrollback line of role `role` (system note, error) and a redraw. */
void tui_note(tui_app *app, char role, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The picker's status line and a redraw. */
void tui_set_message(tui_app *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tui_render_request(tui_app *app);

/* tui_conn.c. tui_conn_send takes params (NULL allowed) and reports a
 * failure on screen; 0 or a negative errno. */
void tui_conn_watch_start(tui_app *app);
void tui_conn_watch_stop(tui_app *app);
void tui_conn_update(tui_app *app);
void tui_conn_on_closed(pt_client *c, const pt_client_error *err, void *ud);
int tui_conn_send(tui_app *app, const char *method, json_t *params, pt_client_reply_cb cb);

/* tui_conv.c */
void tui_conv_load(tui_app *app, json_t *res); /* res: a sessions.attach result (borrowed) */
void tui_conv_attach_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud);
void tui_conv_reattach_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud);
void tui_conv_on_event(pt_client *c, const char *name, json_t *params, void *ud);
tui_action tui_conv_key(tui_app *app, int is_key, wint_t ch);

/* tui_picker.c. selected_id: borrowed from app->sessions, or NULL. */
void tui_picker_reload(tui_app *app);
const char *tui_picker_selected_id(tui_app *app);
tui_action tui_picker_key(tui_app *app, int is_key, wint_t ch);

#endif
