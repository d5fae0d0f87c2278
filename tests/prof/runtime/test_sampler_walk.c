/*
 * test_sampler_walk.c - the stack walker inside the sampler: a known frame-pointer
 * chain, stack bounds, the unwind tables (system objects, dlopen/dlclose)
 * and stacks through libc's malloc. Helpers: sampler_fixture.h.
 */
#include "pt_test.h"
#include "ptprof.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/signal/ptp_handler.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/runtime/ptp_shim.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/signal/ptp_unwind.h"
#include "prof/runtime/ptprof_internal.h"
#include "sampler_fixture.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the walker on a known frame-pointer chain ------------------------- */

typedef struct chain_result {
  uintptr_t ra[4];               /* return addresses seen inside chain_3..chain_0 */
  uintptr_t frames[64];
  int n;
  uint16_t flags;
} chain_result;

static chain_result g_chain;

HOT SECTION("ptt_chain") static void chain_3(void) {
  uintptr_t lo, hi;
  ptp_threads_self_stack(&lo, &hi);
  ptp_cfi_refresh();
  g_chain.ra[3] = (uintptr_t)__builtin_return_address(0);
  ptp_regs r;
  __asm__ volatile("lea 0(%%rip), %0" : "=r"(r.pc));
  r.sp = (uintptr_t)__builtin_frame_address(0);  /* the frame's own rbp: an sp above every local */
  r.fp = (uintptr_t)__builtin_frame_address(0);
  g_chain.n = ptp_unwind(&r, lo, hi, atomic_load(&ptp_g_cfi), g_chain.frames, 64, &g_chain.flags);
}
HOT SECTION("ptt_chain") static void chain_2(void) {
  g_chain.ra[2] = (uintptr_t)__builtin_return_address(0);
  chain_3();
  __asm__ volatile("" ::: "memory");
}
HOT SECTION("ptt_chain") static void chain_1(void) {
  g_chain.ra[1] = (uintptr_t)__builtin_return_address(0);
  chain_2();
  __asm__ volatile("" ::: "memory");
}
HOT SECTION("ptt_chain") static void *chain_0(void *arg) {
  (void)arg;
  g_chain.ra[0] = (uintptr_t)__builtin_return_address(0);
  chain_1();
  __asm__ volatile("" ::: "memory");
  return NULL;
}

/* Walks chain_0..chain_3 on a thread started through our pthread_create;
 * the result is in g_chain. */
static void run_chain(void) {
  PT_ASSERT_INT_EQ(ptp_threads_init(), 0);
  pthread_t t;
  memset(&g_chain, 0, sizeof g_chain);
  PT_ASSERT_INT_EQ(pthread_create(&t, NULL, chain_0, NULL), 0);
  pthread_join(t, NULL);
}

PT_TEST(prof_sampler_unwind_fp_chain) {
  run_chain();
  /* frames[0]: the PC inside chain_3; then the return addresses into
   * chain_2, chain_1, chain_0, i.e. exactly what each callee saw. */
  PT_ASSERT_MSG(g_chain.n >= 4, "only %d frames", g_chain.n);
  PT_ASSERT(ptt_in_range(g_chain.frames[0], __start_ptt_chain, __stop_ptt_chain));
  PT_ASSERT_UINT_EQ(g_chain.frames[1], g_chain.ra[3]);
  PT_ASSERT_UINT_EQ(g_chain.frames[2], g_chain.ra[2]);
  PT_ASSERT_UINT_EQ(g_chain.frames[3], g_chain.ra[1]);
  PT_ASSERT_UINT_EQ(g_chain.frames[4], g_chain.ra[0]);
  /* Above chain_0: the interposer's trampoline, then libc's start_thread
   * and clone3, walked with the CFI tables up to the outermost frame
   * (return address undefined), so the stack is complete, not truncated. */
  if (!PTT_ASAN) {
    PT_ASSERT_MSG(!(g_chain.flags & PTP_SAMPLE_TRUNCATED), "flags %#x after %d frames",
                  g_chain.flags, g_chain.n);
    objrange libc = { "libc.so", 0, 0 };
    dl_iterate_phdr(ptt_objrange_cb, &libc);
    PT_ASSERT(libc.lo);
    PT_ASSERT_MSG(ptt_in_range(g_chain.frames[g_chain.n - 1] - 1, (const char *)libc.lo, (const char *)libc.hi),
                  "outermost frame %#lx not in libc", (unsigned long)g_chain.frames[g_chain.n - 1]);
  }
}

