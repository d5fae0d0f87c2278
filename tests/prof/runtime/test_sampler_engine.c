/*
 * test_sampler_engine.c - the sampling engines: setting names, the perf steal
 * guard (unit and end to end), engine selection, stray SIGPROF, and the
 * timers and events of exited threads. Helpers: sampler_fixture.h.
 */
#include "prof/signal/ptp_sigstate.h"
#include "pt_test.h"
#include "ptprof.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/signal/ptp_handler.h"
#include "prof/runtime/ptp_perf.h"
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

/* The setting names every program uses for the engine (preload
 * PTPROF_ENGINE, POLYTOKEN_PROFILE_ENGINE): exact words only. */
PT_TEST(prof_sampler_engine_names) {
  PT_ASSERT_INT_EQ(ptprof_engine_from_name("auto"), PTPROF_ENGINE_AUTO);
  PT_ASSERT_INT_EQ(ptprof_engine_from_name("perf"), PTPROF_ENGINE_PERF);
  PT_ASSERT_INT_EQ(ptprof_engine_from_name("timer"), PTPROF_ENGINE_TIMER);
  PT_ASSERT_INT_EQ(ptprof_engine_from_name("Perf"), -EINVAL);
  PT_ASSERT_INT_EQ(ptprof_engine_from_name("timers"), -EINVAL);
  PT_ASSERT_INT_EQ(ptprof_engine_from_name(""), -EINVAL);
  PT_ASSERT_INT_EQ(ptprof_engine_from_name(NULL), -EINVAL);
}

/* The perf handler's steal guard (ptp_perf_expiry_backed): an event
 * whose clock runs faster than the thread's CPU clock (steal time) gets
 * only as many samples as the CPU clock backs; an event that keeps pace,
 * expiring a few microseconds late as real ones do, loses none. */
static unsigned backed_run(double clock_ratio, int64_t late_ns, int n, int64_t first) {
  const int64_t period = 10101010, armed = 5000000;
  uint64_t delivered = 0;
  unsigned backed = 0;
  for (int k = 0; k < n; k++) {
    /* the k-th expiration, on the event's clock, since arming */
    double ev = (double)first + (double)k * (double)period + (double)late_ns;
    int64_t cpu = armed + (int64_t)(ev / clock_ratio);
    if (ptp_perf_expiry_backed(armed, first, period, delivered, cpu)) {
      delivered++;
      backed++;
    }
  }
  return backed;
}

PT_TEST(prof_sampler_perf_steal_guard) {
  /* Keeping pace: every expiration is a sample. */
  PT_ASSERT_INT_EQ(backed_run(1.0, 3000, 300, 4000000), 300);
  PT_ASSERT_INT_EQ(backed_run(1.0, 0, 300, 1), 300);
  /* The event's clock 1.5x the CPU clock (a third of the time stolen):
   * 300 expirations for 200 periods of CPU. */
  unsigned b = backed_run(1.5, 0, 300, 4000000);
  PT_ASSERT_MSG(b >= 199 && b <= 201, "1.5x: %u backed of 300", b);
  b = backed_run(3.0, 0, 300, 7000000);
  PT_ASSERT_MSG(b >= 99 && b <= 101, "3x: %u backed of 300", b);
  /* Never early by the thread's clock: the first expiration is always
   * backed; one due beyond half a period ahead of the CPU clock is not. */
  PT_ASSERT(ptp_perf_expiry_backed(0, 5000000, 10000000, 0, 0));
  PT_ASSERT(ptp_perf_expiry_backed(0, 5000000, 10000000, 1, 10000001));
  PT_ASSERT(!ptp_perf_expiry_backed(0, 5000000, 10000000, 1, 9999999));
  /* Unknown clocks keep the sample. */
  PT_ASSERT(ptp_perf_expiry_backed(-1, 5000000, 10000000, 7, 0));
  PT_ASSERT(ptp_perf_expiry_backed(0, 5000000, 10000000, 7, -1));
  PT_ASSERT(ptp_perf_expiry_backed(0, 5000000, 10000000, UINT64_MAX, 0));
}

/* ---- timers of exited threads ----------------------------------------- */

