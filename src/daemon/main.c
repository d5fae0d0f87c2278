/*
 * main.c - polytokend: hosts conversation sessions for the polytoken CLI/TUI.
 * Runs in the foreground (the CLI starts it detached); stops on SIGTERM,
 * SIGINT or the daemon.stop request. See docs/daemon.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "pt_config.h"
#include "common/pt_escape.h"
#include "common/pt_home.h"
#include "common/pt_version.h"
#include "daemon/pd_catalog_ipc.h"
#include "daemon/pd_daemon.h"
#include "daemon/pd_json_alloc.h"
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
          "  --error-fd N  write a fatal startup error to descriptor N too, and\n"
          "              close N once listening (the CLI's auto-start uses it)\n"
          "  --version   print the version and exit\n"
          "  --help      print this help and exit\n"
          "\n"
          "Environment: POLYTOKEN_RESPONDER_CMD, POLYTOKEN_RESPONDER_DELAY_MS,\n"
          "POLYTOKEN_RESPONDER_TIMEOUT_MS, POLYTOKEN_TELEMETRY_INTERVAL_MS (docs/daemon.md).\n");
}

/* Startup-error pipe (--error-fd): the CLI that started us reads the reason
 * from it, which reaches it even when the disk is too full for
 * logs/daemon.stderr. -1: none. Closed once we listen. */
static int g_error_fd = -1;

/* Writes a fatal startup error line, whole in one write, to the error pipe. */
static void tell_starter(const char *line) {
  if (g_error_fd >= 0) {
    char buf[1100];
    int n = snprintf(buf, sizeof buf, "%s\n", line);
    if (n > (int)sizeof buf - 1) n = (int)sizeof buf - 1;
    ssize_t w = write(g_error_fd, buf, (size_t)n);
    (void)w;
  }
}

/* A fatal error before the log is open: stderr and the error pipe. The
 * line may quote outside text (a state root path): control bytes are
 * escaped (pt_escape.h), as they are in the log. */
static void startup_fatal(const char *line) {
  char safe[4200];
  pt_escape_str(safe, sizeof safe, line, 0);
  fprintf(stderr, "%s\n", safe);
  tell_starter(safe);
}

static void close_error_fd(void) {
  if (g_error_fd >= 0) close(g_error_fd);
  g_error_fd = -1;
}

int main(int argc, char **argv) {
  const char *home_arg = NULL;
  /* Before any jansson call: lets the IPC core tell out of memory from bad
   * JSON (pd_json_alloc.h). */
  pd_json_alloc_install();
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
    } else if (strcmp(argv[i], "--error-fd") == 0 && i + 1 < argc) {
      char *end = NULL;
      long fd = strtol(argv[++i], &end, 10);
      /* only a descriptor we were really handed: never 0-2, never unopened */
      if (*end || fd < 3 || fd > 1024 || fcntl((int)fd, F_GETFD) < 0) {
        fprintf(stderr, "polytokend: --error-fd %s is not an open descriptor above 2\n", argv[i]);
        return 2;
      }
      g_error_fd = (int)fd;
      /* never inherited by responder commands */
      fcntl(g_error_fd, F_SETFD, FD_CLOEXEC);
    } else {
      fprintf(stderr, "polytokend: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  char *home = NULL;
  char err[1024] = "";
  if (pt_home_resolve(home_arg, &home, err, sizeof err) < 0) {
    char line[1100];
    snprintf(line, sizeof line, "polytokend: no state root: %s", err);
    startup_fatal(line);
    return 2;
  }
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) {
    startup_fatal("polytokend: cannot initialise the event loop");
    free(home);
    return 1;
  }
  int r = pd_daemon_init(&loop, home, err, sizeof err);
  if (r < 0) {
    startup_fatal(err);
    /* init closed what it had put on the loop (the telemetry timer...):
     * their close callbacks, then the loop's own memory and descriptors
     * (LeakSanitizer saw them in the startup-failure tests) */
    uv_run(&loop, UV_RUN_NOWAIT);
    (void)uv_loop_close(&loop);
    free(home);
    return 1;
  }
  /* Artifact catalog (artifacts.list/fetch), every build; not fatal. The
   * daemon now runs in its state root: pass the absolute path. */
  if (pd_catalog_install(&loop, pd_daemon_home(), pd_daemon_ipc(), pd_daemon_sessions()) < 0) pd_warn("artifact catalog unavailable");
#if PT_PROFILING
  r = pd_profiling_init(&loop, pd_daemon_home(), pd_daemon_ipc(), pd_daemon_sessions());
  if (r < 0) {
    pd_error("profiling initialisation failed: %d; stopping", r);
    snprintf(err, sizeof err, "polytokend: profiling initialisation failed: %s", strerror(-r));
    tell_starter(err);
    pd_daemon_request_stop("profiling init failed");
    pd_daemon_run();
    free(home);
    return 1;
  }
#endif
  r = pd_daemon_listen(err, sizeof err);
  if (r < 0) {
    pd_error("%s", err);
    tell_starter(err);
    pd_daemon_request_stop("cannot listen");
    pd_daemon_run();
    free(home);
    return 1;
  }
  close_error_fd(); /* listening: the starter sees EOF, nothing went wrong */
  r = pd_daemon_run();
  free(home);
  return r;
}
