/*
 * bench_sampler - microbenchmarks of the sampler's own costs, linked with
 * libptprof.a and its internal headers (built by bench/prof/run.sh):
 *
 *   1. ptp_unwind at depth 30 (CFI tables at every frame), ns per call;
 *   2. the whole SIGPROF handler per sample at depth 30: N signals that look
 *      exactly like our timer's (SI_TIMER, our magic, sent to this thread
 *      with rt_tgsigqueueinfo; the sampler runs the timer engine) minus N
 *      identical signals of another start's generation, which the handler
 *      drops at its first check of the value, CPU ns per signal;
 *   3. libc-leaf unwinding (CFI tables): ptp_unwind from inside a libc
 *      frame, ns per call;
 *   2b. the same with labels (issue 11): the thread inside a console task's
 *      poll with PTPROF_LABELS_MAX user labels pushed, measured in the same
 *      rounds as 2 (interleaved), and the cost of one ptprof_labels_push +
 *      ptprof_labels_pop pair;
 *   4. a dump of 10,000 distinct stacks (depth 20, PCs spread over this
 *      binary and libc): CPU ms of ptprof_dump (drain, symbolize, encode,
 *      gzip, atomic write), cold (first) and warm (same stacks again).
 *
 * Prints one JSON object.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ptprof.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/signal/ptp_handler.h"
#include "prof/signal/ptp_label_set.h"
#include "prof/signal/ptp_ring.h"
#include "prof/signal/ptp_sigstate.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/signal/ptp_unwind.h"

static double tcpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uintptr_t g_stack_lo, g_stack_hi;
static double g_unwind_ns, g_handler_ns, g_reject_ns, g_handler_labels_ns, g_push_pop_ns;
static int g_unwind_depth;

static void my_stack(void) {
  pthread_attr_t a;
  pthread_getattr_np(pthread_self(), &a);
  void *addr;
  size_t sz;
  pthread_attr_getstack(&a, &addr, &sz);
  g_stack_lo = (uintptr_t)addr;
  g_stack_hi = g_stack_lo + sz;
  pthread_attr_destroy(&a);
}

/* n signals as our timer sends them (ptp_sigstate.h: the process's timer
 * magic in the high half of the value, the start's generation bits and
 * the tid below); gen: the running start's (sh->magic) to be recorded, any
 * other to be taken as ours but stale and dropped at once. */
static void send_n(uint32_t gen, int n) {
  pid_t pid = getpid(), tid = (pid_t)syscall(SYS_gettid);
  uint64_t hi = atomic_load(&ptp_g_sig.timer_magic);
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = SIGPROF;
  si.si_code = SI_TIMER;
  si.si_value.sival_ptr =
      (void *)(uintptr_t)((hi << 32) | (gen & ~PTP_TIMER_TID_MASK) | ((uint32_t)tid & PTP_TIMER_TID_MASK));
  for (int i = 0; i < n; i++) syscall(SYS_rt_tgsigqueueinfo, pid, tid, SIGPROF, &si);
}

static void wait_drained(void) {
  ptp_shared *sh = atomic_load(&ptp_g_shared);
  while (sh && ptp_ring_fill(&sh->ring) > 0) {
    /* the consumer sleeps until work wakes it: below the ring's fill mark,
     * ask for a pass ourselves */
    ptp_wake_maybe(sh, 1);
    nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
  }
}

