/*
 * pd_daemon.h - the daemon as a whole: state root, lock, log, store,
 * telemetry, signals, IPC server and the orderly shutdown (pd_shutdown.h).
 * One daemon per process: it owns the process's lock, signal watchers and
 * log. Its parts are handles (the session store pd_sessions, the IPC core
 * pd_ipc and its socket driver pd_ipc_uv), which main.c hands to the
 * artifact catalog and the profiling build through the accessors below.
 *
 * Startup (main.c): pd_daemon_init -> [pd_profiling_init] -> pd_daemon_listen
 * -> pd_daemon_run. Threads: loop thread only.
 */
#ifndef PD_DAEMON_H
#define PD_DAEMON_H

#include <stddef.h>
#include <uv.h>

#include "daemon/pd_ipc.h"
#include "daemon/pd_methods.h"
#include "daemon/pd_sessions.h"

/* Checks the state root and creates it (pt_home_prepare: a root that
 * another user can write to or replace is refused with -EPERM, one of
 * ours that others may read is made 0700), takes the lock ($home/daemon.lock, flock, our pid
 * written in it), opens the log, loads the store, starts telemetry,
 * registers the built-in methods and shutdown steps, installs signal
 * watchers. Returns 0; -EALREADY when another daemon holds the lock (err
 * then reads "polytokend: already running (pid N) for <home>"); other
 * negative errors with a one-line reason in err. */
int pd_daemon_init(uv_loop_t *loop, const char *home, char *err, size_t errlen);

/* Binds $home/daemon.sock and starts accepting: from then on clients can
 * connect (the CLI waits for this). 0 or a negative error (reason in err). */
int pd_daemon_listen(char *err, size_t errlen);

/* Runs the loop until the shutdown finished. Returns the exit status. */
int pd_daemon_run(void);

/* Starts the orderly shutdown (idempotent). why: for the log. The work
 * happens in later callbacks of the "daemon.shutdown" task. */
void pd_daemon_request_stop(const char *why);
int pd_daemon_stopping(void);

uv_loop_t *pd_daemon_loop(void);
pd_sessions *pd_daemon_sessions(void); /* the session store */
pd_ipc *pd_daemon_ipc(void);           /* the IPC core (method registry) */
const char *pd_daemon_home(void);       /* absolute; the daemon's cwd */
uint64_t pd_daemon_uptime_ms(void);
/* The built-in methods' context, for a part that adds to daemon.status
 * (pd_methods_set_status_section; the profiling build). */
pd_methods_ctx *pd_daemon_methods(void);

#endif
