/*
 * ptp_window.h - the hand-off between the sampler (sampler.c and friends,
 * which collect and aggregate samples) and the dump side (symbolizer, pprof
 * encoder, snapshot store). One ptp_window is one interval snapshot.
 *
 * Ownership: the sampler owns every array; the dump side reads them only for
 * the duration of ptp_pprof_encode() and keeps no pointer into them.
 * Threads: built and consumed on the sampler's consumer thread (or under the
 * sampler's dump lock); never touched by the signal handler.
 */
#ifndef PTP_WINDOW_H
#define PTP_WINDOW_H

#include <stddef.h>
#include <stdint.h>

/* Why a sample was not recorded; each count ends up in the profile's
 * comments ("dropped samples: ring_full=3 ..."), none is silently lost.
 * The program's CPU whose stack is unknown is also shown as a sample
 * under its cause's pseudo-frame (ptp_lost_frame_name); the two causes
 * that are not the program's CPU of the window are counted only
 * (ptp_drop_is_sampled): the blind window and the profiler's own work. */
enum ptp_drop_cause {
  PTP_DROP_RING_FULL = 0,   /* handler found no free slot */
  PTP_DROP_DUMPING,         /* arrived while the previous dump was encoded and
                               written (the blind window before a window);
                               counted in the next snapshot, never a sample */
  PTP_DROP_NO_STACK,        /* thread's stack bounds unknown, PC unreadable */
  PTP_DROP_REENTRANT,       /* signal nested inside the handler */
  PTP_DROP_THREAD_EXIT,     /* due by a thread's CPU time at its exit but never
                               delivered (timer engine: the kernel's tick) */
  PTP_DROP_KERNEL,          /* perf engine with exclude_kernel (paranoid >= 2):
                               periods that ended while the thread ran in the
                               kernel are not signalled; counted from the
                               event's CPU time at each dump and at exit */
  PTP_DROP_UNDELIVERED,     /* perf engine counting kernel time: periods a
                               live thread's CPU time completed that no signal
                               reported (two overflows before the handler ran
                               merge into one pending SIGPROF); counted at
                               each dump */
  PTP_DROP_NO_MEMORY,       /* taken, but the aggregation had no memory for
                               a new stack (ptp_agg_add: -ENOMEM) */
  PTP_DROP_OWN_WORK,        /* the thread was inside profiler work (a dump,
                               symbolization, a table build:
                               signal/ptp_own_work.h): the profiler's CPU,
                               counted, never a sample */
  PTP_DROP_BLOCKED,         /* due while the thread kept SIGPROF blocked: the
                               delivery at unblock would name the unblocking
                               code's stack, not the one that used the CPU */
  PTP_DROP_FD_CLOSED,       /* perf engine: due after the program closed the
                               thread's event descriptor, until it was opened
                               again */
  PTP_DROP__COUNT
};

/* Whether a cause's expirations are shown as samples under its
 * pseudo-frame: every cause but the blind window's and the profiler's own
 * work, which are counted in the comments only (that CPU is not the
 * program's in this window). */
static inline int ptp_drop_is_sampled(int cause) {
  return cause >= 0 && cause < PTP_DROP__COUNT && cause != PTP_DROP_DUMPING &&
         cause != PTP_DROP_OWN_WORK;
}

/* The pseudo-frame under which the expirations of each sampled drop cause
 * appear in a profile (a PTP_SAMPLE_LOST sample): CPU that was spent but
 * whose stack is unknown is shown as such, never under a guessed stack.
 * Documented in docs/sampler.md and docs/profiling.md. The blind window and
 * the profiler's own work have none (ptp_drop_is_sampled); snapshots
 * written before that showed the blind window as "[lost: during dump]". */
static inline const char *ptp_lost_frame_name(int cause) {
  switch (cause) {
  case PTP_DROP_RING_FULL: return "[lost: ring full]";
  case PTP_DROP_NO_STACK: return "[lost: no stack]";
  case PTP_DROP_REENTRANT: return "[lost: reentrant signal]";
  case PTP_DROP_THREAD_EXIT: return "[lost: thread exit]";
  case PTP_DROP_KERNEL: return "[lost: kernel mode]";
  case PTP_DROP_UNDELIVERED: return "[lost: signal not delivered]";
  case PTP_DROP_NO_MEMORY: return "[lost: out of memory]";
  case PTP_DROP_BLOCKED: return "[lost: signal blocked]";
  case PTP_DROP_FD_CLOSED: return "[lost: sampler descriptor closed]";
  default: return "[lost]";
  }
}

/* The name of each drop cause in a snapshot's "dropped samples:" comment
 * and in ptprof_drop_name (include/ptprof.h); NULL out of range. */
static inline const char *ptp_drop_name(int cause) {
  switch (cause) {
  case PTP_DROP_RING_FULL: return "ring_full";
  case PTP_DROP_DUMPING: return "dumping";
  case PTP_DROP_NO_STACK: return "no_stack";
  case PTP_DROP_REENTRANT: return "reentrant";
  case PTP_DROP_THREAD_EXIT: return "thread_exit";
  case PTP_DROP_KERNEL: return "kernel_mode";
  case PTP_DROP_UNDELIVERED: return "undelivered";
  case PTP_DROP_NO_MEMORY: return "no_memory";
  case PTP_DROP_OWN_WORK: return "own_work";
  case PTP_DROP_BLOCKED: return "blocked";
  case PTP_DROP_FD_CLOSED: return "fd_closed";
  default: return NULL;
  }
}

