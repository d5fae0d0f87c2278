/*
 * tui_conv.c - the TUI's conversation screen: transcript, turns and their
 * events, its keys (units: tui_app_internal.h).
 *
 * DESIGN
 *  - The daemon's transcript is the truth: attach (and reattach after a
 *    reconnect, or after a turn another client started) reloads it.
 *  - A sent text stays in the input line until the request is queued and
 *    comes back if the daemon refuses it (app->unconfirmed).
 *  - Keys that reach beyond this screen (quit, picker, reconnect) are
 *    returned as a tui_action for tui_app.c.
 */
#include "tui/tui_app_internal.h"
#include "tui/tui_editkey.h"

#include <curses.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tui_conv_on_event(pt_client *c, const char *name, json_t *params, void *ud) {
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
    if (!tui_entry_find_turn(app, turn_id)) tui_entry_add(app, 'a', "", turn_id);
  } else if (strcmp(name, "turn.delta") == 0) {
    const char *text = json_string_value(json_object_get(params, "text"));
    entry *e = tui_entry_find_turn(app, turn_id);
    if (!e) e = tui_entry_add(app, 'a', "", turn_id);
    if (e && text) tui_entry_append(e, text, strlen(text));
  } else if (strcmp(name, "turn.done") == 0) {
    const char *status = json_string_value(json_object_get(params, "status"));
    const char *error = json_string_value(json_object_get(params, "error"));
    if (strcmp(app->turn_id, turn_id) == 0) app->streaming = 0;
    if (app->foreign_turn) {
      app->foreign_turn = 0;
      tui_conn_send(app, "sessions.attach", json_pack("{s:s}", "id", app->session_id), tui_conv_attach_reply);
    }
    if (status && strcmp(status, "cancelled") == 0) {
      tui_entry_add(app, 's', "(reply cancelled)", NULL);
    } else if (status && strcmp(status, "error") == 0) {
      char buf[1024];
      snprintf(buf, sizeof buf, "the reply failed: %s", error ? error : "unknown error");
      tui_entry_add(app, 'e', buf, NULL);
    }
  }
  tui_render_request(app);
}

void tui_conv_load(tui_app *app, json_t *res) {
  json_t *s = json_object_get(res, "session");
  const char *id = json_string_value(json_object_get(s, "id"));
  const char *name = json_string_value(json_object_get(s, "name"));
  snprintf(app->session_id, sizeof app->session_id, "%s", id ? id : "?");
  snprintf(app->session_name, sizeof app->session_name, "%s", name ? name : "?");
  tui_entries_clear(app);
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
    tui_entry_add(app, r, text ? text : "", tid);
    const char *status = json_string_value(json_object_get(t, "status"));
    if (r == 'a' && status && strcmp(status, "cancelled") == 0) tui_entry_add(app, 's', "(reply cancelled)", NULL);
    else if (r == 'a' && status) tui_entry_add(app, 's', "(reply incomplete)", NULL);
  }
  long long omitted = json_integer_value(json_object_get(res, "omitted"));
  if (omitted > 0) {
    char buf[128];
    snprintf(buf, sizeof buf, "(%lld older entries not shown)", omitted);
    /* Shown first: insert at the front by rotating the just-added entry. */
    if (tui_entry_add(app, 's', buf, NULL) && app->n_entries > 1) {
      entry e = app->entries[app->n_entries - 1];
      memmove(app->entries + 1, app->entries, (app->n_entries - 1) * sizeof *app->entries);
      app->entries[0] = e;
    }
  }
  app->screen = SCR_CONV;
  app->message[0] = '\0';
  tui_render_request(app);
}

void tui_conv_attach_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  if (err) {
    if (app->screen == SCR_CONV) tui_note(app, 'e', "cannot attach: %s", err->message);
    else tui_set_message(app, "Cannot attach: %s", err->message);
    return;
  }
  tui_conv_load(app, result);
}

/* After a reconnect: reload the transcript (the daemon's copy is the truth;
 * a reply that was streaming when the connection broke is shown as stored). */
void tui_conv_reattach_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_conv_attach_reply(c, result, err, ud);
  if (!err) tui_note(ud, 's', "Reconnected to the daemon.");
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
    tui_note(app, 'e', "the message was not sent: %s%s", err->message,
             back ? " (your text is back in the input line)" : "");
    return;
  }
  free(text);
  if (!app->turn_id[0])
    pt_client_id_str(json_object_get(result, "turn_id"), app->turn_id, sizeof app->turn_id);
  tui_render_request(app);
}

static void cancel_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  (void)c;
  (void)result;
  /* not_found: the turn finished before the cancel arrived; nothing to say. */
  if (err && strcmp(err->code, "not_found") != 0) tui_note(ud, 'e', "cancel failed: %s", err->message);
}