/* The interposers' frames (runtime/ptp_shim.h): the raw walk above holds
 * the thread-start trampoline between chain_0 and start_thread; the
 * consumer's strip leaves it out and keeps every other frame in order, and
 * never drops a leaf, even one inside the shim. */
PT_TEST(prof_sampler_shim_frames_left_out) {
  run_chain();
  PT_ASSERT_MSG(g_chain.n >= 6, "only %d frames", g_chain.n);
  /* chain_0's return address is the trampoline's: in the section */
  PT_ASSERT_UINT_EQ(g_chain.frames[4], g_chain.ra[0]);
  PT_ASSERT_MSG(ptp_shim_has(g_chain.frames[4]), "%#lx not in the shim [%p, %p]",
                (unsigned long)g_chain.frames[4], (const void *)__start_ptp_shim_text,
                (const void *)__stop_ptp_shim_text);
  for (int i = 0; i < 4; i++) PT_ASSERT(!ptp_shim_has(g_chain.frames[i]));
  uintptr_t fr[64];
  memcpy(fr, g_chain.frames, sizeof fr);
  uint16_t n = ptp_shim_strip(fr, (uint16_t)g_chain.n);
  PT_ASSERT_INT_EQ(n, g_chain.n - 1);
  for (int i = 0; i < 4; i++) PT_ASSERT_UINT_EQ(fr[i], g_chain.frames[i]);
  for (int i = 4; i < n; i++) PT_ASSERT_UINT_EQ(fr[i], g_chain.frames[i + 1]);
#if !defined(__SANITIZE_THREAD__)   /* there, TSan's own thread start calls the trampoline */
  if (!PTT_ASAN) {
    /* chain_0's caller is now libc's start_thread, as unprofiled */
    objrange libc = { "libc.so", 0, 0 };
    dl_iterate_phdr(ptt_objrange_cb, &libc);
    PT_ASSERT(libc.lo);
    PT_ASSERT_MSG(ptt_in_range(fr[4] - 1, (const char *)libc.lo, (const char *)libc.hi),
                  "chain_0's caller %#lx is not in libc", (unsigned long)fr[4]);
  }
#endif
  /* a leaf in the shim stays: that CPU ran there */
  uintptr_t leaf[3] = { g_chain.frames[4] - 1, g_chain.frames[4], g_chain.frames[5] };
  PT_ASSERT_INT_EQ(ptp_shim_strip(leaf, 3), 2);
  PT_ASSERT_UINT_EQ(leaf[0], g_chain.frames[4] - 1);
  PT_ASSERT_UINT_EQ(leaf[1], g_chain.frames[5]);
  /* a one-frame stack is left as is; the section's first byte is no
   * return address */
  uintptr_t one[1] = { g_chain.frames[4] };
  PT_ASSERT_INT_EQ(ptp_shim_strip(one, 1), 1);
  PT_ASSERT(!ptp_shim_has((uintptr_t)__start_ptp_shim_text));
}

PT_TEST(prof_sampler_unwind_bounds) {
  /* Unknown bounds: the leaf only, marked truncated. */
  uintptr_t fr[8];
  uint16_t fl;
  ptp_regs r = { .pc = 0x1234, .sp = 0x1000, .fp = 0x2000 };
  PT_ASSERT_INT_EQ(ptp_unwind(&r, 0, 0, NULL, fr, 8, &fl), 1);
  PT_ASSERT_UINT_EQ(fr[0], 0x1234);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* A fake stack: frame records pointing upwards, then one pointing out of
   * bounds. The walk must stop there without reading it. */
  uintptr_t stack[32];
  memset(stack, 0, sizeof stack);
  uintptr_t lo = (uintptr_t)&stack[0], hi = (uintptr_t)&stack[32];
  stack[4] = (uintptr_t)&stack[10];  stack[5] = 0x5555;   /* frame at 4 -> 10 */
  stack[10] = (uintptr_t)&stack[20]; stack[11] = 0x6666;  /* frame at 10 -> 20 */
  stack[20] = hi + 4096;             stack[21] = 0x7777;  /* -> outside */
  r = (ptp_regs){ .pc = 0x4444, .sp = (uintptr_t)&stack[2], .fp = (uintptr_t)&stack[4] };
  int n = ptp_unwind(&r, lo, hi, NULL, fr, 8, &fl);
  PT_ASSERT_INT_EQ(n, 4);
  PT_ASSERT_UINT_EQ(fr[1], 0x5555);
  PT_ASSERT_UINT_EQ(fr[2], 0x6666);
  PT_ASSERT_UINT_EQ(fr[3], 0x7777);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* A chain ending with fp == 0 is complete. */
  stack[20] = 0;
  n = ptp_unwind(&r, lo, hi, NULL, fr, 8, &fl);
  PT_ASSERT_INT_EQ(n, 4);
  PT_ASSERT_INT_EQ(fl, 0);
  /* A loop (fp pointing back down) is cut. */
  stack[20] = (uintptr_t)&stack[4];
  n = ptp_unwind(&r, lo, hi, NULL, fr, 8, &fl);
  PT_ASSERT_INT_EQ(n, 4);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* Depth cap. */
  stack[20] = 0;
  n = ptp_unwind(&r, lo, hi, NULL, fr, 2, &fl);
  PT_ASSERT_INT_EQ(n, 2);
  PT_ASSERT(fl & PTP_SAMPLE_DEPTH_CAP);
  /* sp outside the thread's stack (a signal stack): leaf only. */
  r.sp = hi + 64;
  n = ptp_unwind(&r, lo, hi, NULL, fr, 8, &fl);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
}

