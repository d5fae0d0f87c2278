/*
 * ptcon_encode.c - console-api messages (instrument.Update, instrument.State,
 * tasks.TaskDetails) from the aggregator's state, with the ptp_pb_wire encoder.
 * Field numbers follow our own .proto files in proto/console/ (written from the
 * console wire protocol the tokio-console client speaks; docs/console.md).
 */
#include "console/ptcon_agg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define META_NAME "runtime.spawn"
#define META_TARGET "polytoken::task"

/* Timestamp and Duration share one layout: seconds, nanos in [0, 1e9). */
static void enc_time(ptp_pb_buf *b, uint32_t field, uint64_t ns) {
  ptp_pb_mark m = ptp_pb_begin(b, field);
  uint64_t s = ns / 1000000000u, n = ns % 1000000000u;
  if (s) ptp_pb_uint64(b, 1, s);
  if (n) ptp_pb_uint64(b, 2, n);
  ptp_pb_end(b, m);
}

/* Timestamp of a monotonic instant, never after `now` (clock skew between
 * CPUs could otherwise make a duration the client computes negative). */
static void enc_ts(ptp_pb_buf *b, uint32_t field, const ptcon_agg *a, uint64_t mono) {
  if (mono > a->now) mono = a->now;
  enc_time(b, field, ptcon_agg_wall_ns(a, mono));
}

static void enc_dur(ptp_pb_buf *b, uint32_t field, uint64_t ns) { enc_time(b, field, ns); }

static void enc_id(ptp_pb_buf *b, uint32_t field, uint64_t id) {
  ptp_pb_mark m = ptp_pb_begin(b, field);
  if (id) ptp_pb_uint64(b, 1, id);
  ptp_pb_end(b, m);
}

/* __FILE__ in a meson build is relative to the build directory
 * ("../../src/daemon/x.c"): drop the leading "./" and "../" so the client
 * shows "src/daemon/x.c". */
static const char *display_path(const char *f) {
  for (;;) {
    if (f[0] == '.' && f[1] == '/') f += 2;
    else if (f[0] == '.' && f[1] == '.' && f[2] == '/') f += 3;
    else return f;
  }
}

static void enc_location(ptp_pb_buf *b, uint32_t field, const char *file, uint32_t line) {
  ptp_pb_mark m = ptp_pb_begin(b, field);
  if (file) ptp_pb_string(b, 1, display_path(file));
  if (line) ptp_pb_uint64(b, 3, line);
  ptp_pb_end(b, m);
}

static void enc_meta(ptp_pb_buf *b, const ptcon_meta *mt) {
  ptp_pb_mark nm = ptp_pb_begin(b, 1);            /* RegisterMetadata.metadata */
  enc_id(b, 1, mt->id);                   /* NewMetadata.id */
  ptp_pb_mark md = ptp_pb_begin(b, 2);            /* NewMetadata.metadata */
  ptp_pb_string(b, 1, META_NAME);
  ptp_pb_string(b, 2, META_TARGET);
  ptp_pb_string(b, 3, META_TARGET);
  enc_location(b, 4, mt->file, mt->line);
  /* kind SPAN = 0 (default, not written) */
  ptp_pb_uint64(b, 6, 4);                     /* level TRACE */
  ptp_pb_string(b, 7, "task.name");
  ptp_pb_string(b, 7, "task.id");
  ptp_pb_string(b, 7, "kind");
  ptp_pb_end(b, md);
  ptp_pb_end(b, nm);
}

static void enc_field_str(ptp_pb_buf *b, const char *name, uint32_t vfield, const char *v,
                          uint64_t meta) {
  ptp_pb_mark m = ptp_pb_begin(b, 4);
  ptp_pb_string(b, 1, name);
  ptp_pb_string(b, vfield, v);
  enc_id(b, 8, meta);
  ptp_pb_end(b, m);
}

static void enc_task(ptp_pb_buf *b, const ptcon_agg *a, const ptcon_rec *r) {
  uint64_t meta = a->metas[r->meta].id;
  ptp_pb_mark t = ptp_pb_begin(b, 1);             /* TaskUpdate.new_tasks */
  enc_id(b, 1, r->id);
  enc_id(b, 2, meta);
  if (r->kind && strcmp(r->kind, "blocking") == 0) ptp_pb_uint64(b, 3, 1);
  enc_field_str(b, "task.name", 4, r->name, meta);
  ptp_pb_mark f = ptp_pb_begin(b, 4);
  ptp_pb_string(b, 1, "task.id");
  ptp_pb_uint64(b, 5, r->seq);
  enc_id(b, 8, meta);
  ptp_pb_end(b, f);
  enc_field_str(b, "kind", 3, r->kind ? r->kind : "task", meta);
  for (uint32_t i = 0; i < r->nfields; i++) {
    const ptcon_slot_field *x = &r->fields[i];
    f = ptp_pb_begin(b, 4);
    ptp_pb_string(b, 1, x->name);
    switch (x->type) {
    case PTCON_FIELD_U64: ptp_pb_uint64(b, 5, x->num); break;
    case PTCON_FIELD_I64: ptp_pb_sint64(b, 6, (int64_t)x->num); break;
    case PTCON_FIELD_BOOL: ptp_pb_bool(b, 7, (int)x->num); break;
    default: ptp_pb_string(b, 4, x->str); break;
    }
    enc_id(b, 8, meta);
    ptp_pb_end(b, f);
  }
  enc_location(b, 6, r->file, r->line);
  ptp_pb_end(b, t);
}

