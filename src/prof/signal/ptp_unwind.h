/*
 * ptp_unwind.h - the signal-safe stack walker (x86-64) and the unwind-table
 * format it reads.
 *
 * Chosen per frame by the object holding the frame's PC (the published set
 * lists every loaded object with executable segments):
 *  - an object with an .eh_frame_hdr (the main program, libptprof's own
 *    object and every shared object alike: frame pointers are never
 *    assumed): the walker steps through the frame with a compact table of
 *    CFA rules built OUTSIDE the handler from the object's .eh_frame
 *    (ptp_cfi.c). Tables are built before a set is published (at
 *    ptprof_start for the objects loaded then, by the consumer thread for
 *    objects loaded later); a slot still without a table (a rebuild that
 *    raced with dlopen) is marked PTP_LIB_WANTED (one atomic in a slot
 *    allocated with the set), that sample is truncated and the consumer
 *    builds the table at its next pass;
 *  - an object without CFI whose code keeps frame pointers (PTP_LIB_FP,
 *    decided from its function prologues by ptp_fpdetect.c): frame pointers;
 *  - a PC in no loaded object but in a published executable range
 *    (ptp_xrange.h: JIT code, code a runtime remapped): frame pointers,
 *    every step validated (stack bounds, alignment, progress, a return
 *    address in known executable memory) and the leaf checked for a frame
 *    not set up yet or torn down already (ptp_unwind.c, jit_step); the walk
 *    goes on with CFI once a return address is back in an object;
 *  - an object without CFI and without frame pointers (PTP_LIB_NOCFI), or a
 *    PC in no known object and no published range (JIT code made since the
 *    ranges were read, an object loaded since the set was built): the walk
 *    stops there, truncated (never a guessed frame); the first such walk
 *    raises ptp_g_xranges_wanted and wakes the consumer, which rebuilds the
 *    set and re-reads the ranges.
 * cfi == NULL (tests only) walks every frame with frame pointers.
 * Every stack read is checked against [sp of the interrupted frame, stack
 * top of the thread); a read that would leave it ends the walk (truncated).
 *
 * Threads: ptp_unwind reads only its arguments, the stack, the table set
 * and range set (whose only writable parts are atomics) and the code bytes
 * of a JIT leaf; the sets it is given must stay alive during the call (the
 * handler grace of ptp_cfi.c and ptp_xranges.c).
 */
#ifndef PTP_UNWIND_H
#define PTP_UNWIND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "prof/signal/ptp_xrange.h"

/* ptp_cfi_rule.kind */
#define PTP_CFI_RSP    0   /* CFA = caller-visible rsp + cfa_off */
#define PTP_CFI_RBP    1   /* CFA = rbp + cfa_off */
#define PTP_CFI_NORULE 2   /* no rule we can follow (expression, PLT, ...) */
#define PTP_CFI_END    3   /* return address undefined: outermost frame */

/* ptp_cfi_rule.rbp_off special values */
#define PTP_RBP_SAME    INT16_MAX        /* rbp unchanged in this frame */
#define PTP_RBP_UNKNOWN (INT16_MAX - 1)  /* caller's rbp not recoverable */

/* How to step from a frame to its caller. 8 bytes. An object has few
 * distinct rules (14 to 342 in the objects of a profiling daemon, against
 * 500 to 82,000 rows), so each table keeps its rules once and its rows
 * name them by index. */
typedef struct ptp_cfi_rule {
  int32_t cfa_off;
  int16_t rbp_off;   /* caller's rbp saved at CFA + rbp_off, or PTP_RBP_* */
  int8_t ra_off;     /* return address saved at CFA + ra_off (usually -8) */
  uint8_t kind;      /* PTP_CFI_* */
} ptp_cfi_rule;

/* One rule valid for the PCs [bias + start, bias + start + len) of an
 * object (bias: its ptp_cfi_tab's, the object's load bias). 8 bytes, no
 * padding: the walker's binary search reads 8 rows per cache line, and a
 * table is a third of the size of rows carrying their rule (24 bytes) to
 * read, check and keep. A range longer than PTP_CFI_ROW_LEN_MAX is several
 * rows. */
typedef struct ptp_cfi_row {
  uint32_t start;    /* offset from the table's bias */
  uint16_t len;      /* > 0 */
  uint16_t rule;     /* index into the table's rules */
} ptp_cfi_row;

#define PTP_CFI_ROW_LEN_MAX UINT16_MAX
#define PTP_CFI_RULES_MAX ((size_t)UINT16_MAX + 1)

/* The rows of one object, sorted by start, non-overlapping, relative to
 * the object's load bias (so a table is the same bytes wherever the object
 * is loaded, and the cache's tables are used where they were read, never
 * relocated); every row's rule index is below nrules. Immutable once
 * published. Two origins: a table built here (ptp_cfi_parse.c) has its
 * rules and rows right after the struct in the same allocation; a table
 * read from the persistent cache (ptp_cficache.c) points into a read-only
 * copy of the cache file (a private anonymous mapping: never the file's
 * own pages, which a truncation could take away under the handler), and
 * map/maplen name that copy. Freed only by ptp_cfi_tab_free. */
typedef struct ptp_cfi_tab {
  size_t nrows;
  size_t nrules;
  size_t bytes;                /* memory it holds (memory cap) */
  uintptr_t bias;              /* added to a row's start */
  const ptp_cfi_row *rows;
  const ptp_cfi_rule *rules;
  size_t norule;               /* rows whose rule is PTP_CFI_NORULE */
  void *map;                   /* the copy of the cache file, or NULL */
  size_t maplen;
} ptp_cfi_tab;

