/*
 * pt_console_env.h - starting the task console from the environment, the
 * same way in the daemon and the TUI. The console library takes every
 * setting through ptcon_server_options and reads no POLYTOKEN_* variable;
 * this is where the programs' variables become options:
 *   bind_env (POLYTOKEN_CONSOLE_DAEMON_BIND / POLYTOKEN_CONSOLE_TUI_BIND)
 *     the bind address if set and non-empty, else default_bind;
 *   POLYTOKEN_CONSOLE_RETENTION_MS  completed-task retention, 1 .. 86400000
 *     (malformed or out of range: one log line, the default is kept);
 *   POLYTOKEN_CONSOLE_ALLOW_REMOTE=1  accept a non-loopback bind;
 *   POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS=1  serve connections of every user
 *     (by default only the program's own user is served; 0 or unset: the
 *     default; anything else: one log line, the default is kept).
 * Header-only, for the profiling build's programs (it calls libptprof).
 * Same threading rules as ptcon_server_new; getenv is not synchronised
 * with setenv.
 */
#ifndef PT_CONSOLE_ENV_H
#define PT_CONSOLE_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pt_env.h"
#include "ptprof_console.h"

/* Fills *o from the environment (see above); the returned bind string is
 * getenv's or default_bind (not copied). err gets a line to log, or "". */
static inline void pt_console_options_from_env(ptcon_server_options *o, const char *bind_env,
                                               const char *default_bind, char *err,
                                               size_t errlen) {
  ptcon_server_options_init(o);
  const char *b = bind_env ? getenv(bind_env) : NULL;
  o->bind = b && *b ? b : default_bind;
  o->retention_ms = (uint32_t)pt_env_number("POLYTOKEN_CONSOLE_RETENTION_MS", 0, 1,
                                            24.0 * 3600 * 1000, err, errlen);
  const char *force = getenv("POLYTOKEN_CONSOLE_ALLOW_REMOTE");
  o->allow_non_loopback = force && strcmp(force, "1") == 0;
  char err2[192];
  o->allow_other_users =
      (int)pt_env_int("POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS", 0, 0, 1, err2, sizeof err2);
  if (err2[0] && errlen) {
    size_t used = strlen(err);
    snprintf(err + used, errlen - used, "%s%s", used ? "; " : "", err2);
  }
}

/* Starts a server from the environment. On success the server logs
 * "task console listening on ..." and 0 is returned; on failure exactly one
 * line ("task console disabled: <bind>: <reason>") is logged and the error
 * returned at PTCON_LOG_ERROR: the caller runs on without a console. A
 * refused setting is one PTCON_LOG_WARN line. log may be NULL. */
static inline int pt_console_start(ptcon_server **out, const char *bind_env,
                                   const char *default_bind, ptcon_log_fn log,
                                   void *log_user_data) {
  ptcon_server_options o;
  char err[192];
  pt_console_options_from_env(&o, bind_env, default_bind, err, sizeof err);
  if (err[0] && log) {
    char line[256];
    snprintf(line, sizeof line, "task console: %s", err);
    log(PTCON_LOG_WARN, line, log_user_data);
  }
  o.log = log;
  o.log_user_data = log_user_data;
  int rc = ptcon_server_new(out, &o);
  if (rc && log) {
    char line[256];
    snprintf(line, sizeof line, "task console disabled: %s: %s", o.bind ? o.bind : "(no address)",
             ptcon_strerror(rc));
    log(PTCON_LOG_ERROR, line, log_user_data);
  }
  return rc;
}

#endif