static void enc_stats(ptp_pb_buf *b, const ptcon_agg *a, const ptcon_rec *r) {
  ptp_pb_mark e = ptp_pb_begin(b, 3);             /* TaskUpdate.stats_update entry */
  ptp_pb_uint64(b, 1, r->id);
  ptp_pb_mark s = ptp_pb_begin(b, 2);
  enc_ts(b, 1, a, r->created);
  if (r->dropped) enc_ts(b, 2, a, r->dropped);
  if (r->wakes) ptp_pb_uint64(b, 3, r->wakes);
  if (r->waker_clones) ptp_pb_uint64(b, 4, r->waker_clones);
  if (r->waker_drops) ptp_pb_uint64(b, 5, r->waker_drops);
  if (r->last_wake) enc_ts(b, 6, a, r->last_wake);
  ptp_pb_mark p = ptp_pb_begin(b, 7);             /* poll_stats: always present */
  if (r->polls) ptp_pb_uint64(b, 1, r->polls);
  if (r->first_poll) enc_ts(b, 3, a, r->first_poll);
  if (r->last_poll_started) enc_ts(b, 4, a, r->last_poll_started);
  if (r->last_poll_ended) enc_ts(b, 5, a, r->last_poll_ended);
  enc_dur(b, 6, r->busy_ns);
  ptp_pb_end(b, p);
  if (r->self_wakes) ptp_pb_uint64(b, 8, r->self_wakes);
  enc_dur(b, 9, r->sched_ns);
  ptp_pb_end(b, s);
  ptp_pb_end(b, e);
}

typedef struct chunk {
  ptp_pb_buf b;
  ptp_pb_mark tu;
  size_t ntasks;
} chunk;

static void chunk_start(chunk *c, const ptcon_agg *a) {
  ptp_pb_buf_reset(&c->b);
  enc_ts(&c->b, 1, a, a->now);
  c->ntasks = 0;
}

static int chunk_emit(chunk *c, ptcon_emit_fn emit, void *ud) {
  ptp_pb_end(&c->b, c->tu);
  if (c->b.err) return c->b.err;
  size_t len;
  uint8_t *msg = ptp_pb_buf_take(&c->b, &len);
  return emit(ud, msg, len);
}

int ptcon_agg_encode_updates(ptcon_agg *a, int full, uint64_t since, uint64_t dropped_delta,
                             size_t limit, ptcon_emit_fn emit, void *ud) {
  int rc = 0;
  chunk c;
  ptp_pb_buf one;
  ptp_pb_buf_init(&c.b, 0);
  ptp_pb_buf_init(&one, 0);
  chunk_start(&c, a);
  /* Metadata: all in the first Update (PTCON_MAX_METAS entries of ~150 bytes
   * stay far below the limit). */
  uint32_t nm = 0;
  for (uint32_t i = 0; i < a->nmetas; i++)
    if (full || a->metas[i].gen > since) nm++;
  if (nm) {
    ptp_pb_mark m = ptp_pb_begin(&c.b, 5);
    for (uint32_t i = 0; i < a->nmetas; i++)
      if (full || a->metas[i].gen > since) enc_meta(&c.b, &a->metas[i]);
    ptp_pb_end(&c.b, m);
  }
  c.tu = ptp_pb_begin(&c.b, 2);
  if (dropped_delta) ptp_pb_uint64(&c.b, 4, dropped_delta);
  for (uint32_t i = 0; i < a->nrecs; i++) {
    const ptcon_rec *r = a->recs[i];
    int is_new = full || r->new_gen > since;
    if (!is_new && r->changed_gen <= since) continue;
    ptp_pb_buf_reset(&one);
    if (is_new) enc_task(&one, a, r);     /* a new task always with its stats */
    enc_stats(&one, a, r);
    if (one.err) {
      rc = one.err;
      goto out;
    }
    if (c.ntasks && c.b.len + one.len + 16 > limit) {
      rc = chunk_emit(&c, emit, ud);
      if (rc) goto out;
      chunk_start(&c, a);
      c.tu = ptp_pb_begin(&c.b, 2);
    }
    ptp_pb_raw(&c.b, one.data, one.len);
    c.ntasks++;
  }
  rc = chunk_emit(&c, emit, ud);
out:
  ptp_pb_buf_free(&one);
  ptp_pb_buf_free(&c.b);
  return rc;
}

void ptcon_encode_state(ptp_pb_buf *b, int paused) {
  if (paused) ptp_pb_uint64(b, 1, 1);   /* LIVE = 0 is the default: nothing */
}

static void enc_hist(ptp_pb_buf *b, uint32_t field, const ptcon_hist *h) {
  static const ptcon_hist empty;
  ptp_pb_mark m = ptp_pb_begin(b, field);
  /* raw_histogram: length-delimited; encode the V2 bytes in place. */
  ptp_pb_mark raw = ptp_pb_begin(b, 1);
  ptcon_hist_encode_v2(h, b);
  ptp_pb_end(b, raw);
  if (!h) h = &empty;
  if (h->max) ptp_pb_uint64(b, 2, h->max);
  if (h->high_outliers) ptp_pb_uint64(b, 3, h->high_outliers);
  if (h->highest_outlier) ptp_pb_uint64(b, 4, h->highest_outlier);
  ptp_pb_end(b, m);
}

int ptcon_agg_encode_details(ptcon_agg *a, uint64_t id, ptp_pb_buf *b) {
  ptcon_rec *r = ptcon_agg_find(a, id);
  if (!r) return -ENOENT;
  enc_id(b, 1, r->id);
  enc_ts(b, 2, a, a->now);
  enc_hist(b, 4, r->poll_hist);
  enc_hist(b, 5, r->sched_hist);
  return b->err;
}
