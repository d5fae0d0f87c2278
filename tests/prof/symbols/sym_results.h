/*
 * sym_results.h - what the symbolizer tests compare: a set of PCs and the
 * full result of each (every field of every frame) as one string, so that
 * results with and without a cache can be compared PC by PC.
 * Failures assert (pt_test.h). Ownership: the caller frees with
 * ptt_free_results / free(set.pc).
 */
#ifndef PTT_SYM_RESULTS_H
#define PTT_SYM_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "prof/symbols/ptp_symbolize.h"

typedef struct pcset { uint64_t *pc; size_t n; } pcset;

/* Appends the len addresses fn, fn + 1, ... to s. */
void ptt_pcs_add_range(pcset *s, const void *fn, size_t len);
/* One string per PC of s: "map=M n=N | name / system @ file:line (start L) col C | ...". */
char **ptt_resolve_all(ptp_symbolizer *sy, const pcset *s);
void ptt_free_results(char **v, size_t n);
/* Descriptors this process has open (entries of /proc/self/fd, its own
 * directory stream's included: compare counts, not absolute values). */
int ptt_count_fds(void);

#endif
