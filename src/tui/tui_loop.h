/*
 * tui_loop.h - the ONE place where the TUI's event loop meets the task seam
 * (common/pt_task.h). Every unit of work of the TUI (stdin input handling
 * "tui.input", rendering "tui.render", the daemon connection
 * "tui.daemon_conn", terminal resize "tui.resize", signals "tui.signals")
 * is a tui_unit, and every libuv handle it waits on is wrapped here so that:
 *
 *   - tui_unit_start() spawns the task, tui_unit_end() ends it;
 *   - every libuv callback for the unit runs between pt_task_poll_begin and
 *     pt_task_poll_end (the trampolines below), never sprinkled by hand;
 *   - starting to wait on an fd/timer/signal arms a waker (pt_task_arm),
 *     stopping it disarms (pt_task_disarm), exactly once per transition;
 *   - tui_unit_wake() is called where the TUI schedules work for a unit
 *     (e.g. a render request).
 *
 * In normal builds pt_task_* are empty inline functions, so this costs
 * nothing. Threads: everything here runs on the loop thread.
 */
#ifndef TUI_LOOP_H
#define TUI_LOOP_H

#include <uv.h>
#include "common/pt_task.h"

typedef struct tui_unit {
  pt_task task;
  const char *name;
  int live;
  int in_poll;     /* nesting depth of callbacks running for this unit */
  int end_pending; /* tui_unit_end was called inside a callback */
} tui_unit;

/* Spawns the unit's task (kind "local"); idempotent while live (and it
 * revokes an end requested by the callback that is still running). The
 * task's location (the console's Location, the profiles' task_loc label)
 * is the caller's file:line, as PD_TASK_START gives the daemon's tasks. */
#define tui_unit_start(u, name) tui_unit_start_at((u), (name), __FILE__, __LINE__)
void tui_unit_start_at(tui_unit *u, const char *name, const char *file, int line);
/* Ends the task; idempotent. Called from inside one of the unit's own
 * callbacks, the end happens right after that callback's poll_end, so the
 * console never sees a task end in the middle of a poll. */
void tui_unit_end(tui_unit *u);
/* Marks the unit woken (work was scheduled for it). */
void tui_unit_wake(tui_unit *u);

typedef void (*tui_poll_fn)(void *ud, int status, int events);
typedef void (*tui_timer_fn)(void *ud);
typedef void (*tui_signal_fn)(void *ud, int signum);

/* A uv_poll_t owned by a unit. The struct must stay at a fixed address until
 * its close callback ran (see tui_handle_close). */
typedef struct tui_poll {
  uv_poll_t h;
  tui_unit *unit;
  tui_poll_fn fn;
  void *ud;
  int armed;
} tui_poll;

typedef struct tui_timer {
  uv_timer_t h;
  tui_unit *unit;
  tui_timer_fn fn;
  void *ud;
  int armed;
} tui_timer;

typedef struct tui_signal {
  uv_signal_t h;
  tui_unit *unit;
  tui_signal_fn fn;
  void *ud;
  int armed;
} tui_signal;

/* Each init returns 0 or a negative libuv error code. */
int tui_poll_init(uv_loop_t *loop, tui_poll *p, int fd, tui_unit *u, tui_poll_fn fn, void *ud);
/* (Re)starts with UV_READABLE/UV_WRITABLE events; arms on first start. */
int tui_poll_start(tui_poll *p, int events);
void tui_poll_stop(tui_poll *p);

int tui_timer_init(uv_loop_t *loop, tui_timer *t, tui_unit *u, tui_timer_fn fn, void *ud);
/* One-shot after timeout_ms (repeat 0) or periodic. */
int tui_timer_start(tui_timer *t, uint64_t timeout_ms, uint64_t repeat_ms);
void tui_timer_stop(tui_timer *t);
int tui_timer_pending(const tui_timer *t);

int tui_signal_init(uv_loop_t *loop, tui_signal *s, tui_unit *u, tui_signal_fn fn, void *ud);
int tui_signal_start(tui_signal *s, int signum);
void tui_signal_stop(tui_signal *s);

/* Stops (disarms) and uv_close()s any of the above; cb may be NULL. */
void tui_poll_close(tui_poll *p, uv_close_cb cb);
void tui_timer_close(tui_timer *t, uv_close_cb cb);
void tui_signal_close(tui_signal *s, uv_close_cb cb);

#endif