static int count_proc_timers(void) {
  FILE *f = fopen("/proc/self/timers", "r");
  if (!f) return -1;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "ID:", 3) == 0) n++;
  fclose(f);
  return n;
}

static void *idle_main(void *arg) { (void)arg; ptt_fn_hot_a(2000000); return NULL; }

PT_TEST_T(prof_sampler_timer_cleanup, 60000) {
  char *dir = pt_tmpdir("sampler-timers");
  ptprof *p = ptt_start_sampler_engine(dir, 99, NULL, PTPROF_ENGINE_TIMER);
  int base = count_proc_timers();
  if (base < 0) PT_SKIP("/proc/self/timers not available");
  for (int round = 0; round < 5; round++) {
    pthread_t t[20];
    for (int i = 0; i < 20; i++) PT_ASSERT_INT_EQ(pthread_create(&t[i], NULL, idle_main, NULL), 0);
    for (int i = 0; i < 20; i++) pthread_join(t[i], NULL);
  }
  /* Every exited thread's timer is gone: the count is back where it was. */
  PT_ASSERT_INT_EQ(count_proc_timers(), base);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  PT_ASSERT_INT_EQ(count_proc_timers(), 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

/* perf event fds of this process (/proc/self/fd links "anon_inode:[perf_event]"). */
static int count_perf_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[300], link[64];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, link, sizeof link - 1);
    if (k > 0) {
      link[k] = 0;
      if (strstr(link, "perf_event")) n++;
    }
  }
  closedir(d);
  return n;
}

/* The same for the perf engine: one event per thread, closed at its exit
 * and at stop (no fd leak). */
PT_TEST_T(prof_sampler_perf_cleanup, 60000) {
  if (!ptt_perf_engine_works()) PT_SKIP("perf_event_open refused here");
  char *dir = pt_tmpdir("sampler-perffds");
  PT_ASSERT_INT_EQ(count_perf_fds(), 0);
  ptprof *p = ptt_start_sampler_engine(dir, 99, NULL, PTPROF_ENGINE_PERF);
  int base = count_perf_fds();
  PT_ASSERT_MSG(base >= 1, "no perf event for the running threads (%d)", base);
  for (int round = 0; round < 5; round++) {
    pthread_t t[20];
    for (int i = 0; i < 20; i++) PT_ASSERT_INT_EQ(pthread_create(&t[i], NULL, idle_main, NULL), 0);
    for (int i = 0; i < 20; i++) pthread_join(t[i], NULL);
  }
  PT_ASSERT_INT_EQ(count_perf_fds(), base);
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  PT_ASSERT(st.timers_created >= 100 + (uint64_t)base);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  PT_ASSERT_INT_EQ(count_perf_fds(), 0);
  ptprof_get_stats(p, &st);
  PT_ASSERT_INT_EQ(st.timers_created, st.timers_deleted);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}

/* ---- stray SIGPROF ------------------------------------------------------ */

static _Atomic int g_stray;
static void stray_handler(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)si, (void)uc;
  atomic_fetch_add(&g_stray, 1);
}

/* Each batch of 100 reached the program's handler: every one of them;
 * under ThreadSanitizer, which keeps one pending signal per number and
 * thread while it defers them to the next intercepted call
 * (docs/architecture.md, "Checked by tools"), at least one. */
static void batch_reached(int before) {
  int got = atomic_load(&g_stray) - before;
#ifndef __SANITIZE_THREAD__
  PT_ASSERT_INT_EQ(got, 100);
#else
  PT_ASSERT_MSG(got >= 1 && got <= 100, "%d of 100 reached the program's handler", got);
#endif
}

