/*
 * tui_state.c - the TUI's shared state services: scrollback entries, the
 * status message and redraw requests (units: tui_app_internal.h).
 *
 * DESIGN
 *  - At most MAX_ENTRIES entries (the oldest is dropped) of at most
 *    MAX_ENTRY_BYTES each; control characters are replaced on the way in so
 *    the layout never sees them.
 *  - tui_render_request coalesces: one 0 ms timer, so a burst of deltas
 *    costs one redraw per loop iteration. Calls nothing above it.
 */
#include "tui/tui_app_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends text to an entry, replacing control characters that would break
 * the layout (tab -> space; other C0 except '\n' -> '?'). */
void tui_entry_append(entry *e, const char *s, size_t n) {
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

entry *tui_entry_add(tui_app *app, char role, const char *text, const char *turn_id) {
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
  tui_entry_append(e, text ? text : "", text ? strlen(text) : 0);
  return e;
}

void tui_note(tui_app *app, char role, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  tui_entry_add(app, role, buf, NULL);
  tui_render_request(app);
}

void tui_entries_clear(tui_app *app) {
  for (size_t i = 0; i < app->n_entries; i++) free(app->entries[i].text);
  app->n_entries = 0;
  app->scroll = 0;
}

entry *tui_entry_find_turn(tui_app *app, const char *turn_id) {
  for (size_t i = app->n_entries; i-- > 0;)
    if (app->entries[i].role == 'a' && strcmp(app->entries[i].turn_id, turn_id) == 0)
      return &app->entries[i];
  return NULL;
}

void tui_set_message(tui_app *app, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(app->message, sizeof app->message, fmt, ap);
  va_end(ap);
  tui_render_request(app);
}

void tui_render_request(tui_app *app) {
  /* Before tui_app_run set up the loop handles there is nothing to wake;
   * the first frame is requested there. */
  if (!app->running || app->quitting || tui_timer_pending(&app->render_timer)) return;
  tui_unit_wake(&app->u_render);
  tui_timer_start(&app->render_timer, 0, 0);
}
