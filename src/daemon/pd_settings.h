/*
 * pd_settings.h - the daemon's integer settings from the environment: the
 * one parser (common/pt_env.h, strict: "10abc" is rejected) with a warning
 * in the daemon log for a value that was rejected. Used by the
 * IPC server, telemetry and both responders; it calls only the parser and
 * the log, so none of them depends on another through it.
 *
 * Threads: any thread the log may be written from (pd_log.h); reads the
 * environment, so not concurrently with setenv.
 */
#ifndef PD_SETTINGS_H
#define PD_SETTINGS_H

/* The value of the environment variable `name` in [min, max]; dflt when it
 * is unset or empty, and dflt with a warning in the log when it is not an
 * integer or out of range. Never fails. Knobs: docs/daemon.md. */
int pd_env_int(const char *name, int dflt, int min, int max);

#endif
