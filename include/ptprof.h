/*
 * ptprof.h - CPU sampler writing gzip-compressed pprof interval snapshots.
 *
 * A library any C program can use (static libptprof.a or shared
 * libptprof.so, pkg-config `ptprof`), and a preload mode that profiles an
 * unmodified program (LD_PRELOAD=libptprof.so, see "Preload mode" below).
 *
 * How it samples (details and reasons: docs/sampler.md):
 *  - one sampling source per thread that sends SIGPROF to that thread at
 *    every period of its CPU time, so every thread is sampled in proportion
 *    to the CPU it uses. Two engines, chosen at ptprof_start
 *    (ptprof_options.engine): a perf_event "task-clock" event per thread
 *    (fires at the exact CPU time; needs perf_event_paranoid <= 2), or a
 *    POSIX timer on the thread's CPU-time clock (works everywhere; checked
 *    only at the kernel's tick: expirations it merged (si_overrun) count as
 *    extra weight). Each snapshot's comments name the engine;
 *  - threads started later get their own source before their start routine
 *    runs (the library interposes pthread_create), with a random first
 *    expiry; a /proc/self/task sweep (at start, then at most once a second
 *    while samples come in) covers threads made some other way;
 *  - CPU whose stack is not known (expirations lost at a thread's exit, a
 *    full ring, ...) is shown under one "[lost: <cause>]" pseudo-frame per
 *    cause, never under a guessed stack;
 *  - the profiler's own work (dumps, symbolization, unwind-table builds,
 *    on whatever thread runs it) and the blind window of each dump are
 *    never samples: each snapshot's comments count them;
 *  - the SIGPROF handler only walks the stack (frame pointers, plus unwind
 *    tables for libc/ld.so/libgcc/vdso prepared outside the handler) into a
 *    pre-allocated ring; a consumer thread aggregates; dumps encode one
 *    interval (the "window") each.
 *
 * Process-wide resources: SIGPROF (its handler stays installed once a sampler
 * has started, and ignores signals not sent by our timers), and the
 * pthread_create interposition (which only records each new thread's stack
 * bounds while no sampler runs). At most ONE ptprof may be started at a time
 * in a process (ptprof_start returns -EBUSY otherwise).
 *
 * Errors: every int-returning function returns 0 or a negative errno-style
 * code; ptprof_strerror() describes it in this library's terms.
 *
 * Fork: a forked child never writes the parent's window and samples
 * nothing (POSIX timers are not inherited). In the child every call on a
 * ptprof created by the parent returns PTPROF_E_FORKED, except ptprof_del
 * (which frees the child's copy without touching files) and
 * ptprof_get_stats. A child may create and start its own ptprof, but note
 * that starting one calls dl_iterate_phdr, which hangs in a child forked
 * while another thread was inside dlopen/dlclose/dl_iterate_phdr (glibc does
 * not reset that lock): exec first, or fork from a single-threaded process.
 *
 * Preload mode: a constructor that exists only in libptprof.so starts a
 * sampler when the environment has PTPROF_DIR, configured by
 *   PTPROF_DIR       snapshot directory (created if missing; required)
 *   PTPROF_PREFIX    file name prefix (default "profile-")
 *   PTPROF_HZ        samples per CPU second per thread (default 99)
 *   PTPROF_INTERVAL  seconds between periodic snapshots, decimals allowed
 *                    (default 0 = only the final one)
 *   PTPROF_KEEP      snapshots of this prefix kept (default 8)
 *   PTPROF_KEEP_TOTAL  snapshots kept for the whole family: PTPROF_PREFIX
 *                    and every "<PTPROF_PREFIX>pid<PID>-" child (default 64);
 *                    after each write the family's oldest (by mtime) are
 *                    removed, never another prefix's files (not even one
 *                    that merely starts with PTPROF_PREFIX, except the
 *                    reserved "<PTPROF_PREFIX>pid<digits>-" form), never a
 *                    temp file being written; processes of the family
 *                    prune under a flock of the directory
 *   PTPROF_SYMCACHE  symbol cache directory, "off" to disable (default
 *                    $XDG_CACHE_HOME/ptprof/symbols, ~/.cache/... without
 *                    it); see docs/profiling.md. Read by every user of
 *                    the library (the daemon and TUI too), not only here:
 *                    the symbolizer consults it at its first dump
 *   PTPROF_ENGINE    auto (default), perf or timer: see ptprof_options.engine
 * and writes a final snapshot at exit (atexit). The first process uses
 * PTPROF_PREFIX as is; programs exec'd below it (they inherit LD_PRELOAD and
 * the environment) use "<PTPROF_PREFIX>pid<PID>-", so processes never rotate
 * each other's files. A forked child that does not exec is not sampled (see
 * Fork above and docs/sampler.md).
 * Snapshots are created 0600 and directories the library creates 0700,
 * whatever the umask; a PTPROF_DIR that group or others can access gets a
 * warning on stderr.
 * Errors go to stderr with a "ptprof:" prefix.
 */
