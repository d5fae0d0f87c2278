/*
 * pd_settings.h - the daemon's settings from the environment, read once at
 * start, in one table (docs/daemon.md, "Environment"): the IPC output cap,
 * the telemetry interval and the responders' knobs. Integers go through
 * the one parser (common/pt_env.h, strict: "10abc" is rejected); a value
 * that is rejected keeps its default and gets one warning in the daemon
 * log. The daemon hands the values to the units that use them (IPC options,
 * telemetry, the turns' responder settings), so none of them reads the
 * environment or depends on another through it.
 *
 * Not here: POLYTOKEN_HOME (common/pt_home.h), POLYTOKEN_DEBUG and
 * POLYTOKEN_LOG_STDERR (the log's own, pd_log.h), POLYTOKEN_FAULT_* (test
 * hooks), the profiling build's POLYTOKEN_PROFILE_* and console knobs
 * (pd_profiling.c).
 *
 * Threads: the loop thread, before other threads change the environment
 * (getenv). Errors: 0 or -ENOMEM.
 */
#ifndef PD_SETTINGS_H
#define PD_SETTINGS_H

#include <stddef.h>

#include "daemon/pd_responder.h"

#define PD_TELEMETRY_INTERVAL_MS_DEFAULT 10000

typedef struct pd_settings {
  size_t ipc_outbuf_max;      /* POLYTOKEN_IPC_OUTBUF_MAX: bytes queued per
                                 client (PD_IPC_OUTBUF_MAX; tests) */
  int telemetry_interval_ms;  /* POLYTOKEN_TELEMETRY_INTERVAL_MS
                                 (PD_TELEMETRY_INTERVAL_MS_DEFAULT) */
  pd_resp_settings responder; /* POLYTOKEN_RESPONDER_CMD, _DELAY_MS,
                                 _TIMEOUT_MS; responder.cmd points into
                                 this struct's own copy */
  char *cmd_copy;             /* owned */
} pd_settings;

/* Reads every setting (defaults for unset or empty ones; rejected ones are
 * logged and keep their default). Returns 0, or -ENOMEM (the command could
 * not be copied; *s is then cleared). Free with pd_settings_clear. */
int pd_settings_load(pd_settings *s);
/* Frees what pd_settings_load allocated; *s is zeroed. */
void pd_settings_clear(pd_settings *s);

#endif
