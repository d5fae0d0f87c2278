/*
 * ptcon_ratelog.h - log lines rate-limited per cause. Any local user can
 * make the console log (each bad connection is a line), so per cause the
 * first line of a window is written and the rest are counted; when the
 * window ends one summary line says how many were not written
 * ("task console: 57 more connections closed (no HTTP/2 preface) in the
 * last 10 s"). A cause is a pair: what happened ("connections closed") and
 * why ("no HTTP/2 preface"), both static strings; its lines and its summary
 * have the level given with it (PTCON_LOG_*).
 *
 * Threads: one (the server thread). No allocation; at most
 * PTCON_RATELOG_CAUSES distinct causes (more share the last entry).
 */
#ifndef PTCON_RATELOG_H
#define PTCON_RATELOG_H

#include <stdint.h>

#include "ptprof_console.h"

#define PTCON_RATELOG_CAUSES 12u

typedef struct ptcon_ratelog {
  ptcon_log_fn log;
  void *user_data;
  uint64_t window_ns;
  uint32_t n;
  struct {
    const char *what, *why;  /* static strings; compared by content */
    int level;               /* of the latest line of this cause */
    uint64_t window_end;     /* 0 = no open window */
    uint64_t suppressed;
  } c[PTCON_RATELOG_CAUSES];
} ptcon_ratelog;

/* log may be NULL (everything is dropped). window_ns 0 = 10 s. */
void ptcon_ratelog_init(ptcon_ratelog *rl, ptcon_log_fn log, void *user_data, uint64_t window_ns);
/* One occurrence of the cause (what, why) at now; the line (printf format)
 * is written at level if the cause's window is not open, else counted. */
void ptcon_ratelog_event(ptcon_ratelog *rl, uint64_t now, int level, const char *what,
                         const char *why, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Writes the summary line of every window that has ended with suppressed
 * lines, and closes it. */
void ptcon_ratelog_flush(ptcon_ratelog *rl, uint64_t now);
/* When ptcon_ratelog_flush next has a summary to write (UINT64_MAX: none). */
uint64_t ptcon_ratelog_next_due(const ptcon_ratelog *rl);

#endif