PT_TEST_T(prof_sampler_stray_sigprof, 30000) {
  /* SIGPROF not sent by our timers or events (kill, raise, a foreign
   * timer's value, forged F_SETSIG signals) is the program's: it reaches
   * the handler the program set (kept virtually: ours stays installed),
   * each one, and nothing is recorded for it; a late signal of one of our
   * own timers (an earlier start's generation) reaches nobody. */
  char *dir = pt_tmpdir("sampler-stray");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler(dir, 1, &c);    /* 1 Hz: our own timers stay quiet */
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = stray_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, &sa, NULL), 0);
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, NULL, &old), 0);
  PT_ASSERT(old.sa_sigaction == stray_handler);
  PT_ASSERT(old.sa_flags & SA_SIGINFO);
  int before = atomic_load(&g_stray);
  for (int i = 0; i < 100; i++) raise(SIGPROF);
  batch_reached(before);
  before = atomic_load(&g_stray);
  for (int i = 0; i < 100; i++) kill(getpid(), SIGPROF);
  batch_reached(before);
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = SIGPROF;
  si.si_code = SI_TIMER;
  si.si_value.sival_ptr = (void *)(uintptr_t)0xdeadbeef00000001ull;
  before = atomic_load(&g_stray);
  for (int i = 0; i < 100; i++)
    syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGPROF, &si);
  batch_reached(before);
  /* Forged F_SETSIG-style signals (the perf engine's shape) whose si_fd is
   * not this thread's event. */
  memset(&si, 0, sizeof si);
  si.si_signo = SIGPROF;
  si.si_code = POLL_IN;
  si.si_fd = 1;
  before = atomic_load(&g_stray);
  for (int i = 0; i < 100; i++)
    syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGPROF, &si);
  batch_reached(before);
  si.si_fd = -1;
  before = atomic_load(&g_stray);
  for (int i = 0; i < 100; i++)
    syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGPROF, &si);
  batch_reached(before);
  int all = atomic_load(&g_stray);
  /* Ours, from another start (its generation differs): nobody's. */
  memset(&si, 0, sizeof si);
  si.si_signo = SIGPROF;
  si.si_code = SI_TIMER;
  uint64_t magic = atomic_load(&ptp_g_sig.timer_magic);
  PT_ASSERT(magic != 0);
  si.si_value.sival_ptr =
      (void *)(uintptr_t)((magic << 32) | (77u << PTP_TIMER_TID_BITS) | (uint32_t)gettid());
  for (int i = 0; i < 100; i++)
    syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGPROF, &si);
  PT_ASSERT_INT_EQ(atomic_load(&g_stray), all);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  PT_ASSERT_UINT_EQ(ptp_signals_recorded(p), 0);
  ptprof_del(p);
  /* After stop the handler stays installed: the program's disposition is
   * still the virtual one (here SIG_IGN: ignored, the process lives). */
  sa.sa_handler = SIG_IGN;
  sa.sa_flags = 0;
  PT_ASSERT_INT_EQ(sigaction(SIGPROF, &sa, NULL), 0);
  for (int i = 0; i < 10; i++) raise(SIGPROF);
  PT_ASSERT_INT_EQ(atomic_load(&g_stray), all);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

/* The steal guard in the handler, end to end: a thread whose CPU clock
 * lags its perf event's clock (what a VM's steal time does) gets no
 * samples for the expirations its CPU did not back, and they are counted.
 * The lag is made by moving the thread's own record: its armed CPU time
 * 1000 s ahead, so no later expiration is due by its CPU clock. Written by
 * the thread itself, the only one whose handler reads it. */
typedef struct steal_ctx {
  _Atomic uint32_t tid;
  int armed;           /* the event was armed and its first signal handled */
} steal_ctx;

static void *steal_worker(void *arg) {
  steal_ctx *x = arg;
  uint32_t tid = (uint32_t)gettid();
  atomic_store(&x->tid, tid);
  int64_t t0 = ptt_thread_cpu_ns();
  ptp_thread_sig *r = NULL;
  while (ptt_thread_cpu_ns() - t0 < 2000000000) {
    r = ptp_thread_sig_lookup(tid);
    if (r && atomic_load(&r->perf_fd) >= 0 && !atomic_load(&r->perf_first)) break;
    r = NULL;
    ptt_fn_hot_a(1000000);
  }
  x->armed = r != NULL;
  if (r) r->armed_cpu_ns += INT64_C(1000000000000);
  ptt_fn_hot_b(300000000);
  return NULL;
}

