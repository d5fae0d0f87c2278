/*
 * pd_profiling.h - the profiling build's entry into the daemon. Compiled and
 * called only when PT_PROFILING (main.c calls it inside #if PT_PROFILING,
 * after pd_daemon_init and before pd_daemon_listen, on the loop thread).
 *
 * What it uses (docs/daemon.md, "Seams"), all handed to it by main.c:
 *   pd_shutdown_register(PD_SHUTDOWN_FINAL_PROFILE, ...)   (pd_shutdown.h)
 *   pd_sessions_on_active(sessions, cb, ctx)               (pd_sessions.h)
 *   pd_ipc_register_method(ipc, "profile.dump", ...)       (pd_ipc.h)
 *   the loop and the state root
 * Returns 0, or a negative error: the daemon then logs it and exits 1.
 */
#ifndef PD_PROFILING_H
#define PD_PROFILING_H

#include <uv.h>

#include "daemon/pd_ipc.h"
#include "daemon/pd_sessions.h"

/* Starts the sampler and the console on `loop` for state root `home`
 * (absolute), registers profile.dump on the IPC core `ipc` and follows the
 * active session of `sessions` (all must outlive the loop). Loop thread,
 * once. */
int pd_profiling_init(uv_loop_t *loop, const char *home, pd_ipc *ipc, pd_sessions *sessions);

#endif
