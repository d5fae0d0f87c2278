/* pd_shutdown.c - shutdown step registry. See pd_shutdown.h. */
#include "daemon/pd_shutdown.h"
#include "daemon/pd_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_STEPS 32

typedef struct {
  pd_shutdown_slot slot;
  char name[64];
  void (*fn)(void *);
  void *ctx;
} step;

static step g_steps[MAX_STEPS];
static int g_nsteps, g_running;

const char *pd_shutdown_slot_name(pd_shutdown_slot slot) {
  static const char *const names[] = {"early", "final-profile", "state", "telemetry", "log"};
  return (unsigned)slot < PD_SHUTDOWN_NSLOTS ? names[slot] : "?";
}

int pd_shutdown_register(pd_shutdown_slot slot, const char *name, void (*fn)(void *), void *ctx) {
  if ((unsigned)slot >= PD_SHUTDOWN_NSLOTS || !fn || !name) return -EINVAL;
  if (g_running) return -EBUSY;
  if (g_nsteps >= MAX_STEPS) return -ENOSPC;
  step *s = &g_steps[g_nsteps++];
  s->slot = slot;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->fn = fn;
  s->ctx = ctx;
  return 0;
}

void pd_shutdown_run_steps(void) {
  if (g_running) return;
  g_running = 1;
  for (int slot = 0; slot < PD_SHUTDOWN_NSLOTS; slot++) {
    for (int i = 0; i < g_nsteps; i++) {
      if ((int)g_steps[i].slot != slot) continue;
      /* logged before it runs: the log step closes the log itself */
      pd_info("shutdown: step %s: %s", pd_shutdown_slot_name(g_steps[i].slot), g_steps[i].name);
      g_steps[i].fn(g_steps[i].ctx);
    }
  }
}
