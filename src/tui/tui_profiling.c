/*
 * tui_profiling.c - the profiling build inside the TUI (compiled only with
 * -Dprofiling=true; main.c calls these inside #if PT_PROFILING).
 *
 * DESIGN
 *  - The task console (127.0.0.1:6670, or POLYTOKEN_CONSOLE_TUI_BIND) starts
 *    with the process, so the picker's loop is visible in it too.
 *  - The CPU sampler starts only when the conversation screen is first
 *    reached: time spent in the session picker is not profiled. Snapshots
 *    ("tui-profile-*") go to that session's profiling/ directory, beside
 *    the daemon's; the sampler's own thread writes periodic ones
 *    (POLYTOKEN_PROFILE_INTERVAL, default 60 s).
 *  - After the terminal is torn down on quit, the final snapshot is written
 *    (so the dump never draws over the user's shell), its path is printed
 *    on stdout, and the console stops.
 *  - A console that cannot listen (the TUI's, or the daemon's as its
 *    daemon.status says) is shown on the status bar (tui_profiling_notice),
 *    with the setting that would let it listen.
 *  - The TUI owns the screen, so messages go to $POLYTOKEN_HOME/logs/tui.log,
 *    never to stderr while curses runs.
 *
 * Threads: the three entry points run on the loop thread; tui_prof_log may
 * also run on the sampler's consumer thread and the console's server thread
 * (it takes a mutex).
 */
#include "tui/tui_profiling.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/pt_client.h"
#include "common/pt_console_env.h"
#include "common/pt_console_hint.h"
#include "common/pt_env.h"
#include "common/pt_profile_engine.h"
#include "common/pt_file.h"
#include "common/pt_logfile.h"
#include "common/pt_snapshot_names.h"
#include "ptprof.h"
#include "ptprof_console.h"

#define TUI_CONSOLE_DEFAULT_BIND "127.0.0.1:6670"
#define TUI_PROF_DEFAULT_INTERVAL_S 60.0
/* as the daemon's (pd_profiling.c): perf where allowed, else timers;
 * POLYTOKEN_PROFILE_ENGINE overrides */
#define TUI_PROF_DEFAULT_ENGINE PTPROF_ENGINE_AUTO

static struct {
  pthread_mutex_t log_lock;
  char log_path[PATH_MAX];
  pt_logfile *log; /* guarded by log_lock */
  ptprof *prof;
  ptcon_server *console;
  int started;
  char console_bind[256];
  int console_rc;          /* pt_console_start's result (0: listening) */
  char daemon_console[512]; /* why the daemon's console is off, or "" */
} g = {.log_lock = PTHREAD_MUTEX_INITIALIZER};

static void tui_prof_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tui_prof_log(const char *fmt, ...) {
  char msg[PT_LOGFILE_LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g.log_lock);
  /* Whole lines, 0600, drops counted (pt_logfile.h); opened on first use so
   * that a logs/ directory created later is still picked up. */
  if (!g.log && g.log_path[0] && pt_logfile_open(&g.log, g.log_path) < 0) g.log = NULL;
  if (g.log) pt_logfile_write(g.log, msg);
  pthread_mutex_unlock(&g.log_lock);
}

/* The log callback of the sampler and of the console (one shape and one
 * level scale, ptprof.h): user_data is the line's prefix. */
static char log_prefix_prof[] = "profiling", log_prefix_console[] = "console";

static void log_from_lib(int level, const char *msg, void *user_data) {
  tui_prof_log("%s %s: %s",
               level == PTPROF_LOG_ERROR ? "ERROR" : level == PTPROF_LOG_WARN ? "WARN" : "INFO",
               (const char *)user_data, msg);
}

static double env_num(const char *name, double def, double min, double max) {
  char err[256];
  double v = pt_env_number(name, def, min, max, err, sizeof err);
  if (err[0]) tui_prof_log("WARN profiling: %s", err);
  return v;
}

int tui_profiling_init(uv_loop_t *loop) {
  (void)loop; /* the console serves from its own thread */
  char *home = pt_client_home();
  if (home) {
    size_t n = strlen(home);
    /* Room for "/logs/tui.log"; a longer home just means no TUI log. */
    if (n + sizeof "/logs/tui.log" <= sizeof g.log_path) {
      memcpy(g.log_path, home, n);
      memcpy(g.log_path + n, "/logs", sizeof "/logs");
      (void)pt_mkdir_p(g.log_path, 0700); /* created ones 0700 whatever the umask */
      memcpy(g.log_path + n, "/logs/tui.log", sizeof "/logs/tui.log");
    }
    free(home);
  }
  /* POLYTOKEN_CONSOLE_TUI_BIND and friends become options in
   * pt_console_env.h; on failure one line goes to tui.log and the TUI runs
   * on without a console: CPU profiling still works. */
  const char *b = getenv("POLYTOKEN_CONSOLE_TUI_BIND");
  snprintf(g.console_bind, sizeof g.console_bind, "%s", b && *b ? b : TUI_CONSOLE_DEFAULT_BIND);
  g.console_rc = pt_console_start(&g.console, "POLYTOKEN_CONSOLE_TUI_BIND",
                                  TUI_CONSOLE_DEFAULT_BIND, log_from_lib, log_prefix_console);
  if (g.console_rc != 0) g.console = NULL;
  return 0;
}