#ifndef PTPROF_H
#define PTPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PTPROF_API __attribute__((visibility("default")))
#else
#define PTPROF_API
#endif

typedef struct ptprof ptprof;

/* Error codes beyond plain errno values (still negative ints). Plain errno
 * values also occur: -EINVAL (bad argument), -ENOMEM, -EBUSY (another
 * sampler is started in this process, or a foreign SIGPROF handler is
 * installed), -EALREADY (already started), -ENOTCONN (not started),
 * -EDESTADDRREQ (no directory set), and I/O errors of the snapshot store
 * (-ENOSPC, -EROFS, -ENOENT, -EACCES, -EIO, ...). */
#define PTPROF_E_FORKED   (-10001) /* called in a forked child on the parent's sampler */

/* Log levels passed to the log callback (the same values as PTCON_LOG_*
 * in ptprof_console.h). */
#define PTPROF_LOG_ERROR 0
#define PTPROF_LOG_WARN  1
#define PTPROF_LOG_INFO  2

/* The log callback; ptcon_log_fn (ptprof_console.h) has the same shape, so
 * one function can serve both. level: PTPROF_LOG_*; msg: one complete line,
 * no trailing newline, valid only during the call; user_data: the options'
 * log_user_data. Called for one-time messages (the first snapshot write
 * error after a good one, a failed timer, ...), never from the signal
 * handler. It may run on the consumer thread or on the thread calling
 * ptprof_dump/ptprof_stop; it must not call back into this ptprof. */
typedef void (*ptprof_log_fn)(int level, const char *msg, void *user_data);

/* Options of ptprof_new. Fill with ptprof_options_init first: every field
 * is then 0 or NULL, which means the default stated beside it (so a field
 * added later gets its default in code that does not know it). */
typedef struct ptprof_options {
  int hz;                  /* 1..10000; 0 = default 99 */
  const char *dir;         /* snapshot directory (copied); NULL = none yet:
                              ptprof_set_dir must give one before a dump
                              (periodic dumps wait for it; the window runs on) */
  const char *prefix;      /* file name prefix (copied); NULL = "profile-";
                              must not contain '/' */
  int keep;                /* newest snapshots kept; 0 = default 8 */
  int64_t interval_ms;     /* periodic snapshot interval; 0 = none */
  ptprof_log_fn log;       /* NULL = messages are dropped */
  void *log_user_data;     /* passed to log as is */
  const char *family_prefix; /* NULL = none; else a prefix of `prefix`
                              (copied): after each write the family (this
                              base and every "<base>pid<N>-" prefix) keeps
                              at most keep_total snapshots in the directory,
                              oldest first removed (preload mode uses it) */
  int keep_total;          /* >= 1 when family_prefix is set; else unused */
  int engine;              /* PTPROF_ENGINE_*; 0 = AUTO */
  int skip_empty;          /* 1: a periodic dump whose window holds nothing
                              (no sample, no pseudo-frame, no drop counted)
                              writes no file and the window goes on, so an
                              idle program's empty intervals never push its
                              last snapshots with samples out of the kept
                              ones; manual and final dumps always write.
                              0 = every interval is written */
} ptprof_options;

