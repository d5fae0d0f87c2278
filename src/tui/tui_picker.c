/*
 * tui_picker.c - the TUI's session picker: the list, create, rename and
 * delete, its keys (units: tui_app_internal.h).
 *
 * DESIGN
 *  - The list is reloaded from the daemon after every change and every
 *    30 s (tui_app.c) so other clients' changes show; after a create or
 *    rename the affected session is selected once the list arrives.
 *  - Attaching, quitting and reconnecting are returned as a tui_action for
 *    tui_app.c (the conversation screen is above the picker).
 */
#include "tui/tui_app_internal.h"
#include "tui/tui_editkey.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void list_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  if (err) {
    tui_set_message(app, "Cannot list sessions: %s", err->message);
    return;
  }
  json_decref(app->sessions);
  app->sessions = json_incref(json_object_get(result, "sessions"));
  if (!json_is_array(app->sessions)) {
    json_decref(app->sessions);
    app->sessions = json_array();
  }
  size_t skipped = json_array_size(json_object_get(result, "skipped"));
  if (skipped) tui_set_message(app, "%zu damaged session(s) skipped (see polytoken sessions)", skipped);
  tui_render_request(app);
}

void tui_picker_reload(tui_app *app) {
  tui_conn_send(app, "sessions.list", NULL, list_reply);
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
    tui_set_message(app, "Failed: %s", err->message);
    return;
  }
  const char *id = json_string_value(json_object_get(json_object_get(result, "session"), "id"));
  const char *name = json_string_value(json_object_get(json_object_get(result, "session"), "name"));
  snprintf(app->pending_select, sizeof app->pending_select, "%s", id ? id : "");
  if (name) tui_set_message(app, "Saved \"%s\".", name);
  else tui_set_message(app, "Done.");
  tui_conn_send(app, "sessions.list", NULL, select_pending);
}

const char *tui_picker_selected_id(tui_app *app) {
  json_t *s = app->sessions ? json_array_get(app->sessions, (size_t)app->sel) : NULL;
  return s ? json_string_value(json_object_get(s, "id")) : NULL;
}

static tui_action prompt_key(tui_app *app, int is_key, wint_t ch) {
  tui_lineedit *le = app->prompt;
  if (is_key && ch == KEY_ENTER) {
    ch = '\r';
    is_key = 0;
  }
  if (tui_edit_key(le, is_key, ch) || is_key) return TUI_ACT_NONE;
  if (ch == 27) { app->pmode = PM_NORMAL; return TUI_ACT_NONE; }
  if (ch == KEY_CTRL('c')) return TUI_ACT_QUIT;
  if (ch == '\r' || ch == '\n') {
    char *name = tui_le_submit(le);
    if (!name) return TUI_ACT_NONE;
    if (app->pmode == PM_NEW) {
      json_t *p = json_object();
      if (*name) json_object_set_new(p, "name", json_string(name));
      tui_conn_send(app, "sessions.create", p, mutate_reply);
    } else {
      const char *id = tui_picker_selected_id(app);
      if (id && *name)
        tui_conn_send(app, "sessions.rename", json_pack("{s:s, s:s}", "id", id, "name", name), mutate_reply);
    }
    free(name);
    app->pmode = PM_NORMAL;
  }
  return TUI_ACT_NONE;
}

static void delete_reply(pt_client *c, json_t *result, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  (void)result;
  if (err) {
    tui_set_message(app, "Cannot delete: %s", err->message);
    return;
  }
  tui_set_message(app, "Session deleted.");
  tui_picker_reload(app);
}

tui_action tui_picker_key(tui_app *app, int is_key, wint_t ch) {
  if (app->pmode == PM_NEW || app->pmode == PM_RENAME) return prompt_key(app, is_key, ch);
  if (app->pmode == PM_DELETE) {
    if (!is_key && (ch == 'y' || ch == 'Y')) {
      const char *id = tui_picker_selected_id(app);
      if (id) tui_conn_send(app, "sessions.delete", json_pack("{s:s}", "id", id), delete_reply);
    } else if (!is_key && ch == KEY_CTRL('c')) {
      return TUI_ACT_QUIT;
    }
    app->pmode = PM_NORMAL;
    return TUI_ACT_NONE;
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
    case KEY_F(10): return TUI_ACT_QUIT;
    default: break;
    }
    if (is_key) return TUI_ACT_NONE;
  }
  switch (ch) {
  case 'q': case KEY_CTRL('c'): return TUI_ACT_QUIT;
  case 'k': app->sel--; break;
  case 'j': app->sel++; break;
  case KEY_CTRL('r'): return TUI_ACT_RECONNECT;
  case 'n':
    if (!pt_client_connected(app->client)) break;
    tui_le_clear(app->prompt);
    app->pmode = PM_NEW;
    app->message[0] = '\0';
    break;
  case 'r':
    if (tui_picker_selected_id(app)) {
      json_t *s = json_array_get(app->sessions, (size_t)app->sel);
      tui_le_set(app->prompt, json_string_value(json_object_get(s, "name")) ?: "");
      app->pmode = PM_RENAME;
      app->message[0] = '\0';
    }
    break;
  case 'd':
    if (tui_picker_selected_id(app)) app->pmode = PM_DELETE;
    break;
  case '\r': case '\n':
    /* The app attaches (tui_app.c): the conversation is above the picker. */
    if (tui_picker_selected_id(app)) return TUI_ACT_ATTACH;
    break;
  default: break;
  }
  return TUI_ACT_NONE;
}