/* The measurements at the bottom of a 30-frame chain. */
__attribute__((noinline)) static void at_depth(void) {
  ptp_regs r;
  __asm__ volatile("lea 0(%%rip), %0" : "=r"(r.pc));
  r.sp = (uintptr_t)__builtin_frame_address(0);
  r.fp = (uintptr_t)__builtin_frame_address(0);
  uintptr_t frames[PTP_MAX_FRAMES];
  uint16_t flags;
  const ptp_cfi_set *cfi = atomic_load(&ptp_g_cfi);
  const int N = 1000000;
  double t0 = tcpu_ns();
  for (int i = 0; i < N; i++) {
    g_unwind_depth = ptp_unwind(&r, g_stack_lo, g_stack_hi, cfi, frames, PTP_MAX_FRAMES, &flags);
    __asm__ volatile("" ::: "memory");
  }
  g_unwind_ns = (tcpu_ns() - t0) / N;

  /* Whole handler: accepted vs rejected signals, in batches the ring holds. */
  ptp_shared *sh = atomic_load(&ptp_g_shared);
  const int B = 400, ROUNDS = 50;
  double acc = 0, rej = 0, accl = 0;
  static const char *const keys[] = {"k1", "k2", "k3", "k4"};
  for (int k = 0; k < ROUNDS; k++) {
    wait_drained();
    t0 = tcpu_ns();
    send_n(sh->magic, B);
    acc += tcpu_ns() - t0;
    t0 = tcpu_ns();
    send_n(sh->magic ^ (1u << PTP_TIMER_TID_BITS), B);   /* another start's: dropped */
    rej += tcpu_ns() - t0;
    /* with labels: a task being polled and every user label slot in use */
    wait_drained();
    ptp_label_set_poll_begin(12345);
    for (int i = 0; i < PTPROF_LABELS_MAX; i++) ptprof_labels_push(keys[i], "some-value");
    t0 = tcpu_ns();
    send_n(sh->magic, B);
    accl += tcpu_ns() - t0;
    for (int i = 0; i < PTPROF_LABELS_MAX; i++) ptprof_labels_pop();
    ptp_label_set_poll_end();
  }
  g_handler_ns = (acc - rej) / (B * ROUNDS);
  g_handler_labels_ns = (accl - rej) / (B * ROUNDS);
  g_reject_ns = rej / (B * ROUNDS);
  wait_drained();
  const int NP = 200000;
  t0 = tcpu_ns();
  for (int i = 0; i < NP; i++) {
    ptprof_labels_push("session", "a1b2c3d4");
    ptprof_labels_pop();
  }
  g_push_pop_ns = (tcpu_ns() - t0) / NP;
}

#define CHAIN(n, next) __attribute__((noinline)) static void n(void) { next(); __asm__ volatile("" ::: "memory"); }
CHAIN(d29, at_depth) CHAIN(d28, d29) CHAIN(d27, d28) CHAIN(d26, d27) CHAIN(d25, d26)
CHAIN(d24, d25) CHAIN(d23, d24) CHAIN(d22, d23) CHAIN(d21, d22) CHAIN(d20, d21)
CHAIN(d19, d20) CHAIN(d18, d19) CHAIN(d17, d18) CHAIN(d16, d17) CHAIN(d15, d16)
CHAIN(d14, d15) CHAIN(d13, d14) CHAIN(d12, d13) CHAIN(d11, d12) CHAIN(d10, d11)
CHAIN(d9, d10) CHAIN(d8, d9) CHAIN(d7, d8) CHAIN(d6, d7) CHAIN(d5, d6)
CHAIN(d4, d5) CHAIN(d3, d4) CHAIN(d2, d3) CHAIN(d1, d2)

/* libc-leaf unwinding: qsort calls our comparator; from inside it, unwind
 * starting at a libc frame (the comparator's return address into libc). */
static double g_libc_unwind_ns;
static int g_libc_depth, g_libc_trunc;
static int cmp_measure(const void *a, const void *b) {
  static int done;
  if (!done) {
    done = 1;
    /* registers as if interrupted at our return address in libc: sp just
     * above our return address slot, rbp = libc's rbp (our saved one). */
    uintptr_t *fp = __builtin_frame_address(0);
    ptp_regs r = { .pc = fp[1], .sp = (uintptr_t)(fp + 2), .fp = fp[0] };
    uintptr_t frames[PTP_MAX_FRAMES];
    uint16_t flags;
    const ptp_cfi_set *cfi = atomic_load(&ptp_g_cfi);
    const int N = 200000;
    double t0 = tcpu_ns();
    for (int i = 0; i < N; i++) {
      g_libc_depth = ptp_unwind(&r, g_stack_lo, g_stack_hi, cfi, frames, PTP_MAX_FRAMES, &flags);
      __asm__ volatile("" ::: "memory");
    }
    g_libc_unwind_ns = (tcpu_ns() - t0) / N;
    g_libc_trunc = flags & PTP_SAMPLE_TRUNCATED;
  }
  return *(const int *)a - *(const int *)b;
}

/* ---- dump of 10k distinct stacks ---------------------------------------- */

