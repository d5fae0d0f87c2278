/*
 * pd_shutdown.h - the daemon's orderly shutdown and its step registry
 * (seam 1).
 *
 * On SIGTERM, SIGINT or daemon.stop the daemon:
 *   1. stops accepting (closes and removes the socket)          "stop-accepting"
 *   2. cancels running turns and waits for them to finish       "cancel-turns"
 *      (each records its outcome in its transcript; 5 s deadline)
 *   3. flushes and closes client connections (1 s deadline)     "close-clients"
 *   4. runs the registered steps, slot by slot in the enum order below,
 *      steps of one slot in registration order; each is logged as
 *      "shutdown: step <slot>: <name>" before it runs;
 *   5. releases the lock and exits.
 * PD_SHUTDOWN_TELEMETRY and PD_SHUTDOWN_LOG hold the daemon's own steps
 * (final telemetry line and close; log close), so they always come last and
 * in that order. Steps run on the loop thread with the loop still alive
 * (handles may be closed; no new work should be started).
 */
#ifndef PD_SHUTDOWN_H
#define PD_SHUTDOWN_H

typedef enum pd_shutdown_slot {
  PD_SHUTDOWN_EARLY = 0,       /* after turns and clients are gone */
  PD_SHUTDOWN_FINAL_PROFILE,   /* the profiling build's final profile dump */
  PD_SHUTDOWN_STATE,           /* session store and other state released */
  PD_SHUTDOWN_TELEMETRY,       /* final telemetry line, telemetry closed */
  PD_SHUTDOWN_LOG,             /* log closed: the very last step */
  PD_SHUTDOWN_NSLOTS
} pd_shutdown_slot;

/* Registers fn(ctx) to run in `slot` during shutdown. name (copied, <= 63
 * bytes) appears in the log. Up to 32 steps in all. Loop thread, any time
 * before shutdown starts. Returns 0, -EINVAL (bad slot/args), -ENOSPC
 * (full) or -EBUSY (shutdown already running). */
int pd_shutdown_register(pd_shutdown_slot slot, const char *name, void (*fn)(void *), void *ctx);

/* Slot name as logged ("early", "final-profile", "state", "telemetry",
 * "log"). */
const char *pd_shutdown_slot_name(pd_shutdown_slot slot);

/* Runs all registered steps in order (called by the daemon; once). */
void pd_shutdown_run_steps(void);

#endif
