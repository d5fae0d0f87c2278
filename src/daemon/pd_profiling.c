/*
 * pd_profiling.c - the profiling build inside the daemon (compiled only with
 * -Dprofiling=true; main.c calls pd_profiling_init inside #if PT_PROFILING).
 *
 * DESIGN
 *  - One sampler (include/ptprof.h) for the whole process, started here, so
 *    the daemon is sampled from start. Its snapshots ("daemon-profile-*")
 *    go to the active session's profiling/ directory; until a session is
 *    active they go to $POLYTOKEN_HOME/profiling/ (docs/profiling.md).
 *  - Periodic dumps are a timer job on the loop ("timer.profile_snapshot")
 *    that hands the encode+write to a uv work thread, as a console task of
 *    its own ("profile.snapshot_writer"), so the loop never waits for a
 *    dump and the writer shows up in the task console. `profile.dump` uses
 *    the same writer and replies when the file is written. At most one
 *    writer runs at a time; a tick that finds one running is skipped (the
 *    window just grows until the next tick).
 *  - The final dump runs in the shutdown slot PD_SHUTDOWN_FINAL_PROFILE,
 *    i.e. after turns and clients are gone and before telemetry and the log
 *    close; it stops the sampler and logs the file it wrote.
 *  - The task console server (127.0.0.1:6669 or POLYTOKEN_CONSOLE_DAEMON_BIND)
 *    runs on its own thread; if it cannot start (port taken, bad address)
 *    the daemon logs one line and runs on without it, and says why in
 *    daemon.status (below), which `polytoken daemon start|status` print.
 *    It is torn down in PD_SHUTDOWN_STATE, after the final profile.
 *  - daemon.status gets a "profile" object (pd_methods_set_status_section):
 *    where snapshots go now (absolute), the engine, rate, interval and
 *    keep, and the console's address or why it is off.
 *
 * Threads: everything here runs on the loop thread except writer_work (uv
 * threadpool) and log_from_lib (sampler's consumer thread or the caller of
 * ptprof_dump; the console's server thread). ptprof_* calls are thread-safe (ptprof.h).
 */
#include "daemon/pd_profiling.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pt_console_env.h"
#include "common/pt_console_hint.h"
#include "common/pt_env.h"
#include "common/pt_file.h"
#include "common/pt_profile_engine.h"
#include "common/pt_snapshot_names.h"
#include "common/pt_thread_name.h"
#include "daemon/pd_daemon.h"
#include "daemon/pd_ipc.h"
#include "daemon/pd_log.h"
#include "daemon/pd_loop.h"
#include "daemon/pd_shutdown.h"
#include "daemon/pd_sessions.h"
#include "ptprof.h"
#include "ptprof_console.h"

#define PD_PROF_DEFAULT_INTERVAL_MS 60000
#define PD_CONSOLE_DEFAULT_BIND "127.0.0.1:6669"
/* perf where the kernel allows it, else timers: on this daemon the timer
 * engine is cheaper per context switch but silently misses CPU of the
 * loop thread's short bursts, while the perf engine puts what it cannot
 * attribute under pseudo-frames (docs/profiling.md, "How samples are
 * taken"; figures in docs/performance.md, "Why the perf engine costs the
 * daemon").
 * POLYTOKEN_PROFILE_ENGINE overrides. */
#define PD_PROF_DEFAULT_ENGINE PTPROF_ENGINE_AUTO

typedef struct pd_writer_job {
  uv_work_t work;
  pt_task task;          /* "profile.snapshot_writer" */
  pd_call *call;         /* profile.dump request to answer, or NULL */
  int rc;
  char path[PATH_MAX];
} pd_writer_job;

static struct {
  uv_loop_t *loop;
  ptprof *prof;
  ptcon_server *console;
  uv_timer_t timer;
  pt_task timer_task;    /* "timer.profile_snapshot" */
  int64_t interval_ms;
  int hz, keep;
  int writer_busy;       /* a pd_writer_job is queued or running */
  int stopped;           /* final dump done: no more writers */
  char fallback_dir[PATH_MAX];
  char dir[PATH_MAX];    /* where snapshots go now */
  char console_bind[256];
  int console_rc;        /* pt_console_start's result (0: listening) */
} g;

static double env_num(const char *name, double def, double min, double max) {
  char err[256];
  double v = pt_env_number(name, def, min, max, err, sizeof err);
  if (err[0]) pd_warn("profiling: %s", err);
  return v;
}

/* The log callback of the sampler and of the console (one shape and one
 * level scale, ptprof.h): user_data is the line's prefix. */
static char log_prefix_prof[] = "profiling", log_prefix_console[] = "console";

