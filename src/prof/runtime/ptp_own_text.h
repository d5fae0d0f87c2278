/*
 * ptp_own_text.h - the edges of the profiler's own work, kept out of the
 * program's samples.
 *
 * The profiler's work on a program's thread (a dump, a status read, a
 * label push, a host's own section) runs under the thread's own-work mark
 * (signal/ptp_own_work.h): the handler counts an expiration taken there as
 * the profiler's own and records no sample. But the mark is set by code:
 * the entry point's prologue, the calls that lead to the store that sets
 * it, and after the store that clears it, the epilogues and returns, run
 * unmarked. Each is a few instructions, yet a program that calls the API
 * often (a status poll, labels around every task) spends real time there,
 * and a sample taken in it showed the profiler by name in the user's
 * profile (one sample under ptprof_dump's entry, seen in CI; hundreds in a
 * loop of status reads). So every function on that path - the public
 * entry points that do the profiler's work and the section helpers - is
 * placed in one text section, PTP_OWN_TEXT_SECTION, and the consumer
 * counts a sample with any frame in it (the leaf, or a caller's return
 * address) as the profiler's own work (PTP_DROP_OWN_WORK) instead of
 * recording it (ptp_drain_locked). The section holds no program code and
 * nothing the program's own calls pass through on their way elsewhere (the
 * interposers are ptp_shim.h's: there the program's call is the work).
 *
 * The bounds are the linker's __start_/__stop_ symbols of the section
 * (ptp_textsec.h).
 *
 * Signal-safety: ptp_own_text_in reads two link-time constants; it runs on
 * the consumer side (drain), never in the handler, but would be safe there.
 */
#ifndef PTP_OWN_TEXT_H
#define PTP_OWN_TEXT_H

#include <stdint.h>

#include "prof/runtime/ptp_textsec.h"

#define PTP_OWN_TEXT_SECTION "ptp_own_text"
/* noinline: inlined into a caller outside the section, its code would run
 * as the caller's. */
#define PTP_OWN_TEXT __attribute__((section(PTP_OWN_TEXT_SECTION), noinline))

PTP_TEXTSEC_BOUNDS(ptp_own_text);

/* Nonzero when a sample's frames[0..n) pass through the section: the leaf
 * inside it, or a caller's return address into it. */
static inline int ptp_own_text_in(const uintptr_t *frames, uint16_t n) {
  const char *lo = __start_ptp_own_text, *hi = __stop_ptp_own_text;
  if (n > 0 && ptp_textsec_has_pc(frames[0], lo, hi)) return 1;
  for (uint16_t i = 1; i < n; i++)
    if (ptp_textsec_has_ra(frames[i], lo, hi)) return 1;
  return 0;
}

#endif
