/*
 * pt_feedback_fetch.h - an artifact's bytes from the daemon's catalog
 * (artifacts.fetch, in chunks of base64 until eof; docs/feedback.md), over
 * a connected pt_client in its blocking style, checked against the catalog
 * entry they were listed with: size, SHA-256, and every reply's id, size
 * and digest. The replies are outside input: lengths are checked before
 * anything is copied and the whole artifact is capped
 * (PT_FEEDBACK_FETCH_MAX, the daemon's own cap).
 *
 * Errors: 0 or a negative errno, with one line in err (may be NULL/0):
 *   -EINVAL   the entry lacks id, size or sha256 (or the daemon answered
 *             bad_request)
 *   -EFBIG    the entry's size is over PT_FEEDBACK_FETCH_MAX
 *   -ENOENT   the daemon no longer serves it (not_found: changed since
 *             listing, or pruned; list again)
 *   -EIO      the daemon could not read it (io_error)
 *   -EPROTO   a reply that does not match the listing, or another daemon
 *             error
 *   -EBADMSG  the bytes received do not have the listed SHA-256
 *   -ETIMEDOUT, -ECONNRESET, -ENOTCONN from the connection; -ENOMEM.
 * Threads: the client's thread. Allocation through pt_alloc.h.
 */
#ifndef PT_FEEDBACK_FETCH_H
#define PT_FEEDBACK_FETCH_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/pt_client.h"
#include "common/pt_feedback.h"

/* The daemon serves at most 64 MiB per artifact (pd_catalog_fetch.c). */
#define PT_FEEDBACK_FETCH_MAX ((uint64_t)64 << 20)

/* Fetches `entry`'s bytes (entry: a catalog entry, BORROWED). Returns 0
 * with *data (malloc'd, caller frees; non-NULL even when empty) and *len,
 * or an error above (*data NULL). */
int pt_feedback_fetch(pt_client *c, json_t *entry, uint8_t **data, size_t *len, char *err,
                      size_t errlen);

/* pt_feedback_fetch, then pt_feedback_add of the bytes to fb (its errors
 * too). */
int pt_feedback_fetch_add(pt_feedback *fb, pt_client *c, json_t *entry, char *err,
                          size_t errlen);

#endif
