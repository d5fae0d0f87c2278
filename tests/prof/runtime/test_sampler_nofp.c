/*
 * test_sampler_nofp.c - the walker through a shared library built without
 * frame pointers (tests/prof/sampler_nofp_lib.c), with the unwind table of
 * that library: FP code (thread start) -> the library (CFI,
 * rbp clobbered) -> our callback (FP) -> hot loop. The tables (the
 * library's and the test program's) are built when the sampler starts.
 */
#include "pt_test.h"
#include "ptprof.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/signal/ptp_handler.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/signal/ptp_unwind.h"
#include "prof/runtime/ptprof_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define PTN_ASAN 1
#else
#define PTN_ASAN 0
#endif

typedef void (*ptt_nofp_cb)(void *arg);
uint64_t ptt_nofp_outer(ptt_nofp_cb cb, void *arg, int n);

#define HOT __attribute__((noinline, used))
#define SECTION(s) __attribute__((section(s)))
extern const char __start_ptn_hot[], __stop_ptn_hot[];
extern const char __start_ptn_thread[], __stop_ptn_thread[];

static int64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static volatile uint64_t g_sink;

/* Called back from the library: ~50 us of arithmetic. It calls cpu_ns
 * first: GCC sets up no frame pointer in a leaf function that needs no stack
 * even with -mno-omit-leaf-frame-pointer, and this test is about the
 * library's frames, not that (known) frame-pointer limit. */
HOT SECTION("ptn_hot") static void nofp_hot(void *arg) {
  (void)arg;
  uint64_t acc = (g_sink ^ (uint64_t)cpu_ns()) | 1;
  for (int i = 0; i < 50000; i++) acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
  g_sink = acc;
}

typedef struct job {
  int64_t budget_ns;
  _Atomic uint32_t tid;
} job;

/* The thread's start routine: everything below it runs through the
 * library. */
HOT SECTION("ptn_thread") static void *nofp_thread(void *arg) {
  job *j = arg;
  atomic_store(&j->tid, (uint32_t)gettid());
  int64_t end = cpu_ns() + j->budget_ns;
  while (cpu_ns() < end) g_sink += ptt_nofp_outer(nofp_hot, NULL, 20);
  __asm__ volatile("" ::: "memory");
  return NULL;
}

/* The first executable segment of the loaded object whose name contains
 * `name` (dl_iterate_phdr callback). */
typedef struct lib_range { const char *name; uintptr_t lo, hi; } lib_range;
static int lib_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  lib_range *r = arg;
  if (!info->dlpi_name || !strstr(info->dlpi_name, r->name)) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      r->lo = info->dlpi_addr + ph->p_vaddr;
      r->hi = r->lo + ph->p_memsz;
      return 1;
    }
  }
  return 0;
}

static int in_(uintptr_t a, uintptr_t lo, uintptr_t hi) { return a >= lo && a < hi; }
/* frame i as an address inside its function (callers: RA - 1) */
static uintptr_t fr(const uintptr_t *f, int i) { return i ? f[i] - 1 : f[0]; }

/* Samples of one thread, copied out of the dumped windows. */
typedef struct grab {
  pthread_mutex_t mu;
  _Atomic uint32_t tid;      /* 0: keep nothing; 1: any thread (until the
                              * measured thread's tid is known) */
  uint64_t hot, good, trunc_hot;
  int printed;
  lib_range lib;
} grab;

static void grab_hook(const ptp_window *w, void *ctx) {
  grab *g = ctx;
  uint32_t tid = atomic_load(&g->tid);
  pthread_mutex_lock(&g->mu);
  for (size_t i = 0; tid && i < w->nsamples; i++) {
    const ptp_sample *s = &w->samples[i];
    if ((tid != 1 && s->tid != tid) || !in_(s->frames[0], (uintptr_t)__start_ptn_hot, (uintptr_t)__stop_ptn_hot))
      continue;
    g->hot += s->count;
    /* Complete: the library's frames, then the thread's start routine, and
     * (outside ASan, whose runtime sits between) not truncated. */
    int lib = 0, start = 0;
    for (int k = 1; k < s->nframes; k++) {
      uintptr_t a = fr(s->frames, k);
      if (in_(a, g->lib.lo, g->lib.hi)) lib++;
      if (lib >= 2 && in_(a, (uintptr_t)__start_ptn_thread, (uintptr_t)__stop_ptn_thread)) start = 1;
    }
    int complete = lib >= 2 && start && (PTN_ASAN || !(s->flags & PTP_SAMPLE_TRUNCATED));
    if (complete) {
      g->good += s->count;
    } else {
      if (s->flags & PTP_SAMPLE_TRUNCATED) g->trunc_hot += s->count;
      if (g->printed++ < 3 && getenv("PTT_DEBUG")) {
        printf("# incomplete (flags %#x):", s->flags);
        for (int k = 0; k < s->nframes; k++) {
          Dl_info di;
          uintptr_t a = fr(s->frames, k);
          if (dladdr((void *)a, &di) && di.dli_sname) printf(" %s", di.dli_sname);
          else printf(" %#lx", (unsigned long)a);
        }
        printf("\n");
      }
    }
  }
  pthread_mutex_unlock(&g->mu);
}

