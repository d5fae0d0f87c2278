/*
 * ptp_label_set.h - the calling thread's current labels (the console task
 * it is polling, and the user labels it pushed), as the SIGPROF handler
 * copies them into each sample.
 *
 * Where they live: a thread-local block in initial-exec TLS (an %fs-relative
 * address, no __tls_get_addr, no allocation: safe to read in a signal
 * handler, in the static library and in libptprof.so, which is loaded at
 * start-up as a dependency or by LD_PRELOAD). Its writers are the same
 * thread's poll seam (ptcon_task_poll_begin/_end) and ptprof_labels_push/_pop;
 * its only other reader is the SIGPROF handler, which runs on that same
 * thread. So "atomic" here means "not torn and ordered against a signal":
 * every field the handler reads is _Atomic, stores are relaxed, and a writer
 * publishes a new user label by writing its ids first and the count n last
 * (a signal between the two sees the old count, a consistent set).
 * Why not the thread registry's record (ptp_threads.h): finding it costs a
 * gettid(2) per poll; the TLS block costs two stores.
 *
 * Nesting: a poll inside a poll (a callback that runs another task's
 * callback) makes the inner task current and restores the outer one at the
 * inner end. PTP_POLL_NEST_MAX levels are remembered; deeper levels show as
 * PTP_TASK_TOO_DEEP on return (resolved as "[task unknown: polls nested too
 * deep]"), never as a wrong task.
 *
 * SIGNAL-SAFETY: ptp_label_set_copy is async-signal-safe (atomic loads of
 * initial-exec TLS). The poll functions are not meant for handlers but
 * touch only this thread's block (no locks, no allocation).
 */
#ifndef PTP_LABEL_SET_H
#define PTP_LABEL_SET_H

#include <stdatomic.h>
#include <stdint.h>

#include "prof/output/ptp_window.h"

#define PTP_POLL_NEST_MAX 8u

typedef struct ptp_label_set {
  _Atomic uint64_t task;                    /* innermost polled task; 0 none */
  _Atomic uint32_t n;                       /* user labels in kv[0 .. 2n) */
  _Atomic uint32_t kv[2 * PTP_LABELS_MAX];  /* interned ids, key then value */
  uint32_t depth;                           /* poll nesting, may exceed the max */
  uint64_t outer[PTP_POLL_NEST_MAX];        /* the task current at each level's begin */
} ptp_label_set;

/* Defined in ptp_label_set.c. */
extern __thread ptp_label_set ptp_t_labels __attribute__((tls_model("initial-exec")));

/* The handler's copy (async-signal-safe). */
static inline void ptp_label_set_copy(ptp_label_ids *out) {
  ptp_label_set *s = &ptp_t_labels;
  out->task = atomic_load_explicit(&s->task, memory_order_relaxed);
  uint32_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
  if (n > PTP_LABELS_MAX) n = PTP_LABELS_MAX;
  atomic_signal_fence(memory_order_acquire);
  out->n = n;
  for (uint32_t i = 0; i < 2 * PTP_LABELS_MAX; i++)
    out->kv[i] = i < 2 * n ? atomic_load_explicit(&s->kv[i], memory_order_relaxed) : 0;
}

/* The poll seam: id (nonzero console task id) is polled from now on, on
 * this thread, until the matching end. */
static inline void ptp_label_set_poll_begin(uint64_t id) {
  ptp_label_set *s = &ptp_t_labels;
  if (s->depth < PTP_POLL_NEST_MAX)
    s->outer[s->depth] = atomic_load_explicit(&s->task, memory_order_relaxed);
  if (s->depth < UINT32_MAX) s->depth++;
  atomic_store_explicit(&s->task, id, memory_order_relaxed);
}

/* The end of the innermost poll: the enclosing task (or none) is current
 * again. An end without a begin is ignored. */
static inline void ptp_label_set_poll_end(void) {
  ptp_label_set *s = &ptp_t_labels;
  if (s->depth == 0) return;
  s->depth--;
  uint64_t outer = s->depth < PTP_POLL_NEST_MAX ? s->outer[s->depth] : PTP_TASK_TOO_DEEP;
  atomic_store_explicit(&s->task, outer, memory_order_relaxed);
}

#endif
