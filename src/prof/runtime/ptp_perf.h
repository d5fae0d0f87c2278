/*
 * ptp_perf.h - the perf_event engine's system calls: one software
 * "task-clock" event per thread that sends SIGPROF to that thread at every
 * sample period of its CPU time (see docs/sampler.md, "Engines").
 *
 * Why task-clock: it is driven by an hrtimer that runs while the thread
 * runs and fires at the exact CPU time a period ends (no scheduler-tick
 * granularity, unlike POSIX CPU-time timers), and a process may open it on
 * its own threads up to perf_event_paranoid 2 (with exclude_kernel when the
 * setting is above 1 and the process lacks CAP_PERFMON: then periods that
 * end in kernel mode are not sampled; without it they are, at the user
 * stack that entered the kernel). Debian's default 3 forbids
 * perf_event_open to unprivileged users: the sampler then uses the timer
 * engine.
 *
 * Threads: any thread except the signal handler (the handler only calls
 * ioctl(PERF_EVENT_IOC_PERIOD) itself, see ptp_handler.c). Errors are
 * negative errno values.
 */
#ifndef PTP_PERF_H
#define PTP_PERF_H

#include <stdint.h>

#include "prof/runtime/ptp_threads.h"
#include "prof/signal/ptp_expiry.h"

/* Whether perf events can be used here: opens and closes one event on the
 * calling thread. Returns 0 or -errno (-EACCES/-EPERM: perf_event_paranoid
 * or a seccomp/container policy; -ENOSYS; -ENOENT: no such event). */
int ptp_perf_probe(void);

/* An open event's identity: the (device, inode) of its file and its
 * kernel id (PERF_EVENT_IOC_ID), which tells two events apart even though
 * every perf event file shares one anonymous inode. */
typedef struct ptp_perf_ident {
  uint64_t dev, ino, id;
} ptp_perf_ident;

/* Opens a task-clock event on thread tid (of this process), still
 * disabled, whose first sample comes after first_ns of its CPU time and
 * which will send SIGPROF to that thread at each overflow (F_SETOWN_EX
 * F_OWNER_TID, F_SETSIG, O_ASYNC). The fd is close-on-exec and placed above
 * the descriptor floor (cache/ptp_fd.h: the low numbers stay the
 * program's); F_SETSIG and O_ASYNC are set on the final number, the one
 * the kernel reports in si_fd. Returns 0, *fd_out and *id_out, or -errno
 * (-ESRCH: the thread exited; -EMFILE: no fd left, below or above the
 * floor). */
int ptp_perf_open(uint32_t tid, int64_t first_ns, int *fd_out, ptp_perf_ident *id_out);

/* 1 when fd still names the event id (not closed by the program, not its
 * number reused for another file or event), else 0. */
int ptp_perf_is(int fd, const ptp_perf_ident *id);

/* Enables an event from ptp_perf_open. Publish the fd to the handler first:
 * a signal it does not recognise does not set the regular period, and with
 * a short first period the thread would be flooded. Returns 0 or -errno. */
int ptp_perf_enable(int fd);

/* Whether events are opened with exclude_kernel (decided by the first
 * probe or open: set only when the kernel refuses events that count kernel
 * time): then a period that ends in kernel mode sends no signal. */
int ptp_perf_excludes_kernel(void);

/* ptp_perf_expiry_backed, the handler's steal guard (whether an
 * expiration of the event has the thread's CPU time behind it), is
 * signal/ptp_expiry.h's. */

#endif
