/* ptcon_agg.c - see ptcon_agg.h. Runs on one thread only; time comes from
 * the caller (`now`), the clock is read only to calibrate ticks. */
#include "console/ptcon_agg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ptcon_agg_new(ptcon_agg **out, uint32_t retention_ms, uint32_t max_retained) {
  int rc;
  ptcon_agg *a = calloc(1, sizeof *a);
  if (!a) return -ENOMEM;
  a->retention_ns = (uint64_t)(retention_ms ? retention_ms : 60000u) * 1000000u;
  a->max_retained = max_retained ? max_retained : 8192u;
  a->caprecs = PTCON_MAX_LIVE_TASKS + a->max_retained;
  a->recs = calloc(a->caprecs, sizeof *a->recs);
  a->slot_rec = calloc(PTCON_MAX_LIVE_TASKS, sizeof *a->slot_rec);
  a->metas = calloc(PTCON_MAX_METAS, sizeof *a->metas);
  if (!a->recs || !a->slot_rec || !a->metas) {
    rc = -ENOMEM;
    goto fail_alloc;
  }
  rc = ptcon_consumer_attach();
  if (rc) goto fail_alloc;
  ptcon_clock_init(&a->clock);
  a->anchor_mono_ns = ptcon_mono_ns();
  a->anchor_real_ns = real_ns();
  a->now = a->anchor_mono_ns;
  a->gen = 1;
  *out = a;
  return 0;
fail_alloc:
  free(a->metas);
  free(a->slot_rec);
  free(a->recs);
  free(a);
  return rc;
}

static void rec_free(ptcon_rec *r) {
  free(r->poll_hist);
  free(r->sched_hist);
  free(r);
}

void ptcon_agg_del(ptcon_agg *a) {
  if (!a) return;
  for (uint32_t i = 0; i < a->nrecs; i++) rec_free(a->recs[i]);
  ptcon_consumer_detach();   /* sweeps ended slots */
  free(a->metas);
  free(a->slot_rec);
  free(a->recs);
  free(a);
}

uint64_t ptcon_agg_wall_ns(const ptcon_agg *a, uint64_t mono) {
  int64_t d = (int64_t)(mono - a->anchor_mono_ns);
  if (d < 0 && (uint64_t)(-d) > a->anchor_real_ns) return 0;
  return a->anchor_real_ns + (uint64_t)d;
}

static uint32_t meta_for(ptcon_agg *a, const char *file, uint32_t line) {
  for (uint32_t i = 0; i < a->nmetas; i++) {
    const ptcon_meta *m = &a->metas[i];
    if (m->line == line && (m->file == file || (m->file && file && strcmp(m->file, file) == 0)))
      return i;
  }
  if (a->nmetas == PTCON_MAX_METAS) return 0;   /* shared fallback: the first */
  ptcon_meta *m = &a->metas[a->nmetas];
  m->id = a->nmetas + 1u;
  m->gen = a->gen;
  m->file = file;
  m->line = line;
  return a->nmetas++;
}

static inline uint64_t to_ns(ptcon_agg *a, uint64_t ticks) {
  return ptcon_clock_to_mono_ns(&a->clock, ticks);
}

static void rec_complete(ptcon_agg *a, ptcon_rec *r, uint64_t when) {
  if (r->dropped) return;
  if (when < r->created) when = r->created;
  if (r->depth) {   /* ended inside its own poll: close that poll */
    r->depth = 0;
    uint64_t d = when > r->cur_poll_start ? when - r->cur_poll_start : 0;
    r->busy_ns += d;
    r->last_poll_ended = when;
  }
  r->dropped = when;
  r->changed_gen = a->gen;
  if (a->done_tail) a->done_tail->next_done = r;
  else a->done_head = r;
  a->done_tail = r;
  a->ndone++;
}

/* Creates the record of slot idx's current occupant if it is task `id` and
 * still LIVE or ENDED. The copy is validated against a re-read of state: the
 * slot cannot be recycled while we are attached (only we reap), except for
 * the instant around attach, which the re-check covers. */