static ptprof *start(const char *dir, grab *g) {
  ptprof_options o;
  ptprof_options_init(&o);
  o.hz = 999;
  o.dir = dir;
  o.prefix = "ptn-";
  ptprof *p = NULL;
  PT_ASSERT_INT_EQ(ptprof_new(&p, &o), 0);
  ptp_set_window_hook(p, grab_hook, g);
  int rc = ptprof_start(p);
  PT_ASSERT_MSG(rc == 0, "ptprof_start: %s", ptprof_strerror(rc));
  return p;
}

/* Waits (bounded) until the library's slot reaches a final state. */
static int wait_state(uintptr_t pc) {
  int st = -1;
  for (int i = 0; i < 500; i++) {
    st = ptp_cfi_state_of(pc);
    if (st == PTP_LIB_READY || st == PTP_LIB_FAILED) break;
    nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
  }
  return st;
}

PT_TEST_T(prof_sampler_nofp_lib, 60000) {
  char *dir = pt_tmpdir("sampler-nofp");
  grab g;
  memset(&g, 0, sizeof g);
  pthread_mutex_init(&g.mu, NULL);
  g.lib.name = "libptt_nofp";
  dl_iterate_phdr(lib_cb, &g.lib);
  PT_ASSERT(g.lib.lo);
  uintptr_t libfn = (uintptr_t)ptt_nofp_outer;
  ptprof *p = start(dir, &g);
  /* Tables are built when the sampler starts, before its first sample: the
   * library's, and the test program's own (frame pointers are never
   * assumed, not even for the main program). */
  PT_ASSERT_INT_EQ(ptp_cfi_state_of(libfn), PTP_LIB_READY);
  PT_ASSERT_INT_EQ(ptp_cfi_state_of((uintptr_t)nofp_hot), PTP_LIB_READY);
  ptp_cfi_info info;
  ptp_cfi_get_info(&info);
  PT_ASSERT(info.lazy_ready >= 2 && info.lazy_bytes > 0 && info.lazy_bytes <= info.lazy_cap);
  PT_ASSERT_INT_EQ(info.lazy_wanted, 0);
  /* Measured from the first sample on (no warm-up window): every sample in
   * the hot function should be complete. */
  uint32_t tid = 0;
  job j = { .budget_ns = 400000000 };
  pthread_t t;
  atomic_store(&g.tid, 1);   /* placeholder until the thread's tid is known */
  PT_ASSERT_INT_EQ(pthread_create(&t, NULL, nofp_thread, &j), 0);
  while (!(tid = atomic_load(&j.tid))) sched_yield();
  atomic_store(&g.tid, tid);
  PT_ASSERT_INT_EQ(pthread_join(t, NULL), 0);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  printf("# no-frame-pointer library: %llu of %llu hot samples complete through it "
         "(%llu truncated); non-system tables %zu bytes, built in %.1f ms CPU\n",
         (unsigned long long)g.good, (unsigned long long)g.hot, (unsigned long long)g.trunc_hot,
         info.lazy_bytes, (double)info.build_ns / 1e6);
  PT_ASSERT_MSG(g.hot >= 50, "only %llu hot samples", (unsigned long long)g.hot);
  PT_ASSERT_MSG(g.good * 10 >= g.hot * 9, "%llu of %llu complete", (unsigned long long)g.good,
                (unsigned long long)g.hot);
  ptprof_del(p);
}

