/*
 * pd_log.h - the daemon log: $POLYTOKEN_HOME/logs/daemon.log, one line per
 * message: "2026-11-29T21:33:05.123Z LEVEL message", the message escaped
 * (control bytes, C1 controls, invalid UTF-8 and backslashes: pt_escape.h;
 * so outside text such as a client name or a path can neither split a
 * line nor reach a terminal raw), each line written with
 * one write(2) and dropped whole (counted) when the disk cannot take it
 * (pt_logfile.h), mirrored (escaped the same way) to stderr when
 * enabled (pd_log_set_stderr; polytokend enables it, library users such as
 * the unit tests do not, unless POLYTOKEN_LOG_STDERR=1).
 *
 * Threads: callable from any thread (a mutex serialises lines, so lines from
 * the uv work threads never interleave). Not async-signal-safe: never call
 * from a signal handler (the daemon handles signals with uv_signal, i.e. on
 * the loop thread). DEBUG lines are written only when POLYTOKEN_DEBUG is set
 * (and not "0"). Before pd_log_open and after pd_log_close, messages go
 * to stderr only (if enabled), else nowhere.
 */
#ifndef PD_LOG_H
#define PD_LOG_H

#include <stdint.h>

typedef enum { PD_LOG_DEBUG, PD_LOG_INFO, PD_LOG_WARN, PD_LOG_ERROR } pd_log_level;

/* Opens (appends to) the log file at path. Returns 0 or -errno (then the
 * log keeps going to stderr only). */
int pd_log_open(const char *path);

/* Flushes and closes the log file; later messages go to stderr only. */
void pd_log_close(void);

/* Lines the log file could not take (full disk, ...) since it was opened;
 * each was dropped whole, and one summary line follows once space is back
 * (pt_logfile.h). Any thread. */
uint64_t pd_log_dropped(void);

/* Mirrors every line to stderr (on != 0) or not (the default). The
 * environment variable POLYTOKEN_LOG_STDERR=1 (not "0") turns the mirror on
 * whatever this says. Any thread. */
void pd_log_set_stderr(int on);

void pd_log(pd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pd_info(...) pd_log(PD_LOG_INFO, __VA_ARGS__)
#define pd_warn(...) pd_log(PD_LOG_WARN, __VA_ARGS__)
#define pd_error(...) pd_log(PD_LOG_ERROR, __VA_ARGS__)
#define pd_debug(...) pd_log(PD_LOG_DEBUG, __VA_ARGS__)

/* Writes the current UTC time as RFC 3339 with milliseconds,
 * "YYYY-MM-DDTHH:MM:SS.mmmZ" (24 chars + NUL), into buf (>= 32 bytes). */
void pd_time_rfc3339(char *buf, unsigned long size);

#endif
