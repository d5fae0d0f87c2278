/*
 * tui_conn.c - the TUI's daemon connection (units: tui_app_internal.h).
 *
 * DESIGN
 *  - The pt_client fd is watched with a tui_poll (readable, plus writable
 *    while requests are queued: tui_conn_update after every send).
 *  - When the daemon goes away the client is closed, the poll handle is
 *    closed and freed, the status shows "disconnected" and Ctrl-R
 *    reconnects (tui_app.c; blocking for at most the daemon start timeout,
 *    acceptable for an explicit user action).
 */
#include "tui/tui_app_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* h->data is the tui_poll, the first member of the heap-allocated
 * conn_watch: freeing it frees the watch. */
static void conn_close_cb(uv_handle_t *h) { free(h->data); }

void tui_conn_watch_stop(tui_app *app) {
  if (!app->conn) return;
  tui_poll_close(&app->conn->poll, conn_close_cb);
  app->conn = NULL;
  tui_unit_end(&app->u_conn);
}

void tui_conn_on_closed(pt_client *c, const pt_client_error *err, void *ud) {
  tui_app *app = ud;
  (void)c;
  tui_conn_watch_stop(app);
  app->streaming = 0;
  if (app->screen == SCR_CONV)
    tui_note(app, 's', "Lost the connection to the daemon (%s). Press Ctrl-R to reconnect.",
             err->message);
  else
    tui_set_message(app, "Lost the connection to the daemon (%s). Press Ctrl-R to reconnect.",
                    err->message);
  tui_render_request(app);
}

static void conn_poll_cb(void *ud, int status, int events) {
  tui_app *app = ud;
  if (status < 0) {
    pt_client_close(app->client);
    tui_conn_on_closed(app->client, &(pt_client_error){"disconnected", "poll error"}, app);
    return;
  }
  if (events & UV_WRITABLE) {
    if (pt_client_flush(app->client) < 0) return; /* closed callback ran */
  }
  if (events & UV_READABLE) {
    if (pt_client_pump(app->client) < 0) return;
  }
  tui_conn_update(app);
}

/* Keeps the poll's event mask in step with queued output. */
void tui_conn_update(tui_app *app) {
  if (!app->conn || app->quitting) return;
  int ev = UV_READABLE | (pt_client_wants_write(app->client) ? UV_WRITABLE : 0);
  tui_poll_start(&app->conn->poll, ev);
}

void tui_conn_watch_start(tui_app *app) {
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
  tui_conn_update(app);
}

/* Sends a request and updates the poll mask; reports failure in the UI. */
int tui_conn_send(tui_app *app, const char *method, json_t *params, pt_client_reply_cb cb) {
  if (!pt_client_connected(app->client)) {
    json_decref(params);
    if (app->screen == SCR_CONV) tui_note(app, 's', "Not connected to the daemon. Press Ctrl-R to reconnect.");
    else tui_set_message(app, "Not connected to the daemon. Press Ctrl-R to reconnect.");
    return -ENOTCONN;
  }
  int rc = pt_client_request(app->client, method, params, cb, app);
  if (rc < 0) {
    if (app->screen == SCR_CONV) tui_note(app, 'e', "could not send %s: %s", method, strerror(-rc));
    return rc;
  }
  tui_conn_update(app);
  return 0;
}
