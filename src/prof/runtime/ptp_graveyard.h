/*
 * ptp_graveyard.h - the names of threads that exited: a snapshot names a
 * thread that is gone by the name it had at its exit (its comm, read by the
 * thread itself in its exit destructor, or, for a thread not started
 * through pthread_create, at the last sweep that saw it).
 *
 * Lifetime: kept by dump epoch, like the labels' strings: each dump's cut
 * takes a token (ptp_graveyard_cut); once that dump has named its window's
 * threads it releases the token, and the names of threads that exited
 * before that cut go (every sample of theirs was in that window). So while
 * a sampler runs (ptp_graveyard_keep(1)) every thread that exits in a
 * window keeps its name until the window is written, however many exit (a
 * fixed ring of 256 lost the oldest names of a window with more exits), up
 * to PTP_GRAVEYARD_MAX names at once: beyond that the oldest is dropped
 * (counted: ptp_graveyard_dropped). While none runs, the 256 newest exits
 * are kept, as nothing releases them.
 *
 * Threads: any thread; its own mutex, never held while calling out; its
 * fork handlers (registered at first use) keep the mutex consistent.
 * Allocates (put grows a ring; a failure keeps the old size and drops the
 * oldest). Not for signal handlers.
 */
#ifndef PTP_GRAVEYARD_H
#define PTP_GRAVEYARD_H

#include <stddef.h>
#include <stdint.h>

#define PTP_GRAVEYARD_MAX 16384u

/* on: a sampler runs, keep every name until released (up to the max);
 * off: keep the 256 newest. A stop turns it off after releasing all. */
void ptp_graveyard_keep(int on);

/* Remembers that thread tid exited with this name (at most 15 bytes kept). */
void ptp_graveyard_put(uint32_t tid, const char *name);

/* A dump's cut: returns the token of the names remembered so far. */
uint64_t ptp_graveyard_cut(void);

/* The dump that took `token` has named its threads: forget the names
 * remembered before that cut. UINT64_MAX forgets every name (a stop). */
void ptp_graveyard_release(uint64_t token);

/* The name remembered for tid (the newest, when the tid was reused) into
 * name (NUL-terminated) and 0, or -ENOENT (name then ""). */
int ptp_graveyard_get(uint32_t tid, char name[16]);

/* For each i < n whose names[i] is "": the name remembered for tids[i], if
 * any (the newest). One pass over the remembered names, sorted once: for a
 * dump with many exited threads. */
void ptp_graveyard_get_many(const uint32_t *tids, size_t n, char (*names)[16]);

/* Names dropped because PTP_GRAVEYARD_MAX were kept at once. */
uint64_t ptp_graveyard_dropped(void);

#endif
