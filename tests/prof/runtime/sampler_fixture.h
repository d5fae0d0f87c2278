/*
 * sampler_fixture.h - what the sampler's unit tests (test_sampler_*.c)
 * share: CPU clocks and waits on them, hot functions in their own
 * sections ("ptt_<name>", so the linker's __start_/__stop_ symbols give
 * their exact address ranges: a sample is "in" a function when one of its
 * frames, leaf PC or return address - 1, lies in that range), a deep copy
 * of the windows a sampler dumps (the window hook), worker threads that
 * burn a given CPU time, and sampler start-up.
 *
 * Wall-clock time is never asserted: sample counts are compared with the
 * sampled thread's own CPU clock (CLOCK_THREAD_CPUTIME_ID or
 * pthread_getcpuclockid), which a slow or loaded machine does not change,
 * and waits are for a thread's CPU time or an event, never a fixed sleep.
 */
#ifndef PTT_SAMPLER_FIXTURE_H
#define PTT_SAMPLER_FIXTURE_H

#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "ptprof.h"
#include "prof/output/ptp_window.h"
#include "prof/runtime/ptprof_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define PTT_ASAN 1
#else
#define PTT_ASAN 0
#endif

/* Burns about ~20 us of pure arithmetic (no call) per round. */
#define SPIN_ROUND(acc) do { for (int i_ = 0; i_ < 20000; i_++) (acc) = (acc) * 6364136223846793005ULL + 1442695040888963407ULL; } while (0)

#define HOT __attribute__((noinline, used))
#define SECTION(s) __attribute__((section(s)))

extern const char __start_ptt_hot_a[], __stop_ptt_hot_a[];
extern const char __start_ptt_hot_b[], __stop_ptt_hot_b[];
extern const char __start_ptt_hot_c[], __stop_ptt_hot_c[];
extern const char __start_ptt_three[], __stop_ptt_three[];
extern const char __start_ptt_malloc_caller[], __stop_ptt_malloc_caller[];
extern const char __start_ptt_chain[], __stop_ptt_chain[];

/* A deep copy of the windows the sampler dumped. */
#define CAP_MAXW 16
typedef struct cap_sample {
  uint64_t count;
  uint32_t tid;
  uint16_t n, flags;
  int window;
  uintptr_t frames[64];
} cap_sample;

typedef struct capture {
  pthread_mutex_t mu;
  cap_sample *s;
  size_t n, cap;
  int nw;
  ptp_window w[CAP_MAXW];        /* headers only (arrays not kept) */
  char names[CAP_MAXW][64][16];  /* thread names, by index in threads[] */
  uint32_t name_tids[CAP_MAXW][64];
  int nnames[CAP_MAXW];
  /* The drops test: the thread whose CPU clock measures the blind period,
   * how much of its CPU time a dump's hook waits for (0: none), and that
   * clock at the hook's entry and exit, per window. */
  int has_clk;
  clockid_t clk;
  int64_t blind_cpu_ns;
  int64_t cpu_in[CAP_MAXW], cpu_out[CAP_MAXW];
  char comments[8][1024];        /* the first window's extra comments */
  int ncomments;
  /* The own-work tests: CPU each dump's hook burns in ptt_fn_hot_c on the
   * dumping thread (0: none; the profiler's own work, as symbolization
   * is), and which thread dumped each window. */
  int64_t hook_burn_ns;
  int64_t resume_burn_ns;        /* the same after sampling resumed (where the
                                    debug-file copies run): ptt_cap_resume_hook */
  uint32_t dump_tid[CAP_MAXW];
} capture;

typedef struct worker {
  void (*fn)(int64_t);
  int64_t cpu_ns;
  const char *name;
  _Atomic uint32_t tid;
  int64_t used_ns;               /* CPU the thread really used */
  pthread_t th;
} worker;

/* Executable range of the loaded object whose name contains `name`
 * (dl_iterate_phdr with ptt_objrange_cb). */
typedef struct objrange { const char *name; uintptr_t lo, hi; } objrange;

int64_t ptt_thread_cpu_ns(void);
/* The CPU time of the thread behind clk (pthread_getcpuclockid). */
int64_t ptt_clock_ns(clockid_t clk);
/* Waits until the thread behind clk has used CPU up to `until` (its CPU
 * clock), in 1 ms naps: a readiness condition, not a duration. The thread
 * must be runnable; the test's own time-out bounds the wait. */
void ptt_wait_cpu(clockid_t clk, int64_t until);

/* Hot functions, each burning cpu_ns of the calling thread's CPU in its
 * own section; ptt_fn_three runs a, b, c for 8 : 10 : 12 of it (a short
 * thread's life); ptt_fn_malloc_caller spends most of it inside libc's
 * malloc/free/memset. */
void ptt_fn_hot_a(int64_t cpu_ns);
void ptt_fn_hot_b(int64_t cpu_ns);
void ptt_fn_hot_c(int64_t cpu_ns);
void ptt_fn_three(int64_t cpu_ns);
void ptt_fn_malloc_caller(int64_t cpu_ns);

int ptt_in_range(uintptr_t pc, const char *lo, const char *hi);
/* Whether frame i of a sample lies in [lo, hi) (callers as RA - 1). */
int ptt_frame_in(const uintptr_t *f, int i, const char *lo, const char *hi);

/* The window hook (ptp_set_window_hook) that fills a capture. */
void ptt_cap_hook(const ptp_window *w, void *ctx);
/* The resume hook (ptp_set_resume_hook): burns c->resume_burn_ns in
 * ptt_fn_hot_c on the dumping thread, sampling on. */
void ptt_cap_resume_hook(void *ctx);
void ptt_cap_init(capture *c);
void ptt_cap_free(capture *c);
/* Expirations of tid in the captured windows (optionally only samples with
 * a frame in [lo, hi)). */
uint64_t ptt_count_tid(const capture *c, uint32_t tid, const char *lo, const char *hi);
/* Expirations of tid under a "[lost: ...]" pseudo-frame. */
uint64_t ptt_count_lost_tid(const capture *c, uint32_t tid);
/* Expirations under the pseudo-frame of `cause` in the captured windows,
 * any thread. */
uint64_t ptt_count_lost_cause(const capture *c, int cause);
/* The CPU bands of the short-thread tests (see the definition). */
void ptt_check_bands(uint64_t all, uint64_t lost, int64_t real_ns, int hz);

/* A started sampler writing "ptt-" snapshots to dir, its windows captured
 * in c (may be NULL); asserts on failure. */
ptprof *ptt_start_sampler_engine(const char *dir, int hz, capture *c, int engine);
ptprof *ptt_start_sampler(const char *dir, int hz, capture *c);
/* A started sampler at hz (0: the default rate), engine auto, snapshots
 * "ptt-*" in dir, its windows handed to hook(w, ctx) (ptprof_internal.h). */
ptprof *ptt_start_with_hook(const char *dir, int hz, ptp_window_hook_fn hook, void *ctx);
/* Whether the perf engine can run here (perf_event_paranoid <= 2, no
 * seccomp policy against perf_event_open). */
int ptt_perf_engine_works(void);

/* A thread running w->fn(w->cpu_ns), named w->name, its tid and the CPU
 * it really used recorded. */
void *ptt_worker_main(void *arg);
void ptt_worker_start(worker *w);
void ptt_worker_join(worker *w);

/* Directory entries of dir whose names start with prefix. */
size_t ptt_count_files(const char *dir, const char *prefix);
int ptt_objrange_cb(struct dl_phdr_info *info, size_t size, void *arg);

#endif
