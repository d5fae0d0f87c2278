/*
 * pt_profile_engine.h - POLYTOKEN_PROFILE_ENGINE (auto, perf or timer): the
 * sampling engine the daemon and the TUI ask ptprof for, read the same way
 * in both programs (docs/profiling.md, "Settings"). Each program passes its
 * own default (see pd_profiling.c and tui_profiling.c for why).
 *
 * Header-only (profiling builds only; includes ptprof.h); no allocation;
 * any thread (getenv: call before threads change the environment).
 */
#ifndef PT_PROFILE_ENGINE_H
#define PT_PROFILE_ENGINE_H

#include <stdio.h>
#include <stdlib.h>

#include "ptprof.h"

/* Returns the PTPROF_ENGINE_* named by POLYTOKEN_PROFILE_ENGINE, or def
 * when it is unset or empty. A value other than auto, perf or timer gives
 * def and a one-line explanation in err (the caller logs it); otherwise err
 * is "". */
static inline int pt_profile_engine(int def, char *err, size_t errlen) {
  if (errlen) err[0] = 0;
  const char *s = getenv("POLYTOKEN_PROFILE_ENGINE");
  if (!s || !*s) return def;
  int e = ptprof_engine_from_name(s);
  if (e >= 0) return e;
  if (errlen)
    snprintf(err, errlen, "ignoring POLYTOKEN_PROFILE_ENGINE=%s (expected auto, perf or timer)", s);
  return def;
}

/* How the daemon's and the TUI's start log lines name the engine that
 * ptprof_start chose (ptprof_stats.engine). */
static inline const char *pt_profile_engine_label(int engine) {
  return engine == PTPROF_ENGINE_PERF ? "perf_event" : "CPU-time timer";
}

#endif
