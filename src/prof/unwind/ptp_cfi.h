/*
 * ptp_cfi.h - the walker's unwind tables, built outside the signal handler
 * from each loaded object's .eh_frame (read from memory through
 * PT_GNU_EH_FRAME, so the vDSO works too and no file is opened), and
 * published to the handler.
 *
 * Which objects get what: every loaded object with executable segments has
 * a slot. Objects with an .eh_frame_hdr ("CFI objects": the main program,
 * the object holding libptprof and every shared object; frame pointers are
 * never assumed) get a table before the set is published (ptp_cfi_refresh:
 * at ptprof_start for the objects loaded then, in the thread that called
 * dlopen right after it returns (ptp_interpose.c), else in the consumer
 * thread), so the first samples are complete. A table comes from the
 * persistent table cache when it holds one for the object's build id
 * (ptp_cficache.h), else it is built from the object's .eh_frame and saved
 * there later by ptp_cfi_save_pending. Tables of objects still loaded and
 * identical are carried into a rebuilt set, so a dlopen costs the new
 * object's table only. A slot that still has no table when the
 * walker meets it (the eager pass raced with dlopen) is marked
 * PTP_LIB_WANTED and built at the next refresh. The non-system tables of
 * one set together stay below a cap (PTP_CFI_LAZY_CAP; system objects:
 * the glibc libraries, ld.so, libgcc_s, the vDSO, ptp_cfi_is_system_name,
 * are not counted): an object whose
 * table would exceed it is marked PTP_LIB_FAILED and its samples stay
 * truncated (counted in the profile's truncated samples). Objects without
 * .eh_frame_hdr get PTP_LIB_FP when ptp_fpdetect sees frame pointers in
 * their prologues, else PTP_LIB_NOCFI (glibc objects without CFI:
 * PTP_LIB_FAILED); both without a table.
 *
 * Publication: one process-wide current set (signal/ptp_unwind.h's ptp_g_cfi),
 * replaced atomically when objects are loaded or unloaded (dlpi_adds /
 * dlpi_subs). Tables built for a slot of the current set are stored with a
 * release store and owned by that set. A replaced set (with all its tables)
 * is retired and freed only after the handler-inside counter (ptp_g_inside)
 * has been seen at zero after the replacement, so a handler never reads
 * freed tables. A rebuilt set takes over the current set's non-system
 * tables of objects that are still loaded and identical (same name,
 * address, segments and .eh_frame_hdr hash); the others are built anew.
 *
 * Threads: every function here takes the module's mutex (kept consistent
 * across fork by handlers the module registers at its first use); none may
 * be called from a signal handler (they allocate and call
 * dl_iterate_phdr).
 */
#ifndef PTP_CFI_H
#define PTP_CFI_H

#include "prof/signal/ptp_unwind.h"

/* Cap on the memory of the non-system tables of one set (24-byte rows:
 * ~1.4 million rows). Past it an object's slot becomes PTP_LIB_FAILED. */
#define PTP_CFI_LAZY_CAP ((size_t)32 << 20)

/* The current set is published in signal/ptp_unwind.h's ptp_g_cfi, which
 * only this unit writes. */

/* Makes sure the published set matches the loaded objects: cheap (one
 * dl_iterate_phdr step) when nothing was loaded or unloaded since the last
 * call (dlpi_adds/dlpi_subs), else rebuilds it, builds the tables of its
 * objects that the current set had none for, and publishes it. Then builds the
 * tables of objects the walker marked wanted, and frees retired sets whose
 * grace period is over. Returns 0 or -ENOMEM (the previous set stays). */
int ptp_cfi_refresh(void);

/* Writes the tables built (not read from the cache) since the last call to
 * the persistent table cache (ptp_cficache.h). Does file I/O (fsync): the
 * consumer thread and ptprof_stop call it, never the synchronous refreshes
 * (start, dlopen). Returns 0 or the first write's error (best effort: a
 * table not saved is built again by the next process). */
int ptp_cfi_save_pending(void);

/* Builds a fresh set for the process as it is now (not published; system
 * tables built, the others' slots empty). Caller owns it (ptp_cfi_free).
 * Returns 0 or -ENOMEM. */
int ptp_cfi_build(ptp_cfi_set **out);
void ptp_cfi_free(ptp_cfi_set *set);

/* Frees a table of either origin (ptp_cfi_tab: built, or a mapping of
 * the cache file): unmaps a mapped one. NULL is a no-op. The caller owns
 * t and guarantees no reader is left (ptp_cfi.c frees a set's tables only
 * after the handler grace). Any thread; not for signal handlers. */
void ptp_cfi_tab_free(const ptp_cfi_tab *t);

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
  unsigned long long build_ns;        /* CPU time spent getting the tables
                                       * (built or read from the cache) so far */
  unsigned builds;                    /* sets built and published so far */
  unsigned long long cache_hits;      /* tables read from the persistent cache */
  unsigned long long cache_saved;     /* tables written to it (process) */
} ptp_cfi_info;
void ptp_cfi_get_info(ptp_cfi_info *out);

/* State (PTP_LIB_*) of the current set's slot holding pc, or -ENOENT when
 * pc is in no loaded object the set knows. For tests. */
int ptp_cfi_state_of(uintptr_t pc);

/* Sets the lazy-table memory cap (bytes; for tests), returns the old one.
 * Applies to tables built from now on. */
size_t ptp_cfi_set_lazy_cap(size_t bytes);

#endif
