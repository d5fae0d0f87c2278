/* tui_loop.c - libuv handle wrappers bracketing every callback with the task
 * seam (see tui_loop.h). */
#include "tui/tui_loop.h"

void tui_unit_start_at(tui_unit *u, const char *name, const char *file, int line) {
  if (u->live) {
    u->end_pending = 0;
    return;
  }
  u->name = name;
  u->live = 1;
#if PT_PROFILING
  pt_task_spawn_at(&u->task, name, "local", file, line);
#else
  (void)file;
  (void)line;
  pt_task_spawn(&u->task, name, "local");
#endif
}

static void really_end(tui_unit *u) {
  u->live = 0;
  u->end_pending = 0;
  pt_task_end(&u->task);
}

void tui_unit_end(tui_unit *u) {
  if (!u->live) return;
  if (u->in_poll) u->end_pending = 1;
  else really_end(u);
}

/* Every libuv callback of a unit runs between these two. */
static void poll_begin(tui_unit *u) {
  u->in_poll++;
  pt_task_poll_begin(&u->task);
}

static void poll_end(tui_unit *u) {
  pt_task_poll_end(&u->task);
  if (--u->in_poll == 0 && u->end_pending) really_end(u);
}

void tui_unit_wake(tui_unit *u) {
  if (u->live) pt_task_wake(&u->task);
}

static void arm(tui_unit *u, int *armed) {
  if (!*armed) { *armed = 1; pt_task_arm(&u->task); }
}

static void disarm(tui_unit *u, int *armed) {
  if (*armed) { *armed = 0; pt_task_disarm(&u->task); }
}

/* ---- poll ---- */

static void poll_tramp(uv_poll_t *h, int status, int events) {
  tui_poll *p = h->data;
  tui_unit *u = p->unit;
  poll_begin(u);
  p->fn(p->ud, status, events);
  poll_end(u);
}

int tui_poll_init(uv_loop_t *loop, tui_poll *p, int fd, tui_unit *u, tui_poll_fn fn, void *ud) {
  p->unit = u;
  p->fn = fn;
  p->ud = ud;
  p->armed = 0;
  int rc = uv_poll_init(loop, &p->h, fd);
  p->h.data = p;
  return rc;
}

int tui_poll_start(tui_poll *p, int events) {
  int rc = uv_poll_start(&p->h, events, poll_tramp);
  if (rc == 0) arm(p->unit, &p->armed);
  return rc;
}

void tui_poll_stop(tui_poll *p) {
  uv_poll_stop(&p->h);
  disarm(p->unit, &p->armed);
}

void tui_poll_close(tui_poll *p, uv_close_cb cb) {
  tui_poll_stop(p);
  uv_close((uv_handle_t *)&p->h, cb);
}

/* ---- timer ---- */

static void timer_tramp(uv_timer_t *h) {
  tui_timer *t = h->data;
  /* A one-shot timer is no longer pending once it fired. */
  if (uv_timer_get_repeat(h) == 0) disarm(t->unit, &t->armed);
  tui_unit *u = t->unit;
  poll_begin(u);
  t->fn(t->ud);
  poll_end(u);
}

int tui_timer_init(uv_loop_t *loop, tui_timer *t, tui_unit *u, tui_timer_fn fn, void *ud) {
  t->unit = u;
  t->fn = fn;
  t->ud = ud;
  t->armed = 0;
  int rc = uv_timer_init(loop, &t->h);
  t->h.data = t;
  return rc;
}

int tui_timer_start(tui_timer *t, uint64_t timeout_ms, uint64_t repeat_ms) {
  int rc = uv_timer_start(&t->h, timer_tramp, timeout_ms, repeat_ms);
  if (rc == 0) arm(t->unit, &t->armed);
  return rc;
}

void tui_timer_stop(tui_timer *t) {
  uv_timer_stop(&t->h);
  disarm(t->unit, &t->armed);
}

int tui_timer_pending(const tui_timer *t) { return t->armed; }

void tui_timer_close(tui_timer *t, uv_close_cb cb) {
  tui_timer_stop(t);
  uv_close((uv_handle_t *)&t->h, cb);
}

/* ---- signal ---- */

static void signal_tramp(uv_signal_t *h, int signum) {
  tui_signal *s = h->data;
  tui_unit *u = s->unit;
  tui_unit_wake(u);
  poll_begin(u);
  s->fn(s->ud, signum);
  poll_end(u);
}

int tui_signal_init(uv_loop_t *loop, tui_signal *s, tui_unit *u, tui_signal_fn fn, void *ud) {
  s->unit = u;
  s->fn = fn;
  s->ud = ud;
  s->armed = 0;
  int rc = uv_signal_init(loop, &s->h);
  s->h.data = s;
  return rc;
}

int tui_signal_start(tui_signal *s, int signum) {
  int rc = uv_signal_start(&s->h, signal_tramp, signum);
  if (rc == 0) arm(s->unit, &s->armed);
  return rc;
}

void tui_signal_stop(tui_signal *s) {
  uv_signal_stop(&s->h);
  disarm(s->unit, &s->armed);
}

void tui_signal_close(tui_signal *s, uv_close_cb cb) {
  tui_signal_stop(s);
  uv_close((uv_handle_t *)&s->h, cb);
}
