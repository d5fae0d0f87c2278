/*
 * ptp_labels.h - what the ids in a sample's ptp_label_ids stand for, kept
 * until the samples that carry them are written: the user labels' interned
 * strings (ptprof_labels_push/_pop, include/ptprof.h) and the names of
 * console tasks.
 *
 * Lifetime ("epochs"): ptp_labels_cut() is called at each dump's cut and
 * numbers the cuts 1, 2, ...; whatever stops being used (a string no thread
 * has pushed any more, a task that ended) between cuts E and E+1 is marked
 * with epoch E and kept until the dump of cut E+1 has encoded its window
 * (ptp_labels_release(E + 1)): every sample taken while it was in use was
 * taken before that cut, so it is in that window or was dropped. While no
 * sampler runs, nothing is kept (there are no samples to name).
 *
 * Task names: a live task is resolved through the callback the console
 * registers (ptp_labels_set_task_resolver: prof never calls console code
 * by name); a task that ended while a sampler runs had its name, id and
 * location copied here by the console at its end (ptp_labels_task_ended),
 * before its slot could be reused.
 *
 * Threads: all functions here take the module's mutex (never from a
 * signal handler). The handler only reads the thread's ptp_label_set
 * (ptp_label_set.h), whose TLS block this file defines.
 */
#ifndef PTP_LABELS_H
#define PTP_LABELS_H

#include <stddef.h>
#include <stdint.h>

#include "prof/signal/ptp_label_set.h"
#include "prof/output/ptp_window.h"

/* Bounds of ptp_labels_task_ended's copies (tasks ended and not yet written). */
#define PTP_TASK_NAME_MAX 64u
#define PTP_ENDED_TASKS_MAX 16384u

/* What a task is called (the console's names). file: static storage. */
typedef struct ptp_task_info {
  uint64_t seq;                  /* the console's task.id (display id) */
  const char *file;              /* spawn location, may be NULL */
  uint32_t line;
  char name[PTP_TASK_NAME_MAX];  /* task.name, NUL-terminated */
} ptp_task_info;

/* Fills *out for the live task id and returns 0, or returns nonzero when id
 * is not (or no longer) a live task. Called on the dumping thread; must not
 * block. */
typedef int (*ptp_task_resolver_fn)(uint64_t id, ptp_task_info *out);

/* The console registers its resolver once (any thread). */
void ptp_labels_set_task_resolver(ptp_task_resolver_fn fn);

/* The console: task id is ending (before its slot can be reused). Copies
 * the name while a sampler runs (else does nothing). Beyond
 * PTP_ENDED_TASKS_MAX waiting copies the task's samples are labelled
 * "[task name not kept]". Any thread. */
void ptp_labels_task_ended(uint64_t id, uint64_t seq, const char *name, const char *file,
                           uint32_t line);

/* The dump's cut: returns the new epoch (1, 2, ...). */
uint64_t ptp_labels_cut(void);
/* Forgets what stopped being used before the cut numbered epoch (see the top);
 * UINT64_MAX forgets everything unused (the sampler stopped). */
void ptp_labels_release(uint64_t epoch);

/* Resolved labels of a window: fills samples[i].labels / .nlabels from
 * samples[i].ids (task, task_kind, task_loc, then user labels, an inner push
 * of a key hiding an outer one like Go's pprof.Do); *out owns the memory
 * (ptp_labels_res_free after encoding). Returns 0 or -ENOMEM. */
typedef struct ptp_labels_res ptp_labels_res;
int ptp_labels_resolve(ptp_sample *samples, size_t n, ptp_labels_res **out);
void ptp_labels_res_free(ptp_labels_res *r);

/* Counters (tests, comments): strings interned now, ended-task copies
 * waiting, copies refused because the table was full. */
typedef struct ptp_labels_stats {
  size_t strings, ended_waiting;
  uint64_t ended_not_kept;
} ptp_labels_stats;
void ptp_labels_get_stats(ptp_labels_stats *out);

/* Gives back the calling thread's label cache (its references to the last
 * key=value it interned, ptp_labels.c) unless an entry on its stack still
 * borrows them; returns 1 if it was emptied (or empty), 0 if kept. Called
 * at thread exit, and by tests that count strings. Calling thread only. */
int ptp_labels_cache_drop(void);

#endif