/* ptp_sample.flags */
#define PTP_SAMPLE_TRUNCATED   0x1u  /* the walk stopped early (bad frame, system
                                        object without unwind info, depth cap);
                                        the encoder appends a "[truncated]" root */
#define PTP_SAMPLE_DEPTH_CAP   0x2u  /* stopped at the frame cap */
#define PTP_SAMPLE_LOST        0x4u  /* not a stack: nframes == 1 and frames[0]
                                        is a ptp_drop_cause; the encoder writes
                                        one pseudo-frame, ptp_lost_frame_name */

/* Labels of a sample as the handler copied them (ptp_label_set.h): the
 * console task being polled (its 64-bit console id, generation included;
 * 0 = outside any poll, PTP_TASK_TOO_DEEP = nested deeper than the seam
 * keeps) and n user labels as interned string ids (key, value) pairs, each
 * >= 1. Ids only: names are resolved at dump time (ptp_labels.h). */
#define PTP_LABELS_MAX 4u
#define PTP_TASK_TOO_DEEP UINT64_MAX
typedef struct ptp_label_ids {
  uint64_t task;
  uint32_t n;                       /* <= PTP_LABELS_MAX */
  uint32_t kv[2 * PTP_LABELS_MAX];  /* kv[2i] key id, kv[2i+1] value id */
} ptp_label_ids;

/* One resolved label as the encoder writes it (Sample.label): a string
 * label when str != NULL, else a numeric one (num). */
typedef struct ptp_label {
  const char *key;
  const char *str;
  int64_t num;
} ptp_label;

/* One distinct (thread, labels, stack) with how many timer expirations hit it. */
typedef struct ptp_sample {
  uint64_t count;          /* >= 1; expirations incl. si_overrun */
  uint32_t tid;
  uint16_t nframes;        /* >= 1 */
  uint16_t flags;          /* PTP_SAMPLE_* */
  const uintptr_t *frames; /* frames[0]: interrupted PC (leaf, as is);
                              frames[i > 0]: return addresses, NOT adjusted:
                              the encoder uses frames[i] - 1 for callers */
  ptp_label_ids ids;       /* as recorded (the aggregation's key) */
  const char *thread_name; /* the thread's name when the samples were taken
                              (part of the aggregation's key), or NULL: then
                              the encoder uses the window's name of tid */
  const ptp_label *labels; /* resolved ids (ptp_labels_resolve), written after
                              thread_name/thread_id; may be NULL */
  size_t nlabels;
} ptp_sample;

typedef struct ptp_thread {
  uint32_t tid;
  char name[16];           /* NUL-terminated (comm, at most 15 chars) */
} ptp_thread;

/* The CPU of the threads of one name since the previous cut (or since
 * sampling started), by the threads' own CPU clocks: live threads read at
 * the cut, exited ones at their exit (runtime/ptp_threads.h,
 * ptp_threads_cpu_cut). samples: the window's expirations of those
 * threads (pseudo-frames included), for the reader to set against the
 * CPU. An entry with name "" and nthreads 0 is never made; the
 * threads of no name have name "". */
typedef struct ptp_thread_cpu {
  char name[16];           /* NUL-terminated */
  uint32_t nthreads;       /* threads of this name that ran in the window */
  int64_t cpu_ns;
  uint64_t samples;        /* of these threads (by tid), whatever their
                              thread_name label says */
  char sampled_as[2][16];  /* other thread_name labels of those samples (a
                              thread that renames itself, e.g. per job):
                              up to two, "" unused */
  int sampled_as_more;     /* ... and more than two */
  int others;              /* the bucket of exits beyond the per-name slots
                              (name "(other names)"), printed as such */
} ptp_thread_cpu;

typedef struct ptp_window {
  int64_t start_ns;        /* CLOCK_REALTIME ns since the epoch: time_nanos */
  int64_t duration_ns;     /* exact window length: duration_nanos */
  int64_t period_ns;       /* 1e9 / hz, integer division (99 Hz: 10101010) */
  int hz;
  const ptp_sample *samples;
  size_t nsamples;
  const ptp_thread *threads;  /* names for the tids seen in samples */
  size_t nthreads;
  uint64_t drops[PTP_DROP__COUNT]; /* by cause; drops[PTP_DROP_DUMPING] are
                              the expirations of the blind window before
                              this one, drops[PTP_DROP_OWN_WORK] those taken
                              inside profiler work since the previous cut */
  int64_t blind_ns;        /* length of the blind period (previous dump's
                              encode + write) just before start_ns; 0 if none */
  int64_t own_thread_cpu_ns; /* CPU of the profiler's own unsampled threads
                              (the consumer) since the previous cut */
  int64_t process_cpu_ns;  /* the whole process's CPU since the previous cut
                              (or since sampling started): the blind window
                              and this window, every thread, the profiler's
                              own included; 0 = not known (no line) */
  const ptp_thread_cpu *thread_cpu; /* every name, most CPU first; NULL/0
                              = not known (no line) */
  size_t nthread_cpu;
  int64_t thread_own_ns;   /* the profiler's own work on application
                              threads over the same span (own-work
                              sections, by their CPU clocks), kept out of
                              their cpu_ns; with own_thread_cpu_ns, the
                              own-work comment's CPU */
  const char *const *comments;  /* extra comment lines, may be NULL */
  size_t ncomments;
} ptp_window;

#endif
