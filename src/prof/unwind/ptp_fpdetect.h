/*
 * ptp_fpdetect.h - does a loaded object without CFI keep frame pointers?
 *
 * Used by ptp_cfi.c for objects that have no .eh_frame_hdr (nothing to build
 * an unwind table from): only if their code really sets up frame pointers
 * may the walker follow rbp through them; otherwise samples through them
 * stay truncated. Never assumed, not for the main program either.
 *
 * Method: the object's function symbols from its in-memory dynamic symbol
 * table (PT_DYNAMIC: DT_SYMTAB, and DT_GNU_HASH or DT_HASH for the
 * count), every read bounds-checked against the object's readable segments.
 * Of up to PTP_FPDETECT_MAX functions of at least 16 bytes, the share with
 * mov %rsp,%rbp (what -fno-omit-frame-pointer emits) in their first 32
 * bytes must reach 70 %, from at least PTP_FPDETECT_MIN functions.
 * Fewer functions to judge = no. (DT_STRTAB is not needed: names are not.)
 *
 * Threads: any thread, no shared state; must run inside a dl_iterate_phdr
 * callback for that object (the loader lock keeps it mapped). Not for
 * signal handlers.
 */
#ifndef PTP_FPDETECT_H
#define PTP_FPDETECT_H

#include <link.h>

#define PTP_FPDETECT_MAX 512   /* functions examined at most */
#define PTP_FPDETECT_MIN 4     /* fewer: cannot tell, answer no */

/* 1 if the object's functions keep frame pointers, 0 if not or unknown.
 * *nfuncs / *nfp (may be NULL): functions examined / with the prologue. */
int ptp_fpdetect(const struct dl_phdr_info *info, unsigned *nfuncs, unsigned *nfp);

#endif