typedef struct text { uintptr_t lo, hi; const char *want; } text;
static int text_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  text *t = arg;
  int match = t->want ? (info->dlpi_name && strstr(info->dlpi_name, t->want) != NULL)
                      : (!info->dlpi_name || !info->dlpi_name[0]);
  if (!match) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      t->lo = info->dlpi_addr + ph->p_vaddr;
      t->hi = t->lo + ph->p_memsz;
      return 1;
    }
  }
  return 0;
}

static void push_stacks(uint32_t tid, const uintptr_t *pool, size_t npool, int nstacks) {
  uint64_t rng = 12345;
  uintptr_t fr[20];
  for (int s = 0; s < nstacks; s++) {
    for (int k = 0; k < 20; k++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      fr[k] = pool[(rng >> 33) % npool];
    }
    if (s % 400 == 399) wait_drained();
    ptp_push_sample(tid, 1, 0, fr, 20);
  }
  wait_drained();
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "/tmp/ptprof-bench-dump";
  my_stack();
  ptprof_options o;
  ptprof_options_init(&o);
  o.hz = 1;                  /* the real timers stay out of the way */
  /* Part 2 forges the timer engine's signals (SI_TIMER, our magic); under
   * the perf engine (auto's choice where perf_event_open works) the
   * handler takes them for the program's and the figure measured nothing */
  o.engine = PTPROF_ENGINE_TIMER;
  o.dir = dir;
  o.prefix = "bench-";
  ptprof *p;
  int rc = ptprof_new(&p, &o);
  if (rc == 0) rc = ptprof_start(p);
  if (rc) {
    fprintf(stderr, "bench_sampler: %s\n", ptprof_strerror(rc));
    return 1;
  }
  d1();
  int v[64];
  for (int i = 0; i < 64; i++) v[i] = (i * 37) % 64;
  qsort(v, 64, sizeof v[0], cmp_measure);

  /* 10k distinct stacks over 5000 distinct PCs. */
  text me = { 0, 0, NULL }, libc = { 0, 0, "libc.so" };
  dl_iterate_phdr(text_cb, &me);
  dl_iterate_phdr(text_cb, &libc);
  enum { NPOOL = 5000 };
  static uintptr_t pool[NPOOL];
  for (size_t i = 0; i < NPOOL; i++) {
    const text *t = i % 2 ? &libc : &me;
    pool[i] = t->lo + 1 + (t->hi - t->lo - 2) * (i / 2) / (NPOOL / 2);
  }
  uint32_t tid = (uint32_t)syscall(SYS_gettid);
  ptprof_dump(p, NULL, 0);   /* empty the window */
  push_stacks(tid, pool, NPOOL, 10000);
  char path[512];
  double c0 = tcpu_ns(), w0 = mono_ns();
  rc = ptprof_dump(p, path, sizeof path);
  double cold_cpu = tcpu_ns() - c0, cold_wall = mono_ns() - w0;
  push_stacks(tid, pool, NPOOL, 10000);
  c0 = tcpu_ns();
  w0 = mono_ns();
  int rc2 = ptprof_dump(p, path, sizeof path);
  double warm_cpu = tcpu_ns() - c0, warm_wall = mono_ns() - w0;
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  ptprof_stop(p, 0, NULL, 0);
  ptprof_del(p);
  printf("{\"unwind_depth\": %d, \"unwind_ns\": %.1f, \"handler_ns\": %.1f, \"signal_reject_ns\": %.1f, "
         "\"handler_labels_ns\": %.1f, \"labels_push_pop_ns\": %.1f, "
         "\"libc_unwind_depth\": %d, \"libc_unwind_truncated\": %d, \"libc_unwind_ns\": %.1f, "
         "\"dump_rc\": [%d, %d], \"dump10k_cold_cpu_ms\": %.2f, \"dump10k_cold_wall_ms\": %.2f, "
         "\"dump10k_warm_cpu_ms\": %.2f, \"dump10k_warm_wall_ms\": %.2f, \"ring_full_drops\": %llu}\n",
         g_unwind_depth, g_unwind_ns, g_handler_ns, g_reject_ns, g_handler_labels_ns, g_push_pop_ns,
         g_libc_depth, g_libc_trunc,
         g_libc_unwind_ns, rc, rc2, cold_cpu / 1e6, cold_wall / 1e6, warm_cpu / 1e6, warm_wall / 1e6,
         (unsigned long long)st.drops[0]);
  return 0;
}