/* Sampling engines (ptprof_options.engine, ptprof_stats.engine). */
#define PTPROF_ENGINE_AUTO  0  /* perf when a probe event opens, else timer */
#define PTPROF_ENGINE_PERF  1  /* perf_event task-clock per thread; ptprof_start
                                  fails (-EACCES, -EPERM, -ENOSYS, ...) when
                                  perf events cannot be used */
#define PTPROF_ENGINE_TIMER 2  /* POSIX CPU-time timer per thread */
/* Which to choose: perf is exact (short threads, a thread's last partial
 * period, short bursts between sleeps) but costs the kernel ~3 us at each
 * context switch of a sampled thread on this project's VMs (the event's
 * hrtimer is stopped and restarted); the timer costs ~0.2 us there but is
 * checked only at the tick, and on a thread that runs in bursts shorter
 * than a tick it silently misses CPU (the daemon: ~15 % at 99 Hz). The
 * daemon and the TUI take AUTO. Figures: docs/performance.md, "Why the
 * perf engine costs the daemon"; docs/sampler.md, "Engines". */

/* The engine a setting names: "auto", "perf" or "timer" give
 * PTPROF_ENGINE_AUTO, _PERF or _TIMER; anything else (NULL included)
 * -EINVAL. For programs that let their users choose (the preload's
 * PTPROF_ENGINE, the daemon's and TUI's POLYTOKEN_PROFILE_ENGINE), so the
 * names are the same everywhere. Any thread. */
PTPROF_API int ptprof_engine_from_name(const char *name);

/* Why expirations were not recorded with their stack: the index of
 * ptprof_stats.drops. Each cause's expirations are counted in a snapshot's
 * "dropped samples:" comment under ptprof_drop_name's name and, being the
 * program's CPU, also appear as samples under the pseudo-frame named
 * beside the cause (docs/sampler.md, "Pseudo-frames"); the blind window
 * (DUMPING) and the profiler's own work (OWN_WORK) are counted in the
 * comments only, never as samples. Numbers are stable; a cause added later
 * gets the next one. */
#define PTPROF_DROP_RING_FULL   0  /* "[lost: ring full]": no free ring slot */
#define PTPROF_DROP_DUMPING     1  /* no sample: arrived while the previous
                                      dump was encoded and written (the blind
                                      window; counted in the next snapshot;
                                      older snapshots show "[lost: during dump]") */
#define PTPROF_DROP_NO_STACK    2  /* "[lost: no stack]": nothing readable at the PC */
#define PTPROF_DROP_REENTRANT   3  /* "[lost: reentrant signal]" */
#define PTPROF_DROP_THREAD_EXIT 4  /* "[lost: thread exit]": due at a thread's exit,
                                      never delivered */
#define PTPROF_DROP_KERNEL      5  /* "[lost: kernel mode]": perf engine with
                                      exclude_kernel, periods ended in the kernel */
#define PTPROF_DROP_UNDELIVERED 6  /* "[lost: signal not delivered]": perf engine,
                                      signals merged while one was pending */
#define PTPROF_DROP_NO_MEMORY   7  /* "[lost: out of memory]": the aggregation had
                                      no memory for a new stack */
#define PTPROF_DROP_OWN_WORK    8  /* no sample: the thread was inside the
                                      profiler's own work (a dump, symbols,
                                      an unwind-table build) */
#define PTPROF_DROP_BLOCKED     9  /* "[lost: signal blocked]": due while the thread
                                      kept SIGPROF blocked (sigprocmask,
                                      pthread_sigmask, ...) */
#define PTPROF_DROP_FD_CLOSED   10 /* "[lost: sampler descriptor closed]": perf
                                      engine, due after the program closed the
                                      thread's event descriptor, until it was
                                      opened again */
#define PTPROF_DROP_CAUSES      11 /* causes this version knows */
#define PTPROF_DROPS_MAX        16 /* size of ptprof_stats.drops (room for more) */

/* The short name of a drop cause ("ring_full", "dumping", "no_stack",
 * "reentrant", "thread_exit", "kernel_mode", "undelivered", "no_memory",
 * "own_work", "blocked", "fd_closed"),
 * as in a snapshot's comment; NULL for a number this version does not
 * know. Any thread. */
PTPROF_API const char *ptprof_drop_name(int cause);