PT_TEST(prof_sampler_cfi_tables) {
  ptp_cfi_set *set = NULL;
  PT_ASSERT_INT_EQ(ptp_cfi_build(&set), 0);
  PT_ASSERT(set->nobjs >= 2);                      /* libc and ld.so at least */
  for (size_t i = 1; i < set->nobjs; i++)
    PT_ASSERT(set->objs[i - 1].hi <= set->objs[i].lo);
  /* System objects' tables are built with the set; rows sorted, disjoint. */
  size_t nrows = 0;
  for (size_t l = 0; l < set->nlibs; l++) {
    const ptp_cfi_tab *t = atomic_load(&set->libs[l].tab);
    PT_ASSERT(!t == !set->libs[l].system || atomic_load(&set->libs[l].state) == PTP_LIB_FAILED);
    if (!t) continue;
    nrows += t->nrows;
    for (size_t i = 1; i < t->nrows; i++)
      PT_ASSERT(t->rows[i - 1].start + t->rows[i - 1].len <= t->rows[i].start);
  }
  PT_ASSERT_MSG(nrows > 1000, "%zu rows", nrows);
  /* libc's own functions (not an interposed malloc): at the first
   * instruction the CFA is rsp + 8 and the return address is at CFA - 8. */
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  PT_ASSERT(h);
  const char *fns[] = { "malloc", "free", "memcpy", "qsort", "strtol" };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    uintptr_t pc = (uintptr_t)dlsym(h, fns[i]);
    PT_ASSERT(pc);
    PT_ASSERT_MSG(ptp_cfi_in_system(set, pc), "%s not in a system object", fns[i]);
    const ptp_cfi_rule *rule = ptp_cfi_lookup(set, pc);
    if (!rule) continue;   /* an IFUNC resolver's target may differ from the symbol */
    PT_ASSERT_INT_EQ(rule->kind, PTP_CFI_RSP);
    PT_ASSERT_INT_EQ(rule->cfa_off, 8);
    PT_ASSERT_INT_EQ(rule->ra_off, -8);
  }
  dlclose(h);
  /* The test binary's own code is walked with CFI too (frame pointers are
   * never assumed), but it is not a system object: no table in a set from
   * ptp_cfi_build (ptp_cfi_refresh builds it before publishing). */
  const ptp_cfi_lib *own = ptp_cfi_find(set, (uintptr_t)ptt_fn_hot_a);
  PT_ASSERT(own && !own->system && !atomic_load(&own->tab));
  PT_ASSERT(ptp_cfi_is_system_name("/lib/x86_64-linux-gnu/libc.so.6"));
  PT_ASSERT(ptp_cfi_is_system_name("linux-vdso.so.1"));
  PT_ASSERT(!ptp_cfi_is_system_name("/usr/lib/x86_64-linux-gnu/libuv.so.1"));
  PT_ASSERT(!ptp_cfi_is_system_name(""));
  ptp_cfi_free(set);
}

