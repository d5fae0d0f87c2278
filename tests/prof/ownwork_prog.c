/*
 * ownwork_prog.c - the workload of tests/prof/own_work_test.sh: a program
 * linked with the profiling library (like the daemon) whose dumps do heavy
 * work of the profiler's own, on an application thread, while another
 * thread burns CPU.
 *
 *   ownwork_prog DIR
 *
 * Threads:
 *   "gone-early"  renames itself (it starts with the program's name), burns
 *                 150 ms of CPU in gone_work and exits before any dump;
 *   "burner"      renamed after start too; burns CPU in burn_main until the
 *                 end; after the first dump it renames itself "burner-late";
 *   "dumper"      like the daemon's libuv worker running the snapshot
 *                 writer: three ptprof_dump calls, each after the burner
 *                 used another 100 ms of CPU. Run with an empty symbol cache
 *                 (PTPROF_SYMCACHE), the first dump opens libc's compressed
 *                 debug info and then copies it uncompressed (after
 *                 sampling resumed): the profiler's own work, which must
 *                 never show up as samples.
 *   "poller"      before the dumper starts: 200 ms of its CPU in calls of
 *                 the API that are the profiler's work on the caller's
 *                 thread (ptprof_get_stats, as a status request does, and
 *                 ptprof_set_dir): the code of each call that runs
 *                 before its own-work mark is set or after it is cleared
 *                 (the prologue, the fork check, the returns) showed up
 *                 under the function's name (runtime/ptp_own_text.h).
 * The second dump is held in its blind window (the window hook of
 * ptprof_internal.h) until the burner used 100 ms of CPU there: the third
 * snapshot must count those expirations as the blind window before it, and
 * none of them as samples. The first dump, after sampling resumed (the
 * resume hook, where the debug copies run), also spends 100 ms of the
 * dumper's CPU mostly in the kernel (read(2) of /dev/zero), as a debug
 * copy's writes and page faults do: under the perf engine limited to user
 * mode those periods send no signal and must still count as the
 * profiler's own, never as the program's "[lost: kernel mode]". Then main
 * writes the final snapshot (ptprof_stop).
 *
 * Output lines: "snapshot PATH" per file written, in order, and
 * "blind_burner_ms N" (the burner's CPU inside the held blind window).
 * Exit 0, or 1 with a message on stderr.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptprof.h"
#include "prof/runtime/ptprof_internal.h"

static _Atomic uint64_t g_sink;
static _Atomic int g_stop, g_rename_late;
static clockid_t g_burner_clk;
static _Atomic int g_hold_dump;      /* the dump number whose hook holds its blind window */
static _Atomic int g_dumps_seen;
static int64_t g_blind_burner_ns;

static int64_t clk_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits (1 ms naps) until the burner's CPU clock reaches `until`. */
static void wait_burner(int64_t until) {
  while (clk_ns(g_burner_clk) < until) nanosleep(&(struct timespec){0, 1000000}, NULL);
}

#define SPIN(x) for (int i_ = 0; i_ < 20000; i_++) (x) = (x) * 6364136223846793005ull + 1442695040888963407ull

static __attribute__((noinline)) void gone_work(int64_t ns) {
  uint64_t x = 1;
  int64_t end = clk_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
  while (clk_ns(CLOCK_THREAD_CPUTIME_ID) < end) SPIN(x);
  g_sink += x;
}

static __attribute__((noinline)) void burn_main(void) {
  uint64_t x = 2;
  while (!atomic_load(&g_stop)) {
    SPIN(x);
    if (atomic_exchange(&g_rename_late, 0)) pthread_setname_np(pthread_self(), "burner-late");
  }
  g_sink += x;
}

static void *gone_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "gone-early");
  gone_work(150000000);
  return NULL;
}

static void *burner_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "burner");
  burn_main();
  return NULL;
}

/* The window hook: holds the dump numbered g_hold_dump in its blind window
 * until the burner used 100 ms of CPU there (readiness, not a duration). */
