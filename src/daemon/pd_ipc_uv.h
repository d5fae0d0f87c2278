/*
 * pd_ipc_uv.h - the libuv driver of the IPC core (pd_ipc.h): the Unix
 * socket, one uv_pipe_t per client, the shutdown deadline timer. It moves
 * bytes between the sockets and the core and tells the core the time
 * (uv_now); everything the protocol says is decided by the core.
 *
 * Units of work (pd_loop.h): the listener "ipc.accept", each connection
 * "ipc.client", the deadline "timer.shutdown".
 *
 * Threads: the loop thread only. Errors: 0 or a negative errno / uv error.
 */
#ifndef PD_IPC_UV_H
#define PD_IPC_UV_H

#include <uv.h>

#include "daemon/pd_ipc.h"

typedef struct pd_ipc_uv pd_ipc_uv;

/* Creates the driver and its core on `loop` (options: pd_ipc.h; copied).
 * Returns 0 and the handle in *out, or -ENOMEM / -EINVAL. The core
 * (pd_ipc_uv_core) exists from then on: methods may be registered before
 * the socket listens. */
int pd_ipc_uv_new(pd_ipc_uv **out, uv_loop_t *loop, const pd_ipc_options *o);
/* The protocol core (borrowed; lives as long as the driver). */
pd_ipc *pd_ipc_uv_core(pd_ipc_uv *s);

/* Binds the socket at path (mode 0600, created under umask 0177 so it is
 * never reachable by others; a stale socket file is replaced: the caller
 * holds the daemon lock, so no live daemon owns it) and starts accepting.
 * Returns 0 or a negative error (-ENAMETOOLONG if the path does not fit in
 * sockaddr_un). */
int pd_ipc_uv_listen(pd_ipc_uv *s, const char *path);
/* Stops accepting and removes the socket file (shutdown step 1). */
void pd_ipc_uv_stop_accepting(pd_ipc_uv *s);
/* pd_ipc_close_all with the loop's time and a timer for the deadline:
 * done(ctx) runs once every connection is closed (from a later callback,
 * or right away if there are none). */
void pd_ipc_uv_close_all(pd_ipc_uv *s, uint64_t deadline_ms, void (*done)(void *), void *ctx);
/* Closes the driver's remaining handles (final teardown, before the loop's
 * last run; after pd_ipc_uv_close_all finished). */
void pd_ipc_uv_close(pd_ipc_uv *s);
/* Frees the driver and its core, once the loop ran the close callbacks
 * (after uv_run returned). NULL is allowed. */
void pd_ipc_uv_del(pd_ipc_uv *s);

#endif
