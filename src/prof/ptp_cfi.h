/*
 * ptp_cfi.h - unwind tables of the system objects (glibc libraries, ld.so,
 * libgcc_s, the vDSO), built outside the signal handler from each loaded
 * object's .eh_frame (read from memory through PT_GNU_EH_FRAME, so the vDSO
 * works too and no file is opened), and published to the handler.
 *
 * Publication: one process-wide current set (ptp_g_cfi, see ptp_handler.h),
 * replaced atomically. A replaced set is retired and freed only after the
 * handler-inside counter (ptp_g_inside) has been seen at zero after the
 * replacement, so a handler never reads freed tables.
 *
 * Threads: every function here takes an internal mutex; none may be called
 * from a signal handler (they allocate and call dl_iterate_phdr).
 */
#ifndef PTP_CFI_H
#define PTP_CFI_H

#include "prof/ptp_unwind.h"

/* Makes sure the published set matches the loaded system objects: cheap
 * (one dl_iterate_phdr pass) when nothing was loaded or unloaded since the
 * last call (dlpi_adds/dlpi_subs), else rebuilds and publishes. Also frees
 * retired sets whose grace period is over. Returns 0 or -ENOMEM. */
int ptp_cfi_refresh(void);

/* Builds a fresh set for the process as it is now (not published). Caller
 * owns it (ptp_cfi_free). Returns 0 or -ENOMEM. */
int ptp_cfi_build(ptp_cfi_set **out);
void ptp_cfi_free(ptp_cfi_set *set);

/* Nonzero if the object path (as dl_iterate_phdr names it) is one the
 * walker must not follow with frame pointers. */
int ptp_cfi_is_system_name(const char *path);

/* Statistics of the current set (for tests and benches). */
typedef struct ptp_cfi_info {
  size_t nrows, nobjs, norule_rows;
  unsigned builds;        /* sets built and published so far */
} ptp_cfi_info;
void ptp_cfi_get_info(ptp_cfi_info *out);

/* pthread_atfork hooks (ptp_threads.c registers them): keep the mutex
 * consistent across fork. */
void ptp_cfi_atfork_prepare(void);
void ptp_cfi_atfork_parent(void);
void ptp_cfi_atfork_child(void);

#endif
