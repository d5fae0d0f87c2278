/*
 * ptp_fd.h - the library's own descriptors: where the long-lived ones live
 * and how each use first proves that a descriptor number is still ours.
 *
 * Why: the descriptor table is the program's. A program may close every
 * descriptor above 2 at any moment (close_range(3, ~0U, 0) at its start, a
 * daemon detaching) and reuse the numbers at once; open() returns the
 * lowest free number, which programs count on (the first file after a
 * close_range is fd 3). A library that then writes to, reads from, ioctls
 * or closes "its" number acts on the program's file (docs/sampler.md,
 * "Descriptors"). So:
 *  - long-lived descriptors (perf events, the files libdw keeps open
 *    between dumps) are moved above a floor (ptp_fd_move_high): the low
 *    numbers stay the program's, and a program at a low RLIMIT_NOFILE
 *    keeps its count of free numbers below the floor;
 *  - each one's identity (st_dev, st_ino) is recorded at open
 *    (ptp_fd_id_of) and checked again before any use and before it is
 *    closed (ptp_fd_is, ptp_fd_close_if): a number that no longer names the
 *    file we opened is left alone, never closed.
 * Short-lived descriptors (opened and closed in one call of ours) stay
 * where open() puts them.
 *
 * Threads: any thread. State: the marks below (atomics; listed in
 * runtime/ptp_process.h). Not for signal handlers except where said (the
 * handler's own identity check, signal/ptp_handler.c, uses fstat and ioctl
 * directly).
 * Errors: negative errno values.
 */
#ifndef PTP_FD_H
#define PTP_FD_H

#include <stdint.h>

/* The lowest number a long-lived descriptor of ours takes: three quarters
 * of the soft RLIMIT_NOFILE (so the top quarter), at most PTP_FD_FLOOR_MAX
 * (a floor near a limit of a million would grow the kernel's descriptor
 * table to megabytes), at least 3. */
#define PTP_FD_FLOOR_MAX 4096
int ptp_fd_floor(void);

/* The soft RLIMIT_NOFILE (RLIM_INFINITY as UINT64_MAX), or 0 when it
 * cannot be read. */
uint64_t ptp_fd_soft_limit(void);

/* Moves fd to the lowest free number >= ptp_fd_floor() (F_DUPFD_CLOEXEC:
 * the copy is close-on-exec) and closes fd. Returns the new number, or
 * -errno (-EINVAL: the floor is at or above the limit; -EMFILE: no free
 * number above it) with fd left open for the caller. */
int ptp_fd_move_high(int fd);

/* A descriptor's identity: the (device, inode) of the file it names. */
typedef struct ptp_fd_id {
  uint64_t dev, ino;
} ptp_fd_id;

/* *out = fd's identity. Returns 0 or fstat's -errno. */
int ptp_fd_id_of(int fd, ptp_fd_id *out);

/* 1 when fd is open and names the file id, else 0 (closed, or reused by
 * the program for another file). */
int ptp_fd_is(int fd, const ptp_fd_id *id);

/* Closes fd only if ptp_fd_is(fd, id). Returns 0, or -ESTALE (fd is not
 * ours any more: not closed). Clears fd's mark (below) either way. */
int ptp_fd_close_if(int fd, const ptp_fd_id *id);

/* The numbers of our long-lived descriptors, as a bitmap over [0,
 * PTP_FD_MARK_MAX) (numbers above are not marked: the consumer's periodic
 * check still finds them). The close-family interposers
 * (runtime/ptp_interpose.c) look a closed number up here, so that a
 * program closing one of ours is noticed at once (ptp_fd_take_lost).
 * Marking and the look-ups are atomics: async-signal-safe (close is, and
 * programs call it in their handlers). */
#define PTP_FD_MARK_MAX 16384
void ptp_fd_mark(int fd);
void ptp_fd_unmark(int fd);
/* Called after the program closed [lo, hi] (close, close_range, closefrom,
 * dup2/dup3 onto hi = lo): returns 1 if a marked number was among them
 * (their marks are cleared and the "lost" flag set), else 0.
 * Async-signal-safe. */
int ptp_fd_note_closed(unsigned lo, unsigned hi);
/* 1 once after ptp_fd_note_closed found one of ours closed (the consumer
 * then checks its descriptors), else 0. */
int ptp_fd_take_lost(void);

#endif
