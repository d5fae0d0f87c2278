/*
 * pd_catalog_json.c - the artifacts.* methods' JSON: parameter checks,
 * results and error codes (contract: pd_catalog.h).
 *
 * DESIGN
 *  - Pure encoding and decoding around the catalog, with no I/O loop: the
 *    daemon's asynchronous glue (pd_catalog_ipc.c, libuv threadpool) and the
 *    synchronous pd_catalog_call (unit tests, tools) share these functions,
 *    so both answer with the same messages and codes.
 *  - Every error fills `code` (pd_catalog_errcode) and a message naming what
 *    to do ("list again"); unknown parameters are refused by name.
 * Threads: loop thread (it reads the catalog's list).
 */
#include "daemon/pd_catalog_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *pd_catalog_errcode(int err) {
  switch (err) {
  case -ENOENT: case -ESTALE: case -ELOOP: case -ENOTDIR: case -EPERM: case -EXDEV:
    return "not_found";
  case -EINVAL: return "bad_request";
  case -ENOSYS: return "unknown_method";
  case -ENOMEM: return "internal";
  default: return "io_error";
  }
}

static char *base64(const uint8_t *d, size_t n) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *out = malloc((n + 2) / 3 * 4 + 1);
  if (!out) return NULL;
  size_t o = 0, i = 0;
  for (; i + 2 < n; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
    out[o++] = tbl[v >> 18];
    out[o++] = tbl[(v >> 12) & 63];
    out[o++] = tbl[(v >> 6) & 63];
    out[o++] = tbl[v & 63];
  }
  if (i < n) {
    uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
    out[o++] = tbl[v >> 18];
    out[o++] = tbl[(v >> 12) & 63];
    out[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
    out[o++] = '=';
  }
  out[o] = '\0';
  return out;
}

/* An entry; `base` is the absolute directory its path is relative to
 * (the session's or the state root), or NULL when unknown. */
static json_t *entry_json(const pd_catalog_entry *e, const char *base) {
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:s, s:s, s:s}", "id", e->id, "kind",
                        e->kind, "label", e->label, "source", e->source, "size",
                        (json_int_t)e->size, "created", e->created, "created_unix",
                        (json_int_t)e->created_unix, "sha256", e->sha256, "path", e->path,
                        "root", e->root == PD_CATALOG_ROOT_SESSION ? "session" : "state");
  if (!o) return NULL;
  int r = 0;
  if (e->blob) {
    r |= json_object_set_new(o, "built", json_true());
  } else if (base) {
    char *file = pd_cat_asprintf("%s/%s", base, e->path);
    r |= file ? json_object_set_new(o, "file", json_string(file)) : -1;
    free(file);
  }
  if (e->has_profile) {
    r |= json_object_set_new(o, "samples", json_integer((json_int_t)e->samples));
    r |= json_object_set_new(o, "time_ns", json_integer((json_int_t)e->time_ns));
    r |= json_object_set_new(o, "duration_ns", json_integer((json_int_t)e->duration_ns));
  }
  if (r) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static int fail(int r, const char **code, char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(int r, const char **code, char *msg, size_t msglen, const char *fmt, ...) {
  *code = pd_catalog_errcode(r);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, msglen, fmt, ap);
  va_end(ap);
  return r;
}

static int only_keys(json_t *params, const char *const *allowed, const char **bad) {
  const char *k;
  json_t *v;
  json_object_foreach(params, k, v) {
    int ok = 0;
    for (const char *const *a = allowed; *a; a++) ok |= strcmp(*a, k) == 0;
    if (!ok) { *bad = k; return 0; }
  }
  return 1;
}