void tui_profiling_daemon_status(pt_client *c) {
  json_t *st = NULL;
  pt_client_error err;
  if (pt_client_call(c, "daemon.status", NULL, 5000, &st, &err) < 0) return;
  json_t *con = json_object_get(json_object_get(st, "profile"), "console");
  if (json_is_object(con) && json_is_false(json_object_get(con, "listening")))
    snprintf(g.daemon_console, sizeof g.daemon_console, "daemon console off: %s: %s; %s",
             json_string_value(json_object_get(con, "bind")) ?: "?",
             json_string_value(json_object_get(con, "error")) ?: "?",
             json_string_value(json_object_get(con, "hint")) ?: "see the daemon log");
  json_decref(st);
}

int tui_profiling_notice(char *text, size_t textlen, char *short_text, size_t shortlen) {
  char mine[1024] = "", hint[256];
  if (g.console_rc != 0)
    snprintf(mine, sizeof mine, "TUI console off: %s: %s; %s", g.console_bind,
             ptcon_strerror(g.console_rc),
             pt_console_hint(g.console_rc, "POLYTOKEN_CONSOLE_TUI_BIND", hint, sizeof hint));
  if (!mine[0] && !g.daemon_console[0]) return 0;
  snprintf(text, textlen, "%s%s%s", mine, mine[0] && g.daemon_console[0] ? " | " : "",
           g.daemon_console);
  snprintf(short_text, shortlen, "%s",
           mine[0] && g.daemon_console[0] ? "consoles off (POLYTOKEN_CONSOLE_*_BIND)"
           : mine[0]                      ? "TUI console off (POLYTOKEN_CONSOLE_TUI_BIND)"
                                          : "daemon console off (POLYTOKEN_CONSOLE_DAEMON_BIND)");
  return 1;
}

void tui_profiling_conversation_reached(const char *session_id, const char *session_dir) {
  if (g.started) return;
  g.started = 1;
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/profiling", session_dir) >= (int)sizeof dir) {
    tui_prof_log("ERROR profiling: session path too long: %s", session_dir);
    return;
  }
  ptprof_options o;
  ptprof_options_init(&o);
  o.hz = (int)env_num("POLYTOKEN_PROFILE_HZ", 99, 1, 10000);
  o.keep = (int)env_num("POLYTOKEN_PROFILE_KEEP", 8, 1, 100000);
  o.interval_ms =
      (int64_t)(env_num("POLYTOKEN_PROFILE_INTERVAL", TUI_PROF_DEFAULT_INTERVAL_S, 0.05, 86400) *
                1000);
  o.prefix = PT_SNAPSHOT_TUI_PREFIX;
  o.skip_empty = 1;   /* an idle TUI's empty intervals must not push out the ones with samples */
  {
    char err[160];
    o.engine = pt_profile_engine(TUI_PROF_DEFAULT_ENGINE, err, sizeof err);
    if (err[0]) tui_prof_log("WARN profiling: %s", err);
  }
  o.dir = dir;
  o.log = log_from_lib;
  o.log_user_data = log_prefix_prof;
  int rc = ptprof_new(&g.prof, &o);
  if (rc == 0) rc = ptprof_start(g.prof);
  if (rc != 0) {
    tui_prof_log("ERROR profiling: cannot start the TUI sampler: %s", ptprof_strerror(rc));
    ptprof_del(g.prof);
    g.prof = NULL;
    return;
  }
  ptprof_stats st;
  ptprof_get_stats(g.prof, &st);
  tui_prof_log("INFO profiling: session %s reached, sampling at %d Hz (%s engine) into %s",
               session_id, o.hz, pt_profile_engine_label(st.engine),
               dir);
}

int tui_profiling_dump_now(char *path, size_t cap, char *err, size_t errcap, void *ud) {
  (void)ud;
  if (path && cap) path[0] = 0;
  if (!g.prof) {
    if (err && errcap) snprintf(err, errcap, "the TUI's sampler has not started");
    return -ENOTCONN;
  }
  int rc = ptprof_dump(g.prof, path, cap);
  if (rc == 0) {
    tui_prof_log("INFO profiling: wrote %s (asked for in the feedback picker)", path);
  } else {
    tui_prof_log("ERROR profiling: snapshot for the feedback picker failed: %s", ptprof_strerror(rc));
    if (err && errcap) snprintf(err, errcap, "%s", ptprof_strerror(rc));
  }
  return rc;
}

void tui_profiling_after_teardown(void) {
  if (g.prof) {
    char path[PATH_MAX];
    int rc = ptprof_stop(g.prof, 1, path, sizeof path);
    if (rc == 0) {
      tui_prof_log("INFO profiling: final snapshot %s", path);
      /* the terminal is the shell's again: say where the profile is */
      printf("TUI CPU profile: %s\n", path);
      fflush(stdout);
    } else {
      tui_prof_log("ERROR profiling: final snapshot failed: %s", ptprof_strerror(rc));
      fprintf(stderr, "polytoken: the final TUI CPU profile could not be written: %s (see %s)\n",
              ptprof_strerror(rc), g.log_path[0] ? g.log_path : "the TUI log");
    }
    ptprof_del(g.prof);
    g.prof = NULL;
  }
  if (g.console) {
    ptcon_server_del(g.console);
    g.console = NULL;
  }
}
