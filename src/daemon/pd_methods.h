/*
 * pd_methods.h - the built-in IPC methods (docs/ipc.md): daemon.status,
 * daemon.stop, sessions.*, turn.send, turn.cancel.
 *
 * They reach the daemon only through the context given at registration,
 * never through daemon globals, so pd_daemon.c (which registers them) and
 * this module do not call each other.
 * Threads: loop thread only.
 */
#ifndef PD_METHODS_H
#define PD_METHODS_H

#include <stdint.h>
#include <uv.h>

#include "daemon/pd_ipc.h"
#include "daemon/pd_sessions.h"

typedef struct pd_methods_ctx {
  uv_loop_t *loop;
  pd_ipc *ipc;                           /* where they are registered */
  pd_sessions *sessions;                 /* the daemon's session store */
  void (*request_stop)(const char *why); /* daemon.stop */
  int (*stopping)(void);                 /* 1 once a stop was requested */
  uint64_t (*uptime_ms)(void);
} pd_methods_ctx;

/* Registers the methods on ctx->ipc with pd_ipc_register_method. ctx is
 * BORROWED: it becomes the handlers' context, so it (and its loop, core and
 * store) must outlive the core; the caller owns it (the daemon keeps it in
 * its own state, the fuzz target in its own). Returns 0 or the first
 * registration error (-EINVAL, -ENOSPC). */
int pd_methods_register(const pd_methods_ctx *ctx);

#endif