int pd_catalog_list_params(json_t *params, int64_t *since, const char **code, char *msg,
                           size_t msglen) {
  *since = -1;
  if (params && !json_is_object(params))
    return fail(-EINVAL, code, msg, msglen, "params must be an object");
  const char *bad = NULL;
  static const char *const keys[] = {"since_generation", NULL};
  if (params && !only_keys(params, keys, &bad))
    return fail(-EINVAL, code, msg, msglen, "artifacts.list: unknown parameter \"%s\"", bad);
  json_t *js = params ? json_object_get(params, "since_generation") : NULL;
  if (js && !json_is_null(js) && (!json_is_integer(js) || json_integer_value(js) < 0))
    return fail(-EINVAL, code, msg, msglen, "since_generation must be a non-negative integer");
  if (js && json_is_integer(js)) *since = (int64_t)json_integer_value(js);
  return 0;
}

int pd_catalog_list_result(pd_catalog *c, int64_t since, int refresh_err, json_t **result,
                           const char **code, char *msg, size_t msglen) {
  *result = NULL;
  if (refresh_err < 0)
    return fail(refresh_err, code, msg, msglen, "catalog refresh failed: %s",
                strerror(-refresh_err));
  int changed = since < 0 || (uint64_t)since != c->generation;
  /* Paths are relative to a directory the reply names: the session's
   * (absolute) or the state root; each file entry also has its absolute
   * path. */
  char *sdir = c->listed_srel ? pd_cat_asprintf("%s/%s", c->home, c->listed_srel) : NULL;
  const char *sid = c->listed_srel ? strrchr(c->listed_srel, '/') : NULL;
  json_t *o = json_pack("{s:i, s:I, s:b, s:s, s:o}", "schema", PD_CATALOG_SCHEMA, "generation",
                        (json_int_t)c->generation, "changed", changed, "home", c->home, "session",
                        sdir ? json_pack("{s:s, s:s}", "id", sid ? sid + 1 : c->listed_srel,
                                         "dir", sdir)
                             : json_null());
  if (!o || (c->listed_srel && !sdir)) {
    json_decref(o);
    free(sdir);
    return fail(-ENOMEM, code, msg, msglen, "out of memory");
  }
  if (changed) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < c->n_entries; i++) {
      const pd_catalog_entry *e = &c->entries[i];
      json_t *ej = entry_json(e, e->root == PD_CATALOG_ROOT_SESSION ? sdir : c->home);
      if (!ej || json_array_append_new(arr, ej) != 0) { json_decref(arr); arr = NULL; }
    }
    if (!arr || json_object_set_new(o, "entries", arr) != 0) {
      json_decref(o);
      free(sdir);
      return fail(-ENOMEM, code, msg, msglen, "out of memory");
    }
  }
  free(sdir);
  *result = o;
  return 0;
}

int pd_catalog_fetch_begin(pd_catalog *c, json_t *params, pd_catalog_read_job **job,
                           const char **code, char *msg, size_t msglen) {
  *job = NULL;
  const char *bad = NULL;
  static const char *const keys[] = {"id", "offset", "length", NULL};
  if (!params) return fail(-EINVAL, code, msg, msglen, "artifacts.fetch needs {\"id\"}");
  if (!json_is_object(params)) return fail(-EINVAL, code, msg, msglen, "params must be an object");
  if (!only_keys(params, keys, &bad))
    return fail(-EINVAL, code, msg, msglen,
                "artifacts.fetch: unknown parameter \"%s\" (artifacts are named by id only)", bad);
  json_t *jid = json_object_get(params, "id");
  json_t *joff = json_object_get(params, "offset");
  json_t *jlen = json_object_get(params, "length");
  if (!jid || !json_is_string(jid))
    return fail(-EINVAL, code, msg, msglen, "artifacts.fetch: \"id\" must be a string");
  if ((joff && (!json_is_integer(joff) || json_integer_value(joff) < 0)) ||
      (jlen && (!json_is_integer(jlen) || json_integer_value(jlen) <= 0)))
    return fail(-EINVAL, code, msg, msglen,
                "artifacts.fetch: offset must be >= 0 and length > 0 integers");
  const char *id = json_string_value(jid);
  uint64_t off = joff ? (uint64_t)json_integer_value(joff) : 0;
  size_t want = jlen ? (size_t)json_integer_value(jlen) : PD_CATALOG_CHUNK_MAX;
  const pd_catalog_entry *e = pd_catalog_find(c, id);
  if (!e) return fail(-ENOENT, code, msg, msglen, "no artifact with id \"%.40s\" (list again)", id);
  if (e->size > PD_CATALOG_FETCH_MAX)
    return fail(-EFBIG, code, msg, msglen, "artifact %s is %" PRIu64 " bytes, over the %" PRIu64
                " MiB fetch limit", e->id, e->size, PD_CATALOG_FETCH_MAX >> 20);
  int r = pd_catalog_read_begin(c, id, off, want, job);
  if (r == -ENOENT)
    return fail(r, code, msg, msglen,
                "artifact %s changed or disappeared since it was listed; list again", e->id);
  if (r == -EINVAL)
    return fail(r, code, msg, msglen, "offset %" PRIu64 " is past the end (%" PRIu64 " bytes)",
                off, e->size);
  if (r < 0) return fail(r, code, msg, msglen, "reading artifact %s: %s", e->id, strerror(-r));
  return 0;
}

