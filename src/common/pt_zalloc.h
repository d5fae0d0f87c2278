/*
 * pt_zalloc.h - zlib's allocator hooks through pt_alloc, so the
 * allocation-failure tests (tests/common/test_alloc_fail.c) reach zlib's
 * own allocations in pt_gzip and pt_gunzip: z.zalloc = pt_zalloc,
 * z.zfree = pt_zfree. Header-only; threads: any.
 */
#ifndef PT_ZALLOC_H
#define PT_ZALLOC_H

#include <stdlib.h>
#include <zlib.h>

#include "common/pt_alloc.h"

static inline voidpf pt_zalloc(voidpf opaque, uInt items, uInt size) {
  (void)opaque;
  return pt_calloc(items, size);
}

static inline void pt_zfree(voidpf opaque, voidpf p) {
  (void)opaque;
  free(p);
}

#endif
