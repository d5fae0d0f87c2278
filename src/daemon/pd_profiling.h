/*
 * pd_profiling.h - the profiling build's entry into the daemon. Compiled and
 * called only when PT_PROFILING (main.c calls it inside #if PT_PROFILING,
 * after pd_daemon_init and before pd_daemon_listen, on the loop thread).
 *
 * What it may use (docs/daemon.md, "Seams"):
 *   pd_shutdown_register(PD_SHUTDOWN_FINAL_PROFILE, ...)   (pd_shutdown.h)
 *   pd_on_active_session(cb, ctx)                          (pd_sessions.h)
 *   pd_ipc_register_method("profile.dump", ...)            (pd_ipc.h)
 *   pd_daemon_home(), pd_daemon_loop()                     (pd_daemon.h)
 * Returns 0, or a negative error: the daemon then logs it and exits 1.
 */
#ifndef PD_PROFILING_H
#define PD_PROFILING_H

#include <uv.h>

int pd_profiling_init(uv_loop_t *loop);

#endif
