/*
 * pd_daemon.c - daemon lifecycle. See pd_daemon.h; shutdown order in
 * pd_shutdown.h and docs/daemon.md.
 *
 * The shutdown is a small state machine driven by one uv_async
 * ("daemon.shutdown" task): signal and daemon.stop callbacks only request
 * it, completions of other units (turns finished, clients closed, a
 * deadline) only set a flag and send the async, so every phase runs in the
 * shutdown task's own callback, never nested in another task's poll.
 */
#include "pt_config.h"
#include "daemon/pd_daemon.h"
#include "daemon/pd_ipc_uv.h"
#include "daemon/pd_log.h"
#include "daemon/pd_loop.h"
#include "daemon/pd_methods.h"
#include "daemon/pd_settings.h"
#include "daemon/pd_shutdown.h"
#include "daemon/pd_telemetry.h"
#include "daemon/pd_turn.h"
#include "common/pt_feedback_outbox.h"
#include "common/pt_file.h"
#include "common/pt_home.h"
#include "common/pt_version.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#define TURN_DEADLINE_MS 5000
#define CLIENT_FLUSH_MS 1000

enum { PH_RUNNING, PH_TURNS, PH_CLIENTS, PH_DONE };

static struct {
  uv_loop_t *loop;
  char *home;      /* absolute */
  char *start_cwd; /* cwd at start (the daemon then chdirs to home) */
  int lock_fd;
  pd_sessions *sessions;
  pd_ipc_uv *ipc_uv;   /* the socket driver */
  pd_ipc *ipc;         /* its protocol core */
  pd_methods_ctx methods; /* the built-in methods' context (borrowed by them) */
  pd_settings settings;   /* read once at start */
  uint64_t start_ms;
  uv_signal_t sigterm, sigint;
  pt_task sig_task; /* "signals" */
  uv_async_t stop_async;
  pt_task stop_task; /* "daemon.shutdown" */
  uv_timer_t turn_deadline;
  int phase, stop_requested, turns_done, turns_timed_out, clients_done;
  int exit_code;
} d = {.lock_fd = -1};

uv_loop_t *pd_daemon_loop(void) { return d.loop; }
pd_sessions *pd_daemon_sessions(void) { return d.sessions; }
pd_ipc *pd_daemon_ipc(void) { return d.ipc; }
pd_methods_ctx *pd_daemon_methods(void) { return &d.methods; }
const char *pd_daemon_home(void) { return d.home; }
int pd_daemon_stopping(void) { return d.stop_requested; }
uint64_t pd_daemon_uptime_ms(void) { return uv_now(d.loop) - d.start_ms; }

/* ---- limits ---- */

/* Up to 1024 clients (docs/ipc.md) plus the log, telemetry, transcripts and
 * responder pipes need more descriptors than the usual soft limit of 1024;
 * without them accept() fails with EMFILE before the daemon can answer
 * `busy`. Raise the soft limit towards the hard one (at most 8192). */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t want = 8192;
  if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max) want = rl.rlim_max;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
      pd_warn("cannot raise the open-file limit to %lu: %s", (unsigned long)want, strerror(errno));
  }
}

/* ---- lock ---- */

static int take_lock(const char *home, char *err, size_t errlen) {
  char path[4096];
  snprintf(path, sizeof path, "%s/daemon.lock", home);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "polytokend: cannot open %s: %s", path, strerror(e));
    return -e;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      char pid[32] = "";
      ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
      pid[n > 0 ? n : 0] = 0;
      pid[strcspn(pid, "\n")] = 0;
      snprintf(err, errlen, "polytokend: already running (pid %s) for %s", pid[0] ? pid : "?",
               home);
      close(fd);
      return -EALREADY;
    }
    snprintf(err, errlen, "polytokend: cannot lock %s: %s", path, strerror(e));
    close(fd);
    return -e;
  }
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
    int e = errno;
    snprintf(err, errlen, "polytokend: cannot write %s: %s", path, strerror(e));
    close(fd);
    return -e;
  }
  (void)fsync(fd);
  d.lock_fd = fd;
  return 0;
}

static void release_lock(void) {
  if (d.lock_fd < 0) return;
  /* empty the pid so nobody reads a stale one; the lock goes with close */
  if (ftruncate(d.lock_fd, 0) != 0) { /* nothing useful to do */ }
  close(d.lock_fd);
  d.lock_fd = -1;
}

