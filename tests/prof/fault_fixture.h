/*
 * fault_fixture.h - allocation-failure tests of the library's parsers and
 * its dump path (src/prof/ptp_alloc.h: the mechanism; CONTRIBUTING.md,
 * "Tests"). ptt_fault_loop runs an operation with the calling thread's
 * 1st, 2nd, 3rd, ... allocation failing in turn until the operation no
 * longer reaches the failing one, and hands each run's result to a check;
 * ptt_no_leaks asks LeakSanitizer (asan variant) for a verdict at once.
 *
 * A test using them skips in a build without -Dfault_injection (release
 * never has it; every test variant does).
 */
#ifndef PTT_FAULT_FIXTURE_H
#define PTT_FAULT_FIXTURE_H

#include <stdint.h>

/* op: runs the operation once, returns its result (0 or -errno). check:
 * called after each run with that result, the failing allocation's
 * number n and whether that allocation happened (failed: the operation
 * had to cope with it; otherwise this was the last run, and it must have
 * succeeded). Returns how many runs it took (n of the last run). Asserts
 * the loop ends before max_n. */
typedef int (*ptt_fault_op)(void *ctx);
typedef void (*ptt_fault_check)(void *ctx, int rc, uint64_t n, int failed);
uint64_t ptt_fault_loop(ptt_fault_op op, ptt_fault_check check, void *ctx, uint64_t max_n);

/* Skips the test unless the build has fault injection. */
void ptt_fault_require(void);

/* Fails the test when LeakSanitizer finds memory that is no longer
 * reachable (asan variant; elsewhere it checks nothing and says so on
 * stdout once). */
void ptt_no_leaks(void);

/* Whether dir holds a temp file of ours (a name starting with '.' and
 * ending in ".tmp"): something written half. */
int ptt_has_temp_file(const char *dir);

#endif
