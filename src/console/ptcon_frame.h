/*
 * ptcon_frame.h - one encoded gRPC message (the 5-byte length prefix and
 * the protobuf bytes), reference-counted so that several streams can queue
 * the same bytes: the initial state of WatchUpdates is encoded once and
 * shared by every stream that starts while it is current
 * (ptcon_initstate.h). A frame is never changed after ptcon_frame_new.
 *
 * Threads: one (the gRPC layer's); the count is not atomic.
 */
#ifndef PTCON_FRAME_H
#define PTCON_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct ptcon_frame {
  uint32_t refs;
  size_t len;          /* 5 + message length */
  uint8_t data[];
} ptcon_frame;

/* A new frame holding msg (len bytes, copied; msg may be NULL when len is
 * 0) behind its gRPC prefix, with one reference. NULL when out of memory. */
static inline ptcon_frame *ptcon_frame_new(const uint8_t *msg, size_t len) {
  ptcon_frame *f = malloc(sizeof *f + len + 5);
  if (!f) return NULL;
  f->refs = 1;
  f->len = len + 5;
  f->data[0] = 0;   /* not compressed */
  f->data[1] = (uint8_t)(len >> 24);
  f->data[2] = (uint8_t)(len >> 16);
  f->data[3] = (uint8_t)(len >> 8);
  f->data[4] = (uint8_t)len;
  if (len) memcpy(f->data + 5, msg, len);
  return f;
}

static inline ptcon_frame *ptcon_frame_ref(ptcon_frame *f) {
  f->refs++;
  return f;
}

/* Drops one reference; the last one frees the frame. NULL ok. */
static inline void ptcon_frame_unref(ptcon_frame *f) {
  if (f && --f->refs == 0) free(f);
}

#endif
