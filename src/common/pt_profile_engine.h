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
#include <string.h>

#include "ptprof.h"

/* Returns the PTPROF_ENGINE_* named by POLYTOKEN_PROFILE_ENGINE, or def
 * when it is unset or empty. A value other than auto, perf or timer gives
 * def and a one-line explanation in err (the caller logs it); otherwise err
 * is "". */
static inline int pt_profile_engine(int def, char *err, size_t errlen) {
  if (errlen) err[0] = 0;
  const char *s = getenv("POLYTOKEN_PROFILE_ENGINE");
  if (!s || !*s) return def;
  if (!strcmp(s, "auto")) return PTPROF_ENGINE_AUTO;
  if (!strcmp(s, "perf")) return PTPROF_ENGINE_PERF;
  if (!strcmp(s, "timer")) return PTPROF_ENGINE_TIMER;
  if (errlen)
    snprintf(err, errlen, "ignoring POLYTOKEN_PROFILE_ENGINE=%s (expected auto, perf or timer)", s);
  return def;
}

#endif
