/*
 * pt_logfile.h - an append-only log file of whole lines, shared by the
 * daemon log (logs/daemon.log) and the TUI's log (logs/tui.log).
 *
 * Every line is "<RFC 3339 UTC time with ms> <text>\n" and goes to the file
 * in ONE write(2) (no stdio buffer), so a line is never split and two lines
 * are never glued together. When a line cannot be written whole (a full
 * disk: ENOSPC, a quota: EDQUOT, EIO...), whatever part of it landed is cut
 * off again and the line is dropped whole and counted; the first line that
 * fits afterwards is preceded by one summary line
 * "<time> WARN log: N line(s) dropped since <time>: <reason>".
 *
 * The file is created 0600 whatever the umask, opened with O_NOFOLLOW (a
 * symlink planted at the log's path is refused), and an existing log of
 * ours that others may read is narrowed to 0600.
 *
 * Threads: a pt_logfile is not locked; callers serialise (both logs hold a
 * mutex around pt_logfile_write). Not async-signal-safe. Errors: 0 or a
 * negative errno.
 */
#ifndef PT_LOGFILE_H
#define PT_LOGFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct pt_logfile pt_logfile;

/* Opens (appends to, creating) the log at path. Returns 0 and *out, or a
 * negative errno (-ELOOP for a symlink). Free with pt_logfile_del. */
int pt_logfile_open(pt_logfile **out, const char *path);

/* fsyncs and closes. NULL ok. */
void pt_logfile_del(pt_logfile *l);

/* Writes one line: the current time, a space, `text` escaped
 * (pt_escape.h with PT_ESC_BACKSLASH: control bytes, C1 controls and
 * invalid UTF-8 as \n, \t, \xNN..., a backslash as \\; so a newline or
 * an ESC from outside can neither forge a line nor reach a terminal that
 * shows the log), cut at PT_LOGFILE_LINE_MAX bytes (never inside an escape
 * or a character), '\n'. Returns 0, or the negative errno of a line that
 * was dropped (counted, see above). */
#define PT_LOGFILE_LINE_MAX 4096
int pt_logfile_write(pt_logfile *l, const char *text);

/* Lines dropped since open (all of them, summarised or not). */
uint64_t pt_logfile_dropped(const pt_logfile *l);

/* Formats the current UTC time as "YYYY-MM-DDTHH:MM:SS.mmmZ" into buf
 * (size >= 25). Any thread. */
void pt_logfile_time(char *buf, size_t size);

#endif
