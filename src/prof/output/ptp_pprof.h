/*
 * ptp_pprof.h - encodes one interval snapshot (ptp_window) as a gzip-
 * compressed pprof profile (the profile.proto format described in
 * docs/pprof-format.md and proto/profile.proto).
 *
 * What is written: sample types [samples/count, cpu/nanoseconds], period
 * type cpu/nanoseconds, period = w->period_ns, values [n, n * period],
 * labels thread_name (string; omitted when the name is unknown/empty) and
 * thread_id (number), then each sample's resolved labels (ptp_sample.labels:
 * task number, task_kind, task_loc, user labels), time_nanos/duration_nanos from the window, mappings
 * (main executable first, ids 1..n; then, for addresses in no object, a
 * "[jit]" mapping per JIT code range and a mapping of an object's file per
 * range of its remapped code: ptp_symbolize.h, "JIT code"), locations
 * deduplicated by address (leaf
 * = interrupted PC as is, callers = return address - 1), functions
 * deduplicated by (name, system_name, file, start_line), a "[truncated]"
 * root frame for PTP_SAMPLE_TRUNCATED samples, one "[lost: <cause>]"
 * pseudo-frame (no address) per cause for PTP_SAMPLE_LOST samples (CPU
 * whose stack is unknown, ptp_lost_frame_name), and comments: the window
 * bounds, the sampler rate, the drop counts by cause, the blind window
 * before this one and the profiler's own work (both counted only, never
 * samples), symbolization (and, when the window has addresses in no object, where
 * JIT names came from: "jit code: ..."), then the window's own comment
 * lines.
 *
 * Threads: reentrant for distinct symbolizers; the symbolizer is used
 * without locking (the caller serializes). Allocates freely: never call from
 * a signal handler.
 */
#ifndef PTP_PPROF_H
#define PTP_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "prof/symbols/ptp_symbolize.h"
#include "prof/output/ptp_window.h"

/* Upper bound of the uncompressed profile; beyond it encoding fails with
 * -E2BIG rather than eating memory. */
#define PTP_PPROF_MAX_BYTES ((size_t)512 << 20)

/* Symbolizes and encodes one window as a gzip-compressed pprof profile.
 * s may be NULL: then no mappings are written and locations carry only
 * their address. s is refreshed first (cheap when no object was loaded or
 * unloaded). *out is malloc'd (caller frees), *outlen its size.
 * Returns 0 or a negative errno: -EINVAL (NULL w/out/outlen, a sample with
 * no frames or count 0, period_ns <= 0), -ENOMEM, -E2BIG, -EIO (zlib). */
int ptp_pprof_encode(const ptp_window *w, ptp_symbolizer *s, uint8_t **out, size_t *outlen);

/* The same, without gzip: the raw protobuf bytes (tests, debugging). */
int ptp_pprof_encode_raw(const ptp_window *w, ptp_symbolizer *s, uint8_t **out, size_t *outlen);

/* Name of a drop cause as used in the comments ("ring_full", ...); "?" if
 * out of range. */
const char *ptp_pprof_drop_name(int cause);

#endif
