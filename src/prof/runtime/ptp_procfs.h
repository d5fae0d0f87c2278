/*
 * ptp_procfs.h - what the thread registry reads from /proc about this
 * process's threads: the task list, a thread's start time and name, the
 * main thread's stack. Parsing only, no state.
 *
 * Threads: any thread; not for signal handlers (file I/O, allocation).
 * Errors: 0 or negative errno values.
 */
#ifndef PTP_PROCFS_H
#define PTP_PROCFS_H

#include <stddef.h>
#include <stdint.h>

/* The tids listed in /proc/self/task (valid ones: 1 .. PTP_TID_LIMIT - 1),
 * sorted ascending, in a malloc'd array (*out, caller frees; NULL when
 * n is 0). Returns 0, -ENOMEM, or the errno of opendir. */
int ptp_procfs_tasks(uint32_t **out, size_t *n);

/* A thread's start time in clock ticks since boot (field 22 of
 * /proc/self/task/<tid>/stat), 0 if unreadable: tells a reused tid apart. */
uint64_t ptp_procfs_start_ticks(uint32_t tid);

/* The thread's name (/proc/self/task/<tid>/comm, without the newline,
 * at most 15 bytes, NUL-terminated) into name. Returns 0, or -errno of
 * open/read (-ENOENT: the thread is gone), name then "". */
int ptp_procfs_comm(uint32_t tid, char name[16]);

/* The names of n threads at once (names[i] for tids[i], "" where it
 * cannot be read: the thread is gone), in one pass on the ptprof-io
 * helper rather than one hand-off per thread. Returns how many could not
 * be read. */
size_t ptp_procfs_comms(const uint32_t *tids, size_t n, char (*names)[16]);

/* The main thread's stack: the "[stack]" mapping's top (/proc/self/maps),
 * and a bottom at most RLIMIT_STACK below it (it grows down; 1 GiB for an
 * unlimited one). 0, 0 when not found. */
void ptp_procfs_main_stack(uintptr_t *lo, uintptr_t *hi);

#endif
