/* ptcon_initstate.c - see ptcon_initstate.h. One thread. */
#include "console/ptcon_initstate.h"

#include <errno.h>
#include <stdlib.h>

static int collect_frame(void *ud, uint8_t *msg, size_t len) {
  ptcon_initstate *s = ud;
  ptcon_frame *f = ptcon_frame_new(msg, len);
  free(msg);
  if (!f) return -ENOMEM;
  ptcon_frame **nf = realloc(s->frames, (s->n + 1) * sizeof *nf);
  if (!nf) {
    ptcon_frame_unref(f);
    return -ENOMEM;
  }
  s->frames = nf;
  s->frames[s->n++] = f;
  return 0;
}

int ptcon_initstate_build(ptcon_initstate **out, ptcon_agg *agg, uint64_t now, size_t limit) {
  ptcon_initstate *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  ptcon_agg_collect(agg, now);
  s->gen = ptcon_agg_seal(agg);
  s->built_at = now;
  s->dropped = agg->dropped_total;
  int rc = ptcon_agg_encode_updates(agg, 1, 0, s->dropped, limit, collect_frame, s);
  if (rc) {
    ptcon_initstate_del(s);
    return rc;
  }
  *out = s;
  return 0;
}

void ptcon_initstate_del(ptcon_initstate *s) {
  if (!s) return;
  for (uint32_t i = 0; i < s->n; i++) ptcon_frame_unref(s->frames[i]);
  free(s->frames);
  free(s);
}
