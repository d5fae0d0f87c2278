/*
 * pd_loop.h - the daemon's one place where units of work meet the event-loop
 * seam (common/pt_task.h). Every unit of work owns a `pt_task`: each client
 * connection ("ipc.client"), the listener ("ipc.accept"), each turn ("turn"),
 * each responder stream ("responder.builtin", "responder.exec"), each timer
 * job ("timer.telemetry", "timer.shutdown"), the signal watcher ("signals").
 *
 * Rules (keep them; the task console relies on them):
 *  - PD_TASK_START(&x->task, "name") when the unit starts;
 *  - PD_POLL(&x->task); as the FIRST statement of every libuv callback that
 *    runs on the unit's behalf (only pd_profiling.c's PD_OWN_WORK and
 *    PT_THREAD_JOB, which must enclose it, come before): it brackets the
 *    whole callback with pt_task_poll_begin/end (the end runs at scope
 *    exit via the cleanup attribute, so early returns are covered);
 *  - pd_task_wake() where something wakes the unit (data for it, a timer
 *    firing, a uv_async); PD_POLL does NOT imply a wake, because a
 *    callback may also run for a unit that nobody woke (close callbacks);
 *  - pd_task_arm()/pd_task_disarm() when the unit starts/stops waiting on
 *    an fd (uv_read_start/stop, uv_poll) or a timer (uv_timer_start/stop);
 *  - PD_TASK_END(&x->task) right before the unit's memory is freed. Free
 *    units in uv_close callbacks (which do not use PD_POLL), not in the
 *    middle of a polled callback. PD_POLL works on a copy of the task
 *    handle, so a unit freed anyway inside its own callback is not touched
 *    after the free.
 *
 * Threads: the loop thread only (pt_task_wake also from others).
 * In normal builds (PT_PROFILING == 0) all of this compiles to nothing.
 */
#ifndef PD_LOOP_H
#define PD_LOOP_H

#include "common/pt_task.h"

typedef struct pd_poll_scope {
  pt_task t; /* a copy: see above */
} pd_poll_scope;

static inline pd_poll_scope pd_poll_scope_begin(const pt_task *t) {
  pd_poll_scope s = {*t};
  pt_task_poll_begin(&s.t);
  return s;
}

static inline void pd_poll_scope_end(pd_poll_scope *s) { pt_task_poll_end(&s->t); }

#define PD_CAT_(a, b) a##b
#define PD_CAT(a, b) PD_CAT_(a, b)

/* First statement of a libuv callback run on behalf of the task *taskp. */
#define PD_POLL(taskp)                                                     \
  __attribute__((cleanup(pd_poll_scope_end), unused)) pd_poll_scope        \
  PD_CAT(pd_poll_scope_, __LINE__) = pd_poll_scope_begin(taskp)

/* PD_LABEL(key, value): a user label (e.g. the session id) on this
 * thread's CPU samples until the end of the enclosing scope (profiling
 * build; see docs/profiling.md "CPU per task (labels)"). Declare it after
 * PD_POLL so it is popped before the poll ends. */
typedef struct pd_label_scope {
  int pushed;
} pd_label_scope;
static inline pd_label_scope pd_label_scope_begin(const char *key, const char *value) {
  pd_label_scope s = {pt_label_push(key, value) == 0};
  return s;
}
static inline void pd_label_scope_end(pd_label_scope *s) {
  if (s->pushed) pt_label_pop();
}
#define PD_LABEL(key, value)                                               \
  __attribute__((cleanup(pd_label_scope_end), unused)) pd_label_scope      \
  PD_CAT(pd_label_scope_, __LINE__) = pd_label_scope_begin((key), (value))

/* Starts a unit of work; keeps the caller's file:line for the console. */
#define PD_TASK_START(taskp, name) pt_task_spawn((taskp), (name), "task")

/* Ends a unit of work (before freeing it). Idempotent. */
#define PD_TASK_END(taskp) pt_task_end(taskp)

static inline void pd_task_wake(pt_task *t) { pt_task_wake(t); }
static inline void pd_task_arm(pt_task *t) { pt_task_arm(t); }
static inline void pd_task_disarm(pt_task *t) { pt_task_disarm(t); }

#endif