/* ---- repair at start ---- */

/* Appends "; <n> <what>" (plural by `plural`) to line when n > 0. */
static void repair_part(char *line, size_t cap, unsigned n, const char *one, const char *many,
                        const char *rest) {
  if (!n) return;
  size_t k = strlen(line);
  snprintf(line + k, cap - k, "%s%u %s%s", k ? "; " : "", n, n == 1 ? one : many, rest);
}

/* What a crash left: the store repaired sessions/ when it opened
 * (pd_sessions_open); feedback/tmp/ is repaired here. One line says what
 * was done, and only when something was: the leftovers are gone from
 * where they were, so the next start has nothing to say. */
static void repair_at_start(const char *home) {
  const pd_sessions_repair *sr = pd_sessions_repaired(d.sessions);
  pt_feedback_repair fr;
  char ferr[800] = "", q[PT_HOME_MAX + 64], line[2 * sizeof q + 800] = "";
  int r = pt_feedback_outbox_repair(home, &fr, ferr, sizeof ferr);
  if (r < 0) pd_warn("feedback: %s; left for the next start", ferr);
  else if (fr.failed) pd_warn("feedback: %s", ferr);
  repair_part(line, sizeof line, sr->completed, "interrupted session creation finished",
              "interrupted session creations finished", "");
  snprintf(q, sizeof q, " moved to %s/quarantine/sessions", home);
  repair_part(line, sizeof line, sr->quarantined, "incomplete session", "incomplete sessions", q);
  repair_part(line, sizeof line, sr->deletions_finished, "interrupted session deletion finished",
              "interrupted session deletions finished", "");
  repair_part(line, sizeof line, fr.completed, "complete feedback bundle",
              "complete feedback bundles", " moved from feedback/tmp to feedback/outbox");
  snprintf(q, sizeof q, " moved to %s/quarantine/feedback-tmp", home);
  repair_part(line, sizeof line, fr.quarantined, "incomplete feedback bundle",
              "incomplete feedback bundles", q);
  repair_part(line, sizeof line, sr->failed + fr.failed, "leftover", "leftovers",
              " left where it was (see the warnings above)");
  if (line[0]) pd_warn("start repair: %s", line);
}

/* ---- built-in shutdown steps ---- */

static void step_state(void *ctx) {
  (void)ctx;
  pd_sessions_del(d.sessions);
  d.sessions = NULL;
}

static void step_telemetry(void *ctx) {
  (void)ctx;
  pd_telemetry_close();
}

static void step_log(void *ctx) {
  (void)ctx;
  pd_log_close();
}

/* ---- telemetry source ---- */

static size_t tel_sessions(void) { return d.sessions ? pd_sessions_count(d.sessions) : 0; }
static size_t tel_clients(void) { return d.ipc ? pd_ipc_client_count(d.ipc) : 0; }

/* ---- wiring ---- */

/* The IPC core's log lines, in the daemon log. */
static void log_ipc(int level, const char *msg, void *ud) {
  (void)ud;
  pd_log(level == PD_IPC_LOG_ERROR  ? PD_LOG_ERROR
         : level == PD_IPC_LOG_WARN ? PD_LOG_WARN
         : level == PD_IPC_LOG_INFO ? PD_LOG_INFO
                                    : PD_LOG_DEBUG,
         "%s", msg);
}

/* Turn events go to the IPC core (pd_turn.h: emit). */
static void turn_emit(void *ctx, const char *session, pd_conn *sender, const char *name,
                      json_t *params) {
  pd_ipc_broadcast(ctx, session, sender, name, params);
}

/* ---- shutdown state machine ---- */

static void on_turns_done(void *ctx) {
  (void)ctx;
  d.turns_done = 1;
  uv_async_send(&d.stop_async);
}

static void on_clients_done(void *ctx) {
  (void)ctx;
  d.clients_done = 1;
  uv_async_send(&d.stop_async);
}

static void turn_deadline_cb(uv_timer_t *t) {
  (void)t;
  PD_POLL(&d.stop_task);
  pd_task_wake(&d.stop_task);
  pd_task_disarm(&d.stop_task);
  d.turns_timed_out = 1;
  uv_async_send(&d.stop_async);
}

