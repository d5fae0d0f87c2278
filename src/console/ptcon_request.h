/*
 * ptcon_request.h - decoding of incoming gRPC requests of the Instrument service:
 * the method path, the 5-byte gRPC message prefix and the protobuf body.
 * Pure functions over untrusted bytes (fuzzed by tests/console/fuzz_request.c);
 * any thread.
 */
#ifndef PTCON_REQUEST_H
#define PTCON_REQUEST_H

#include <stddef.h>
#include <stdint.h>

/* Requests larger than this are refused (RESOURCE_EXHAUSTED): every request
 * of the service is a few bytes. */
#define PTCON_MAX_REQUEST_BYTES 4096u

typedef enum ptcon_method {
  PTCON_M_UNKNOWN = 0,
  PTCON_M_WATCH_UPDATES,
  PTCON_M_WATCH_TASK_DETAILS,
  PTCON_M_WATCH_STATE,
  PTCON_M_PAUSE,
  PTCON_M_RESUME,
} ptcon_method;

/* gRPC status codes we send. */
enum {
  PTCON_GRPC_OK = 0,
  PTCON_GRPC_INVALID_ARGUMENT = 3,
  PTCON_GRPC_NOT_FOUND = 5,
  PTCON_GRPC_RESOURCE_EXHAUSTED = 8,
  PTCON_GRPC_UNIMPLEMENTED = 12,
  PTCON_GRPC_INTERNAL = 13,
};

typedef struct ptcon_request {
  ptcon_method method;
  uint64_t task_id;      /* WatchTaskDetails: 0 = missing */
} ptcon_request;

/* Maps a :path to a method (PTCON_M_UNKNOWN for anything else). */
ptcon_method ptcon_method_from_path(const char *path, size_t len);

/* Decodes a complete request body (all DATA of the stream) for `method`:
 * exactly one gRPC message, uncompressed, whose protobuf parses (unknown
 * fields are skipped). Returns a gRPC status: PTCON_GRPC_OK and fills *req,
 * or INVALID_ARGUMENT (malformed framing or protobuf, missing or zero task
 * id), UNIMPLEMENTED (unknown method, compressed message),
 * RESOURCE_EXHAUSTED (larger than PTCON_MAX_REQUEST_BYTES). *why gets a
 * static description for grpc-message. */
int ptcon_request_decode(ptcon_method method, const uint8_t *body, size_t len,
                         ptcon_request *req, const char **why);

/* Walks a protobuf message; returns 0 if well-formed, -EINVAL otherwise.
 * If id_field != 0, *id receives the varint inside the nested message at
 * field id_field (Id{1: id}); last occurrence wins, as protobuf says. */
int ptcon_pb_check(const uint8_t *p, size_t n, uint32_t id_field, uint64_t *id, int depth);

#endif
