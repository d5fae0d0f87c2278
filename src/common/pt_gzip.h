/*
 * pt_gzip.h - gzip compression with zlib, for the profiles the tools write
 * (`polytoken profile merge`, the catalog's merged artifact): one gzip
 * member (RFC 1952), what pt_gunzip and `go tool pprof` read.
 *
 * The output is deterministic: the same input gives the same bytes (no
 * file name, modification time 0, zlib's default level), so an artifact
 * built twice from the same snapshots has the same SHA-256.
 *
 * Threads: reentrant. Allocation through pt_alloc.h (zlib's included).
 */
#ifndef PT_GZIP_H
#define PT_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* Compresses in[0..len) into one gzip member. Returns 0 with *out
 * (malloc'd, caller frees; never NULL on success) of *outlen bytes, or
 * -ENOMEM / -EFBIG (len over what zlib's bound can describe) with *out
 * NULL and *outlen 0. */
int pt_gzip(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen);

#endif
