/*
 * pt_err.h - the error convention of src/common, in one place.
 *
 * Functions return 0 (or a documented non-negative value) or a negative
 * errno-style code whose meaning is the one of the failure where it
 * happened (an open that failed with ENOENT returns -ENOENT, not a code of
 * its caller's choosing). Where a function can say more than the code, it
 * takes `char *err, size_t errlen` (either may be NULL/0) and writes one
 * line without a newline there when it fails; pt_errf below fills it. A
 * module with codes of its own (pt_jsonl's PT_JSONL_EOVERSIZE) says so in
 * its header; the IPC client's pt_client_error carries the daemon's error
 * codes, which are protocol values, not C error codes.
 *
 * Header-only; any thread.
 */
#ifndef PT_ERR_H
#define PT_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* printf into err (if err and errlen), truncated to fit. */
static inline void pt_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void pt_errf(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

#endif
