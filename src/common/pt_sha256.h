/*
 * pt_sha256.h - SHA-256 over memory and files (OpenSSL libcrypto EVP).
 *
 * Used by the daemon's artifact catalog (hash of each artifact) and by the
 * feedback bundle writer (verifying what the catalog served). Hex digests are
 * 64 lowercase hex chars + NUL (PT_SHA256_HEX bytes).
 *
 * Threads: every function is reentrant (no shared state).
 * Errors: 0 or a negative errno-style code.
 */
#ifndef PT_SHA256_H
#define PT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define PT_SHA256_LEN 32
#define PT_SHA256_HEX 65

typedef struct pt_sha256 pt_sha256;

/* Incremental hashing. _new returns NULL on out of memory; _update/_final
 * return 0 or -EIO (libcrypto failure). _final may be called once; the hex
 * digest goes to hex (PT_SHA256_HEX bytes). _del frees (NULL ok). */
pt_sha256 *pt_sha256_new(void);
int pt_sha256_update(pt_sha256 *h, const void *data, size_t len);
int pt_sha256_final(pt_sha256 *h, char hex[PT_SHA256_HEX]);
void pt_sha256_del(pt_sha256 *h);

/* A copy of h's state (the bytes hashed so far), to be extended or
 * finalized independently; caller owns it (pt_sha256_del). NULL on out of
 * memory. h must not have been finalized. */
pt_sha256 *pt_sha256_dup(const pt_sha256 *h);
/* The digest of what h has hashed so far, leaving h usable for more
 * updates. Returns 0, -ENOMEM or -EIO. */
int pt_sha256_peek(const pt_sha256 *h, char hex[PT_SHA256_HEX]);

/* One-shot over a buffer. Returns 0, -ENOMEM or -EIO. */
int pt_sha256_hex(const void *data, size_t len, char hex[PT_SHA256_HEX]);

/* Hashes at most `limit` bytes read from fd starting at its current offset
 * (limit = SIZE_MAX: to EOF). *nread (may be NULL) receives the byte count
 * hashed. Returns 0, -ENOMEM, -EIO or the negated errno of read(). */
int pt_sha256_fd(int fd, size_t limit, char hex[PT_SHA256_HEX], size_t *nread);

/* Feeds at most `limit` bytes read from fd (from its current offset) into h,
 * without finalizing. *nread (may be NULL) receives the count fed (also on
 * error). Returns 0, -ENOMEM, -EIO or the negated errno of read(). */
int pt_sha256_update_fd(pt_sha256 *h, int fd, size_t limit, size_t *nread);

#endif