PT_TEST_T(prof_sampler_nofp_cap, 60000) {
  /* Past the memory cap: no table, the samples stay (truncated). */
  char *dir = pt_tmpdir("sampler-nofp-cap");
  grab g;
  memset(&g, 0, sizeof g);
  pthread_mutex_init(&g.mu, NULL);
  g.lib.name = "libptt_nofp";
  dl_iterate_phdr(lib_cb, &g.lib);
  PT_ASSERT(g.lib.lo);
  ptp_cfi_set_lazy_cap(16);          /* smaller than any table */
  ptprof *p = start(dir, &g);
  job j = { .budget_ns = 300000000 };
  pthread_t t;
  atomic_store(&g.tid, 1);
  PT_ASSERT_INT_EQ(pthread_create(&t, NULL, nofp_thread, &j), 0);
  uint32_t tid;
  while (!(tid = atomic_load(&j.tid))) sched_yield();
  atomic_store(&g.tid, tid);
  PT_ASSERT_INT_EQ(pthread_join(t, NULL), 0);
  PT_ASSERT_INT_EQ(wait_state((uintptr_t)ptt_nofp_outer), PTP_LIB_FAILED);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  ptp_cfi_info info;
  ptp_cfi_get_info(&info);
  printf("# cap 16 bytes: %llu hot samples, %llu truncated, refused %llu\n",
         (unsigned long long)g.hot, (unsigned long long)g.trunc_hot, info.lazy_refused);
  PT_ASSERT(info.lazy_refused >= 1);
  PT_ASSERT(g.hot >= 50);
  PT_ASSERT_INT_EQ(g.good, 0);                    /* cut at the library */
  PT_ASSERT_INT_EQ(g.trunc_hot, g.hot);           /* kept and marked */
  ptprof_del(p);
}

PT_TEST(prof_unwind_epilogue_after_pop_rbp) {
  /* Interrupted in an epilogue after `pop %rbp` (GCC's CFI still says "rbp
   * saved at CFA - 48" there, but that slot is below sp): the walk goes on
   * with the current rbp, which is the caller's again, instead of stopping.
   * A hand-made set: one CFI object [0x1000, 0x2000) with one row; the
   * caller (0x5000) and its caller (0x6000) are in an object walked with
   * frame pointers. */
  static uintptr_t stack[64];
  for (size_t i = 0; i < 64; i++) stack[i] = 0;
  uintptr_t sp = (uintptr_t)&stack[8];
  ptp_cfi_tab *tab = calloc(1, sizeof *tab + sizeof(ptp_cfi_rule) + sizeof(ptp_cfi_row));
  PT_ASSERT(tab);
  ptp_cfi_rule *rule0 = (ptp_cfi_rule *)(tab + 1);
  ptp_cfi_row *row0 = (ptp_cfi_row *)(rule0 + 1);
  tab->nrows = 1;
  tab->rows = row0;
  tab->nrules = 1;
  tab->rules = rule0;
  *rule0 = (ptp_cfi_rule){ .cfa_off = 24, .rbp_off = -48, .ra_off = -8, .kind = PTP_CFI_RSP };
  *row0 = (ptp_cfi_row){ .start = 0x1000, .len = 0x1000, .rule = 0 };
  ptp_cfi_obj objs[2] = { { 0x1000, 0x2000, 0 }, { 0x4000, 0x7000, 1 } };
  ptp_cfi_lib libs[2];
  memset(libs, 0, sizeof libs);
  atomic_init(&libs[0].tab, tab);
  atomic_init(&libs[0].state, PTP_LIB_READY);
  atomic_init(&libs[1].tab, NULL);
  atomic_init(&libs[1].state, PTP_LIB_FP);
  ptp_cfi_set set = { .objs = objs, .nobjs = 2, .libs = libs, .nlibs = 2 };
  stack[10] = 0x5000;                    /* CFA - 8 = sp + 16: return address */
  stack[20] = 0;                         /* the caller's frame: end of chain */
  stack[21] = 0x6000;
  stack[5] = 0xdead;                     /* CFA - 48 = sp - 24: dead slot */
  ptp_regs r = { .pc = 0x1500, .sp = sp, .fp = (uintptr_t)&stack[20] };
  uintptr_t fr[8];
  uint16_t fl = 0;
  int n = ptp_unwind(&r, (uintptr_t)stack, (uintptr_t)&stack[64], &set, fr, 8, &fl);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT(!(fl & PTP_SAMPLE_TRUNCATED));
  PT_ASSERT(fr[1] == 0x5000 && fr[2] == 0x6000);
  /* Before the pop (slot at CFA - 16 = sp + 8, live): rbp is restored from
   * the slot, not taken from the register (which holds junk here). */
  rule0->rbp_off = -16;
  stack[9] = (uintptr_t)&stack[20];
  r.fp = 0x1234;
  n = ptp_unwind(&r, (uintptr_t)stack, (uintptr_t)&stack[64], &set, fr, 8, &fl);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT(!(fl & PTP_SAMPLE_TRUNCATED));
  PT_ASSERT(fr[1] == 0x5000 && fr[2] == 0x6000);
  free(tab);
}