/* Cumulative counters since ptprof_new (all windows). */
typedef struct ptprof_stats {
  uint64_t samples;        /* timer expirations recorded into windows */
  uint64_t drops[PTPROF_DROPS_MAX]; /* expirations not recorded with their
                              stack, by cause (PTPROF_DROP_*; the entries
                              from PTPROF_DROP_CAUSES on stay 0) */
  uint64_t truncated;      /* recorded expirations whose stack is truncated */
  uint64_t dumps;          /* snapshot files written */
  uint64_t dump_errors;    /* dumps that failed (encode or write) */
  uint64_t timers_created; /* per-thread timers or perf events created */
  uint64_t timers_deleted; /* ... and deleted (exited threads, stop) */
  uint64_t timer_errors;   /* timer_create/settime/perf_event_open failures */
  uint64_t threads_flushed;/* exiting threads with expirations accounted as
                              lost at exit (see docs/sampler.md) */
  int64_t  last_window_ns; /* duration of the last window dumped */
  int64_t  last_blind_ns;  /* blind period before the current window */
  uint64_t lost_thread_exit; /* expirations due by exiting threads' CPU time
                              but never delivered (under "[lost: thread exit]") */
  int      engine;         /* PTPROF_ENGINE_PERF/TIMER of the last start; 0 */
  uint64_t expirations_no_cpu; /* perf engine: expirations ignored because the
                              thread's CPU clock did not back them (a VM's
                              steal time; see docs/sampler.md) */
  int64_t  own_thread_cpu_ns; /* CPU of the profiler's own threads, which are
                              never sampled (the consumer thread), up to the
                              last dump's cut or the stop; its work on other
                              threads is drops[PTPROF_DROP_OWN_WORK] */
  uint64_t fds_lost;       /* perf event descriptors the program closed (or
                              whose number it reused): never touched again,
                              the thread's event opened anew (docs/sampler.md,
                              "Descriptors") */
  int      stopped;        /* PTPROF_STOPPED_*: why sampling stopped for good
                              in this process, or 0 */
} ptprof_stats;

/* ptprof_stats.stopped (docs/sampler.md, "Signals"): sampling could not go
 * on without changing the program, so it stopped for good. */
#define PTPROF_STOPPED_HANDLER_REPLACED 1  /* SIGPROF's handler replaced without
                                              sigaction (a raw rt_sigaction) */
#define PTPROF_STOPPED_SIGNALFD         2  /* the program reads SIGPROF through
                                              a signalfd */

/* Zero-fills *opt: every field 0 or NULL, which ptprof_new reads as its
 * default (hz 99, prefix "profile-", keep 8, no interval, no dir, no log,
 * no family, engine AUTO). Any thread; cannot fail. */
PTPROF_API void ptprof_options_init(ptprof_options *opt);

/* Creates a sampler (not started). opt may be NULL (defaults). Copies what
 * it needs from opt. Creates the snapshot directory when opt->dir is set
 * (mkdir -p) and removes leftover temp files of this prefix there.
 * Returns 0 and *out, or -EINVAL (bad option), -ENOMEM, or a store error.
 * Any thread. */
PTPROF_API int ptprof_new(ptprof **out, const ptprof_options *opt);

/* Starts sampling every thread of the process, current and future: builds
 * the unwind tables of the system libraries (a few ms), installs the SIGPROF
 * handler (once per process; it stays), starts the consumer thread (which
 * itself is not sampled and blocks every signal), picks the engine (AUTO:
 * perf if a probe event opens and the soft RLIMIT_NOFILE leaves room for
 * one descriptor per thread) and arms one event or timer per thread. The
 * first window starts now.
 * SIGPROF stays the program's (docs/sampler.md, "Signals"): a handler the
 * program installed before, or installs later, is kept as its virtual
 * disposition, reported by sigaction and given every SIGPROF that is not
 * the sampler's; SIG_DFL and SIG_IGN act on those alone.
 * Returns 0, -EALREADY, -EBUSY (another ptprof runs in this process, or
 * sampling was stopped for good in it: the program replaced the handler
 * behind sigaction's back or reads SIGPROF through a signalfd), -ENOMEM,
 * the perf probe's error with PTPROF_ENGINE_PERF (-EACCES, -EPERM, ...), or
 * a system error. Thread-safe against the other calls on the same
 * ptprof. */
