/*
 * pd_telemetry.h - periodic metrics as JSON lines in
 * $POLYTOKEN_HOME/telemetry/telemetry.jsonl:
 *   {"ts","event":"start"|"tick"|"close","uptime_ms","sessions","turns_total",
 *    "turns_running","clients","cpu_user_ms","cpu_sys_ms","rss_kb","maxrss_kb"}
 * one at start, one every interval (POLYTOKEN_TELEMETRY_INTERVAL_MS,
 * default 10000, read by pd_settings.c) from a loop timer (task "timer.telemetry"), and one at close.
 * Lines are appended with O_APPEND and not fsync'd (metrics, not data).
 * Threads: loop thread only.
 */
#ifndef PD_TELEMETRY_H
#define PD_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct pd_telemetry_source {
  size_t (*sessions)(void);
  size_t (*clients)(void);
  uint64_t (*turns_total)(void);
  size_t (*turns_running)(void);
} pd_telemetry_source;

/* Opens the file (creating the directory) and starts the timer, a line
 * every interval_ms (<= 0: 10000). 0 or -errno. */
int pd_telemetry_start(uv_loop_t *loop, const char *dir, int interval_ms,
                       const pd_telemetry_source *src);
/* Writes the "close" line, stops the timer, closes the file. Idempotent. */
void pd_telemetry_close(void);

#endif