static void close_walk_cb(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) {
    pd_debug("shutdown: closing leftover handle of type %s", uv_handle_type_name(h->type));
    uv_close(h, NULL);
  }
}

static void on_stop_async_closed(uv_handle_t *h) {
  (void)h;
  PD_TASK_END(&d.stop_task);
}

static void on_sig_closed(uv_handle_t *h) {
  if (h == (uv_handle_t *)&d.sigint) PD_TASK_END(&d.sig_task);
}

static void stop_async_cb(uv_async_t *a) {
  (void)a;
  PD_POLL(&d.stop_task);
  pd_task_wake(&d.stop_task);
  for (;;) {
    int before = d.phase;
    if (d.phase == PH_RUNNING && d.stop_requested) {
      pd_ipc_set_shutting_down(d.ipc);
      pd_info("shutdown: step stop-accepting");
      pd_ipc_uv_stop_accepting(d.ipc_uv);
      pd_info("shutdown: step cancel-turns (%zu running)", pd_turn_running());
      d.phase = PH_TURNS;
      uv_timer_start(&d.turn_deadline, turn_deadline_cb, TURN_DEADLINE_MS, 0);
      pd_task_arm(&d.stop_task);
      pd_turn_cancel_all(d.sessions, on_turns_done, NULL);
    } else if (d.phase == PH_TURNS && (d.turns_done || d.turns_timed_out)) {
      uv_timer_stop(&d.turn_deadline);
      pd_task_disarm(&d.stop_task);
      if (!d.turns_done)
        pd_warn("shutdown: %zu turn(s) still running after %d ms; going on", pd_turn_running(),
                TURN_DEADLINE_MS);
      pd_info("shutdown: step close-clients (%zu connected)", pd_ipc_client_count(d.ipc));
      d.phase = PH_CLIENTS;
      pd_ipc_uv_close_all(d.ipc_uv, CLIENT_FLUSH_MS, on_clients_done, NULL);
    } else if (d.phase == PH_CLIENTS && d.clients_done) {
      d.phase = PH_DONE;
      pd_shutdown_run_steps(); /* ... telemetry, then log close: the last step */
      uv_close((uv_handle_t *)&d.turn_deadline, NULL);
      uv_close((uv_handle_t *)&d.sigterm, on_sig_closed);
      uv_close((uv_handle_t *)&d.sigint, on_sig_closed);
      uv_close((uv_handle_t *)&d.stop_async, on_stop_async_closed);
      pd_ipc_uv_close(d.ipc_uv);
      /* anything else still open (a turn past its deadline) must not keep
       * the process alive */
      uv_walk(d.loop, close_walk_cb, NULL);
      return;
    }
    if (d.phase == before) break;
  }
}

void pd_daemon_request_stop(const char *why) {
  if (d.stop_requested) {
    pd_info("shutdown already in progress (%s)", why);
    return;
  }
  d.stop_requested = 1;
  pd_info("shutdown: requested (%s)", why);
  uv_async_send(&d.stop_async);
}