static void cancel_turn(tui_app *app) {
  tui_conn_send(app, "turn.cancel", json_pack("{s:s}", "session", app->session_id), cancel_reply);
}

static tui_action conv_submit(tui_app *app) {
  const char *raw = tui_le_text(app->input);
  if (strcmp(raw, "/quit") == 0) {
    free(tui_le_submit(app->input));
    return TUI_ACT_QUIT;
  }
  if (strcmp(raw, "/sessions") == 0) {
    free(tui_le_submit(app->input));
    return TUI_ACT_PICKER;
  }
  if (tui_le_len(app->input) == 0) return TUI_ACT_NONE;
  if (!pt_client_connected(app->client)) {
    tui_note(app, 's', "Not connected to the daemon. Press Ctrl-R to reconnect; your text is kept.");
    return TUI_ACT_NONE;
  }
  if (app->streaming) {
    tui_note(app, 's', "A reply is still streaming; wait or press Esc to cancel it. Your text is kept.");
    return TUI_ACT_NONE;
  }
  /* The line is cleared only once the request is queued: a text that
   * cannot be sent stays where the user can shorten it. */
  const char *text = tui_le_text(app->input);
  json_t *params = json_pack("{s:s, s:s}", "session", app->session_id, "text", text);
  if (!params) {
    /* The line holds UTF-8 only (tui_utf8_dec), so this is out of memory. */
    tui_note(app, 'e', "the message was not sent: out of memory. Your text is kept.");
    return TUI_ACT_NONE;
  }
  int rc = pt_client_request(app->client, "turn.send", params, send_reply, app);
  if (rc == PT_JSONL_EOVERSIZE) {
    json_t *js = json_string(text);
    size_t esc = js ? json_dumpb(js, NULL, 0, JSON_ENCODE_ANY | JSON_COMPACT) : 0;
    json_decref(js);
    tui_note(app, 'e',
             "the message was not sent: JSON-escaped it takes %zu bytes (quotes and backslashes take "
         "two), more than one request line holds (%zu bytes); shorten it by about %zu bytes. "
         "Your text is kept.",
         esc, (size_t)PT_JSONL_MAX_LINE,
         esc + (PT_JSONL_MAX_LINE - INPUT_MAX_BYTES) > PT_JSONL_MAX_LINE
           ? esc + (PT_JSONL_MAX_LINE - INPUT_MAX_BYTES) - PT_JSONL_MAX_LINE : 0);
    return TUI_ACT_NONE;
  }
  if (rc < 0) {
    /* Lost the connection while sending: send_reply and on_daemon_closed
     * have said so; the text is still in the line. */
    if (pt_client_connected(app->client)) tui_note(app, 'e', "could not send turn.send: %s", strerror(-rc));
    return TUI_ACT_NONE;
  }
  tui_conn_update(app);
  char *sent = tui_le_submit(app->input); /* history + clear */
  tui_entry_add(app, 'u', sent ? sent : "", NULL);
  free(app->unconfirmed);
  app->unconfirmed = sent;
  app->cut_bytes = 0;
  app->streaming = 1;
  app->awaiting_own_turn = 1;
  app->turn_id[0] = '\0';
  app->scroll = 0;
  tui_render_request(app);
  return TUI_ACT_NONE;
}

tui_action tui_conv_key(tui_app *app, int is_key, wint_t ch) {
  tui_lineedit *le = app->input;
  if (tui_edit_key(le, is_key, ch)) return TUI_ACT_NONE;
  if (is_key) {
    switch (ch) {
    case KEY_UP: tui_le_history_prev(le); break;
    case KEY_DOWN: tui_le_history_next(le); break;
    case KEY_PPAGE: app->scroll += tui_draw_conv_height() - 1; break;
    case KEY_NPAGE: app->scroll -= tui_draw_conv_height() - 1; if (app->scroll < 0) app->scroll = 0; break;
    case KEY_ENTER: return conv_submit(app);
    case KEY_F(2): return TUI_ACT_PICKER;
    case KEY_F(3):
      if (app->feedback) tui_feedback_open(app->feedback);
      break;
    case KEY_F(10): return TUI_ACT_QUIT;
    default: break;
    }
    return TUI_ACT_NONE;
  }
  switch (ch) {
  case '\r': case '\n': return conv_submit(app);
  case 27: /* Esc */
    if (app->streaming) cancel_turn(app);
    break;
  case KEY_CTRL('c'):
    if (app->streaming) cancel_turn(app);
    else return TUI_ACT_QUIT;
    break;
  case KEY_CTRL('r'): return TUI_ACT_RECONNECT;
  case KEY_CTRL('a'): tui_le_home(le); break;
  case KEY_CTRL('e'): tui_le_end(le); break;
  default: break;
  }
  return TUI_ACT_NONE;
}
