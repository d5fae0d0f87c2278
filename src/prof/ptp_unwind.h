/*
 * ptp_unwind.h - the signal-safe stack walker (x86-64) and the unwind-table
 * format it reads.
 *
 * Two methods, chosen per frame by the frame's PC:
 *  - PC inside a "system object" (libc and the rest of glibc, ld.so,
 *    libgcc_s, the vDSO): those are built without frame pointers, and their
 *    own unwinders are not signal-safe, so the walker steps through the frame
 *    with a compact table of CFA rules built OUTSIDE the handler from the
 *    object's .eh_frame (ptp_cfi.c);
 *  - any other PC: frame pointers (Polytoken's code and test programs are
 *    compiled with -fno-omit-frame-pointer).
 * Every stack read is checked against [sp of the interrupted frame, stack
 * top of the thread); a read that would leave it ends the walk (truncated).
 *
 * Threads: ptp_unwind reads only its arguments and the stack; the table set
 * it is given must stay alive during the call (ptp_cfi.c's grace counter).
 */
#ifndef PTP_UNWIND_H
#define PTP_UNWIND_H

#include <stddef.h>
#include <stdint.h>

/* ptp_cfi_row.kind */
#define PTP_CFI_RSP    0   /* CFA = caller-visible rsp + cfa_off */
#define PTP_CFI_RBP    1   /* CFA = rbp + cfa_off */
#define PTP_CFI_NORULE 2   /* no rule we can follow (expression, PLT, ...) */
#define PTP_CFI_END    3   /* return address undefined: outermost frame */

/* ptp_cfi_row.rbp_off special values */
#define PTP_RBP_SAME    INT16_MAX        /* rbp unchanged in this frame */
#define PTP_RBP_UNKNOWN (INT16_MAX - 1)  /* caller's rbp not recoverable */

/* One rule valid for PCs in [start, start + len). 24 bytes. */
typedef struct ptp_cfi_row {
  uintptr_t start;
  uint32_t len;
  int32_t cfa_off;
  int16_t rbp_off;   /* caller's rbp saved at CFA + rbp_off, or PTP_RBP_* */
  int8_t ra_off;     /* return address saved at CFA + ra_off (usually -8) */
  uint8_t kind;      /* PTP_CFI_* */
} ptp_cfi_row;

/* Executable range of a system object. */
typedef struct ptp_cfi_obj {
  uintptr_t lo, hi;
} ptp_cfi_obj;

/* An immutable set of tables: rows sorted by start, non-overlapping; objs
 * sorted by lo. Built by ptp_cfi.c, published atomically, freed only after
 * a grace period. */
typedef struct ptp_cfi_set {
  const ptp_cfi_row *rows;
  size_t nrows;
  const ptp_cfi_obj *objs;
  size_t nobjs;
} ptp_cfi_set;

/* The interrupted thread's registers. */
typedef struct ptp_regs {
  uintptr_t pc, sp, fp;
} ptp_regs;

/* Walks the stack described by r. stack_lo/stack_hi: the thread's stack
 * bounds (both 0 = unknown: only the PC is recorded and the sample is marked
 * truncated). Writes at most max frames into frames (frames[0] = r->pc,
 * then return addresses, unadjusted) and PTP_SAMPLE_* bits into *flags.
 * cfi may be NULL (then samples in system objects are truncated at the leaf).
 * Returns the number of frames (>= 1 when r->pc != 0, else 0).
 * Async-signal-safe. */
int ptp_unwind(const ptp_regs *r, uintptr_t stack_lo, uintptr_t stack_hi,
               const ptp_cfi_set *cfi, uintptr_t *frames, int max, uint16_t *flags);

/* The row covering pc, or NULL. Async-signal-safe (binary search). */
const ptp_cfi_row *ptp_cfi_lookup(const ptp_cfi_set *cfi, uintptr_t pc);
/* Nonzero if pc lies in a system object of cfi. Async-signal-safe. */
int ptp_cfi_in_system(const ptp_cfi_set *cfi, uintptr_t pc);

#endif