static void log_from_lib(int level, const char *msg, void *user_data) {
  pd_log(level == PTPROF_LOG_ERROR ? PD_LOG_ERROR
         : level == PTPROF_LOG_WARN ? PD_LOG_WARN : PD_LOG_INFO,
         "%s: %s", (const char *)user_data, msg);
}

/* ---- snapshot writer (uv threadpool) ---- */

/* PD_OWN_WORK: the rest of the enclosing scope is the profiler's own work
 * (ptprof_own_begin/_end). As the FIRST statement of a callback its end
 * runs last (cleanup runs in reverse order of declaration), so it also
 * encloses the ends of a PD_POLL or PT_THREAD_JOB declared after it. */
static inline ptprof_own_section pd_own_begin(void) {
  ptprof_own_section s;
  ptprof_own_begin(&s);
  return s;
}
#define PD_OWN_WORK()                                                            \
  __attribute__((cleanup(ptprof_own_end), unused)) ptprof_own_section           \
  PD_CAT(pd_own_, __LINE__) = pd_own_begin()

/* All of the job is the profiler's own work, not only ptprof_dump: the
 * pool thread's name for the job, the job's console bookkeeping and the
 * name given back at its end (docs/profiling.md: pd-snapshot never shows
 * in a profile). */
static void writer_work(uv_work_t *w) {
  PD_OWN_WORK();
  PT_THREAD_JOB(PT_THREAD_DAEMON_SNAPSHOT, PT_THREAD_DAEMON_POOL);
  pd_writer_job *job = w->data;
  PD_POLL(&job->task);
  /* a periodic one writes nothing for an interval with nothing sampled (an
   * idle daemon's empty files would push the last ones with samples out of
   * the eight kept); profile.dump always writes */
  job->rc = job->call ? ptprof_dump(g.prof, job->path, sizeof job->path)
                      : ptprof_dump_if_sampled(g.prof, job->path, sizeof job->path);
}

/* The loop's side of a dump: own work too (its log line, the reply). */
static void writer_done(uv_work_t *w, int status) {
  PD_OWN_WORK();
  pd_writer_job *job = w->data;
  {
    PD_POLL(&job->task);
    if (status == UV_ECANCELED) job->rc = -ECANCELED;
    if (job->rc == 0) {
      pd_info("profiling: wrote %s", job->path);
    } else if (job->rc == 1) {
      pd_debug("profiling: nothing sampled since the last snapshot: none written, the interval goes on");
    } else if (job->rc != -EDESTADDRREQ) {
      /* The sampler itself logs the first write error after a success;
       * this line names the trigger. */
      pd_debug("profiling: dump failed: %s", ptprof_strerror(job->rc));
    }
    if (job->call) {
      if (job->rc == 0)
        pd_call_reply(job->call, json_pack("{s:s}", "path", job->path));
      else
        pd_call_error(job->call, "io_error", "profile dump failed: %s",
                      ptprof_strerror(job->rc));
    }
    g.writer_busy = 0;
  }
  PD_TASK_END(&job->task);
  free(job);
}

/* Queues one dump on the threadpool. Returns 0, -EBUSY (one is running) or
 * a negative error; on error the call (if any) is NOT completed. */
static int writer_start(pd_call *call) {
  if (g.stopped) return -ESHUTDOWN;
  if (g.writer_busy) return -EBUSY;
  pd_writer_job *job = calloc(1, sizeof *job);
  if (!job) return -ENOMEM;
  job->work.data = job;
  job->call = call;
  PD_TASK_START(&job->task, "profile.snapshot_writer");
  int rc = uv_queue_work(g.loop, &job->work, writer_work, writer_done);
  if (rc != 0) {
    PD_TASK_END(&job->task);
    free(job);
    return rc;
  }
  pd_task_wake(&job->task);
  g.writer_busy = 1;
  return 0;
}

/* Queueing a periodic dump is the profiler's own work. */
static void timer_cb(uv_timer_t *t) {
  (void)t;
  PD_OWN_WORK();
  PD_POLL(&g.timer_task);
  pd_task_wake(&g.timer_task);
  int rc = writer_start(NULL);
  if (rc == -EBUSY) pd_debug("profiling: periodic snapshot skipped, a dump is running");
  else if (rc != 0 && rc != -ESHUTDOWN)
    pd_warn("profiling: cannot queue a snapshot: %s", strerror(-rc));
}

/* profile.dump: a manual interval snapshot; replies {path} once written. */
static void method_profile_dump(pd_call *call, json_t *params, void *ctx) {
  (void)params;
  (void)ctx;
  int rc;
  {
    PD_OWN_WORK();    /* queueing the dump: the profiler's own work */
    rc = writer_start(call);
  }
  if (rc == -EBUSY)
    pd_call_error(call, "busy", "a profile dump is already being written; try again");
  else if (rc == -ESHUTDOWN)
    pd_call_error(call, "shutting_down", "the profiler has stopped");
  else if (rc != 0)
    pd_call_error(call, "internal", "cannot start a profile dump: %s", strerror(-rc));
}

