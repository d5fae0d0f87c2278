/*
 * ptp_fdmarks.h - the numbers of the library's long-lived descriptors (see
 * ptp_fd.h), as the close-family interposers (runtime/ptp_fdwatch.c) look
 * them up: a program that closes one of ours (close_range(3, ~0U, 0) at its
 * start closes the perf event the preload constructor opened) is noticed
 * at once, and the consumer forgets it without ever touching the number
 * again.
 *
 * A unit of its own that calls nothing (no close(2) either): every close
 * of the library goes through the interposers, which call this, so a
 * unit both calling close and being called by them would make a loop.
 *
 * State: one bitmap and a flag, process-wide (runtime/ptp_process.h),
 * atomics; never reset (a fork child's copy is right for its copy of the
 * descriptor table until its engine forgets the events).
 * SIGNAL-SAFETY: every function is async-signal-safe (atomics): close is,
 * and programs call it in their handlers.
 */
#ifndef PTP_FDMARKS_H
#define PTP_FDMARKS_H

/* A bitmap over [0, PTP_FD_MARK_MAX): numbers above are not marked (the
 * consumer's periodic check still finds them). */
#define PTP_FD_MARK_MAX 16384
void ptp_fd_mark(int fd);
void ptp_fd_unmark(int fd);
/* Called after the program closed [lo, hi] (close, close_range, closefrom,
 * dup2/dup3 onto hi = lo): returns 1 if a marked number was among them
 * (their marks are cleared and the "lost" flag set), else 0.
 * Async-signal-safe. */
int ptp_fd_note_closed(unsigned lo, unsigned hi);
/* The lowest marked number in [lo, hi], or -1 when there is none (hi is
 * capped below PTP_FD_MARK_MAX). The range closers (close_range,
 * closefrom) close around these. Async-signal-safe. */
int ptp_fd_next_mark(unsigned lo, unsigned hi);
/* 1 once after ptp_fd_note_closed found one of ours closed (the consumer
 * then checks its descriptors), else 0. */
int ptp_fd_take_lost(void);

#endif