int pd_catalog_fetch_end(pd_catalog_read_job *j, json_t **result, const char **code, char *msg,
                         size_t msglen) {
  *result = NULL;
  char id[17];
  char sha[65];
  uint64_t size = j->size, off = j->offset;
  memcpy(id, j->id, sizeof id);
  memcpy(sha, j->sha256, sizeof sha);
  uint8_t *data = NULL;
  size_t len = 0;
  int r = pd_catalog_read_end(j, &data, &len);
  if (r == -EPERM)
    return fail(r, code, msg, msglen,
                "artifact %s is not served: not owned by the daemon's user, or it has another "
                "hard link", id);
  if (r == -ESTALE || r == -ELOOP || r == -ENOENT)
    return fail(r, code, msg, msglen,
                "artifact %s changed or disappeared since it was listed; list again", id);
  if (r == -EINVAL)
    return fail(r, code, msg, msglen, "offset %" PRIu64 " is past the end (%" PRIu64 " bytes)",
                off, size);
  if (r < 0) return fail(r, code, msg, msglen, "reading artifact %s: %s", id, strerror(-r));
  char *b64 = base64(data, len);
  free(data);
  if (!b64) return fail(-ENOMEM, code, msg, msglen, "out of memory");
  json_t *o = json_pack("{s:s, s:I, s:s, s:I, s:I, s:b, s:s}", "id", id, "size",
                        (json_int_t)size, "sha256", sha, "offset", (json_int_t)off,
                        "length", (json_int_t)len, "eof", off + len >= size, "data_base64",
                        b64);
  free(b64);
  if (!o) return fail(-ENOMEM, code, msg, msglen, "out of memory");
  *result = o;
  return 0;
}

int pd_catalog_call(pd_catalog *c, const char *method, json_t *params, json_t **result,
                    const char **code, char *msg, size_t msglen) {
  *result = NULL;
  if (params && !json_is_object(params))
    return fail(-EINVAL, code, msg, msglen, "params must be an object");
  if (strcmp(method, "artifacts.list") == 0) {
    int64_t since;
    int r = pd_catalog_list_params(params, &since, code, msg, msglen);
    if (r < 0) return r;
    return pd_catalog_list_result(c, since, pd_catalog_refresh(c), result, code, msg, msglen);
  }
  if (strcmp(method, "artifacts.fetch") == 0) {
    pd_catalog_read_job *j;
    int r = pd_catalog_fetch_begin(c, params, &j, code, msg, msglen);
    if (r < 0) return r;
    pd_catalog_read_work(j);
    pd_catalog_read_keep(c, j);
    return pd_catalog_fetch_end(j, result, code, msg, msglen);
  }
  return fail(-ENOSYS, code, msg, msglen, "unknown method %s", method);
}

