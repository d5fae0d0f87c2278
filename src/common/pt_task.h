/*
 * pt_task.h - the one seam where every unit of work of an event loop (a
 * client connection, a turn, a responder stream, a timer job, TUI input,
 * rendering, ...) is started, polled, woken and ended.
 *
 * Daemon and TUI call these around each libuv callback. In normal and release
 * builds (PT_PROFILING == 0) they are empty inline functions and no profiling
 * code is compiled or linked. In the profiling build they forward to the task
 * console instrumentation (include/ptprof_console.h), which never blocks and
 * never allocates per event.
 *
 * Threads: call from the thread that runs the loop owning the task, except
 * pt_task_wake, which may be called from any thread.
 */
#ifndef PT_TASK_H
#define PT_TASK_H

#include <stdint.h>
#include "pt_config.h"

typedef struct pt_task {
  uint64_t id; /* console task id; 0 = not spawned / not instrumented */
} pt_task;

#if PT_PROFILING
#include "ptprof.h"
#include "ptprof_console.h"

/* kind: "task", "local", "blocking" or "block_on" (the console's Kind field). */
#define pt_task_spawn(t, name, kind) \
  pt_task_spawn_at((t), (name), (kind), __FILE__, __LINE__)
static inline void pt_task_spawn_at(pt_task *t, const char *name, const char *kind,
                                    const char *file, int line) {
  t->id = ptcon_task_spawn(name, kind, file, (uint32_t)line, NULL, 0);
}
static inline void pt_task_poll_begin(pt_task *t) { if (t->id) ptcon_task_poll_begin(t->id); }
static inline void pt_task_poll_end(pt_task *t) { if (t->id) ptcon_task_poll_end(t->id); }
static inline void pt_task_wake(pt_task *t) { if (t->id) ptcon_task_wake(t->id); }
/* A wake source (registered fd, pending timer) was armed / disarmed. */
static inline void pt_task_arm(pt_task *t) { if (t->id) ptcon_task_waker_clone(t->id); }
static inline void pt_task_disarm(pt_task *t) { if (t->id) ptcon_task_waker_drop(t->id); }
static inline void pt_task_end(pt_task *t) { if (t->id) ptcon_task_end(t->id); t->id = 0; }
/* A user label on this thread's CPU samples until the matching pop
 * (ptprof_labels_push, include/ptprof.h); returns 0 when pushed (pop only
 * then). Normal builds: nothing, returns -1. */
static inline int pt_label_push(const char *key, const char *value) {
  return ptprof_labels_push(key, value);
}
static inline void pt_label_pop(void) { (void)ptprof_labels_pop(); }

#else

#define pt_task_spawn(t, name, kind) ((void)(t), (void)(name), (void)(kind))
static inline void pt_task_poll_begin(pt_task *t) { (void)t; }
static inline void pt_task_poll_end(pt_task *t) { (void)t; }
static inline void pt_task_wake(pt_task *t) { (void)t; }
static inline void pt_task_arm(pt_task *t) { (void)t; }
static inline void pt_task_disarm(pt_task *t) { (void)t; }
static inline void pt_task_end(pt_task *t) { (void)t; }
static inline int pt_label_push(const char *key, const char *value) {
  (void)key;
  (void)value;
  return -1;
}
static inline void pt_label_pop(void) {}

#endif
#endif
