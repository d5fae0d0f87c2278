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

#include <jansson.h>
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
  /* Optional, set with pd_methods_set_status_section: what a part of the
   * daemon adds to daemon.status's reply under `status_key` (the
   * profiling build's "profile" object). Returns a NEW object, or NULL to
   * add nothing. Loop thread. */
  json_t *(*status_section)(void *ud);
  void *status_section_ud;
  const char *status_key;
} pd_methods_ctx;

/* Installs the status section (fn NULL removes it); key is BORROWED (a
 * string literal). Loop thread. */
void pd_methods_set_status_section(pd_methods_ctx *ctx, const char *key,
                                   json_t *(*fn)(void *ud), void *ud);

/* Registers the methods on ctx->ipc with pd_ipc_register_method. ctx is
 * BORROWED: it becomes the handlers' context, so it (and its loop, core and
 * store) must outlive the core; the caller owns it (the daemon keeps it in
 * its own state, the fuzz target in its own). Returns 0 or the first
 * registration error (-EINVAL, -ENOSPC). */
int pd_methods_register(const pd_methods_ctx *ctx);

#endif
