/*
 * ptp_scan.h - number scanning for the library's sans-I/O text parsers
 * (symbols/ptp_perfmap.c: perf maps; unwind/ptp_xranges.c: /proc/self/maps
 * lines). Bounded: the text is [*p, e), never NUL-terminated, and a
 * number too long for 64 bits is an error, not a wrapped value.
 *
 * Header-only (static inline): calls nothing, so any unit of any folder
 * can use it without a dependency. Threads: any; pure.
 */
#ifndef PTP_SCAN_H
#define PTP_SCAN_H

#include <stdint.h>

/* The value of hex digit c, or -1. */
static inline int ptp_scan_hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* 1-16 hex digits at *p (< e) into *v; advances *p past them. 0, or -1
 * (none, or more than 16). */
static inline int ptp_scan_hex(const char **p, const char *e, uint64_t *v) {
  uint64_t x = 0;
  int k = 0;
  while (*p < e && ptp_scan_hexval(**p) >= 0) {
    if (++k > 16) return -1;
    x = x << 4 | (uint64_t)ptp_scan_hexval(**p);
    (*p)++;
  }
  *v = x;
  return k ? 0 : -1;
}

#endif