/* ---- session directory ---- */

/* session_dir is NULL when the active session was deleted: snapshots then
 * go back to the state root's profiling/ directory. */
static void on_active_session(const char *session_dir, void *ctx) {
  (void)ctx;
  char dir[PATH_MAX];
  if (!session_dir) {
    snprintf(dir, sizeof dir, "%s", g.fallback_dir);
  } else if (snprintf(dir, sizeof dir, "%s/profiling", session_dir) >= (int)sizeof dir) {
    pd_error("profiling: session path too long: %s", session_dir);
    return;
  }
  int rc = ptprof_set_dir(g.prof, dir);
  if (rc != 0) {
    pd_error("profiling: cannot use %s for snapshots: %s (keeping the previous directory)",
             dir, ptprof_strerror(rc));
  } else {
    snprintf(g.dir, sizeof g.dir, "%s", dir);
    pd_info("profiling: snapshots now go to %s", dir);
  }
}

/* ---- shutdown steps ---- */

static void final_profile_step(void *ctx) {
  (void)ctx;
  uv_timer_stop(&g.timer);
  pd_task_disarm(&g.timer_task);
  g.stopped = 1;
  /* A queued periodic writer may still be running on the threadpool: the
   * sampler serializes dumps, so ptprof_stop simply waits for it. */
  char path[PATH_MAX];
  int rc = ptprof_stop(g.prof, 1, path, sizeof path);
  if (rc == 0)
    pd_info("profiling: final snapshot %s", path);
  else
    pd_error("profiling: final snapshot failed: %s", ptprof_strerror(rc));
  ptprof_stats st;
  ptprof_get_stats(g.prof, &st);
  pd_info("profiling: %llu samples, %llu snapshots, %llu dump errors, drops ring_full=%llu "
          "dumping=%llu no_stack=%llu reentrant=%llu",
          (unsigned long long)st.samples, (unsigned long long)st.dumps,
          (unsigned long long)st.dump_errors, (unsigned long long)st.drops[0],
          (unsigned long long)st.drops[1], (unsigned long long)st.drops[2],
          (unsigned long long)st.drops[3]);
}

static void timer_closed(uv_handle_t *h) {
  (void)h;
  PD_TASK_END(&g.timer_task);
}

static void release_step(void *ctx) {
  (void)ctx;
  if (!uv_is_closing((uv_handle_t *)&g.timer)) uv_close((uv_handle_t *)&g.timer, timer_closed);
  if (g.console) {
    ptcon_server_del(g.console);
    g.console = NULL;
    pd_info("console: stopped");
  }
  /* g.prof is freed at exit by the OS: a writer job that was cancelled may
   * still reference it until the loop's last run. */
}

/* ---- init ---- */

/* POLYTOKEN_CONSOLE_DAEMON_BIND (and the retention and remote-override
 * knobs) become the console's options in pt_console_env.h; on failure one
 * line goes through log_from_lib and the daemon runs on without a
 * console. */
static void console_start(void) {
  const char *b = getenv("POLYTOKEN_CONSOLE_DAEMON_BIND");
  snprintf(g.console_bind, sizeof g.console_bind, "%s", b && *b ? b : PD_CONSOLE_DEFAULT_BIND);
  g.console_rc = pt_console_start(&g.console, "POLYTOKEN_CONSOLE_DAEMON_BIND",
                                  PD_CONSOLE_DEFAULT_BIND, log_from_lib, log_prefix_console);
  if (g.console_rc != 0) g.console = NULL;
}

/* ---- daemon.status ---- */

/* {dir, engine, hz, interval_ms, keep, running, console: {bind, listening,
 * address | error and hint, setting}} (docs/ipc.md). */
static json_t *status_section(void *ud) {
  (void)ud;
  ptprof_stats st;
  ptprof_get_stats(g.prof, &st);
  json_t *con;
  if (g.console) {
    /* the bind string with the port actually bound */
    char addr[300];
    const char *colon = strrchr(g.console_bind, ':');
    int hl = colon ? (int)(colon - g.console_bind) : (int)strlen(g.console_bind);
    snprintf(addr, sizeof addr, "%.*s:%u", hl, g.console_bind,
             (unsigned)ptcon_server_port(g.console));
    con = json_pack("{s:s, s:b, s:s, s:s}", "bind", g.console_bind, "listening", 1, "address", addr,
                    "setting", "POLYTOKEN_CONSOLE_DAEMON_BIND");
  } else {
    char hint[256];
    con = json_pack("{s:s, s:b, s:s, s:s, s:s}", "bind", g.console_bind, "listening", 0, "error",
                    g.console_rc ? ptcon_strerror(g.console_rc) : "stopped", "setting",
                    "POLYTOKEN_CONSOLE_DAEMON_BIND", "hint",
                    pt_console_hint(g.console_rc, "POLYTOKEN_CONSOLE_DAEMON_BIND", hint,
                                    sizeof hint));
  }
  return json_pack("{s:s, s:s, s:i, s:I, s:i, s:b, s:o*}", "dir", g.dir, "engine",
                   pt_profile_engine_label(st.engine), "hz", g.hz, "interval_ms",
                   (json_int_t)g.interval_ms, "keep", g.keep, "running", !g.stopped, "console",
                   con);
}