/* ptp_cfi_lib.state */
#define PTP_LIB_NONE   0   /* no table yet, nobody asked */
#define PTP_LIB_WANTED 1   /* the walker met it: consumer, please build */
#define PTP_LIB_READY  2   /* tab is set */
#define PTP_LIB_FAILED 3   /* no table will come (memory cap, parse or alloc
                            * failure): samples through it stay truncated */
#define PTP_LIB_FP     4   /* no CFI, and its code keeps frame pointers
                            * (ptp_fpdetect): walked with rbp */
#define PTP_LIB_NOCFI  5   /* no CFI and no frame pointers (or cannot tell):
                            * samples through it stay truncated */

/* One CFI object. Slots are allocated with the set; the walker writes only
 * `state` (NONE -> WANTED, compare-and-swap), the consumer writes `tab`
 * (release, once, NULL -> table) and then `state` (READY/FAILED) under the
 * set module's mutex. */
typedef struct ptp_cfi_lib {
  _Atomic(const ptp_cfi_tab *) tab;   /* NULL until built; owned by the set */
  _Atomic uint8_t state;
  uint8_t system;                     /* table built eagerly with the set */
  uint8_t owns_tab;                   /* the set frees tab (cleared when a
                                       * newer set took the table over) */
  uint8_t code_readable;              /* its executable segments are mapped
                                       * readable (the walker may read the
                                       * code at a leaf its CFI misses) */
  uintptr_t base;                     /* dlpi_addr: identity for the lazy build */
  uintptr_t text_lo;                  /* lowest executable segment start */
  uint64_t id;                        /* hash of the name and .eh_frame_hdr:
                                       * identity across set rebuilds */
} ptp_cfi_lib;

/* Executable range of a CFI object, and its slot. */
typedef struct ptp_cfi_obj {
  uintptr_t lo, hi;
  uint32_t lib;                       /* index into ptp_cfi_set.libs */
} ptp_cfi_obj;

/* A set of tables: objs sorted by lo, non-overlapping; libs are the slots.
 * Built by ptp_cfi.c, published atomically, freed (with every table it
 * owns) only after a grace period. Apart from the atomics in libs[] it is
 * immutable once published. */
typedef struct ptp_cfi_set {
  const ptp_cfi_obj *objs;
  size_t nobjs;
  ptp_cfi_lib *libs;
  size_t nlibs;
} ptp_cfi_set;

/* The current unwind-table set, read by the handler, which may CAS a
 * slot's state NONE -> WANTED in it and nothing else. Defined in
 * ptp_unwind.c; written only by unwind/ptp_cfi.c (ptp_cfi_refresh), which
 * builds a set whole before it stores it here (release) and frees a
 * replaced one only after the handler grace (runtime/ptp_grace.h). NULL
 * until the first refresh (ptprof_start makes one before it arms any
 * thread). */
extern _Atomic(const ptp_cfi_set *) ptp_g_cfi;

/* The interrupted thread's registers. */
typedef struct ptp_regs {
  uintptr_t pc, sp, fp;
} ptp_regs;

/* Walks the stack described by r. stack_lo/stack_hi: the thread's stack
 * bounds (both 0 = unknown: only the PC is recorded and the sample is marked
 * truncated). Writes at most max frames into frames (frames[0] = r->pc,
 * then return addresses, unadjusted) and PTP_SAMPLE_* bits into *flags.
 * cfi may be NULL (tests: frame pointers everywhere).
 * A walk that reaches a CFI object without a table marks it WANTED.
 * No executable ranges outside objects: a PC in no object ends the walk.
 * Returns the number of frames (>= 1 when r->pc != 0, else 0).
 * Async-signal-safe. */
int ptp_unwind(const ptp_regs *r, uintptr_t stack_lo, uintptr_t stack_hi,
               const ptp_cfi_set *cfi, uintptr_t *frames, int max, uint16_t *flags);
/* Same, with xr (may be NULL) the executable ranges outside objects whose
 * frames are walked with frame pointers (ptp_xrange.h; the handler passes
 * ptp_g_xranges). *asked (may be NULL) is set to 1 when this walk is the one
 * that marked a slot WANTED, or raised ptp_g_xranges_wanted for a PC in no
 * object and no range (the handler then wakes the consumer at once), else
 * to 0. Async-signal-safe. */
int ptp_unwind_ex(const ptp_regs *r, uintptr_t stack_lo, uintptr_t stack_hi,
                  const ptp_cfi_set *cfi, const ptp_xrange_set *xr, uintptr_t *frames,
                  int max, uint16_t *flags, int *asked);

/* The slot of the CFI object containing pc, or NULL (frame-pointer code or
 * unknown). Async-signal-safe (binary search). */
ptp_cfi_lib *ptp_cfi_find(const ptp_cfi_set *cfi, uintptr_t pc);
/* The rule of the row covering pc (a runtime address) in tab, or NULL.
 * Async-signal-safe. */
const ptp_cfi_rule *ptp_cfi_tab_lookup(const ptp_cfi_tab *tab, uintptr_t pc);
/* The rule covering pc in the set (NULL when pc is in no CFI object, its
 * table is not built, or no row covers it). Does not mark anything wanted.
 * Async-signal-safe. */
const ptp_cfi_rule *ptp_cfi_lookup(const ptp_cfi_set *cfi, uintptr_t pc);
/* Nonzero if pc lies in an object of cfi walked with CFI tables (not frame
 * pointers, not refused for lack of both). Async-signal-safe. */
int ptp_cfi_in_system(const ptp_cfi_set *cfi, uintptr_t pc);

#endif
