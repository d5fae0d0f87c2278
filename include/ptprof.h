/*
 * ptprof.h - CPU sampler writing gzip-compressed pprof interval snapshots.
 *
 * DRAFT CONTRACT (owned by the sampler work; see docs/profiling.md).
 * A usable-by-any-C-program library: opaque handle, _new/_del pair, functions
 * return 0 or a negative error code (ptprof_strerror names it).
 */
#ifndef PTPROF_H
#define PTPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#ifdef __cplusplus
}
#endif
#endif

typedef struct ptprof ptprof;

#ifdef __cplusplus
}
#endif
#endif
