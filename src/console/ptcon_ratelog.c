/* ptcon_ratelog.c - see ptcon_ratelog.h. One thread; no allocation. */
#include "console/ptcon_ratelog.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ptcon_ratelog_init(ptcon_ratelog *rl, ptcon_log_fn log, void *ud, uint64_t window_ns) {
  memset(rl, 0, sizeof *rl);
  rl->log = log;
  rl->ud = ud;
  rl->window_ns = window_ns ? window_ns : 10000000000u;
}

static uint32_t slot_for(ptcon_ratelog *rl, const char *cause) {
  for (uint32_t i = 0; i < rl->n; i++)
    if (rl->c[i].cause == cause || strcmp(rl->c[i].cause, cause) == 0) return i;
  if (rl->n == PTCON_RATELOG_CAUSES) return PTCON_RATELOG_CAUSES - 1;
  rl->c[rl->n].cause = cause;
  return rl->n++;
}

static void summary(ptcon_ratelog *rl, uint32_t i) {
  char line[256];
  snprintf(line, sizeof line, "task console: %llu more %s in the last %llu s (not logged one by one)",
           (unsigned long long)rl->c[i].suppressed, rl->c[i].cause,
           (unsigned long long)(rl->window_ns / 1000000000u));
  rl->log(rl->ud, line);
  rl->c[i].suppressed = 0;
}

void ptcon_ratelog_event(ptcon_ratelog *rl, uint64_t now, const char *cause, const char *fmt,
                         ...) {
  if (!rl->log) return;
  uint32_t i = slot_for(rl, cause);
  if (rl->c[i].window_end && now < rl->c[i].window_end) {
    rl->c[i].suppressed++;
    return;
  }
  if (rl->c[i].suppressed) summary(rl, i);
  rl->c[i].window_end = now + rl->window_ns;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  rl->log(rl->ud, line);
}

void ptcon_ratelog_flush(ptcon_ratelog *rl, uint64_t now) {
  if (!rl->log) return;
  for (uint32_t i = 0; i < rl->n; i++) {
    if (!rl->c[i].window_end || now < rl->c[i].window_end) continue;
    if (rl->c[i].suppressed) summary(rl, i);
    rl->c[i].window_end = 0;
  }
}

uint64_t ptcon_ratelog_next_due(const ptcon_ratelog *rl) {
  uint64_t d = UINT64_MAX;
  for (uint32_t i = 0; i < rl->n; i++)
    if (rl->c[i].suppressed && rl->c[i].window_end < d) d = rl->c[i].window_end;
  return d;
}
