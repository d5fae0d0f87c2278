/*
 * pt_escape.h - text from outside made safe to write to a log or a
 * terminal: the one escaper of logs/daemon.log, logs/tui.log, the daemon's
 * stderr copy of its log and the CLI's error lines.
 *
 * A client name, a session directory's name, a state root path, an error
 * text quoting bad input: any of them may hold an ESC sequence (which a
 * terminal showing the log would obey) or a newline (which would forge a
 * log line). pt_escape writes:
 *   - bytes 0x00-0x1f and 0x7f as \n, \r, \t or \xNN;
 *   - C1 controls (U+0080-U+009F, UTF-8 bytes c2 80 .. c2 9f: CSI is
 *     U+009B) and every byte that is not part of valid UTF-8 as \xNN, one
 *     escape per byte;
 *   - with PT_ESC_BACKSLASH, '\' as "\\", so the result is unambiguous
 *     (a literal "\x1b" in the text reads "\\x1b"); logs use it;
 *   - everything else (printable ASCII, valid UTF-8) as it is.
 * The output never holds a byte below 0x20, 0x7f, a C1 control or invalid
 * UTF-8.
 *
 * Sans-I/O, no allocation, no shared state: any thread, and
 * async-signal-safe (it calls nothing but memcpy).
 */
#ifndef PT_ESCAPE_H
#define PT_ESCAPE_H

#include <stddef.h>

#define PT_ESC_BACKSLASH 0x1u

/* Escapes the `len` bytes at `in` into `out` (cap bytes; NUL-terminated
 * when cap > 0). Never cuts an escape or a UTF-8 character in half: input
 * whose escaped form does not fit is left out, from there on. Returns the
 * number of bytes written, without the NUL. *used (may be NULL) receives
 * the number of input bytes consumed (len when everything fitted). */
size_t pt_escape(char *out, size_t cap, const char *in, size_t len, unsigned flags, size_t *used);

/* The same for a NUL-terminated string. */
size_t pt_escape_str(char *out, size_t cap, const char *in, unsigned flags);

#endif
