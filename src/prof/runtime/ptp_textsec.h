/*
 * ptp_textsec.h - a text section of the library's own, by the linker's
 * bounds: the one rule for "is this frame in it" that ptp_shim.h (the
 * interposers, left out of stacks) and ptp_own_text.h (the edges of the
 * profiler's work, whose samples are its own) share.
 *
 * A section whose name is a C identifier gets __start_<name> and
 * __stop_<name> from the linker, in whichever module holds the library
 * (the executable it is linked into, or libptprof.so). Declared hidden
 * (readelf lists them in libptprof.so's dynamic symbols, but STV_HIDDEN:
 * never bound by the loader, so a preloaded program's symbol scope gains
 * nothing) and weak (a link without any function in the section has an
 * empty range, lo == 0).
 *
 * Signal-safety: pure comparisons of link-time constants.
 */
#ifndef PTP_TEXTSEC_H
#define PTP_TEXTSEC_H

#include <stdint.h>

#define PTP_TEXTSEC_BOUNDS(name)                                                   \
  extern const char __start_##name[] __attribute__((weak, visibility("hidden"))); \
  extern const char __stop_##name[] __attribute__((weak, visibility("hidden")))

/* Whether pc, an instruction's address (a sample's leaf), lies in [lo, hi). */
static inline int ptp_textsec_has_pc(uintptr_t pc, const char *lo, const char *hi) {
  return lo != 0 && pc >= (uintptr_t)lo && pc < (uintptr_t)hi;
}

/* Whether ra, a return address (a caller's frame), is into [lo, hi): it
 * can equal the end (a call as a function's last instruction) and never
 * the start. */
static inline int ptp_textsec_has_ra(uintptr_t ra, const char *lo, const char *hi) {
  return lo != 0 && ra > (uintptr_t)lo && ra <= (uintptr_t)hi;
}

#endif
