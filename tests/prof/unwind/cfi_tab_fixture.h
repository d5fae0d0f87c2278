/*
 * cfi_tab_fixture.h - an unwind table made up for the cache tests
 * (test_cficache.c, test_cachefile.c): valid rows, as ptp_cfi.c would build
 * them, without parsing any object.
 */
#ifndef PTT_CFI_TAB_FIXTURE_H
#define PTT_CFI_TAB_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "prof/unwind/ptp_cfi.h"

/* A table of an object loaded at bias base: n rows from base + 0x1000,
 * each 16 bytes, kinds and rbp rules cycling (60 distinct rules at most);
 * variant changes every cfa_off (so two writers' tables differ).
 * One calloc'd block: free() it (not ptp_cfi_tab_free: nothing is mapped).
 * Allocation failure asserts (pt_test.h). */
ptp_cfi_tab *ptt_cfi_tab_make(uintptr_t base, size_t n, int variant);

#endif
