/*
 * ptp_privio.h - reads the library does in a descriptor table of its own.
 *
 * Why: open(2) takes the lowest free number of the process's table. A
 * descriptor the consumer opens for a moment (a /proc file read at each
 * sweep) takes the very number a program opening files at that instant
 * counts on: seen as "many-0612: fd 616, want 615" (tests/prof/
 * guest_fds_test.sh "many", about 1 run in 40 under load). The reads go to
 * a helper thread, "ptprof-io", whose table is its own and empty
 * (close_range(0, ~0U, CLOSE_RANGE_UNSHARE) at its start: the kernel
 * copies none of the program's descriptors into it), so what it opens
 * never shows in the program's table. Only transient reads belong here:
 * a descriptor opened by a call is closed by the same call (the table
 * goes with the helper when it ends).
 *
 * The helper is created at the first call (every signal blocked, as the
 * consumer, and through libc's pthread_create, so the registry does not
 * register it) and ends after PTP_PRIVIO_IDLE_S idle seconds; a fork
 * child starts without one. The thread registry never samples it
 * (ptp_privio_is_helper). Where the kernel refuses CLOSE_RANGE_UNSHARE
 * (before Linux 5.9) the helper shares the table (the old behaviour);
 * where the thread cannot be created the call runs inline.
 *
 * Threads: any thread but the helper itself (a call from inside fn would
 * wait for itself); one call at a time, others wait. Not for signal
 * handlers (mutexes). Process-wide state: runtime/ptp_process.h.
 */
#ifndef PTP_PRIVIO_H
#define PTP_PRIVIO_H

#include <stdint.h>

#define PTP_PRIVIO_IDLE_S 5

/* Runs fn(arg) on the helper and returns its result. fn must close what it
 * opens and touch no descriptor of the program's table (its numbers mean
 * nothing there). */
int ptp_privio_call(int (*fn)(void *arg), void *arg);

/* 1 if tid is the helper thread (alive now), else 0. */
int ptp_privio_is_helper(uint32_t tid);

/* 1 if calls run in a table of their own (the helper runs and the kernel
 * allowed the unshare), else 0; for tests. */
int ptp_privio_private(void);

#endif