static void hold_hook(const ptp_window *w, void *ctx) {
  (void)w, (void)ctx;
  int n = atomic_fetch_add(&g_dumps_seen, 1) + 1;
  if (n != atomic_load(&g_hold_dump)) return;
  int64_t t0 = clk_ns(g_burner_clk);
  wait_burner(t0 + 100000000);
  g_blind_burner_ns = clk_ns(g_burner_clk) - t0;
}

/* The resume hook: the first dump's kernel-heavy own work (see the top). */
static void kernel_hook(void *ctx) {
  (void)ctx;
  static int done;
  if (done++) return;
  static char buf[4 << 20];
  int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  int64_t end = clk_ns(CLOCK_THREAD_CPUTIME_ID) + 100000000;
  while (clk_ns(CLOCK_THREAD_CPUTIME_ID) < end)
    if (read(fd, buf, sizeof buf) < 0) break;
  close(fd);
}

static ptprof *g_p;
static const char *g_dir;

static void *poller_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "poller");
  int64_t end = clk_ns(CLOCK_THREAD_CPUTIME_ID) + 200000000;
  while (clk_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
    for (int i = 0; i < 200; i++) {
      ptprof_stats st;
      ptprof_get_stats(g_p, &st);
      int rc = ptprof_set_dir(g_p, g_dir);
      if (rc != 0) {
        fprintf(stderr, "ownwork_prog: set_dir: %s\n", ptprof_strerror(rc));
        exit(1);
      }
    }
  }
  return NULL;
}

static void *dumper_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "dumper");
  for (int i = 1; i <= 3; i++) {
    wait_burner(clk_ns(g_burner_clk) + 100000000);
    char path[4096];
    int rc = ptprof_dump(g_p, path, sizeof path);
    if (rc != 0) {
      fprintf(stderr, "ownwork_prog: dump %d: %s\n", i, ptprof_strerror(rc));
      exit(1);
    }
    printf("snapshot %s\n", path);
    fflush(stdout);
    if (i == 1) atomic_store(&g_rename_late, 1);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: ownwork_prog DIR\n");
    return 2;
  }
  ptprof_options o;
  ptprof_options_init(&o);
  g_dir = o.dir = argv[1];
  o.prefix = "own-";
  o.hz = 999;
  o.keep = 16;
  int rc = ptprof_new(&g_p, &o);
  if (rc == 0) {
    ptp_set_window_hook(g_p, hold_hook, NULL);
    ptp_set_resume_hook(g_p, kernel_hook, NULL);
    atomic_store(&g_hold_dump, 2);
    rc = ptprof_start(g_p);
  }
  if (rc != 0) {
    fprintf(stderr, "ownwork_prog: %s\n", ptprof_strerror(rc));
    return 1;
  }
  pthread_t gone, burner, poller, dumper;
  if (pthread_create(&gone, NULL, gone_thread, NULL) != 0 || pthread_join(gone, NULL) != 0 ||
      pthread_create(&burner, NULL, burner_thread, NULL) != 0 ||
      pthread_getcpuclockid(burner, &g_burner_clk) != 0 ||
      pthread_create(&poller, NULL, poller_thread, NULL) != 0 ||
      pthread_join(poller, NULL) != 0 ||
      pthread_create(&dumper, NULL, dumper_thread, NULL) != 0) {
    fprintf(stderr, "ownwork_prog: cannot start the threads\n");
    return 1;
  }
  pthread_join(dumper, NULL);
  atomic_store(&g_stop, 1);
  pthread_join(burner, NULL);
  char path[4096];
  rc = ptprof_stop(g_p, 1, path, sizeof path);
  if (rc != 0) {
    fprintf(stderr, "ownwork_prog: final dump: %s\n", ptprof_strerror(rc));
    return 1;
  }
  printf("snapshot %s\n", path);
  printf("blind_burner_ms %.1f\n", g_blind_burner_ns / 1e6);
  ptprof_stats st;
  ptprof_get_stats(g_p, &st);
  printf("own_work_drops %llu own_thread_cpu_ms %.1f\n",
         (unsigned long long)st.drops[PTPROF_DROP_OWN_WORK], st.own_thread_cpu_ns / 1e6);
  ptprof_del(g_p);
  return 0;
}
