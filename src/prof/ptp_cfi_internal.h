/*
 * ptp_cfi_internal.h - shared by the units of the unwind-table module,
 * listed in call order (each calls only those before it):
 *   ptp_cfi_parse.c   bounded reader of mapped CFI bytes, the call-frame
 *                     interpreter, one object's table from its .eh_frame
 *   ptp_cficache.c    the persistent table cache (files keyed by build id)
 *   ptp_cfi.c         table sets: building, publication, retirement
 * Only these files (and their unit tests) include it. Threads: what is declared here allocates or
 * reads object memory; never from a signal handler.
 */
#ifndef PTP_CFI_INTERNAL_H
#define PTP_CFI_INTERNAL_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

#include "prof/ptp_unwind.h"

typedef struct ptp_cfi_seg { uintptr_t lo, hi; } ptp_cfi_seg;

typedef struct ptp_cfi_objmem {
  ptp_cfi_seg segs[16];    /* readable PT_LOAD ranges (runtime addresses) */
  int nsegs;
} ptp_cfi_objmem;

/* What the walker and the table builder need to know of one loaded object. */
typedef struct ptp_cfi_objinfo {
  ptp_cfi_objmem m;                /* readable segments: every read is checked */
  ptp_cfi_seg text[8];             /* executable segments */
  int ntext;
  uintptr_t text_lo;       /* lowest executable address (identity) */
  uintptr_t hdr;           /* PT_GNU_EH_FRAME, 0 if none */
  size_t hdrsz;
} ptp_cfi_objinfo;

/* Nonzero when [a, a + n) lies inside one readable segment of m. */
int ptp_cfi_mem_ok(const ptp_cfi_objmem *m, uintptr_t a, size_t n);

/* Fills *o from a loaded object's program headers (no memory is read but
 * the .eh_frame_hdr bounds check). */
void ptp_cfi_obj_scan(const struct dl_phdr_info *info, ptp_cfi_objinfo *o);

/* Builds the table of one object from its .eh_frame, at most max_rows rows.
 * Must run inside a dl_iterate_phdr callback for that object (the loader's
 * lock keeps it mapped). Returns 0 and *out (caller frees), -ENOENT (no
 * usable .eh_frame_hdr), -E2BIG (more than max_rows rows) or -ENOMEM. */
int ptp_cfi_parse_eh(const ptp_cfi_objinfo *o, size_t max_rows, ptp_cfi_tab **out);

#endif
