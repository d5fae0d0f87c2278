/*
 * pt_console_hint.h - what to tell a user whose task console could not
 * listen: the setting that would let it (docs/profiling.md, "The live task
 * console"). Shown by `polytoken daemon start|status` (from the daemon's
 * daemon.status) and on the TUI's status line, so that a port in use is
 * not only a line in a log.
 *
 * Header-only; no allocation; any thread.
 */
#ifndef PT_CONSOLE_HINT_H
#define PT_CONSOLE_HINT_H

#include <errno.h>
#include <stdio.h>

/* One sentence for ptcon_server_new's error rc (negative errno) with the
 * program's bind setting bind_env (POLYTOKEN_CONSOLE_DAEMON_BIND or
 * POLYTOKEN_CONSOLE_TUI_BIND) into buf; returns buf. */
static inline const char *pt_console_hint(int rc, const char *bind_env, char *buf, size_t n) {
  switch (rc) {
  case -EPERM:
    snprintf(buf, n,
             "set POLYTOKEN_CONSOLE_ALLOW_REMOTE=1 to serve a non-loopback address, or a "
             "loopback one in %s",
             bind_env);
    break;
  case -EINVAL:
    snprintf(buf, n, "set %s to HOST:PORT, e.g. 127.0.0.1:16669", bind_env);
    break;
  default: /* -EADDRINUSE and the rest */
    snprintf(buf, n, "set %s=127.0.0.1:PORT (a free port) before it starts", bind_env);
    break;
  }
  return buf;
}

#endif
