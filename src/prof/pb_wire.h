/*
 * pb_wire.h - a small protobuf wire-format encoder (sans-I/O), shared by the
 * pprof writer and the task console.
 *
 * A pb_buf is a growable byte buffer. Nested messages are written in place:
 * pb_begin() reserves room for the length, pb_end() patches it (and moves the
 * body when the length needed fewer bytes than reserved). Errors are sticky:
 * after an allocation failure or a size-cap overrun every call is a no-op and
 * pb_buf.err holds the negative errno (-ENOMEM, -E2BIG); check it once at the
 * end. Not thread-safe; one buffer per thread. Never call from a signal
 * handler (it allocates).
 */
#ifndef PB_WIRE_H
#define PB_WIRE_H

#include <stddef.h>
#include <stdint.h>

typedef struct pb_buf {
  uint8_t *data;
  size_t len;
  size_t cap;
  size_t max;   /* hard cap on len; 0 = unlimited */
  int err;      /* 0 or negative errno, sticky */
} pb_buf;

/* Opaque position of an open nested message. */
typedef size_t pb_mark;

void pb_buf_init(pb_buf *b, size_t max);
void pb_buf_free(pb_buf *b);
void pb_buf_reset(pb_buf *b);                 /* len = 0, err = 0, keeps memory */
/* Hands the bytes to the caller (free() them); the buffer is left empty. */
uint8_t *pb_buf_take(pb_buf *b, size_t *len);

void pb_raw(pb_buf *b, const void *p, size_t n);
void pb_varint_raw(pb_buf *b, uint64_t v);
size_t pb_varint_size(uint64_t v);

/* Field writers. They always write (proto2-style); callers skip defaults. */
void pb_tag(pb_buf *b, uint32_t field, uint32_t wiretype);
void pb_uint64(pb_buf *b, uint32_t field, uint64_t v);          /* varint */
void pb_int64(pb_buf *b, uint32_t field, int64_t v);            /* varint, two's complement */
void pb_sint64(pb_buf *b, uint32_t field, int64_t v);           /* zigzag */
void pb_bool(pb_buf *b, uint32_t field, int v);
void pb_fixed64(pb_buf *b, uint32_t field, uint64_t v);
void pb_double(pb_buf *b, uint32_t field, double v);
void pb_bytes(pb_buf *b, uint32_t field, const void *p, size_t n);
void pb_string(pb_buf *b, uint32_t field, const char *s);       /* NULL = "" */
/* Packed repeated varints. */
void pb_packed_uint64(pb_buf *b, uint32_t field, const uint64_t *v, size_t n);

/* Nested message: mark = pb_begin(b, field); ...; pb_end(b, mark).
 * An empty nested message is written as tag + length 0. */
pb_mark pb_begin(pb_buf *b, uint32_t field);
void pb_end(pb_buf *b, pb_mark m);

static inline uint64_t pb_zigzag64(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

#endif
