/*
 * pt_client_error.c - filling a pt_client_error (see pt_client.h).
 *
 * DESIGN
 *  - The one helper both the IPC client (pt_client.c) and the daemon
 *    starter (pt_client_start.c) report through, in its own unit so that
 *    neither of them calls the other back. Any thread; touches only *e.
 */
#include "common/pt_client.h"

#include <stdarg.h>
#include <stdio.h>

void pt_client_error_set(pt_client_error *e, const char *code, const char *fmt, ...) {
  if (!e) return;
  snprintf(e->code, sizeof e->code, "%s", code);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
}
