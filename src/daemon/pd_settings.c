/* pd_settings.c - settings from the environment (see pd_settings.h). */
#include "daemon/pd_settings.h"
#include "daemon/pd_log.h"
#include "common/pt_env.h"

/* The daemon's logging front of the one settings parser (common/pt_env.h). */
int pd_env_int(const char *name, int dflt, int min, int max) {
  char err[256];
  int v = (int)pt_env_int(name, dflt, min, max, err, sizeof err);
  if (err[0]) pd_warn("%s", err);
  return v;
}
