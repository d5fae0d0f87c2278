/*
 * ptcon_initstate.h - the initial state of WatchUpdates (every callsite,
 * every retained task with its stats: the full state, split below the
 * message limit), encoded once and shared. Encoding it costs time in
 * proportion to the retained tasks (about 1 ms per 3000); a client that
 * reconnects in a loop would otherwise have it encoded once per loop. The
 * gRPC layer keeps one current ptcon_initstate, rebuilt at most once per
 * publish interval, and every WatchUpdates that starts while it is current
 * queues references to the same frames (ptcon_frame.h).
 *
 * Consistency: the build collects and seals a generation (ptcon_agg.h); a
 * stream that starts from it has received everything up to `gen`, so its
 * next delta carries what changed after the build, as a stream whose state
 * had been encoded for it alone at that moment.
 *
 * Threads: the gRPC layer's (the aggregator's).
 */
#ifndef PTCON_INITSTATE_H
#define PTCON_INITSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "console/ptcon_agg.h"
#include "console/ptcon_frame.h"

typedef struct ptcon_initstate {
  uint64_t built_at;     /* `now` of the build */
  uint64_t gen;          /* the generation sealed by the build */
  uint64_t dropped;      /* agg->dropped_total then (already in the first Update) */
  uint32_t n;            /* frames, >= 1 */
  ptcon_frame **frames;  /* one reference each, held by this object */
} ptcon_initstate;

/* Collects at now, seals, and encodes the full state into frames of at
 * most limit bytes each (ptcon_agg_encode_updates). 0 and *out, or
 * -ENOMEM. */
int ptcon_initstate_build(ptcon_initstate **out, ptcon_agg *agg, uint64_t now, size_t limit);
/* Drops this object's references (frames still queued somewhere live on
 * until sent). NULL ok. */
void ptcon_initstate_del(ptcon_initstate *s);

#endif