static ptcon_rec *rec_discover(ptcon_agg *a, uint32_t idx, uint64_t id) {
  ptcon_slot *s = &ptcon_slots[idx];
  uint64_t st = atomic_load_explicit(&s->state, memory_order_acquire);
  uint64_t gen = (id & PTCON_EV_ID_MASK) >> PTCON_SLOT_BITS;
  if ((st >> 2) != gen || (st & 3) == PTCON_SLOT_FREE) return NULL;
  if (a->nrecs == a->caprecs) return NULL;   /* cannot happen: caps add up */
  ptcon_rec *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->id = id;
  r->seq = s->seq;
  r->kind = s->kind;
  r->file = s->file;
  r->line = s->line;
  r->nfields = s->nfields;
  memcpy(r->name, s->name, sizeof r->name);
  r->name[sizeof r->name - 1] = 0;
  memcpy(r->fields, s->fields, sizeof r->fields);
  uint64_t ct = s->created_ticks;
  if (atomic_load_explicit(&s->state, memory_order_acquire) >> 2 != gen) {
    free(r);
    return NULL;
  }
  r->created = to_ns(a, ct);
  if (r->created > a->now) r->created = a->now;
  r->meta = meta_for(a, r->file, r->line);
  r->new_gen = r->changed_gen = a->gen;
  r->pos = a->nrecs;
  a->recs[a->nrecs++] = r;
  a->slot_rec[idx] = r;
  return r;
}

static ptcon_rec *rec_lookup(ptcon_agg *a, uint64_t id, int discover) {
  uint32_t idx = (uint32_t)(id & PTCON_SLOT_MASK);
  ptcon_rec *r = a->slot_rec[idx];
  if (r && r->id == id) return r;
  return discover ? rec_discover(a, idx, id) : NULL;
}

ptcon_rec *ptcon_agg_find(ptcon_agg *a, uint64_t id) {
  ptcon_rec *r = rec_lookup(a, id, 0);
  if (r) return r;
  for (uint32_t i = 0; i < a->nrecs; i++)
    if (a->recs[i]->id == id) return a->recs[i];
  return NULL;
}

/* Completes the record of slot idx's occupant if that slot is ENDED with
 * generation gen, and returns the slot. Shared by the END event and the scan. */
static void end_from_slot(ptcon_agg *a, ptcon_rec *r, uint32_t idx, uint64_t gen) {
  ptcon_slot *s = &ptcon_slots[idx];
  uint64_t st = atomic_load_explicit(&s->state, memory_order_acquire);
  if (st != (gen << 2 | PTCON_SLOT_ENDED)) return;
  if (r) {
    uint64_t et = ptcon_clock_to_mono_ns(&a->clock,
                                         atomic_load_explicit(&s->ended_ticks, memory_order_relaxed));
    rec_complete(a, r, et > a->now ? a->now : et);
    if (a->slot_rec[idx] == r) a->slot_rec[idx] = NULL;
  }
  ptcon_slot_reap(idx, gen);
}

static void apply(ptcon_agg *a, ptcon_rec *r, unsigned type, uint64_t t) {
  if (r->dropped) return;   /* late event of a completed task */
  if (t < r->created) t = r->created;
  switch (type) {
  case PTCON_EV_POLL_BEGIN:
    if (r->depth++ == 0) {
      r->polls++;
      r->cur_poll_start = t;
      if (!r->first_poll) r->first_poll = t;
      r->last_poll_started = t;
      if (r->last_wake) {
        uint64_t base = r->last_wake > r->last_poll_ended ? r->last_wake : r->last_poll_ended;
        uint64_t d = t > base ? t - base : 0;
        r->sched_ns += d;
        (void)ptcon_hist_record(&r->sched_hist, d);   /* -ENOMEM: sample lost */
      }
    }
    break;
  case PTCON_EV_POLL_END:
    if (r->depth == 0) break;   /* its begin was dropped */
    if (--r->depth == 0) {
      uint64_t d = t > r->cur_poll_start ? t - r->cur_poll_start : 0;
      r->busy_ns += d;
      r->last_poll_ended = t;
      (void)ptcon_hist_record(&r->poll_hist, d);
    }
    break;
  case PTCON_EV_SELF_WAKE:
    r->self_wakes++;
    /* fallthrough */
  case PTCON_EV_WAKE:
    r->wakes++;
    r->last_wake = t;
    break;
  case PTCON_EV_WAKER_CLONE: r->waker_clones++; break;
  case PTCON_EV_WAKER_DROP: r->waker_drops++; break;
  default: return;
  }
  r->changed_gen = a->gen;
}