static void signal_cb(uv_signal_t *s, int signum) {
  (void)s;
  PD_POLL(&d.sig_task);
  pd_task_wake(&d.sig_task);
  pd_daemon_request_stop(signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ---- lifecycle ---- */

/* Test builds only (-Dfault_injection=true; a release daemon contains
 * neither this code nor the variable's name):
 * POLYTOKEN_FAULT_DAEMON_START=<step> makes that libuv setup step of
 * pd_daemon_init fail as if libuv had run out of descriptors
 * (tests/daemon/startup_fault_test.sh). */
#if PT_FAULT_INJECTION
static int start_fault(const char *step) {
  const char *v = getenv("POLYTOKEN_FAULT_DAEMON_START");
  return v && strcmp(v, step) == 0 ? UV_EMFILE : 0;
}
#else
static int start_fault(const char *step) {
  (void)step;
  return 0;
}
#endif
#define STEP(name, call) ((r = start_fault(name)) < 0 || (r = (call)) < 0)

int pd_daemon_init(uv_loop_t *loop, const char *home, char *err, size_t errlen) {
  d.loop = loop;
  d.home = strdup(home);
  if (!d.home) return -ENOMEM;
  /* Ours alone: a root (or a directory above it) that another user can
   * write to or replace is refused; a missing one is created 0700, one of
   * ours that others may read is tightened (logged below, once the log is
   * open). pt_home.h has the rules. */
  mode_t was_mode;
  char why[1000];
  int r = pt_home_prepare(home, PT_HOME_CREATE | PT_HOME_TIGHTEN, &was_mode, why, sizeof why);
  if (r < 0) {
    snprintf(err, errlen, "polytokend: %s", why);
    return r;
  }
  r = take_lock(home, err, errlen);
  if (r < 0) return r;
  /* Work in the state root from now on: an absolute home for every path we
   * build, and a cwd that pins no unrelated directory and contains any
   * stray relative path. The start directory is kept for the external
   * responder, whose command may use paths relative to it. */
  char *abs = realpath(home, NULL);
  if (abs && strlen(abs) > PT_HOME_MAX) {
    /* resolved links made it longer than any path we build below it may
     * be: keep the name we were given (it fits, pt_home_resolve checked) */
    free(abs);
    abs = NULL;
  }
  if (abs) {
    free(d.home);
    d.home = abs;
    home = d.home;
  }
  d.start_cwd = getcwd(NULL, 0);
  if (chdir(d.home) != 0) { /* not fatal: paths are absolute anyway */ }
  char path[4096];
  snprintf(path, sizeof path, "%s/logs", home);
  r = pt_mkdir_p(path, 0700);
  if (r == 0) {
    snprintf(path, sizeof path, "%s/logs/daemon.log", home);
    r = pd_log_open(path);
  }
  if (r < 0) {
    snprintf(err, errlen, "polytokend: cannot open the log in %s/logs: %s", home, strerror(-r));
    goto fail_lock;
  }
  pd_info("polytokend %s starting (pid %ld, home %s)", pt_version(), (long)getpid(), home);
  if (was_mode != (mode_t)-1)
    pd_warn("state root %s was mode %04o, readable by others; changed it to 0700", home,
            (unsigned)was_mode);
  raise_fd_limit();
  /* Settings once the log is open (a rejected value is logged). */
  r = pd_settings_load(&d.settings);
  if (r < 0) {
    snprintf(err, errlen, "polytokend: cannot read the settings: %s", strerror(-r));
    goto fail_log;
  }
  /* A client that vanishes mid-write must give EPIPE, not kill us. */
  signal(SIGPIPE, SIG_IGN);
  pd_transcript_install_fault_hook();
  r = pd_sessions_open(home, &d.sessions);
  if (r < 0) {
    snprintf(err, errlen, "polytokend: cannot load sessions in %s: %s", home, strerror(-r));
    goto fail_settings;
  }
  repair_at_start(home);
  d.start_ms = uv_now(loop);
  snprintf(path, sizeof path, "%s/telemetry", home);
  pd_telemetry_source src = {tel_sessions, tel_clients, pd_turn_total, pd_turn_running};
  r = pd_telemetry_start(loop, path, d.settings.telemetry_interval_ms, &src);
  if (r < 0) {
    snprintf(err, errlen, "polytokend: cannot open telemetry in %s: %s", path, strerror(-r));
    goto fail_store;
  }
  /* The IPC core and its socket driver (listening comes later). */
  pd_ipc_options io;
  pd_ipc_options_init(&io);
  io.outbuf_max = d.settings.ipc_outbuf_max;
  io.log = log_ipc;
  r = pd_ipc_uv_new(&d.ipc_uv, loop, &io);
  if (r < 0) {
    snprintf(err, errlen, "polytokend: cannot set up the IPC server: %s", strerror(-r));
    goto fail_telemetry;
  }
  d.ipc = pd_ipc_uv_core(d.ipc_uv);
  /* Wiring: turns emit through IPC and run external responders in the
   * start directory; methods reach the daemon through their context. */
  pd_turn_config tc = {turn_emit,
                       pd_conn_hold,
                       pd_conn_release,
                       d.start_cwd,
                       d.ipc,
                       pd_responder_pick(&d.settings.responder),
                       d.settings.responder};
  pd_turn_configure(&tc);
  d.methods = (pd_methods_ctx){.loop = loop,
                               .ipc = d.ipc,
                               .sessions = d.sessions,
                               .request_stop = pd_daemon_request_stop,
                               .stopping = pd_daemon_stopping,
                               .uptime_ms = pd_daemon_uptime_ms};
  r = pd_methods_register(&d.methods);
  if (r == 0) r = pd_shutdown_register(PD_SHUTDOWN_STATE, "close session store", step_state, NULL);
  if (r == 0) r = pd_shutdown_register(PD_SHUTDOWN_TELEMETRY, "close telemetry", step_telemetry, NULL);
  if (r == 0) r = pd_shutdown_register(PD_SHUTDOWN_LOG, "close log", step_log, NULL);
  if (r < 0) {
    snprintf(err, errlen, "polytokend: internal registration failed: %s", strerror(-r));
    goto fail_ipc;
  }
  /* The shutdown machinery; a failure here (libuv out of descriptors)
   * closes what was set up again, in reverse order. */
  const char *what = "the shutdown trigger";
  if (STEP("async", uv_async_init(loop, &d.stop_async, stop_async_cb))) goto fail_uv;
  what = "the shutdown timer";
  if (STEP("timer", uv_timer_init(loop, &d.turn_deadline))) goto fail_async;
  what = "the SIGTERM watcher";
  if (STEP("sigterm", uv_signal_init(loop, &d.sigterm))) goto fail_timer;
  if (STEP("sigterm-start", uv_signal_start(&d.sigterm, signal_cb, SIGTERM))) goto fail_sigterm;
  what = "the SIGINT watcher";
  if (STEP("sigint", uv_signal_init(loop, &d.sigint))) goto fail_sigterm;
  if (STEP("sigint-start", uv_signal_start(&d.sigint, signal_cb, SIGINT))) goto fail_sigint;
  PD_TASK_START(&d.stop_task, "daemon.shutdown");
  PD_TASK_START(&d.sig_task, "signals");
  pd_task_arm(&d.sig_task);
  return 0;
fail_sigint:
  uv_close((uv_handle_t *)&d.sigint, NULL);
fail_sigterm:
  uv_close((uv_handle_t *)&d.sigterm, NULL);
fail_timer:
  uv_close((uv_handle_t *)&d.turn_deadline, NULL);
fail_async:
  uv_close((uv_handle_t *)&d.stop_async, NULL);
  uv_run(loop, UV_RUN_NOWAIT); /* their close callbacks */
fail_uv:
  snprintf(err, errlen, "polytokend: cannot set up %s: %s", what, uv_strerror(r));
fail_ipc:
  pd_ipc_uv_del(d.ipc_uv); /* nothing of it is on the loop yet */
  d.ipc_uv = NULL;
  d.ipc = NULL;
fail_telemetry:
  pd_telemetry_close();
fail_store:
  pd_sessions_del(d.sessions);
  d.sessions = NULL;
fail_settings:
  pd_settings_clear(&d.settings);
fail_log:
  pd_log_close();
fail_lock:
  release_lock();
  return r;
}

int pd_daemon_listen(char *err, size_t errlen) {
  char path[4096];
  snprintf(path, sizeof path, "%s/daemon.sock", d.home);
  int r = pd_ipc_uv_listen(d.ipc_uv, path);
  if (r < 0) {
    snprintf(err, errlen, "polytokend: cannot listen on %s: %s", path,
             r == -ENAMETOOLONG ? "path too long for a Unix socket" : uv_strerror(r));
    return r;
  }
  pd_info("listening on %s", path);
  return 0;
}

int pd_daemon_run(void) {
  uv_run(d.loop, UV_RUN_DEFAULT);
  if (d.sessions) {
    /* the loop ended without a shutdown (should not happen) */
    pd_sessions_del(d.sessions);
    d.sessions = NULL;
  }
  /* after the log is closed: stderr only */
  fprintf(stderr, "polytokend: stopped\n");
  release_lock();
  /* the loop ran every close callback: the IPC server can go */
  pd_ipc_uv_del(d.ipc_uv);
  d.ipc_uv = NULL;
  d.ipc = NULL;
  int r = uv_loop_close(d.loop);
  if (r != 0) fprintf(stderr, "polytokend: loop still had handles at exit (%s)\n", uv_strerror(r));
  free(d.home);
  d.home = NULL;
  free(d.start_cwd);
  d.start_cwd = NULL;
  pd_settings_clear(&d.settings); /* no turn runs any more */
  return d.exit_code;
}
