/*
 * ptp_shim.h - the interposers' frames, kept out of the program's stacks.
 *
 * The library interposes libc entry points the sampler must follow
 * (pthread_create, the exec family, dlopen, close and dup, the signal
 * calls). On the program's own calls those functions sit between the
 * program and libc, and ptp_thread_trampoline sits between libc's
 * start_thread and every thread's start routine. Unprofiled, none of those
 * frames exist; in a profile they are the profiler showing (every pool
 * thread's flame graph rooted at ptp_thread_trampoline). So each such
 * function is placed in one text section, PTP_SHIM_SECTION, and the
 * consumer drops a frame whose PC lies in it from a sample's stack unless
 * it is the leaf (ptp_shim_strip): the caller chain then reads as it would
 * without us (start_thread -> worker, or the program's call -> libc's
 * close). A sample whose leaf is in a shim function keeps it: that CPU ran
 * there, and a leaf is never replaced by a guess. Nothing else is dropped:
 * only code in the section, which holds no program code.
 *
 * What goes in the section (PTP_SHIM): a function whose frame is on a
 * program's call path while it calls the real function, i.e. the
 * interposers and the helpers that call libc for them. Code that does the
 * profiler's own work runs inside an own-work section instead and is never
 * sampled at all (signal/ptp_own_work.h).
 *
 * The bounds are the linker's __start_/__stop_ symbols of the section
 * (ptp_textsec.h).
 *
 * Signal-safety: ptp_shim_strip reads two link-time constants and writes
 * only the array it is given; it runs on the consumer side (drain), never
 * in the handler, but would be safe there.
 */
#ifndef PTP_SHIM_H
#define PTP_SHIM_H

#include <stdint.h>

#include "prof/runtime/ptp_textsec.h"

#define PTP_SHIM_SECTION "ptp_shim_text"
/* noinline: a shim function inlined into a caller outside the section would
 * leave its frame (the caller's) in stacks; one inlined into another shim
 * function stays inside the section either way. */
#define PTP_SHIM __attribute__((section(PTP_SHIM_SECTION), noinline))

PTP_TEXTSEC_BOUNDS(ptp_shim_text);

/* Nonzero when pc is a return address into a shim function. */
static inline int ptp_shim_has(uintptr_t pc) {
  return ptp_textsec_has_ra(pc, __start_ptp_shim_text, __stop_ptp_shim_text);
}

/* Removes from frames[1..n) (frames[0] is the leaf, kept) every return
 * address into a shim function, keeping the others' order. Returns the new
 * count (>= 1 when n >= 1). */
static inline uint16_t ptp_shim_strip(uintptr_t *frames, uint16_t n) {
  uint16_t out = n > 0 ? 1 : 0;
  for (uint16_t i = 1; i < n; i++)
    if (!ptp_shim_has(frames[i])) frames[out++] = frames[i];
  return out;
}

#endif
