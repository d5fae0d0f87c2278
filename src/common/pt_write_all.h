/*
 * pt_write_all.h - the one write-all loop of the programs (daemon, TUI/CLI,
 * src/common): writes every byte or says why not.
 *
 * The library (src/prof, src/console) cannot include src/common (layering:
 * CONTRIBUTING.md) and keeps its own loops (e.g. the snapshot store's).
 *
 * Async-signal-safe: it calls only write(2) and touches no shared state, so
 * a signal handler may use it (tui_term.c's crash handler does); like
 * write(2) it may change errno, which such a caller saves and restores if
 * it returns.
 */
#ifndef PT_WRITE_ALL_H
#define PT_WRITE_ALL_H

#include <stddef.h>

/* Writes len bytes of data to fd, retrying after EINTR and short writes.
 * Returns 0, or a negative errno of the write that failed (e.g. -ENOSPC,
 * -EPIPE, -EAGAIN on a non-blocking fd that is full), or -EIO if write(2)
 * returned 0 for a non-zero length. On error an unknown prefix of the data
 * may have been written. Any thread; blocking as the fd is. */
int pt_write_all(int fd, const void *data, size_t len);

#endif
