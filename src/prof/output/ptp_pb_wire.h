/*
 * ptp_pb_wire.h - a small protobuf wire-format encoder (sans-I/O), shared by the
 * pprof writer and the task console.
 *
 * A ptp_pb_buf is a growable byte buffer. Nested messages are written in place:
 * ptp_pb_begin() reserves room for the length, ptp_pb_end() patches it (and moves the
 * body when the length needed fewer bytes than reserved). Errors are sticky:
 * after an allocation failure or a size-cap overrun every call is a no-op and
 * ptp_pb_buf.err holds the negative errno (-ENOMEM, -E2BIG); check it once at the
 * end. Not thread-safe; one buffer per thread. Never call from a signal
 * handler (it allocates).
 */
#ifndef PB_WIRE_H
#define PB_WIRE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ptp_pb_buf {
  uint8_t *data;
  size_t len;
  size_t cap;
  size_t max;   /* hard cap on len; 0 = unlimited */
  int err;      /* 0 or negative errno, sticky */
} ptp_pb_buf;

/* Opaque position of an open nested message. */
typedef size_t ptp_pb_mark;

void ptp_pb_buf_init(ptp_pb_buf *b, size_t max);
void ptp_pb_buf_free(ptp_pb_buf *b);
void ptp_pb_buf_reset(ptp_pb_buf *b);                 /* len = 0, err = 0, keeps memory */
/* Hands the bytes to the caller (free() them); the buffer is left empty. */
uint8_t *ptp_pb_buf_take(ptp_pb_buf *b, size_t *len);

void ptp_pb_raw(ptp_pb_buf *b, const void *p, size_t n);
void ptp_pb_varint_raw(ptp_pb_buf *b, uint64_t v);
size_t ptp_pb_varint_size(uint64_t v);

/* Field writers. They always write (proto2-style); callers skip defaults. */
void ptp_pb_tag(ptp_pb_buf *b, uint32_t field, uint32_t wiretype);
void ptp_pb_uint64(ptp_pb_buf *b, uint32_t field, uint64_t v);          /* varint */
void ptp_pb_int64(ptp_pb_buf *b, uint32_t field, int64_t v);            /* varint, two's complement */
void ptp_pb_sint64(ptp_pb_buf *b, uint32_t field, int64_t v);           /* zigzag */
void ptp_pb_bool(ptp_pb_buf *b, uint32_t field, int v);
void ptp_pb_fixed64(ptp_pb_buf *b, uint32_t field, uint64_t v);
void ptp_pb_double(ptp_pb_buf *b, uint32_t field, double v);
void ptp_pb_bytes(ptp_pb_buf *b, uint32_t field, const void *p, size_t n);
void ptp_pb_string(ptp_pb_buf *b, uint32_t field, const char *s);       /* NULL = "" */
/* Packed repeated varints. */
void ptp_pb_packed_uint64(ptp_pb_buf *b, uint32_t field, const uint64_t *v, size_t n);

/* Nested message: mark = ptp_pb_begin(b, field); ...; ptp_pb_end(b, mark).
 * An empty nested message is written as tag + length 0. */
ptp_pb_mark ptp_pb_begin(ptp_pb_buf *b, uint32_t field);
void ptp_pb_end(ptp_pb_buf *b, ptp_pb_mark m);

static inline uint64_t ptp_pb_zigzag64(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

#endif