PTPROF_API int ptprof_start(ptprof *p);

/* Manual dump: closes the current window, writes it as a snapshot, starts a
 * fresh window. Samples arriving while the snapshot is encoded and written
 * are dropped (counted as "dumping" in the next snapshot's comments), never
 * rolled into the next window; the calling thread's own CPU for the dump is
 * the profiler's (counted as "own_work", never sampled). path_out (may be
 * NULL) receives the file's path, truncated to cap bytes (NUL-terminated). Blocks for the encode and write
 * (typically a few ms). Returns 0, -ENOTCONN (not started), -EDESTADDRREQ (no
 * directory; the window keeps running), PTPROF_E_FORKED, or the encoder's or
 * store's error (the window is then lost, older snapshots stay, and the
 * first such error after a success is logged). Thread-safe; dumps are
 * serialized. */
PTPROF_API int ptprof_dump(ptprof *p, char *path_out, size_t cap);

/* ptprof_dump for a program's own periodic timer (the daemon's): returns 1
 * and writes nothing when the window holds nothing (no sample, no
 * pseudo-frame, no drop counted): the window goes on, its blind window and
 * the profiler's own work are counted in the next snapshot written;
 * otherwise exactly ptprof_dump. The check drains the samples in flight
 * first. Thread-safe. */
PTPROF_API int ptprof_dump_if_sampled(ptprof *p, char *path_out, size_t cap);

/* A section of the calling thread's CPU that is the profiler's own: work a
 * program does only because it is profiled, around ptprof_dump (naming
 * the pool thread that runs a dump, the bookkeeping of that job, logging
 * the path written). Samples taken inside are counted as "own_work" in the
 * next snapshot's comments and never recorded, exactly as the CPU of
 * ptprof_dump itself, and under the perf engine limited to user mode its
 * periods spent in the kernel count as the profiler's own too, not as the
 * program's "[lost: kernel mode]". Begin and end pair up on one thread;
 * sections nest (the outermost one counts); the struct lives on the
 * caller's stack in between and its fields are the library's. Works with
 * no sampler started (it marks the thread only). While a sampler runs,
 * the outermost section's CPU (by the thread's clock) is kept out of the
 * thread's figure in the snapshot's "threads' CPU" comment and told as the
 * profiler's. Cost: a thread-local counter; while a sampler runs, one read
 * of the thread's CPU clock and the registry's mutex at each end of the
 * outermost section.
 * Any thread; not in a signal handler. Never bracket the program's own
 * work with it: what a section hides is in no profile. */
typedef struct ptprof_own_section {
  int timed_;         /* the library's: timed (a sampler runs, the thread has a record) */
  int64_t cpu0_;      /* the library's: the thread's CPU clock at begin */
  uint64_t hits0_;    /* the library's: own-work samples seen at begin */
} ptprof_own_section;
PTPROF_API void ptprof_own_begin(ptprof_own_section *s);
PTPROF_API void ptprof_own_end(ptprof_own_section *s);

/* Later snapshots go to dir (copied; created if missing). The current window
 * is not cut. Returns 0, -EINVAL, or the store's error (the old directory then
 * stays in use). Thread-safe. */
PTPROF_API int ptprof_set_dir(ptprof *p, const char *dir);

/* Stops sampling: deletes every timer, stops the consumer thread. With
 * final_dump != 0, writes the last window (from the previous dump to now)
 * and returns its path in path_out like ptprof_dump (a final dump error is
 * returned, sampling is stopped anyway). May be started again later (a new
 * window). Returns 0, -ENOTCONN (not started), or the dump's error.
 * Thread-safe; must not be called from a thread the sampler is stopping
 * (i.e. not from the log callback). */
PTPROF_API int ptprof_stop(ptprof *p, int final_dump, char *path_out, size_t cap);

/* Stops (without a final dump) if started, and frees everything. NULL is a
 * no-op. No other call on p may run concurrently or follow. */
PTPROF_API void ptprof_del(ptprof *p);

