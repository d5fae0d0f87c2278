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
 *    between dumps) are moved to the top of the descriptor range, below
 *    the soft limit (ptp_fd_move_high): the numbers a program gets are the
 *    ones it gets without us;
 *  - each one's identity (st_dev, st_ino) is recorded at open
 *    (ptp_fd_id_of) and checked again before any use and before it is
 *    closed (ptp_fd_is, ptp_fd_close_if): a number that no longer names the
 *    file we opened is left alone, never closed.
 * Short-lived descriptors (opened and closed in one call of ours) stay
 * where open() puts them.
 *
 * Threads: any thread (one atomic hint of where to place the next). Not
 * for signal handlers (the handler's own identity check,
 * signal/ptp_handler.c, uses fstat and ioctl directly).
 * Errors: negative errno values.
 */
#ifndef PTP_FD_H
#define PTP_FD_H

#include <stdint.h>

/* Our long-lived descriptors take the highest free numbers below the
 * soft RLIMIT_NOFILE (at most PTP_FD_TOP_MAX: a range near a limit of a
 * million would grow the kernel's descriptor table to megabytes), never
 * one below the floor, a quarter of that lower (at least 3). From the top
 * down: a program gets the very numbers it gets without us unless it
 * comes within our count of its limit (where it would soon run out
 * anyway). ptp_fd_floor returns the floor. */
#define PTP_FD_TOP_MAX 4096
int ptp_fd_floor(void);

/* The soft RLIMIT_NOFILE (RLIM_INFINITY as UINT64_MAX), or 0 when it
 * cannot be read. */
uint64_t ptp_fd_soft_limit(void);

/* Moves fd to the highest free number below the top (F_DUPFD_CLOEXEC:
 * the copy is close-on-exec; see above) and closes fd. Returns the new
 * number, or -errno (-EMFILE: no free number between the floor and the
 * top) with fd left open for the caller. */
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

/* The marks of our long-lived numbers (for the close-family interposers):
 * ptp_fdmarks.h. */

#endif
