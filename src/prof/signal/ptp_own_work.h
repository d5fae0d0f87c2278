/*
 * ptp_own_work.h - the calling thread's "inside profiler work" mark.
 *
 * Why: the profiler does its own work on whatever thread asks for it: a
 * dump (cut, symbolization, encode, snapshot write, debug-file copies) on
 * the thread that calls ptprof_dump or ptprof_stop (the daemon's libuv
 * worker, an atexit handler), unwind-table builds on the thread that calls
 * dlopen (the interposer builds the new object's table before dlopen
 * returns), the thread sweep on the thread that calls ptprof_start. Those
 * threads are sampled; without the mark their expirations became samples
 * under ptprof_dump -> ... -> inflate in the user's profile. With it, the
 * SIGPROF handler counts an expiration taken while the mark is set as the
 * profiler's own (PTP_DROP_OWN_WORK) and records no sample; the snapshot's
 * comments give that CPU (docs/sampler.md, "The profiler's own work").
 *
 * Where it lives: a counter in initial-exec TLS (an %fs-relative address,
 * no __tls_get_addr, no allocation), like the label block
 * (ptp_label_set.h). Its only writer is the thread itself (enter/leave),
 * its only other reader the SIGPROF handler running on that same thread,
 * so relaxed atomics ordered by signal fences suffice: the handler sees
 * either the value before or after a store, never a torn one.
 *
 * Nesting: enter/leave pairs nest (a dump's symbolizer may dlopen, whose
 * interposer marks its table build too); the mark is set while the depth
 * is > 0. A leave without an enter is ignored.
 *
 * Kernel time: under the perf engine with exclude_kernel a period that ends
 * while the thread is in the kernel sends no signal, so the handler never
 * sees it; the runtime's section wrapper (ptp_threads_own_begin/_end)
 * counts those of a marked section from the thread's CPU clock and the
 * handler's hits, so they are not reported as the program's
 * "[lost: kernel mode]".
 *
 * SIGNAL-SAFETY: ptp_own_work_active is async-signal-safe (one atomic load
 * of initial-exec TLS). enter/leave are meant for ordinary thread context
 * and touch only the calling thread's counter.
 */
#ifndef PTP_OWN_WORK_H
#define PTP_OWN_WORK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct ptp_own_work_tls {
  _Atomic uint32_t depth;     /* nesting of enter/leave; > 0: the mark is set */
  _Atomic uint64_t hits;      /* expirations the handler counted as own work
                                 on this thread (runtime/ptp_threads.c's
                                 section accounting reads it) */
} ptp_own_work_tls;

/* Defined in ptp_own_work.c. */
extern __thread ptp_own_work_tls ptp_t_own_work __attribute__((tls_model("initial-exec")));

/* The calling thread starts profiler work (nestable). Returns the depth
 * now: 1 for the outermost. */
static inline uint32_t ptp_own_work_enter(void) {
  uint32_t d = atomic_load_explicit(&ptp_t_own_work.depth, memory_order_relaxed) + 1;
  atomic_store_explicit(&ptp_t_own_work.depth, d, memory_order_relaxed);
  /* the work below is not moved before the mark, as a handler sees it */
  atomic_signal_fence(memory_order_seq_cst);
  return d;
}

/* The calling thread ends the innermost profiler work. */
static inline void ptp_own_work_leave(void) {
  atomic_signal_fence(memory_order_seq_cst);
  uint32_t d = atomic_load_explicit(&ptp_t_own_work.depth, memory_order_relaxed);
  if (d) atomic_store_explicit(&ptp_t_own_work.depth, d - 1, memory_order_relaxed);
}

/* Nonzero while the calling thread is inside profiler work. The handler's
 * check (async-signal-safe). */
static inline int ptp_own_work_active(void) {
  return atomic_load_explicit(&ptp_t_own_work.depth, memory_order_relaxed) != 0;
}

/* The handler counts weight expirations as this thread's own work
 * (async-signal-safe; the thread reads the sum with ptp_own_work_hits). */
static inline void ptp_own_work_hit(uint32_t weight) {
  uint64_t h = atomic_load_explicit(&ptp_t_own_work.hits, memory_order_relaxed);
  atomic_store_explicit(&ptp_t_own_work.hits, h + weight, memory_order_relaxed);
}

/* Own-work expirations of the calling thread so far. */
static inline uint64_t ptp_own_work_hits(void) {
  return atomic_load_explicit(&ptp_t_own_work.hits, memory_order_relaxed);
}

#endif