int pd_profiling_init(uv_loop_t *loop, const char *home, pd_ipc *ipc, pd_sessions *sessions) {
  g.loop = loop;
  ptprof_options o;
  ptprof_options_init(&o);
  o.hz = (int)env_num("POLYTOKEN_PROFILE_HZ", 99, 1, 10000);
  o.keep = (int)env_num("POLYTOKEN_PROFILE_KEEP", 8, 1, 100000);
  g.interval_ms = (int64_t)(env_num("POLYTOKEN_PROFILE_INTERVAL",
                                    PD_PROF_DEFAULT_INTERVAL_MS / 1000.0, 0.05, 86400) * 1000);
  o.prefix = PT_SNAPSHOT_DAEMON_PREFIX;
  {
    char err[160];
    o.engine = pt_profile_engine(PD_PROF_DEFAULT_ENGINE, err, sizeof err);
    if (err[0]) pd_warn("profiling: %s", err);
  }
  o.interval_ms = 0; /* the loop's timer job drives periodic dumps */
  o.log = log_from_lib;
  o.log_user_data = log_prefix_prof;
  snprintf(g.fallback_dir, sizeof g.fallback_dir, "%s/profiling", home);
  /* Private state: created here 0700 whatever the umask, before the
   * sampler would create it on its first dump. */
  int mr = pt_mkdir_p(g.fallback_dir, 0700);
  if (mr < 0) pd_warn("profiling: cannot create %s: %s", g.fallback_dir, strerror(-mr));
  o.dir = g.fallback_dir;
  snprintf(g.dir, sizeof g.dir, "%s", g.fallback_dir);
  g.hz = o.hz;
  g.keep = o.keep;

  int rc = ptprof_new(&g.prof, &o);
  if (rc != 0) {
    pd_error("profiling: cannot create the sampler: %s", ptprof_strerror(rc));
    return rc;
  }
  /* Before starting: the callback is called right away for an active session,
   * so the first window's snapshot already lands in its directory. */
  rc = pd_sessions_on_active(sessions, on_active_session, NULL);
  if (rc != 0) goto fail_prof;
  rc = ptprof_start(g.prof);
  if (rc != 0) {
    pd_error("profiling: cannot start the sampler: %s", ptprof_strerror(rc));
    goto fail_prof;
  }
  ptprof_stats st;
  ptprof_get_stats(g.prof, &st);
  pd_info("profiling: sampling at %d Hz (%s engine), a snapshot every %lld ms with samples, keeping %d", o.hz,
          pt_profile_engine_label(st.engine),
          (long long)g.interval_ms, o.keep);

  rc = uv_timer_init(loop, &g.timer);
  if (rc != 0) goto fail_started;
  PD_TASK_START(&g.timer_task, "timer.profile_snapshot");
  rc = uv_timer_start(&g.timer, timer_cb, (uint64_t)g.interval_ms, (uint64_t)g.interval_ms);
  if (rc != 0) goto fail_timer;
  pd_task_arm(&g.timer_task);
  uv_unref((uv_handle_t *)&g.timer); /* never keeps the loop alive by itself */

  if ((rc = pd_ipc_register_method(ipc, "profile.dump", method_profile_dump, NULL)) != 0 ||
      (rc = pd_shutdown_register(PD_SHUTDOWN_FINAL_PROFILE, "final profile dump",
                                 final_profile_step, NULL)) != 0 ||
      (rc = pd_shutdown_register(PD_SHUTDOWN_STATE, "profiler and console release",
                                 release_step, NULL)) != 0)
    goto fail_timer;

  console_start();
  pd_methods_set_status_section(pd_daemon_methods(), "profile", status_section, NULL);
  return 0;

fail_timer:
  uv_timer_stop(&g.timer);
  uv_close((uv_handle_t *)&g.timer, timer_closed);
fail_started:
  ptprof_stop(g.prof, 0, NULL, 0);
fail_prof:
  ptprof_del(g.prof);
  g.prof = NULL;
  return rc;
}
