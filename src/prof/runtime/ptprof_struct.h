/*
 * ptprof_struct.h - the sampler handle's fields and the calls between the
 * two units that share them: ptprof.c (the public API, the lifecycle and
 * the consumer thread) calls ptp_dump.c (the dump cycle, the drain of the
 * ring into the window, the handle's log lines); ptp_dump.c calls nothing
 * of ptprof.c. Private to src/prof/runtime.
 *
 * Locks (ptprof.c's header comment says who takes them when): api_mu,
 * then agg_mu. The fields each guards are marked below.
 */
#ifndef PTPROF_STRUCT_H
#define PTPROF_STRUCT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ptprof.h"
#include "prof/output/ptp_snapstore.h"
#include "prof/runtime/ptp_agg.h"
#include "prof/runtime/ptprof_internal.h"
#include "prof/signal/ptp_producer.h"
#include "prof/symbols/ptp_symbolize.h"

struct ptprof {
  /* configuration (immutable after new, except dir under api_mu) */
  int hz;
  int64_t period_ns;
  int keep;
  int64_t interval_ns;
  int skip_empty;              /* opt->skip_empty */
  int64_t periodic_next_mono;  /* consumer: a skipped periodic dump's next
                                  try (api_mu not needed: consumer only) */
  char *dir;
  char *prefix;
  char family[PTP_SNAPSTORE_PREFIX_MAX + 1];   /* "" or opt->family_prefix */
  int keep_total;
  ptprof_log_fn log;
  void *log_user_data;
  pid_t pid;                   /* creating process: a forked child is refused */
  int engine_opt;              /* PTPROF_ENGINE_* asked for */
  _Atomic int engine;          /* chosen at the last start (PTP_ENGINE_*) */
  int engine_why;              /* AUTO fell back to the timer: the probe's -errno */
  uint64_t engine_nofile;      /* AUTO took the timer for RLIMIT_NOFILE: the soft limit */

  pthread_mutex_t api_mu;
  int running;
  ptp_shared *sh;
  pthread_t consumer;
  sem_t consumer_ready;
  _Atomic int consumer_stop;
  ptp_symbolizer *sym;
  ptp_snapstore *store;
  int err_latched;             /* an error was logged; cleared by a good dump */
  uint64_t flushed_at_cut;     /* threads with exit losses, at the last cut */

  pthread_mutex_t agg_mu;
  ptp_agg *agg, *agg_spare;
  int64_t win_start_mono, win_start_real, blind_ns;
  int in_dump;                 /* between a dump's cut and its resume */
  uint64_t blind_drops;        /* expirations dropped in the blind window
                                  before the current window (agg_mu) */

  /* The consumer thread's CPU clock (it is never sampled): read at each cut
   * while it runs, and its last value stored by the thread as it ends
   * (a stop joins it before the final dump). */
  clockid_t consumer_clk;
  int consumer_clk_ok;
  _Atomic int consumer_ended;
  _Atomic int64_t consumer_cpu_end;
  int64_t consumer_cpu_at_cut; /* its CPU at the previous cut (api_mu) */
  int64_t process_cpu_at_cut;  /* the process's CPU clock at the previous cut,
                                  or when sampling started; -1 unknown (api_mu) */

  ptp_window_hook_fn hook;     /* tests: sees each window before encoding */
  void *hook_ctx;
  ptp_resume_hook_fn resume_hook;   /* tests: runs after sampling resumed */
  void *resume_hook_ctx;

  _Atomic uint64_t st_samples, st_signals, st_truncated, st_dumps, st_dump_errors;
  _Atomic uint64_t st_drops[PTP_DROP__COUNT];
  _Atomic uint64_t st_no_cpu;  /* perf expirations ignored: no CPU behind them */
  _Atomic int64_t st_own_cpu;  /* the consumer's CPU up to the last cut */
  _Atomic int64_t st_last_window, st_last_blind;
};

/* A log line through the handle's callback (none: nothing); the whole
 * line, or without memory for it its first 511 bytes marked "...". */
void ptp_logf(ptprof *p, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Moves every published slot of the ring into the aggregation; returns
 * how many slots it took. agg_mu held. */
size_t ptp_drain_locked(ptprof *p);

/* The consumer thread's CPU clock now (its last value once it ended). */
int64_t ptp_consumer_cpu_ns(ptprof *p);

/* The process's CPU clock now (every thread, exited ones included), or -1
 * if it cannot be read. */
int64_t ptp_process_cpu_ns(void);

/* One dump (ptprof.c's header comment: "Dump cycle"): cut, drops,
 * comments, names, encode and write, latch, resume. api_mu held. Writes
 * the snapshot's path into path_out (cap bytes) when not NULL. 0, or a
 * negative error (ptprof_strerror). With skip_empty, first drains the
 * ring and returns 1 without a cut when the window holds nothing (no
 * aggregated entry, no blind-window drop, no sampled drop counted). */
int ptp_dump_run(ptprof *p, char *path_out, size_t cap, int skip_empty);

#endif
