/*
 * ptp_graveyard.h - the names of threads that exited: a snapshot names a
 * thread that is gone by the name it had (its comm, read by the thread
 * itself at exit), for the GRAVE_N most recent exits.
 *
 * Threads: any thread; its own mutex, never held while calling out; its
 * fork handlers (registered at first use) keep the mutex consistent.
 * Not for signal handlers.
 */
#ifndef PTP_GRAVEYARD_H
#define PTP_GRAVEYARD_H

#include <stdint.h>

/* Remembers that thread tid exited with this name (at most 15 bytes kept;
 * the oldest entry is overwritten). */
void ptp_graveyard_put(uint32_t tid, const char *name);

/* The name remembered for tid (the newest, when the tid was reused) into
 * name (NUL-terminated) and 0, or -ENOENT (name then ""). */
int ptp_graveyard_get(uint32_t tid, char name[16]);

#endif