uint32_t ptcon_agg_drain(ptcon_agg *a, uint64_t now) {
  uint32_t most = 0;
  if (now > a->now) a->now = now;
  uint64_t dropped = atomic_load_explicit(&ptcon_spawn_dropped, memory_order_relaxed);
  for (ptcon_ring *rg = atomic_load_explicit(&ptcon_rings, memory_order_acquire); rg;
       rg = rg->next) {
    uint64_t head = atomic_load_explicit(&rg->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&rg->tail, memory_order_acquire);
    if (tail - head > most) most = (uint32_t)(tail - head);
    for (; head != tail; head++) {
      const ptcon_event *e = &rg->ev[head & (PTCON_RING_CAP - 1)];
      uint64_t id = e->w0 & PTCON_EV_ID_MASK;
      unsigned type = (unsigned)(e->w0 >> 60);
      ptcon_rec *r = rec_lookup(a, id, 1);
      if (type == PTCON_EV_END)
        end_from_slot(a, r, (uint32_t)(id & PTCON_SLOT_MASK), id >> PTCON_SLOT_BITS);
      else if (r)
        apply(a, r, type, to_ns(a, e->ticks));
      a->events++;
    }
    atomic_store_explicit(&rg->head, head, memory_order_release);
    dropped += atomic_load_explicit(&rg->dropped, memory_order_relaxed);
  }
  a->dropped_total = dropped;
  return most;
}

static void rec_remove(ptcon_agg *a, ptcon_rec *r) {
  uint32_t idx = (uint32_t)(r->id & PTCON_SLOT_MASK);
  if (a->slot_rec[idx] == r) a->slot_rec[idx] = NULL;
  ptcon_rec *last = a->recs[--a->nrecs];
  a->recs[r->pos] = last;
  last->pos = r->pos;
  a->removed++;
  rec_free(r);
}

uint32_t ptcon_agg_collect(ptcon_agg *a, uint64_t now) {
  ptcon_clock_refine(&a->clock);
  uint32_t most = ptcon_agg_drain(a, now);
  now = a->now;
  /* Slot scan: tasks with no events yet, and ended tasks whose END hint
   * was dropped or is still in a ring (the slot's ENDED state cannot be
   * lost, so no task stays a ghost). */
  uint32_t hwm = atomic_load_explicit(&ptcon_slot_hwm, memory_order_acquire);
  if (hwm > PTCON_MAX_LIVE_TASKS) hwm = PTCON_MAX_LIVE_TASKS;
  for (uint32_t i = 0; i < hwm; i++) {
    ptcon_slot *s = &ptcon_slots[i];
    uint64_t st = atomic_load_explicit(&s->state, memory_order_acquire);
    unsigned kind = (unsigned)(st & 3);
    if (kind == PTCON_SLOT_FREE) continue;
    uint64_t gen = st >> 2;
    uint64_t id = gen << PTCON_SLOT_BITS | i;
    ptcon_rec *r = rec_lookup(a, id, 1);
    if (kind == PTCON_SLOT_ENDED) end_from_slot(a, r, i, gen);
  }
  /* Retention, then the hard cap (oldest first). */
  while (a->done_head &&
         (a->done_head->dropped + a->retention_ns <= now || a->ndone > a->max_retained)) {
    ptcon_rec *r = a->done_head;
    a->done_head = r->next_done;
    if (!a->done_head) a->done_tail = NULL;
    a->ndone--;
    rec_remove(a, r);
  }
  return most;
}

uint64_t ptcon_agg_seal(ptcon_agg *a) { return a->gen++; }
