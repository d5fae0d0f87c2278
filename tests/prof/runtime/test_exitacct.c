/*
 * test_exitacct.c - the exit accounting (src/prof/runtime/ptp_exitacct.c):
 * the caps by cause, and one path for both engines end to end: a thread
 * that keeps SIGPROF blocked while it burns CPU and exits has its blocked
 * CPU under "[lost: signal blocked]" (counted by its CPU clock: the mask
 * interposers saw it block), nothing on a stack, and no more under
 * "[lost: thread exit]" than the cap allows (the perf engine's path used to
 * count them all, under "[lost: kernel mode]" when exclude_kernel is on,
 * although the CPU was user time; before the interposers, the caps hid the
 * blocked CPU altogether).
 */
#include "pt_test.h"
#include "ptprof.h"
#include "prof/output/ptp_window.h"
#include "prof/runtime/ptp_exitacct.h"
#include "prof/runtime/ptprof_internal.h"
#include "sampler_fixture.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

PT_TEST(prof_exitacct_split) {
  uint64_t k, e;
  const int64_t p99 = 1000000000 / 99, p999 = 1000000000 / 999;
  /* No kernel share: one tick's worth under "[lost: thread exit]". */
  ptp_exitacct_split(30, p99, -1, &k, &e);
  PT_ASSERT_UINT_EQ(k, 0);
  PT_ASSERT_UINT_EQ(e, 1);              /* 1 + 10 ms / 10.1 ms */
  ptp_exitacct_split(30, p999, -1, &k, &e);
  PT_ASSERT_UINT_EQ(e, 10);             /* 1 + 10 ms / 1.001 ms */
  ptp_exitacct_split(3, p999, -1, &k, &e);
  PT_ASSERT_UINT_EQ(e, 3);              /* under the cap: all of it */
  /* Kernel share: at most 1 + kernel time / period, the rest as above. */
  ptp_exitacct_split(30, p99, 50000000, &k, &e);
  PT_ASSERT_UINT_EQ(k, 5);              /* 1 + 50 ms / 10.1 ms */
  PT_ASSERT_UINT_EQ(e, 1);
  ptp_exitacct_split(4, p99, 50000000, &k, &e);
  PT_ASSERT_UINT_EQ(k, 4);
  PT_ASSERT_UINT_EQ(e, 0);
  ptp_exitacct_split(30, p99, 0, &k, &e);
  PT_ASSERT_UINT_EQ(k, 1);
  PT_ASSERT_UINT_EQ(e, 1);
  /* Nothing owed, or no period: nothing. */
  ptp_exitacct_split(0, p99, 50000000, &k, &e);
  PT_ASSERT(k == 0 && e == 0);
  ptp_exitacct_split(30, 0, -1, &k, &e);
  PT_ASSERT(k == 0 && e == 0);
}

typedef struct blocked {
  _Atomic uint32_t tid;
  int64_t cpu_ns;
} blocked;

static void *blocked_main(void *arg) {
  blocked *b = arg;
  atomic_store(&b->tid, (uint32_t)gettid());
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &s, NULL);
  ptt_fn_hot_a(b->cpu_ns);
  return NULL;                         /* exits with SIGPROF still blocked */
}

/* Expirations of tid under the pseudo-frame of cause. */
static uint64_t count_cause(const capture *c, uint32_t tid, int cause) {
  uint64_t n = 0;
  for (size_t i = 0; i < c->n; i++)
    if (c->s[i].tid == tid && (c->s[i].flags & PTP_SAMPLE_LOST) && c->s[i].n == 1 &&
        c->s[i].frames[0] == (uintptr_t)cause)
      n += c->s[i].count;
  return n;
}

static void blocked_exit(int engine) {
  char *dir = pt_tmpdir("exitacct-blocked");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler_engine(dir, 99, &c, engine);
  blocked b = { .cpu_ns = 300000000 };
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, blocked_main, &b), 0);
  PT_ASSERT_INT_EQ(pthread_join(th, NULL), 0);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  uint64_t all = ptt_count_tid(&c, b.tid, NULL, NULL);
  uint64_t lost = ptt_count_lost_tid(&c, b.tid);
  uint64_t nblocked = count_cause(&c, b.tid, PTP_DROP_BLOCKED);
  uint64_t at_exit = count_cause(&c, b.tid, PTP_DROP_THREAD_EXIT);
  printf("# %s: a thread with SIGPROF blocked for 300 ms of CPU (~30 periods): %llu "
         "expirations, %llu under [lost: signal blocked], %llu under [lost: thread exit], %llu "
         "on a stack\n", engine == PTPROF_ENGINE_PERF ? "perf" : "timer", (unsigned long long)all,
         (unsigned long long)nblocked, (unsigned long long)at_exit, (unsigned long long)(all - lost));
  /* The CPU it used while blocked is in the profile under its own
   * pseudo-frame, counted by its CPU clock (300 ms / 10.1 ms = 29.7: 29 or
   * 30, plus the CPU it used before the block's first period), never on a
   * stack: at most one sample before it blocked; the exit cap as before. */
  PT_ASSERT_MSG(nblocked >= 28 && nblocked <= 32, "%llu under [lost: signal blocked], want ~30",
                (unsigned long long)nblocked);
  PT_ASSERT_MSG(all - lost <= 1, "%llu on a stack for a thread whose signals were blocked",
                (unsigned long long)(all - lost));
  PT_ASSERT_MSG(at_exit <= 2, "%llu under [lost: thread exit]", (unsigned long long)at_exit);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST_T(prof_exitacct_blocked_timer, 30000) { blocked_exit(PTPROF_ENGINE_TIMER); }

PT_TEST_T(prof_exitacct_blocked_perf, 30000) {
  if (!ptt_perf_engine_works()) PT_SKIP("perf_event_open refused here");
  blocked_exit(PTPROF_ENGINE_PERF);
}

/* Every drop cause is public (ptprof_stats.drops had 4 of the 7): the
 * blocked thread's CPU is counted under PTPROF_DROP_BLOCKED, and each
 * cause has its comment name. */
PT_TEST_T(prof_exitacct_public_causes, 30000) {
  static const char *const names[PTPROF_DROP_CAUSES] = {
    "ring_full", "dumping", "no_stack", "reentrant", "thread_exit", "kernel_mode", "undelivered",
    "no_memory", "own_work", "blocked", "fd_closed",
  };
  for (int i = 0; i < PTPROF_DROP_CAUSES; i++) PT_ASSERT_STR_EQ(ptprof_drop_name(i), names[i]);
  PT_ASSERT(ptprof_drop_name(PTPROF_DROP_CAUSES) == NULL);
  PT_ASSERT(ptprof_drop_name(-1) == NULL);
  char *dir = pt_tmpdir("exitacct-public");
  ptprof *p = ptt_start_sampler_engine(dir, 99, NULL, PTPROF_ENGINE_TIMER);
  blocked b = { .cpu_ns = 100000000 };
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, blocked_main, &b), 0);
  PT_ASSERT_INT_EQ(pthread_join(th, NULL), 0);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  PT_ASSERT_MSG(st.drops[PTPROF_DROP_BLOCKED] >= 8, "blocked drops %llu (100 ms of CPU blocked)",
                (unsigned long long)st.drops[PTPROF_DROP_BLOCKED]);
  for (int i = PTPROF_DROP_CAUSES; i < PTPROF_DROPS_MAX; i++) PT_ASSERT_UINT_EQ(st.drops[i], 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}
