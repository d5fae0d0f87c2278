/*
 * ptp_aranges.h - a reader of DWARF's .debug_aranges section (the address
 * ranges of each compile unit), for the symbolizer's CU-by-address index
 * (ptp_symbolize_module.c). Sans-I/O: it reads only the bytes it is given,
 * every read bounds-checked, so it is fuzzed on arbitrary input
 * (tests/prof/fuzz_aranges.c).
 *
 * It accepts and refuses exactly what libdw 0.188's dwarf_getaranges does
 * (the symbolizer must find the CU libdwfl would): version 2 sets only,
 * 32- or 64-bit DWARF lengths, 4- or 8-byte addresses, no segment
 * selectors, each set's entries aligned to twice the address size from
 * the set's start and ended by a (0, 0) pair; the next set starts right
 * after that pair (libdw does not use the set's length to find it); every
 * CU offset must leave 4 bytes of .debug_info after it.
 * Threads: any; reentrant.
 */
#ifndef PTP_ARANGES_H
#define PTP_ARANGES_H

#include <stddef.h>
#include <stdint.h>

typedef struct ptp_arange {
  uint64_t lo, len;    /* [lo, lo + len), DWARF (unbiased) addresses */
  uint64_t cu;         /* the CU header's offset in .debug_info */
  uint32_t ord;        /* the entry's position in the section */
} ptp_arange;

/* Parses the section bytes [sec, sec + len) of an object whose
 * .debug_info is info_size bytes. On 0, *out (malloc'd, the caller frees;
 * NULL when *n is 0) holds the *n entries in section order. Returns
 * -EINVAL (libdw would refuse the section), -E2BIG (2^32 entries or
 * more) or -ENOMEM; *out is untouched then. */
int ptp_aranges_parse(const void *sec, size_t len, uint64_t info_size, ptp_arange **out,
                      size_t *n);

#endif