/* ---- objects without CFI: frame-pointer detection ------------------------ */

typedef void (*ptt_fpd_cb)(void *arg);
uint64_t ptt_fpd_fp_call(ptt_fpd_cb cb, void *arg, uint64_t x);
uint64_t ptt_fpd_nofp_call(ptt_fpd_cb cb, void *arg, uint64_t x);

typedef struct fpd_walk {
  uintptr_t frames[64];
  int n;
  uint16_t flags;
} fpd_walk;

/* Called back from a library: walks its own stack with the published set,
 * as the handler would from an interrupted PC here. */
HOT SECTION("ptn_hot") static void fpd_walk_here(void *arg) {
  fpd_walk *w = arg;
  uintptr_t lo, hi;
  ptp_threads_self_stack(&lo, &hi);
  ptp_regs r;
  __asm__ volatile("lea 0(%%rip), %0" : "=r"(r.pc));
  r.sp = (uintptr_t)__builtin_frame_address(0);
  r.fp = (uintptr_t)__builtin_frame_address(0);
  w->n = ptp_unwind(&r, lo, hi, atomic_load(&ptp_g_cfi), w->frames, 64, &w->flags);
}

/* The caller of the library call, with frame pointers and CFI. */
HOT SECTION("ptn_thread") static void fpd_through(int fp, fpd_walk *w) {
  g_sink += fp ? ptt_fpd_fp_call(fpd_walk_here, w, g_sink) : ptt_fpd_nofp_call(fpd_walk_here, w, g_sink);
  __asm__ volatile("" ::: "memory");
}

PT_TEST(prof_unwind_nocfi_fp_detect) {
  PT_ASSERT_INT_EQ(ptp_cfi_refresh(), 0);
  /* Neither library has CFI; the detector read their prologues. */
  PT_ASSERT_INT_EQ(ptp_cfi_state_of((uintptr_t)ptt_fpd_fp_call), PTP_LIB_FP);
  PT_ASSERT_INT_EQ(ptp_cfi_state_of((uintptr_t)ptt_fpd_nofp_call), PTP_LIB_NOCFI);
  ptp_cfi_info info;
  ptp_cfi_get_info(&info);
  PT_ASSERT(info.nfp >= 1 && info.nnocfi >= 1);
  lib_range fpr = { "libptt_fpd_fp", 0, 0 }, nofpr = { "libptt_fpd_nofp", 0, 0 };
  dl_iterate_phdr(lib_cb, &fpr);
  dl_iterate_phdr(lib_cb, &nofpr);
  PT_ASSERT(fpr.lo && nofpr.lo);
  /* Through the library with frame pointers: the walk goes on into our
   * caller and up to the outermost frame. */
  fpd_walk w;
  memset(&w, 0, sizeof w);
  fpd_through(1, &w);
  int in_lib = 0, caller = 0;
  for (int k = 1; k < w.n; k++) {
    uintptr_t x = w.frames[k] - 1;
    if (in_(x, fpr.lo, fpr.hi)) in_lib = k;
    if (in_lib && in_(x, (uintptr_t)__start_ptn_thread, (uintptr_t)__stop_ptn_thread)) caller = 1;
  }
  PT_ASSERT_MSG(in_lib == 1 && caller, "fp library: %d frames, lib at %d, caller %d", w.n, in_lib, caller);
  PT_ASSERT(!(w.flags & PTP_SAMPLE_TRUNCATED) || PTN_ASAN);
  /* Through the library without: the walk stops at its frame, marked. */
  memset(&w, 0, sizeof w);
  fpd_through(0, &w);
  PT_ASSERT_INT_EQ(w.n, 2);
  PT_ASSERT(in_(w.frames[1] - 1, nofpr.lo, nofpr.hi));
  PT_ASSERT(w.flags & PTP_SAMPLE_TRUNCATED);
}
