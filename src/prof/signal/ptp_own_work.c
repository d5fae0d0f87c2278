/*
 * ptp_own_work.c - the per-thread "inside profiler work" mark the handler
 * reads (see ptp_own_work.h). Its writers are the thread's own profiler
 * calls: runtime/ptprof.c (API entry points, the consumer thread) and
 * runtime/ptp_interpose.c (the dlopen interposer's table build).
 *
 * ASYNC-SIGNAL-SAFE FILE: data only.
 */
#include "prof/signal/ptp_own_work.h"

__thread ptp_own_work_tls ptp_t_own_work __attribute__((tls_model("initial-exec")));
