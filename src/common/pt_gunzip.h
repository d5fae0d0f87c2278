/*
 * pt_gunzip.h - gzip decompression of untrusted files with zlib, capped.
 *
 * Used to read profile snapshots (`.pb.gz`: one gzip member, RFC 1952)
 * before pt_pprof_read decodes them. zlib (a kept library, not a profiling
 * one) does the inflating and checks the header CRC (FHCRC), the data's
 * CRC-32 and length; this unit adds the output cap and the error meanings.
 *
 * Threads: reentrant. Allocation through pt_alloc.h (zlib's included).
 */
#ifndef PT_GUNZIP_H
#define PT_GUNZIP_H

#include <stddef.h>
#include <stdint.h>

/* Decompressed bytes accepted by default: 256 MiB. */
#define PT_GUNZIP_MAX_OUT ((size_t)256 << 20)

/* 1 when in[0..len) starts with the gzip magic (1f 8b), else 0. */
int pt_is_gzip(const uint8_t *in, size_t len);

/* Decompresses the first gzip member of in[0..len) (bytes after it are
 * ignored, as zlib's gzip mode leaves them). Returns 0 with *out (malloc'd,
 * caller frees; never NULL on success) of *outlen bytes, or
 *   -EINVAL  not gzip, a damaged or truncated stream, a CRC or length
 *            mismatch
 *   -EFBIG   more than max_out bytes (0 = PT_GUNZIP_MAX_OUT)
 *   -ENOMEM
 * with *out NULL and *outlen 0. */
int pt_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *outlen);

#endif
