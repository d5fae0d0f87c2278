/*
 * ptp_cfi_internal.h - shared by the units of the unwind-table module,
 * listed in call order (each calls only those before it):
 *   ptp_cfi_parse.c   bounded reader of CFI bytes, the call-frame
 *                     interpreter, one object's table from its .eh_frame
 *                     (in memory) or from .debug_frame bytes; build ids
 *   ptp_debugframe.c  finds an object's .debug_frame (its file, or its
 *                     separate debug file) and builds its table from it
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

#include "prof/symbols/ptp_elfnote.h"
#include "prof/signal/ptp_unwind.h"

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
  uintptr_t bias;          /* load bias (dlpi_addr): the table's rows are
                            * relative to it */
  uintptr_t hdr;           /* PT_GNU_EH_FRAME, 0 if none */
  size_t hdrsz;
} ptp_cfi_objinfo;

/* Room for an object's build id in hex (ptp_elfnote_build_id_hex, the one
 * reader of the note, shared with the symbolizer), NUL included; 66, not
 * PTP_ELFNOTE_HEX_MAX, because the table-cache file header is sized by it. */
#define PTP_CFI_BID_MAX 66
_Static_assert(PTP_CFI_BID_MAX >= PTP_ELFNOTE_HEX_MAX, "a build id in hex fits bid");

/* Continues the 64-bit hash h over [p, p + n) (not cryptographic: the
 * identity of an object across set rebuilds, and the table cache's content
 * key). In ptp_cficache.c. */
uint64_t ptp_cfi_hash(uint64_t h, const void *p, size_t n);

/* Nonzero when [a, a + n) lies inside one readable segment of m. */
int ptp_cfi_mem_ok(const ptp_cfi_objmem *m, uintptr_t a, size_t n);

/* Fills *o from a loaded object's program headers (no memory is read but
 * the .eh_frame_hdr bounds check). */
void ptp_cfi_obj_scan(const struct dl_phdr_info *info, ptp_cfi_objinfo *o);

/* Builds the table of one object from its .eh_frame, relative to o->bias,
 * at most max_rows rows and rules together (8 bytes each, ptp_unwind.h).
 * Must run inside a dl_iterate_phdr callback for that object (the loader's
 * lock keeps it mapped). Returns 0 and *out (caller frees), -ENOENT (no
 * usable .eh_frame_hdr), -E2BIG (more than max_rows rows and rules, or
 * more than PTP_CFI_RULES_MAX distinct rules) or -ENOMEM. */
int ptp_cfi_parse_eh(const ptp_cfi_objinfo *o, size_t max_rows, ptp_cfi_tab **out);

/* Builds a table from a .debug_frame section's bytes [sec, sec + len) (a
 * copy read from the object's file or its separate debug file; every read
 * is bounds-checked against it) whose addresses are link-time addresses
 * of an object loaded with this bias (the table's rows are relative to
 * it). Same returns as ptp_cfi_parse_eh (-ENOENT never). */
int ptp_cfi_parse_debug_frame(const uint8_t *sec, size_t len, uintptr_t bias, size_t max_rows,
                              ptp_cfi_tab **out);

/* The table of an object without .eh_frame_hdr from its .debug_frame: in
 * the object's own file (the path it was loaded from; /proc/self/exe for
 * the main program) or in its separate debug file
 * (/usr/lib/debug/.build-id/xx/yyyy.debug, or the .gnu_debuglink name next
 * to the object, in its .debug/ directory or under /usr/lib/debug). A file
 * is used only if its build id is the loaded object's (objects without a
 * build id get no table: a file changed on disk since the load would
 * lie). Call inside a dl_iterate_phdr callback for that object. Returns 0
 * and *out, -ENOENT (no usable .debug_frame), -E2BIG, -ENOMEM. */
int ptp_cfi_debugframe(const struct dl_phdr_info *info, const ptp_cfi_objinfo *o,
                       size_t max_rows, ptp_cfi_tab **out);

#endif