/* Copies the counters. Any thread; the counters are read without locks
 * (values may be a few samples apart from each other). The call is the
 * profiler's own work (never a sample of the caller; under the perf engine
 * limited to user mode it ends with the registry's mutex, as
 * ptprof_own_end does). */
PTPROF_API void ptprof_get_stats(const ptprof *p, ptprof_stats *out);

/* A static English description of an error code returned by this library
 * (including plain negative errno values). Never NULL; thread-safe. */
PTPROF_API const char *ptprof_strerror(int err);

/* ---- labels ------------------------------------------------------------
 * Key/value labels on the CPU samples of the calling thread, written as
 * pprof Sample.label: `go tool pprof -tags`, `-tagfocus=KEY=REGEXP`,
 * `-tagroot=KEY` (see docs/sampler.md "Labels"). Like Go's pprof.Do for a
 * C thread: push before a piece of work, pop after it; every sample taken
 * on this thread in between carries the label.
 *
 * Besides these, samples taken inside a task console poll
 * (ptcon_task_poll_begin/_end, include/ptprof_console.h) carry the task's
 * labels without any call: `task` (number: the console's task id),
 * `task_kind` (the console's task name) and `task_loc` (its spawn
 * file:line). Those keys, `thread_name` and `thread_id` are reserved.
 *
 * Contract:
 *  - per thread, a stack of at most PTPROF_LABELS_MAX labels; pop removes
 *    the most recent push. A key pushed again hides the outer value until
 *    popped (as pprof.Do nests);
 *  - key: 1..PTPROF_LABEL_LEN_MAX bytes of [A-Za-z0-9_.-]; value:
 *    1..PTPROF_LABEL_LEN_MAX bytes of UTF-8 without control characters.
 *    Both are copied (interned: the signal handler copies only their ids);
 *  - at most PTPROF_LABEL_STRINGS_MAX distinct strings are interned at
 *    once process-wide; a string is forgotten once no thread has it pushed
 *    or cached and the snapshot holding its samples is written (while no
 *    sampler runs: at once). Each thread caches the last key=value it
 *    pushed (at most two strings per thread, given back at its exit), so
 *    pushing the same label again takes no lock;
 *  - labels a thread still has pushed when it exits are popped for it;
 *  - the calls work with or without a running sampler (and in preload
 *    mode: they are exported by libptprof.so);
 *  - cost: a push of the thread's cached label and its pop are two string
 *    compares and a few thread-local stores; any other push or pop takes
 *    one uncontended mutex and two hash look-ups (figures in
 *    docs/performance.md, "Labels"); never call
 *    them from a signal handler.
 * Errors: -EINVAL (NULL, empty, a bad character, a reserved key),
 * PTPROF_E_LABEL_TOO_LONG, PTPROF_E_LABELS_FULL (this thread already has
 * PTPROF_LABELS_MAX), PTPROF_E_LABEL_TABLE (too many distinct strings),
 * PTPROF_E_LABELS_EMPTY (pop with nothing pushed). A failed push changes
 * nothing. */
#define PTPROF_LABELS_MAX 4
#define PTPROF_LABEL_LEN_MAX 63
#define PTPROF_LABEL_STRINGS_MAX 4096
#define PTPROF_E_LABELS_FULL    (-10002) /* PTPROF_LABELS_MAX labels pushed already */
#define PTPROF_E_LABELS_EMPTY   (-10003) /* pop without a push */
#define PTPROF_E_LABEL_TOO_LONG (-10004) /* key or value over PTPROF_LABEL_LEN_MAX */
#define PTPROF_E_LABEL_TABLE    (-10005) /* PTPROF_LABEL_STRINGS_MAX strings interned */

/* Pushes key=value on the calling thread's label stack. Returns 0 or an
 * error above. Any thread; not async-signal-safe. A sample taken inside
 * this call or ptprof_labels_pop is counted as the profiler's own work,
 * not recorded. */
PTPROF_API int ptprof_labels_push(const char *key, const char *value);
/* Pops the calling thread's most recent label. Returns 0 or
 * PTPROF_E_LABELS_EMPTY. Any thread; not async-signal-safe. */
PTPROF_API int ptprof_labels_pop(void);

#ifdef __cplusplus
}
#endif
#endif