PT_TEST_T(prof_sampler_perf_steal_e2e, 60000) {
  if (!ptt_perf_engine_works()) PT_SKIP("perf_event_open refused here");
  char *dir = pt_tmpdir("sampler-steal");
  capture c;
  ptt_cap_init(&c);
  ptprof *p = ptt_start_sampler_engine(dir, 99, &c, PTPROF_ENGINE_PERF);
  static steal_ctx x;
  memset(&x, 0, sizeof x);
  pthread_t th;
  PT_ASSERT_INT_EQ(pthread_create(&th, NULL, steal_worker, &x), 0);
  PT_ASSERT_INT_EQ(pthread_join(th, NULL), 0);
  PT_ASSERT_INT_EQ(ptprof_stop(p, 1, NULL, 0), 0);
  PT_ASSERT_MSG(x.armed, "the worker's perf event was never armed");
  uint64_t in_b = ptt_count_tid(&c, x.tid, __start_ptt_hot_b, __stop_ptt_hot_b);
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  printf("# steal guard: %llu samples in hot_b for 300 ms of CPU after the lag, %llu "
         "expirations ignored\n", (unsigned long long)in_b,
         (unsigned long long)st.expirations_no_cpu);
  /* 300 ms at 99 Hz is ~30 expirations, none backed by the thread's clock:
   * at most the one due within half a period of the lag's start. */
  PT_ASSERT_MSG(in_b <= 1, "%llu samples in hot_b", (unsigned long long)in_b);
  PT_ASSERT_MSG(st.expirations_no_cpu >= 20, "%llu ignored",
                (unsigned long long)st.expirations_no_cpu);
  ptprof_del(p);
  ptt_cap_free(&c);
  pt_rm_rf(dir);
  free(dir);
}

/* Engine selection: the forced fallback runs timers and every snapshot
 * says so; AUTO takes perf exactly when a probe event opens; a forced perf
 * engine that cannot run fails to start with the probe's error. */
static int comment_has(const capture *c, const char *needle) {
  for (int i = 0; i < c->ncomments; i++)
    if (strstr(c->comments[i], needle)) return 1;
  return 0;
}

PT_TEST_T(prof_sampler_engine_select, 30000) {
  char *dir = pt_tmpdir("sampler-engine");
  int have_perf = ptt_perf_engine_works();
  for (int e = PTPROF_ENGINE_AUTO; e <= PTPROF_ENGINE_TIMER; e++) {
    ptprof_options o;
    ptprof_options_init(&o);
    o.dir = dir;
    o.engine = e;
    ptprof *p = NULL;
    PT_ASSERT_INT_EQ(ptprof_new(&p, &o), 0);
    capture c;
    ptt_cap_init(&c);
    ptp_set_window_hook(p, ptt_cap_hook, &c);
    int rc = ptprof_start(p);
    if (e == PTPROF_ENGINE_PERF && !have_perf) {
      PT_ASSERT_MSG(rc < 0, "forced perf started where the probe fails");
      ptprof_del(p);
      continue;
    }
    PT_ASSERT_MSG(rc == 0, "start engine %d: %s", e, ptprof_strerror(rc));
    ptt_fn_hot_a(30000000);
    PT_ASSERT_INT_EQ(ptprof_dump(p, NULL, 0), 0);
    ptprof_stats st;
    ptprof_get_stats(p, &st);
    int want = e == PTPROF_ENGINE_TIMER || (e == PTPROF_ENGINE_AUTO && !have_perf)
                   ? PTPROF_ENGINE_TIMER : PTPROF_ENGINE_PERF;
    PT_ASSERT_INT_EQ(st.engine, want);
    const char *name = want == PTPROF_ENGINE_TIMER ? "sampler engine: POSIX CPU-time timer"
                                                  : "sampler engine: perf_event task-clock";
    PT_ASSERT_MSG(comment_has(&c, name), "no \"%s\" comment (first: %s)", name,
                  c.ncomments ? c.comments[0] : "none");
    PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
    ptprof_del(p);
    ptt_cap_free(&c);
  }
  ptprof_options o;
  ptprof_options_init(&o);
  o.engine = 3;
  ptprof *p = NULL;
  PT_ASSERT_INT_EQ(ptprof_new(&p, &o), -EINVAL);
  pt_rm_rf(dir);
  free(dir);
}
