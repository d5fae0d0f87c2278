/*
 * ptp_thread_sig.h - what the SIGPROF handler knows of each registered
 * thread, and how it finds it: the lock-free half of the thread registry's
 * records (the other half, written and read under the registry mutex only,
 * is runtime/ptp_threads.h's ptp_thread_rec; record i of one table goes
 * with entry i of the other).
 *
 * Storage: two tables mapped once by the registry (ptp_threads_init) and
 * never freed: PTP_MAX_THREADS entries, and a sparse map of one uint32 per
 * possible tid (index + 1, 0 = none; MAP_NORESERVE, so only the pages of
 * tids in use are ever touched). Their pointers are defined here.
 *
 * PUBLICATION RULE (the one contract between the registry, the engines and
 * the handler; every writer below holds the registry mutex):
 *  1. Tables: ptp_g_thread_sigs is stored before ptp_g_tidmap (release);
 *     whoever loads a non-NULL map with acquire sees the entries.
 *  2. An entry's identity: stack_lo/stack_hi, busy = 0, delivered = 0 and
 *     perf_fd = -1 are written before its tid (release), and the tid before
 *     the map's slot for that tid (release). The handler loads the slot, the
 *     entry's tid (both acquire) and accepts the entry only when that tid is
 *     the one it looked up: it then sees those fields. An entry is freed by
 *     clearing its map slot and its tid (release) before anything of it is
 *     written again.
 *  3. Who removes whom: a live thread's entry is removed (or re-keyed) only
 *     by that thread itself (its exit destructor, its start trampoline) or
 *     by the fork child; a sweep removes only entries of threads that are
 *     gone. The handler always looks up the thread it runs on (or the one a
 *     timer names), so an entry it accepted does not change identity under
 *     it.
 *  4. Perf events: armed_cpu_ns, first_ns, delivered = 0, perf_first = 1
 *     and the event's identity (perf_dev, perf_ino, perf_id) are written
 *     before perf_fd (release); the handler loads perf_fd with acquire and
 *     reads them only when si_fd matches it. An event is
 *     unpublished (perf_fd exchanged for -1) before its fd is closed, and
 *     closed only when no handler can hold it: on the calling thread
 *     itself, for a thread that is gone, or after the handler grace
 *     (runtime/ptp_grace.h).
 *  5. The timer engine's armed_cpu_ns/first_ns are not read by the handler
 *     (its signal carries its own count, si_overrun).
 *  6. perf_fd_prev, block_cpu_ns, blocked_got and unblocking are set to
 *     -1, -1, 0 and 0 with the identity (rule 2); perf_fd_prev takes the
 *     old perf_fd before perf_fd is unpublished.
 * What the handler writes: busy (its own reentrancy flag), delivered (+=
 * weight, relaxed), perf_first (exchanged 1 -> 0 at an event's first
 * signal) and blocked_got (+= weight). Nothing else, and nothing of any
 * other thread.
 *
 * SIGNAL-SAFETY: ptp_thread_sig_lookup is async-signal-safe (atomic loads).
 */
#ifndef PTP_THREAD_SIG_H
#define PTP_THREAD_SIG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PTP_TID_LIMIT   4194304u  /* Linux PID_MAX_LIMIT on 64-bit */
#define PTP_MAX_THREADS 8192u     /* live registered threads at once */

typedef struct ptp_thread_sig {
  _Atomic uint32_t tid;         /* 0 = free entry */
  _Atomic int busy;             /* the handler is inside for this thread */
  uintptr_t stack_lo, stack_hi; /* 0,0 = unknown (a "foreign" thread) */
  _Atomic uint64_t delivered;   /* expirations handled since the event or
                                   timer was armed */
  _Atomic int perf_fd;          /* the thread's perf event, -1 = none: the
                                   handler accepts a perf signal only with
                                   this si_fd */
  _Atomic int perf_first;       /* 1 until the handler set the regular period */
  /* The event's identity (rule 4): the (device, inode) of its file and its
   * kernel id (PERF_EVENT_IOC_ID). perf_fd is a number in the program's
   * descriptor table: before the handler uses it (the ioctl that sets the
   * regular period) it checks that the number still names this event
   * (the program may have closed it and opened something else there). */
  uint64_t perf_dev, perf_ino, perf_id;
  _Atomic int perf_fd_prev;     /* the event before (unpublished or closed): a
                                   signal it left pending is still ours */
  /* SIGPROF kept blocked by the program (ptp_sigstate.h, the mask
   * interposers of runtime/ptp_siginterpose.c; written by the thread
   * itself, or by a dump's accounting with a compare-and-swap): */
  _Atomic int64_t block_cpu_ns; /* the thread's CPU clock when it blocked
                                   SIGPROF (from there on, expirations are
                                   "[lost: signal blocked]"); -1: not blocked
                                   as far as we saw */
  _Atomic uint64_t blocked_got; /* weight the handler took while blocked
                                   (inside sigsuspend and the like, or at the
                                   unblock): counted by the CPU clock instead */
  _Atomic int unblocking;       /* the thread is inside an unblocking call:
                                   a delivery now was pending from the block */
  int64_t armed_cpu_ns;         /* thread CPU time when armed (rule 4) */
  int64_t first_ns;             /* first expiry after arming (rule 4) */
} ptp_thread_sig;

/* PTP_MAX_THREADS entries, and tid -> entry index + 1 (rule 1). Written
 * once by the registry; read through atomic loads. */
extern _Atomic(ptp_thread_sig *) ptp_g_thread_sigs;
extern _Atomic(_Atomic uint32_t *) ptp_g_tidmap;

/* The entry of tid, or NULL (no table yet, unknown tid, or an entry being
 * reused). Async-signal-safe. */
static inline ptp_thread_sig *ptp_thread_sig_lookup(uint32_t tid) {
  _Atomic uint32_t *map = atomic_load_explicit(&ptp_g_tidmap, memory_order_acquire);
  if (!map || tid >= PTP_TID_LIMIT) return NULL;
  uint32_t i = atomic_load_explicit(&map[tid], memory_order_acquire);
  if (i == 0 || i > PTP_MAX_THREADS) return NULL;
  ptp_thread_sig *s = &atomic_load_explicit(&ptp_g_thread_sigs, memory_order_relaxed)[i - 1];
  if (atomic_load_explicit(&s->tid, memory_order_acquire) != tid) return NULL;
  return s;
}

#endif
