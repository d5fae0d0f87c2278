/*
 * main.c - polytokend: hosts conversation sessions for the polytoken CLI/TUI.
 * Runs in the foreground (the CLI starts it detached); stops on SIGTERM,
 * SIGINT or the daemon.stop request. See docs/daemon.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "pt_config.h"
#include "common/pt_version.h"
#include "daemon/pd_catalog_ipc.h"
#include "daemon/pd_daemon.h"
#include "daemon/pd_log.h"
#if PT_PROFILING
#include "daemon/pd_profiling.h"
#endif

static void usage(FILE *f) {
  fprintf(f,
          "usage: polytokend [--home DIR]\n"
          "       polytokend --version | --help\n"
          "\n"
          "Hosts Polytoken conversation sessions and serves them on a Unix socket.\n"
          "Runs in the foreground until SIGTERM, SIGINT or a daemon.stop request.\n"
          "\n"
          "  --home DIR  state root (default: $POLYTOKEN_HOME, else\n"
          "              ${XDG_STATE_HOME:-$HOME/.local/state}/polytoken)\n"
          "  --version   print the version and exit\n"
          "  --help      print this help and exit\n"
          "\n"
          "Environment: POLYTOKEN_RESPONDER_CMD, POLYTOKEN_RESPONDER_DELAY_MS,\n"
          "POLYTOKEN_RESPONDER_TIMEOUT_MS, POLYTOKEN_TELEMETRY_INTERVAL_MS (docs/daemon.md).\n");
}

int main(int argc, char **argv) {
  const char *home_arg = NULL;
  /* The daemon's log lines also go to stderr (the CLI appends that to
   * logs/daemon.stderr); the library default is quiet for unit tests. */
  pd_log_set_stderr(1);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--version") == 0) {
      printf("polytokend %s%s\n", pt_version(), pt_is_profiling_build() ? " (profiling)" : "");
      return 0;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--home") == 0 && i + 1 < argc) {
      home_arg = argv[++i];
    } else if (strncmp(argv[i], "--home=", 7) == 0) {
      home_arg = argv[i] + 7;
    } else {
      fprintf(stderr, "polytokend: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  char *home = home_arg ? strdup(home_arg) : pd_default_home();
  if (!home || !*home) {
    fprintf(stderr, "polytokend: no state root: set POLYTOKEN_HOME or HOME, or pass --home\n");
    free(home);
    return 2;
  }
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) {
    fprintf(stderr, "polytokend: cannot initialise the event loop\n");
    free(home);
    return 1;
  }
  char err[1024] = "";
  int r = pd_daemon_init(&loop, home, err, sizeof err);
  if (r < 0) {
    fprintf(stderr, "%s\n", err);
    free(home);
    return 1;
  }
  /* Artifact catalog (artifacts.list/fetch), every build; not fatal. The
   * daemon now runs in its state root: pass the absolute path. */
  if (pd_catalog_install(pd_daemon_home()) < 0) pd_warn("artifact catalog unavailable");
#if PT_PROFILING
  r = pd_profiling_init(&loop);
  if (r < 0) {
    pd_error("profiling initialisation failed: %d; stopping", r);
    pd_daemon_request_stop("profiling init failed");
    pd_daemon_run();
    free(home);
    return 1;
  }
#endif
  r = pd_daemon_listen(err, sizeof err);
  if (r < 0) {
    pd_error("%s", err);
    pd_daemon_request_stop("cannot listen");
    pd_daemon_run();
    free(home);
    return 1;
  }
  r = pd_daemon_run();
  free(home);
  return r;
}
