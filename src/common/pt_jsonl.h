/*
 * pt_jsonl.h - sans-I/O framer for newline-delimited JSON (one JSON object per
 * line, '\n'-terminated), with a hard cap on the line length.
 *
 * Used by both ends of the daemon IPC (docs/ipc.md): the daemon feeds it the
 * bytes it reads from each client socket, the client library the bytes it
 * reads from the daemon. The framer does no I/O and never blocks: you push
 * bytes in with pt_jsonl_feed() and pull complete lines out with
 * pt_jsonl_next(), in that order, from one thread.
 *
 *   pt_jsonl *f = pt_jsonl_new(0);            // 0 = PT_JSONL_MAX_LINE
 *   ... on every read of n bytes:
 *   if (pt_jsonl_feed(f, buf, n) < 0) -> out of memory
 *   const char *line; size_t len; int r;
 *   while ((r = pt_jsonl_next(f, &line, &len)) == 1) handle(line, len);
 *   if (r == PT_JSONL_EOVERSIZE) -> reply "oversize", close the connection
 *
 * Limits: a line may hold at most max_line bytes INCLUDING its '\n' (so at
 * most max_line - 1 bytes of payload). Memory held by a framer is bounded by
 * max_line + the size of the largest single pt_jsonl_feed() call: as soon as
 * an unterminated tail exceeds the cap it is dropped, and the rest of that
 * line (up to its '\n') is discarded as it arrives, so a peer that never
 * sends '\n' cannot grow the buffer.
 *
 * Ordering: complete lines fed before an oversize line are returned first;
 * then pt_jsonl_next() returns PT_JSONL_EOVERSIZE exactly once for that
 * line; lines after it (after its '\n') are returned normally, so a caller
 * that wants to resynchronise instead of closing may keep going.
 *
 * Empty lines (just "\n") are skipped silently. A '\r' before '\n' is kept
 * as part of the line (JSON parsers treat it as whitespace).
 *
 * The framer does not look inside lines: JSON validity is the caller's
 * business (see pt_jsonl_parse / pt_jsonl_dump below for the jansson helpers
 * both ends use).
 *
 * Allocation through pt_alloc.h (tests fail each allocation in turn).
 */
#ifndef PT_JSONL_H
#define PT_JSONL_H

#include <stddef.h>
#include <jansson.h>

/* Maximum line length on the daemon socket, newline included (1 MiB). */
#define PT_JSONL_MAX_LINE ((size_t)1048576)

/* Returned by pt_jsonl_next when a line longer than the cap was seen. */
#define PT_JSONL_EOVERSIZE (-90) /* == -EMSGSIZE on Linux */

typedef struct pt_jsonl pt_jsonl;

/* Creates a framer. max_line: cap in bytes including the '\n'; 0 means
 * PT_JSONL_MAX_LINE; values below 2 are raised to 2.
 * Returns NULL on out of memory. Owned by the caller: free with pt_jsonl_del.
 * Threads: a framer is not thread-safe; use it from one thread. */
pt_jsonl *pt_jsonl_new(size_t max_line);

/* Frees the framer and any buffered bytes. NULL is allowed. */
void pt_jsonl_del(pt_jsonl *f);

/* Appends len bytes read from the peer. Invalidates the pointer returned by
 * the previous pt_jsonl_next. data is copied; the caller keeps ownership.
 * Returns 0, or -ENOMEM (nothing was consumed then; the framer stays
 * usable). */
int pt_jsonl_feed(pt_jsonl *f, const void *data, size_t len);

/* Pulls the next complete line.
 * Returns 1 and sets *line / *len (payload without the '\n'; the bytes are
 * NUL-terminated at line[len] for convenience; the pointer stays valid until
 * the next pt_jsonl_feed / pt_jsonl_next / pt_jsonl_del call),
 * 0 if no complete line is buffered (feed more), or
 * PT_JSONL_EOVERSIZE once per line that exceeded the cap. */
int pt_jsonl_next(pt_jsonl *f, const char **line, size_t *len);

/* Bytes of an incomplete line currently buffered (0 when the peer stopped at
 * a line boundary). Useful on EOF: non-zero means the peer hung up
 * mid-line. */
size_t pt_jsonl_pending(const pt_jsonl *f);

/* ---- jansson helpers shared by daemon and client ---- */

/* Parses one line into a JSON object. Returns 0 and a new reference in *out,
 * -EINVAL if the line is not valid JSON or not an object, or -ENOMEM when
 * jansson says it ran out of memory (*out = NULL; if err/errlen are given,
 * a human-readable reason is written there). jansson reports some
 * allocation failures of its parser as syntax errors: those are -EINVAL. */
int pt_jsonl_parse(const char *line, size_t len, json_t **out, char *err, size_t errlen);

/* Serialises obj compactly as one line with a trailing '\n'. Returns 0 and a
 * malloc'd buffer (*out, caller frees) of *len bytes (not NUL-terminated
 * beyond *len, though a NUL follows it), -ENOMEM, -EINVAL if obj cannot be
 * encoded, or PT_JSONL_EOVERSIZE if the line would exceed max_line (0 =
 * PT_JSONL_MAX_LINE). JSON escapes any '\n' inside strings, so the output
 * is always exactly one line. */
int pt_jsonl_dump(const json_t *obj, size_t max_line, char **out, size_t *len);

#endif
