/*
 * pd_catalog_ipc.h - wires the artifact catalog (pd_catalog.h) into the
 * daemon: one catalog per daemon, its two IPC methods `artifacts.list` and
 * `artifacts.fetch` registered through the method registry (pd_ipc.h), the
 * active-session callback (pd_sessions.h) feeding it the session directory, and a
 * shutdown step (slot "state") that frees it.
 *
 * Present in every build: a normal daemon serves daemon snapshots left on
 * disk, the log and telemetry; only a profiling daemon lists TUI snapshots
 * (see pd_catalog_refresh).
 *
 * Threads: pd_catalog_install on the loop thread. The methods answer
 * asynchronously: refreshes and fetches do their file work on the libuv
 * threadpool and reply from the loop thread (DESIGN block of
 * pd_catalog_ipc.c).
 */
#ifndef PD_CATALOG_IPC_H
#define PD_CATALOG_IPC_H

#include <uv.h>

#include "daemon/pd_ipc.h"
#include "daemon/pd_sessions.h"

/* Creates the catalog for state root `home`, registers its methods on the
 * IPC core `ipc`, its active-session callback on `sessions` (the daemon's
 * session store) and the shutdown step; its file work runs on `loop`'s
 * threadpool. Call once from main on the loop thread, before the
 * loop runs (before or after pd_ipc_uv_listen). Returns 0, or a negative errno
 * (the daemon can run on without the catalog; the methods then answer
 * `not_profiling`/`unknown_method` as the registry does for unregistered
 * names). */
int pd_catalog_install(uv_loop_t *loop, const char *home, pd_ipc *ipc, pd_sessions *sessions);

#endif
