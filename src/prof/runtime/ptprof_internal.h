/*
 * ptprof_internal.h - seams of the sampler for tests and benchmarks (not
 * part of the public API).
 */
#ifndef PTPROF_INTERNAL_H
#define PTPROF_INTERNAL_H

#include "ptprof.h"
#include "prof/output/ptp_window.h"

/* Called during every dump of p, in the blind period, with the closed window
 * just before it is encoded (on the dumping thread, api_mu held). The window
 * and its arrays are valid only during the call. fn NULL removes the hook.
 * Call while p is not started. */
typedef void (*ptp_window_hook_fn)(const ptp_window *w, void *ctx);
void ptp_set_window_hook(ptprof *p, ptp_window_hook_fn fn, void *ctx);

/* Called at the end of every dump of p, after sampling resumed, where the
 * dump's debug-file copies are made (on the dumping thread, api_mu held):
 * work there is the profiler's own, with sampling on. fn NULL removes it.
 * Call while p is not started. */
typedef void (*ptp_resume_hook_fn)(void *ctx);
void ptp_set_resume_hook(ptprof *p, ptp_resume_hook_fn fn, void *ctx);

/* Signals (not expirations) recorded since ptprof_new: samples minus this is
 * how many expirations the kernel merged (si_overrun). */
uint64_t ptp_signals_recorded(const ptprof *p);

#endif
