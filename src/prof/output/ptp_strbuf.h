/*
 * ptp_strbuf.h - a growing, size-capped string for text the library
 * composes from parts (a snapshot's comment lines): never truncated in
 * silence. A failed append (out of memory, or the cap reached) latches an
 * error; later appends do nothing and ptp_strbuf_take returns that error,
 * so the caller checks once at the end (like ptp_pb_buf's err).
 *
 * Zero-filled is an empty buffer with the default cap. Not thread-safe
 * (one owner); not for signal handlers (allocates).
 */
#ifndef PTP_STRBUF_H
#define PTP_STRBUF_H

#include <stddef.h>

#define PTP_STRBUF_MAX_DEFAULT (64u << 10)

typedef struct ptp_strbuf {
  char *s;          /* NUL-terminated when len > 0 */
  size_t len, cap;
  size_t max;       /* longest string allowed, 0 = PTP_STRBUF_MAX_DEFAULT */
  int err;          /* 0, -ENOMEM or -E2BIG: the first failed append */
} ptp_strbuf;

/* Appends printf-style text. */
void ptp_strbuf_printf(ptp_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Returns the string (the caller frees it; "" allocated for an empty
 * buffer) and empties b, or NULL with *err (the latched error; b freed). */
char *ptp_strbuf_take(ptp_strbuf *b, int *err);

/* Frees the buffer's memory; b is empty and usable again. */
void ptp_strbuf_free(ptp_strbuf *b);

#endif
