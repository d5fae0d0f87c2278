/*
 * ptcon_agg.h - the consumer of the instrumentation: drains the per-thread
 * rings, discovers and completes tasks through the slot table, keeps per-task
 * statistics and histograms, ages completed tasks out, and encodes the
 * console messages (Update, State, TaskDetails) from that state.
 *
 * Threads: everything here runs on one thread (the server thread, or a unit
 * test). There is at most one aggregator per process (ptcon_consumer_attach).
 *
 * Change tracking: agg->gen is the open generation; every change stamps the
 * record with it. ptcon_agg_seal() closes the generation and returns it. A
 * subscriber that has received everything up to generation U gets, as its
 * next delta, the records stamped in (U, S] for the newly sealed S. Values
 * are always current, so a paused subscriber catches up in one delta.
 *
 * Memory bound: live records <= PTCON_MAX_LIVE_TASKS (one per slot),
 * completed records <= max_retained (oldest evicted first even before the
 * retention ends), histograms 2 x sizeof(ptcon_hist) per polled record.
 */
#ifndef PTCON_AGGREGATOR_H
#define PTCON_AGGREGATOR_H

#include <stddef.h>
#include <stdint.h>

#include "console/ptcon_hdrhist.h"
#include "console/ptcon_instr.h"
#include "prof/output/ptp_pb_wire.h"

#define PTCON_MAX_METAS 4096u

typedef struct ptcon_meta {
  uint64_t id;        /* MetaId, 1.. */
  uint64_t gen;       /* generation it was registered in */
  const char *file;   /* static (from the slot) */
  uint32_t line;
} ptcon_meta;

typedef struct ptcon_rec {
  uint64_t id, seq;
  uint32_t pos;                 /* index in agg->recs */
  uint32_t meta;                /* index in agg->metas */
  const char *kind, *file;
  uint32_t line, nfields;
  char name[PTCON_NAME_MAX];
  ptcon_slot_field fields[PTCON_MAX_FIELDS];
  /* CLOCK_MONOTONIC ns; 0 = never */
  uint64_t created, dropped, first_poll, last_poll_started, last_poll_ended, last_wake;
  uint64_t cur_poll_start;
  uint64_t polls, wakes, self_wakes, waker_clones, waker_drops, busy_ns, sched_ns;
  uint32_t depth;
  uint64_t new_gen, changed_gen;
  ptcon_hist *poll_hist, *sched_hist;
  struct ptcon_rec *next_done;  /* completion FIFO */
} ptcon_rec;

typedef struct ptcon_agg {
  ptcon_clock clock;
  uint64_t anchor_real_ns, anchor_mono_ns;   /* the one wall-clock anchor */
  uint64_t now;                              /* mono ns of the last collect */
  uint64_t retention_ns;
  uint32_t max_retained;
  uint64_t gen;
  ptcon_rec **recs;                          /* dense: live + completed */
  uint32_t nrecs, caprecs;
  ptcon_rec **slot_rec;                      /* current occupant per slot */
  ptcon_rec *done_head, *done_tail;          /* completed, oldest first */
  uint32_t ndone;
  ptcon_meta *metas;
  uint32_t nmetas;
  uint64_t dropped_total;                    /* rings + refused spawns */
  uint64_t events;                           /* events consumed (stats) */
  uint64_t removed;                          /* records aged out/evicted */
} ptcon_agg;

/* Attaches as the process's consumer (-EBUSY if another is attached).
 * retention_ms: how long completed tasks stay; max_retained: cap on them. */
int ptcon_agg_new(ptcon_agg **out, uint32_t retention_ms, uint32_t max_retained);
/* Reaps slots of ended tasks, detaches, frees. NULL ok. */
void ptcon_agg_del(ptcon_agg *agg);
/* Drains the rings (cheap; the server calls it when a ring crosses its fill
 * mark, see ptcon_instr.h). now: CLOCK_MONOTONIC ns from the caller; agg->now
 * becomes max(agg->now, now) and clamps every timestamp (a test passes any
 * value it likes, e.g. to step past the retention without sleeping).
 * Returns the largest number of events found in one ring. */
uint32_t ptcon_agg_drain(ptcon_agg *agg, uint64_t now);
/* drain + slot scan (new and ended tasks) + retention at `now`; returns
 * what the drain returned. */
uint32_t ptcon_agg_collect(ptcon_agg *agg, uint64_t now);
/* Closes the open generation; returns it. */
uint64_t ptcon_agg_seal(ptcon_agg *agg);
ptcon_rec *ptcon_agg_find(ptcon_agg *agg, uint64_t id);

/* Receives one encoded message; takes ownership of msg (malloc'd). Returns 0
 * or a negative error to stop. */
typedef int (*ptcon_emit_fn)(void *ud, uint8_t *msg, size_t len);

/* Encodes the Updates for a subscriber: full = 1 for the initial state
 * (everything), else the changes stamped after `since` (metadata, new tasks
 * with their stats, stats of changed tasks). Splits across several Updates
 * so that none exceeds `limit` bytes: metadata first, each new task together
 * with its stats. Always emits at least one Update (with `now`).
 * dropped_delta goes into the first Update's task_update.dropped_events.
 * Returns 0, -ENOMEM, or the emitter's error. */
int ptcon_agg_encode_updates(ptcon_agg *agg, int full, uint64_t since, uint64_t dropped_delta,
                             size_t limit, ptcon_emit_fn emit, void *ud);
/* State{temporality} into b. */
void ptcon_encode_state(ptp_pb_buf *b, int paused);
/* TaskDetails for id into b; -ENOENT if the task is not (or no longer) kept. */
int ptcon_agg_encode_details(ptcon_agg *agg, uint64_t id, ptp_pb_buf *b);

/* Wall-clock ns for a monotonic ns (the anchor rule; never negative). */
uint64_t ptcon_agg_wall_ns(const ptcon_agg *agg, uint64_t mono);

#endif
