/*
 * pt_base64.h - base64 decoding (RFC 4648, standard alphabet, padding
 * required), for the artifact chunks the daemon sends (artifacts.fetch's
 * data_base64). The input comes from outside the process: every byte is
 * checked, the output is sized from the input, nothing else is allocated.
 *
 * (The daemon's encoder is in src/daemon/pd_catalog_json.c.)
 * Threads: reentrant. Allocation through pt_alloc.h.
 */
#ifndef PT_BASE64_H
#define PT_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Decodes slen characters of s. Returns 0 with *out (malloc'd, caller
 * frees; never NULL on success, even for empty input) of *outlen bytes,
 * -EINVAL (length not a multiple of 4, a character outside the alphabet,
 * padding anywhere but at the end) or -ENOMEM; *out is NULL on error. */
int pt_base64_decode(const char *s, size_t slen, uint8_t **out, size_t *outlen);

#endif
