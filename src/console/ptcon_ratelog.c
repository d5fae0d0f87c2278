/* ptcon_ratelog.c - see ptcon_ratelog.h. One thread; no allocation. */
#include "console/ptcon_ratelog.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ptcon_ratelog_init(ptcon_ratelog *rl, ptcon_log_fn log, void *user_data, uint64_t window_ns) {
  memset(rl, 0, sizeof *rl);
  rl->log = log;
  rl->user_data = user_data;
  rl->window_ns = window_ns ? window_ns : 10000000000u;
}

static int same(const char *a, const char *b) { return a == b || strcmp(a, b) == 0; }

static uint32_t slot_for(ptcon_ratelog *rl, const char *what, const char *why) {
  for (uint32_t i = 0; i < rl->n; i++)
    if (same(rl->c[i].what, what) && same(rl->c[i].why, why)) return i;
  if (rl->n == PTCON_RATELOG_CAUSES) return PTCON_RATELOG_CAUSES - 1;
  rl->c[rl->n].what = what;
  rl->c[rl->n].why = why;
  return rl->n++;
}

static void summary(ptcon_ratelog *rl, uint32_t i) {
  char line[256];
  snprintf(line, sizeof line, "task console: %llu more %s (%s) in the last %llu s",
           (unsigned long long)rl->c[i].suppressed, rl->c[i].what, rl->c[i].why,
           (unsigned long long)(rl->window_ns / 1000000000u));
  rl->log(rl->c[i].level, line, rl->user_data);
  rl->c[i].suppressed = 0;
}

void ptcon_ratelog_event(ptcon_ratelog *rl, uint64_t now, int level, const char *what,
                         const char *why, const char *fmt, ...) {
  if (!rl->log) return;
  uint32_t i = slot_for(rl, what, why);
  if (rl->c[i].window_end && now < rl->c[i].window_end) {
    rl->c[i].suppressed++;
    return;
  }
  if (rl->c[i].suppressed) summary(rl, i);
  rl->c[i].level = level;
  rl->c[i].window_end = now + rl->window_ns;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  rl->log(level, line, rl->user_data);
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
