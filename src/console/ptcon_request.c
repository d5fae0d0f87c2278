/* ptcon_request.c - see ptcon_request.h. Every read is bounds-checked against n. */
#include "console/ptcon_request.h"

#include <errno.h>
#include <string.h>

#define SVC "/rs.tokio.console.instrument.Instrument/"

ptcon_method ptcon_method_from_path(const char *path, size_t len) {
  static const struct { const char *name; ptcon_method m; } tab[] = {
    {"WatchUpdates", PTCON_M_WATCH_UPDATES},
    {"WatchTaskDetails", PTCON_M_WATCH_TASK_DETAILS},
    {"WatchState", PTCON_M_WATCH_STATE},
    {"Pause", PTCON_M_PAUSE},
    {"Resume", PTCON_M_RESUME},
  };
  size_t sl = sizeof SVC - 1;
  if (!path || len <= sl || memcmp(path, SVC, sl) != 0) return PTCON_M_UNKNOWN;
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
    size_t nl = strlen(tab[i].name);
    if (len - sl == nl && memcmp(path + sl, tab[i].name, nl) == 0) return tab[i].m;
  }
  return PTCON_M_UNKNOWN;
}

static int rd_varint(const uint8_t *p, size_t n, size_t *off, uint64_t *v) {
  uint64_t r = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*off >= n) return -EINVAL;
    uint8_t c = p[(*off)++];
    if (shift == 63 && c > 1) return -EINVAL;   /* more than 64 bits */
    r |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) {
      *v = r;
      return 0;
    }
  }
  return -EINVAL;
}

int ptcon_pb_check(const uint8_t *p, size_t n, uint32_t id_field, uint64_t *id, int depth) {
  size_t off = 0;
  if (depth > 8) return -EINVAL;
  while (off < n) {
    uint64_t key, v;
    if (rd_varint(p, n, &off, &key)) return -EINVAL;
    uint64_t field = key >> 3;
    unsigned wt = (unsigned)(key & 7);
    if (field == 0 || field > 536870911u) return -EINVAL;
    switch (wt) {
    case 0:
      if (rd_varint(p, n, &off, &v)) return -EINVAL;
      if (id_field && field == id_field) return -EINVAL;  /* Id must be a message */
      break;
    case 1:
      if (n - off < 8) return -EINVAL;
      off += 8;
      break;
    case 5:
      if (n - off < 4) return -EINVAL;
      off += 4;
      break;
    case 2:
      if (rd_varint(p, n, &off, &v)) return -EINVAL;
      if (v > n - off) return -EINVAL;
      if (id_field && field == id_field) {
        /* Id { uint64 id = 1; } */
        size_t o2 = off, end = off + (size_t)v;
        uint64_t got = 0;
        while (o2 < end) {
          uint64_t k2, v2;
          if (rd_varint(p, end, &o2, &k2)) return -EINVAL;
          if ((k2 >> 3) == 0) return -EINVAL;
          switch (k2 & 7) {
          case 0:
            if (rd_varint(p, end, &o2, &v2)) return -EINVAL;
            if ((k2 >> 3) == 1) got = v2;
            break;
          case 1: if (end - o2 < 8) return -EINVAL; o2 += 8; break;
          case 5: if (end - o2 < 4) return -EINVAL; o2 += 4; break;
          case 2:
            if (rd_varint(p, end, &o2, &v2) || v2 > end - o2) return -EINVAL;
            o2 += (size_t)v2;
            break;
          default: return -EINVAL;
          }
        }
        if (id) *id = got;
      }
      off += (size_t)v;
      break;
    default:   /* groups (3, 4) are not proto3; 6, 7 do not exist */
      return -EINVAL;
    }
  }
  return 0;
}

int ptcon_request_decode(ptcon_method method, const uint8_t *body, size_t len,
                         ptcon_request *req, const char **why) {
  static const char *dummy;
  if (!why) why = &dummy;
  memset(req, 0, sizeof *req);
  req->method = method;
  if (method == PTCON_M_UNKNOWN) {
    *why = "unknown method";
    return PTCON_GRPC_UNIMPLEMENTED;
  }
  if (len > PTCON_MAX_REQUEST_BYTES) {
    *why = "request too large";
    return PTCON_GRPC_RESOURCE_EXHAUSTED;
  }
  if (len < 5) {
    *why = "missing gRPC message";
    return PTCON_GRPC_INVALID_ARGUMENT;
  }
  if (body[0] > 1) {
    *why = "bad gRPC message flag";
    return PTCON_GRPC_INVALID_ARGUMENT;
  }
  if (body[0] == 1) {
    *why = "compression is not supported";
    return PTCON_GRPC_UNIMPLEMENTED;
  }
  uint32_t mlen = (uint32_t)body[1] << 24 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 8 | body[4];
  if ((size_t)mlen != len - 5) {
    *why = "gRPC message length does not match the request body";
    return PTCON_GRPC_INVALID_ARGUMENT;
  }
  uint64_t id = 0;
  int want_id = method == PTCON_M_WATCH_TASK_DETAILS;
  if (ptcon_pb_check(body + 5, mlen, want_id ? 1 : 0, &id, 0)) {
    *why = "malformed protobuf request";
    return PTCON_GRPC_INVALID_ARGUMENT;
  }
  if (want_id && id == 0) {
    *why = "task id is missing or 0";
    return PTCON_GRPC_INVALID_ARGUMENT;
  }
  req->task_id = id;
  *why = "";
  return PTCON_GRPC_OK;
}
