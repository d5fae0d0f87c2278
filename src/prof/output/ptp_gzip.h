/*
 * ptp_gzip.h - gzip (RFC 1952) compression of a whole buffer with zlib, as a
 * single member, which is what pprof readers expect (two concatenated members
 * would decode as two profiles merged field by field).
 *
 * Threads: reentrant (no shared state). Allocates: never call from a signal
 * handler.
 */
#ifndef PTP_GZIP_H
#define PTP_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* Compresses in[0..len) into a freshly malloc'd buffer *out (caller frees),
 * *outlen its length. level is a zlib level (1 = fastest, what Go's pprof
 * writer uses; -1 = zlib default). Returns 0, -ENOMEM, or -EIO on a zlib
 * error. On error *out is untouched. */
int ptp_gzip(const uint8_t *in, size_t len, int level, uint8_t **out, size_t *outlen);

/* Decompresses exactly one gzip member into a malloc'd buffer (caller frees),
 * refusing more than max_out bytes of output (-E2BIG). Returns 0, -ENOMEM,
 * -EBADMSG (not gzip, corrupt or truncated), -E2BIG, or -ENOTUNIQ when bytes
 * follow the first member (a second member or trailing garbage). Used by the
 * tests and the validator's checks of our own output. */
int ptp_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *outlen);

#endif
