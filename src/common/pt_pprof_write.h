/*
 * pt_pprof_write.h - a sans-I/O pprof encoder: a pt_pprof (the struct of
 * pt_pprof_read.h) into the protobuf bytes of one Profile message
 * (proto/profile.proto, /work/shared/specs/pprof.md), not gzip'd
 * (pt_gzip.h compresses them into a `.pb.gz`).
 *
 * The library's own encoder (src/prof/output) exists only in profiling
 * builds and encodes the sampler's window; this one encodes any profile,
 * in every build: `polytoken profile merge` writes its result with it, and
 * the daemon's catalog builds its merged artifact with it.
 *
 *   uint8_t *pb; size_t n;
 *   r = pt_pprof_write(p, &pb, &n, err, sizeof err);
 *   ... pt_gzip(pb, n, &gz, &gzlen) ...; free(pb);
 *
 * What is written: every field of the struct, in the struct's order;
 * references become the referenced entity's `id` (a sample's location
 * index i is written as locations[i].id, and so on); fields equal to 0
 * (or false, or the empty value type) are left out, as proto3 does.
 * Repeated numbers (a sample's location ids and values, the comments) are
 * packed. So pt_pprof_read of the output gives back a struct equal to p,
 * field for field and index for index (tests/common/test_pprof_write.c;
 * the reader's fuzz target checks it on every profile it reads).
 *
 * What is checked first (-EINVAL with err saying where, and nothing
 * written), so that the output is always a profile pt_pprof_read and
 * `go tool pprof` accept: at least one sample type and one string,
 * strings[0] is "", every string index and every reference is in range, a
 * Line has a function, ids of mappings, locations and functions are
 * non-zero and unique within their kind. Not checked, as in the reader:
 * label contents, mapping ranges, times.
 *
 * Memory: *out is allocated through pt_alloc.h (free with free()); the
 * size is computed exactly before the one allocation. p is BORROWED and
 * not modified. Threads: reentrant, no shared state.
 */
#ifndef PT_PPROF_WRITE_H
#define PT_PPROF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "common/pt_pprof_read.h"

/* Encodes p (see top). Returns 0 with *out (never NULL on success) of
 * *outlen bytes, or
 *   -EINVAL  p is not a valid profile (err says what)
 *   -EFBIG   the encoding would be over PT_PPROF_MAX_INPUT bytes (what the
 *            reader accepts)
 *   -ENOMEM
 * with *out NULL and *outlen 0. err/errlen may be NULL/0. */
int pt_pprof_write(const pt_pprof *p, uint8_t **out, size_t *outlen, char *err, size_t errlen);

#endif
