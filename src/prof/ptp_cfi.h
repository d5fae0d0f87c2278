/*
 * ptp_cfi.h - the walker's unwind tables, built outside the signal handler
 * from each loaded object's .eh_frame (read from memory through
 * PT_GNU_EH_FRAME, so the vDSO works too and no file is opened), and
 * published to the handler.
 *
 * Which objects get tables ("CFI objects"): every loaded object except the
 * main program and the object that holds libptprof (both built with frame
 * pointers), and except non-glibc objects without .eh_frame_hdr (nothing to
 * build from; walked with frame pointers). The system objects (glibc's
 * libraries, ld.so, libgcc_s, the vDSO; ptp_cfi_is_system_name) get their
 * table when the set is built. Every other CFI object gets a slot only; its
 * table is built on demand: the walker marks the slot PTP_LIB_WANTED when it
 * meets one of its PCs, and the next ptp_cfi_refresh (the consumer thread
 * calls it at every pass, at least every 100 ms) builds it. The lazy tables
 * of one set together stay below a cap (PTP_CFI_LAZY_CAP): an object whose
 * table would exceed it is marked PTP_LIB_FAILED and its samples stay
 * truncated (counted in the profile's truncated samples).
 *
 * Publication: one process-wide current set (ptp_g_cfi, see ptp_handler.h),
 * replaced atomically when objects are loaded or unloaded (dlpi_adds /
 * dlpi_subs). Lazy tables are stored into the current set's slots with a
 * release store and owned by that set. A replaced set (with all its tables)
 * is retired and freed only after the handler-inside counter (ptp_g_inside)
 * has been seen at zero after the replacement, so a handler never reads
 * freed tables. Lazy tables are not carried into a new set (an object at the
 * same address may be another one); they are rebuilt on demand.
 *
 * Threads: every function here takes an internal mutex; none may be called
 * from a signal handler (they allocate and call dl_iterate_phdr).
 */
#ifndef PTP_CFI_H
#define PTP_CFI_H

#include "prof/ptp_unwind.h"

/* Cap on the memory of the lazily built tables of one set (24-byte rows:
 * ~1.4 million rows). Past it an object's slot becomes PTP_LIB_FAILED. */
#define PTP_CFI_LAZY_CAP ((size_t)32 << 20)

/* Makes sure the published set matches the loaded objects: cheap (one
 * dl_iterate_phdr step) when nothing was loaded or unloaded since the last
 * call (dlpi_adds/dlpi_subs), else rebuilds and publishes. Then builds the
 * tables of objects the walker marked wanted, and frees retired sets whose
 * grace period is over. Returns 0 or -ENOMEM (the previous set stays). */
int ptp_cfi_refresh(void);

/* Builds a fresh set for the process as it is now (not published; system
 * tables built, the others' slots empty). Caller owns it (ptp_cfi_free).
 * Returns 0 or -ENOMEM. */
int ptp_cfi_build(ptp_cfi_set **out);
void ptp_cfi_free(ptp_cfi_set *set);

/* Nonzero if the object path (as dl_iterate_phdr names it) is a glibc,
 * ld.so, libgcc_s or vDSO object (tables built eagerly, never walked with
 * frame pointers). */
int ptp_cfi_is_system_name(const char *path);

/* Statistics of the current set (for tests and benches). */
typedef struct ptp_cfi_info {
  size_t nrows, nobjs, norule_rows;   /* rows of built tables; exec segments */
  size_t nlibs;                       /* objects walked with CFI */
  size_t nfp;                         /* objects without CFI walked with frame
                                       * pointers (ptp_fpdetect said so) */
  size_t nnocfi;                      /* objects without CFI or frame pointers:
                                       * samples through them truncated */
  size_t lazy_ready, lazy_wanted, lazy_failed;  /* non-system slots by state */
  size_t lazy_bytes, lazy_cap;        /* lazy table memory of the current set */
  unsigned long long lazy_built;      /* lazy tables built so far (process) */
  unsigned long long lazy_refused;    /* refused by the cap so far */
  unsigned long long build_ns;        /* CPU time spent building the non-system
                                       * tables so far (process) */
  unsigned builds;                    /* sets built and published so far */
} ptp_cfi_info;
void ptp_cfi_get_info(ptp_cfi_info *out);

/* State (PTP_LIB_*) of the current set's slot holding pc, or -ENOENT when
 * pc is not in a CFI object (frame-pointer code). For tests. */
int ptp_cfi_state_of(uintptr_t pc);

/* Sets the lazy-table memory cap (bytes; for tests), returns the old one.
 * Applies to tables built from now on. */
size_t ptp_cfi_set_lazy_cap(size_t bytes);

/* pthread_atfork hooks (ptp_threads.c registers them): keep the mutex
 * consistent across fork. */
void ptp_cfi_atfork_prepare(void);
void ptp_cfi_atfork_parent(void);
void ptp_cfi_atfork_child(void);

#endif