PT_TEST_T(prof_sampler_malloc_caller, 60000) {
  if (PTT_ASAN) PT_SKIP("ASan replaces malloc: no libc leaf to test");
  char *dir = pt_tmpdir("sampler-malloc");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler(dir, 999, &c);
  worker a = { .fn = ptt_fn_malloc_caller, .cpu_ns = 400000000 };
  ptt_worker_start(&a);
  ptt_worker_join(&a);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  objrange libc = { "libc.so", 0, 0 };
  dl_iterate_phdr(ptt_objrange_cb, &libc);
  PT_ASSERT(libc.lo);
  uint64_t in_libc = 0, good = 0, total = 0;
  for (size_t i = 0; i < c.n; i++) {
    const cap_sample *s = &c.s[i];
    if (s->tid != a.tid) continue;
    total += s->count;
    if (!ptt_in_range(s->frames[0], (const char *)libc.lo, (const char *)libc.hi)) continue;
    in_libc += s->count;
    /* The first frame outside libc must be ptt_fn_malloc_caller, and the stack
     * must go on to the thread's root, not be cut. */
    int k = 1;
    while (k < s->n && ptt_frame_in(s->frames, k, (const char *)libc.lo, (const char *)libc.hi)) k++;
    if (k < s->n && ptt_frame_in(s->frames, k, __start_ptt_malloc_caller, __stop_ptt_malloc_caller) &&
        !(s->flags & PTP_SAMPLE_TRUNCATED))
      good += s->count;
    else if (getenv("PTT_DEBUG")) {
      printf("# bad stack (flags %#x, count %llu):", s->flags, (unsigned long long)s->count);
      for (int j = 0; j < s->n; j++) {
        Dl_info di;
        uintptr_t ad = j ? s->frames[j] - 1 : s->frames[j];
        if (dladdr((void *)ad, &di) && di.dli_sname)
          printf(" %s+%#lx", di.dli_sname, (unsigned long)(ad - (uintptr_t)di.dli_saddr));
        else
          printf(" %#lx", (unsigned long)ad);
      }
      printf("\n");
    }
  }
  printf("# malloc: %llu of %llu samples have a libc leaf; %llu of those are complete under "
         "malloc_caller\n", (unsigned long long)in_libc, (unsigned long long)total,
         (unsigned long long)good);
  PT_ASSERT_MSG(in_libc * 3 >= total, "libc leaves %llu of %llu", (unsigned long long)in_libc,
                (unsigned long long)total);
  PT_ASSERT_MSG(good * 10 >= in_libc * 9, "%llu of %llu", (unsigned long long)good,
                (unsigned long long)in_libc);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

/* ---- unwind tables follow dlopen/dlclose ------------------------------ */

typedef struct find_obj { const char *name; int found; } find_obj;
static int find_obj_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_obj *f = arg;
  if (info->dlpi_name && strstr(info->dlpi_name, f->name)) f->found = 1;
  return 0;
}

PT_TEST(prof_sampler_cfi_dlopen) {
  /* A glibc library this process has not loaded yet is a system object:
   * loading it must extend the published tables, unloading shrink them. */
  static const char *const cands[] = { "libBrokenLocale.so.1", "libanl.so.1", "libresolv.so.2" };
  const char *lib = NULL;
  for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !lib; i++) {
    find_obj f = { cands[i], 0 };
    dl_iterate_phdr(find_obj_cb, &f);
    if (!f.found) lib = cands[i];
  }
  if (!lib) PT_SKIP("every candidate library is already loaded");
  PT_ASSERT_INT_EQ(ptp_cfi_refresh(), 0);
  ptp_cfi_info before, loaded, after;
  ptp_cfi_get_info(&before);
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) PT_SKIP("library not installed");
  PT_ASSERT_INT_EQ(ptp_cfi_refresh(), 0);
  ptp_cfi_get_info(&loaded);
  objrange o = { lib, 0, 0 };
  dl_iterate_phdr(ptt_objrange_cb, &o);
  PT_ASSERT(o.lo);
  PT_ASSERT_MSG(loaded.builds == before.builds + 1, "builds %u -> %u", before.builds, loaded.builds);
  PT_ASSERT_MSG(loaded.nobjs > before.nobjs, "objects %zu -> %zu", before.nobjs, loaded.nobjs);
  PT_ASSERT(ptp_cfi_in_system(atomic_load(&ptp_g_cfi), o.lo + (o.hi - o.lo) / 2));
  /* Nothing changed: no rebuild. */
  PT_ASSERT_INT_EQ(ptp_cfi_refresh(), 0);
  ptp_cfi_info same;
  ptp_cfi_get_info(&same);
  PT_ASSERT_INT_EQ(same.builds, loaded.builds);
  dlclose(h);
  find_obj f = { lib, 0 };
  dl_iterate_phdr(find_obj_cb, &f);
  if (f.found) PT_SKIP("dlclose kept the library loaded");
  PT_ASSERT_INT_EQ(ptp_cfi_refresh(), 0);
  ptp_cfi_get_info(&after);
  PT_ASSERT_INT_EQ(after.builds, loaded.builds + 1);
  PT_ASSERT_INT_EQ(after.nobjs, before.nobjs);
}
