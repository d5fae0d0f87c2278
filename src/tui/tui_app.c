/*
 * tui_app.c - the TUI app: lifecycle, input, timers, signals and
 * what spans screens (see tui_app.h; units: tui_app_internal.h).
 *
 * DESIGN
 *  - Owns the loop handles (stdin poll, render and refresh timers,
 *    signals); every one is closed by app_quit, then uv_run returns.
 *  - stdin bytes are decoded here (tui_utf8_dec) and runs of text go into
 *    the line that takes them in one insert per run; other characters and
 *    keys go to the screen's key handler, whose tui_action (quit, picker,
 *    attach, reconnect) is carried out here, the one unit above both
 *    screens and the connection.
 */
#include "pt_config.h"
#include "tui/tui_app_internal.h"

#include "tui/tui_editkey.h"
#include "tui/tui_term.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void close_cb_noop(uv_handle_t *h) { (void)h; }

static void app_quit(tui_app *app, int code) {
  if (app->quitting) return;
  app->quitting = 1;
  app->exit_code = code;
  tui_conn_watch_stop(app);
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

static void go_picker(tui_app *app) {
  app->screen = SCR_PICKER;
  app->pmode = PM_NORMAL;
  tui_picker_reload(app);
  tui_render_request(app);
}

static void reconnect(tui_app *app) {
  if (pt_client_connected(app->client)) return;
  pt_client_error err;
  if (pt_client_connect(app->client, 1, CALL_TIMEOUT_MS, &err) < 0) {
    if (app->screen == SCR_CONV) tui_note(app, 'e', "reconnect failed: %s", err.message);
    else tui_set_message(app, "Reconnect failed: %s", err.message);
    return;
  }
  tui_conn_watch_start(app);
  if (app->screen == SCR_CONV) {
    tui_conn_send(app, "sessions.attach", json_pack("{s:s}", "id", app->session_id), tui_conv_reattach_reply);
  } else {
    tui_set_message(app, "Reconnected to the daemon.");
    tui_picker_reload(app);
  }
}

static void relayout(tui_app *app) {
  struct winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
    resize_term(ws.ws_row, ws.ws_col);
  app->last_total = (size_t)-1; /* re-wrapped: do not treat as new output */
  clear();
  tui_render_request(app);
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

/* The screens' key handlers change their own state and return what the
 * app above them must do: quitting, switching screens, attaching and
 * reconnecting involve both screens and the connection. */
static void dispatch_key(tui_app *app, int is_key, wint_t ch) {
  tui_action act = TUI_ACT_NONE;
  if (app->feedback && tui_feedback_active(app->feedback)) tui_feedback_key(app->feedback, is_key, ch);
  else if (app->screen == SCR_PICKER) act = tui_picker_key(app, is_key, ch);
  else act = tui_conv_key(app, is_key, ch);
  switch (act) {
  case TUI_ACT_NONE: break;
  case TUI_ACT_QUIT: app_quit(app, 0); break;
  case TUI_ACT_PICKER: go_picker(app); break;
  case TUI_ACT_RECONNECT: reconnect(app); break;
  case TUI_ACT_ATTACH: {
    const char *id = tui_picker_selected_id(app);
    if (id) tui_conn_send(app, "sessions.attach", json_pack("{s:s}", "id", id), tui_conv_attach_reply);
    break;
  }
  }
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
  tui_render_request(app);
}

/* Every 30 s: the picker's "3 min ago" texts age, and other clients may have
 * created or renamed sessions, so reload the list (idle picker only). */
static void refresh_cb(void *ud) {
  tui_app *app = ud;
  if (app->screen == SCR_PICKER && app->pmode == PM_NORMAL && pt_client_connected(app->client))
    tui_picker_reload(app);
  tui_render_request(app);
}

static void winch_cb(void *ud, int signum) {
  (void)signum;
  relayout(ud);
}

static void quit_signal_cb(void *ud, int signum) {
  (void)signum;
  app_quit(ud, 128 + signum);
}

static void render_cb(void *ud) { tui_draw_frame(ud); }

static void feedback_redraw(void *ud) { tui_render_request(ud); }

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
  pt_client_set_callbacks(client, tui_conv_on_event, tui_conn_on_closed, app);
  return app;
}

void tui_app_del(tui_app *app) {
  if (!app) return;
  tui_entries_clear(app);
  free(app->entries);
  json_decref(app->sessions);
  free(app->unconfirmed);
  tui_lineedit_del(app->input);
  tui_lineedit_del(app->prompt);
  pt_client_del(app->client);
  free(app);
}

uv_loop_t *tui_app_loop(tui_app *app) { return &app->loop; }

void tui_app_set_self_dump(tui_app *app, tui_feedback_dump_fn fn, void *ud) {
  app->self_dump = fn;
  app->self_dump_ud = ud;
}

void tui_app_set_hooks(tui_app *app, tui_reached_fn on_reached, tui_teardown_fn after_teardown,
                       void *ud) {
  app->on_reached = on_reached;
  app->after_teardown = after_teardown;
  app->hook_ud = ud;
}

void tui_app_set_notice(tui_app *app, const char *text, const char *short_text) {
  snprintf(app->notice, sizeof app->notice, "%s", text ? text : "");
  snprintf(app->notice_short, sizeof app->notice_short, "%s", short_text ? short_text : "");
  if (app->notice[0] && !app->message[0])
    snprintf(app->message, sizeof app->message, "%s", app->notice);
}

int tui_app_start_attached(tui_app *app, json_t *attach_result) {
  if (!json_is_object(json_object_get(attach_result, "session"))) return -EINVAL;
  tui_conv_load(app, attach_result);
  return 0;
}

/* Closes the loop once every handle is closed. A handle still open is a
 * bug of the teardown (app_quit or the fail_* ladder of tui_app_run): said
 * on stderr, after the terminal is restored, as the daemon does. */
static void close_loop(tui_app *app) {
  int r = uv_loop_close(&app->loop);
  if (r != 0)
    fprintf(stderr, "polytoken: the event loop still had handles at exit (%s)\n", uv_strerror(r));
}

/* Test builds only (-Dfault_injection=true; release builds contain neither
 * this code nor the variable's name): POLYTOKEN_FAULT_TUI_START=<step>
 * makes that setup step of tui_app_run fail as if libuv had run out of
 * descriptors, so a test sees each failure's message and teardown
 * (tests/tui/tui_start_failure_test.sh). */
#if PT_FAULT_INJECTION
static int start_fault(const char *step) {
  const char *v = getenv("POLYTOKEN_FAULT_TUI_START");
  return v && strcmp(v, step) == 0 ? UV_EMFILE : 0;
}
#else
static int start_fault(const char *step) {
  (void)step;
  return 0;
}
#endif

/* One setup step: the injected fault (test builds), else the call. */
#define STEP(name, call) ((rc = start_fault(name)) < 0 || (rc = (call)) < 0)

int tui_app_run(tui_app *app, char *errbuf, size_t errlen) {
  const char *what = "";
  int rc = tui_term_begin();
  if (rc < 0) {
    snprintf(errbuf, errlen, "%s", rc == -ENOTTY ? "the TUI needs a terminal (stdin and stdout must be a tty)"
                                                 : "cannot initialise the terminal (check TERM)");
    goto fail_hook;
  }
  /* Every handle below is closed on the way out, in reverse order (the
   * fail_* ladder), and the loop runs their close callbacks before the
   * terminal is restored and the message reaches the user. */
  tui_unit_start(&app->u_input, "tui.input");
  tui_unit_start(&app->u_render, "tui.render");
  tui_unit_start(&app->u_resize, "tui.resize");
  tui_unit_start(&app->u_signals, "tui.signals");
  tui_unit_start(&app->u_refresh, "tui.refresh");
  what = "watching the terminal's input";
  if (STEP("stdin", tui_poll_init(&app->loop, &app->stdin_poll, STDIN_FILENO, &app->u_input,
                                  stdin_cb, app)))
    goto fail_units;
  if (STEP("stdin-start", tui_poll_start(&app->stdin_poll, UV_READABLE))) goto fail_stdin;
  what = "the render timer";
  if (STEP("render", tui_timer_init(&app->loop, &app->render_timer, &app->u_render, render_cb, app)))
    goto fail_stdin;
  what = "the refresh timer";
  if (STEP("refresh", tui_timer_init(&app->loop, &app->refresh_timer, &app->u_refresh, refresh_cb,
                                     app)))
    goto fail_render;
  if (STEP("refresh-start", tui_timer_start(&app->refresh_timer, 30000, 30000))) goto fail_refresh;
  what = "the SIGWINCH watcher";
  if (STEP("sigwinch", tui_signal_init(&app->loop, &app->sig_winch, &app->u_resize, winch_cb, app)))
    goto fail_refresh;
  if (STEP("sigwinch-start", tui_signal_start(&app->sig_winch, SIGWINCH))) goto fail_winch;
  /* Raw mode delivers Ctrl-C as a key; these catch kill(1) and hangups. */
  what = "the SIGINT watcher";
  if (STEP("sigint", tui_signal_init(&app->loop, &app->sig_int, &app->u_signals, quit_signal_cb,
                                     app)))
    goto fail_winch;
  if (STEP("sigint-start", tui_signal_start(&app->sig_int, SIGINT))) goto fail_int;
  what = "the SIGTERM watcher";
  if (STEP("sigterm", tui_signal_init(&app->loop, &app->sig_term, &app->u_signals, quit_signal_cb,
                                      app)))
    goto fail_int;
  if (STEP("sigterm-start", tui_signal_start(&app->sig_term, SIGTERM))) goto fail_term;
  what = "the SIGHUP watcher";
  if (STEP("sighup", tui_signal_init(&app->loop, &app->sig_hup, &app->u_signals, quit_signal_cb,
                                     app)))
    goto fail_term;
  if (STEP("sighup-start", tui_signal_start(&app->sig_hup, SIGHUP))) goto fail_hup;
  /* The feedback overlay is optional: without memory for it F3 does nothing. */
  app->feedback = tui_feedback_new(app->client, &app->loop, feedback_redraw, app);
  tui_feedback_set_self_dump(app->feedback, app->self_dump, app->self_dump_ud);
  app->running = 1;
  /* Without its watch the daemon's replies and events would never be read:
   * the screen would wait forever. */
  what = "watching the daemon connection";
  tui_conn_watch_start(app);
  if ((rc = start_fault("conn")) < 0) goto fail_conn;
  if (pt_client_connected(app->client) && !app->conn) {
    rc = UV_ENOMEM;
    goto fail_conn;
  }
  if (app->screen == SCR_PICKER) tui_picker_reload(app);
  tui_render_request(app);
  uv_run(&app->loop, UV_RUN_DEFAULT);
  /* Every handle is closed by app_quit; the loop ran their close callbacks. */
  tui_term_end();
  /* uv_run returned, so no upload worker is running (tui_feedback_del rule). */
  tui_feedback_del(app->feedback);
  app->feedback = NULL;
  if (app->after_teardown) app->after_teardown(app->hook_ud);
  close_loop(app);
  return app->exit_code;

/* Each label closes what its name says was set up, then everything set up
 * before it. */
fail_conn:
  tui_conn_watch_stop(app);
  tui_unit_end(&app->u_conn); /* idempotent; a failed watch left it started */
  app->running = 0;
fail_hup:
  tui_signal_close(&app->sig_hup, close_cb_noop);
fail_term:
  tui_signal_close(&app->sig_term, close_cb_noop);
fail_int:
  tui_signal_close(&app->sig_int, close_cb_noop);
fail_winch:
  tui_signal_close(&app->sig_winch, close_cb_noop);
fail_refresh:
  tui_timer_close(&app->refresh_timer, close_cb_noop);
fail_render:
  tui_timer_close(&app->render_timer, close_cb_noop);
fail_stdin:
  tui_poll_close(&app->stdin_poll, close_cb_noop);
fail_units:
  tui_unit_end(&app->u_input);
  tui_unit_end(&app->u_render);
  tui_unit_end(&app->u_resize);
  tui_unit_end(&app->u_signals);
  tui_unit_end(&app->u_refresh);
  /* the close callbacks; nothing else is active any more */
  uv_run(&app->loop, UV_RUN_DEFAULT);
  /* no upload can have started: the loop never ran a key handler */
  tui_feedback_del(app->feedback);
  app->feedback = NULL;
  tui_term_end();
  snprintf(errbuf, errlen, "cannot start the TUI: %s: %s", what, uv_strerror(rc));
fail_hook:
  if (app->after_teardown) app->after_teardown(app->hook_ud);
  close_loop(app);
  return rc;
}
