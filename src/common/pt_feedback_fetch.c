/*
 * pt_feedback_fetch.c - fetching an artifact from the daemon (see
 * pt_feedback_fetch.h).
 *
 * Invariant: buf holds `size` bytes (the listed size, capped); a chunk is
 * copied only after its decoded length is checked to fit at `off`.
 */
#include "common/pt_feedback_fetch.h"

#include "common/pt_alloc.h"
#include "common/pt_base64.h"
#include "common/pt_err.h"
#include "common/pt_sha256.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define FETCH_TIMEOUT_MS 60000

/* A daemon error reply's code as an errno (docs/ipc.md, pd_catalog_errcode). */
static int daemon_errno(const char *code) {
  if (strcmp(code, "not_found") == 0) return -ENOENT;
  if (strcmp(code, "bad_request") == 0) return -EINVAL;
  if (strcmp(code, "io_error") == 0) return -EIO;
  if (strcmp(code, "internal") == 0 || strcmp(code, "no_memory") == 0) return -ENOMEM;
  return -EPROTO;
}

/* Checks one artifacts.fetch reply against the listing and copies its
 * bytes to buf + *off. Returns 1 at the end (eof or all bytes), 0 for more,
 * or a negative errno. */
static int take_chunk(json_t *res, const char *id, const char *sha, uint64_t size, uint8_t *buf,
                      uint64_t *off, char *err, size_t errlen) {
  const char *b64 = pt_feedback_entry_str(res, "data_base64");
  const char *rsha = pt_feedback_entry_str(res, "sha256");
  json_t *jl = json_object_get(res, "length");
  json_t *js = json_object_get(res, "size");
  if (!b64 || !rsha || !json_is_integer(jl) || !json_is_integer(js) ||
      (uint64_t)json_integer_value(js) != size || strcmp(rsha, sha) != 0) {
    pt_errf(err, errlen, "artifact %s: the daemon's fetch reply does not match the listing", id);
    return -EPROTO;
  }
  uint8_t *chunk = NULL;
  size_t clen = 0;
  int r = pt_base64_decode(b64, strlen(b64), &chunk, &clen);
  if (r == -ENOMEM) {
    pt_errf(err, errlen, "artifact %s: out of memory for a chunk", id);
    return r;
  }
  if (r < 0 || (json_int_t)clen != json_integer_value(jl) || clen > size - *off) {
    free(chunk);
    pt_errf(err, errlen, "artifact %s: the daemon's fetch reply does not match the listing", id);
    return -EPROTO;
  }
  memcpy(buf + *off, chunk, clen);
  free(chunk);
  *off += clen;
  if (json_is_true(json_object_get(res, "eof")) || *off >= size) return 1;
  if (clen == 0) {
    pt_errf(err, errlen, "artifact %s: empty chunk before the end", id);
    return -EPROTO;
  }
  return 0;
}

int pt_feedback_fetch(pt_client *c, json_t *entry, uint8_t **data, size_t *len, char *err,
                      size_t errlen) {
  *data = NULL;
  *len = 0;
  const char *id = pt_feedback_entry_str(entry, "id");
  const char *sha = pt_feedback_entry_str(entry, "sha256");
  json_t *jsize = json_object_get(entry, "size");
  if (!id || !sha || !json_is_integer(jsize) || json_integer_value(jsize) < 0) {
    pt_errf(err, errlen, "catalog entry lacks id, size or sha256");
    return -EINVAL;
  }
  uint64_t size = (uint64_t)json_integer_value(jsize);
  if (size > PT_FEEDBACK_FETCH_MAX) {
    pt_errf(err, errlen, "artifact %s: %" PRIu64 " bytes, more than the %" PRIu64 " MiB served",
            id, size, PT_FEEDBACK_FETCH_MAX >> 20);
    return -EFBIG;
  }
  uint8_t *buf = pt_malloc(size ? size : 1);
  if (!buf) {
    pt_errf(err, errlen, "artifact %s: out of memory for %" PRIu64 " bytes", id, size);
    return -ENOMEM;
  }
  uint64_t off = 0;
  int r;
  do {
    json_t *params = json_pack("{s:s, s:I}", "id", id, "offset", (json_int_t)off);
    if (!params) {
      r = -ENOMEM;
      pt_errf(err, errlen, "artifact %s: out of memory", id);
      break;
    }
    json_t *res = NULL;
    pt_client_error ce = {"", ""};
    r = pt_client_call(c, "artifacts.fetch", params, FETCH_TIMEOUT_MS, &res, &ce);
    if (r < 0) {
      /* A daemon error reply keeps its meaning as an errno; the
       * connection's own errors (-ETIMEDOUT, -ECONNRESET) stay as they are. */
      if (r == -EPROTO) r = daemon_errno(ce.code);
      pt_errf(err, errlen, "%s", ce.message);
      break;
    }
    r = take_chunk(res, id, sha, size, buf, &off, err, errlen);
    json_decref(res);
  } while (r == 0);
  if (r < 0) {
    free(buf);
    return r;
  }
  if (off != size) {
    free(buf);
    pt_errf(err, errlen, "artifact %s: got %" PRIu64 " of %" PRIu64 " bytes", id, off, size);
    return -EPROTO;
  }
  char hex[PT_SHA256_HEX];
  if ((r = pt_sha256_hex(buf, size, hex)) < 0) {
    free(buf);
    pt_errf(err, errlen, "artifact %s: SHA-256 failed", id);
    return r;
  }
  if (strcmp(hex, sha) != 0) {
    free(buf);
    pt_errf(err, errlen, "artifact %s: SHA-256 of the received bytes does not match the catalog",
            id);
    return -EBADMSG;
  }
  *data = buf;
  *len = size;
  return 0;
}

int pt_feedback_fetch_add(pt_feedback *fb, pt_client *c, json_t *entry, char *err,
                          size_t errlen) {
  uint8_t *data = NULL;
  size_t len = 0;
  int r = pt_feedback_fetch(c, entry, &data, &len, err, errlen);
  if (r < 0) return r;
  r = pt_feedback_add(fb, entry, data, len, err, errlen);
  free(data);
  return r;
}
