/*
 * labels_work.c - the workload of tests/prof/labels_agree_test.sh: two
 * console tasks doing known CPU work per poll, CPU outside any poll, a user
 * label, a sampler and a console server in one process.
 *
 * Script: LW_ROUNDS rounds (default 400) of
 *   poll "labels.A": burn_a() for 4 ms of thread CPU, the last 2 ms of it
 *                    under the user label phase=hot;
 *   poll "labels.B": burn_b() for 2 ms of thread CPU;
 *   no poll:         burn_outside() for 1 ms of thread CPU.
 * So A burns twice what B burns. Then one snapshot (ptprof_dump) is
 * written and a line of JSON goes to LW_DONE (temp + rename):
 *   {"snapshot": PATH, "polls": ROUNDS, "cpu_a_ns": N, "cpu_b_ns": N,
 *    "cpu_out_ns": N, "period_ns": N}
 * with the CPU each part really used (CLOCK_THREAD_CPUTIME_ID around it).
 * The tasks stay alive (not polled) for the console client until SIGTERM.
 *
 * Environment: LW_DIR snapshot directory, LW_PORTFILE (the console's port
 * is written there once listening), LW_DONE, LW_HZ (default 499), LW_ROUNDS.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptprof.h"
#include "ptprof_console.h"

static volatile sig_atomic_t g_stop;
static void on_sig(int sig) { (void)sig; g_stop = 1; }

static int64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static volatile uint64_t g_sink;
/* Spins until the thread used ns of CPU; returns what it used. noinline so
 * each burner is its own frame in the profile. */
static __attribute__((noinline)) int64_t spin(int64_t ns) {
  int64_t t0 = cpu_ns(), t;
  do {
    /* few clock reads: each is a system call, kernel-mode CPU that the perf
     * engine under perf_event_paranoid 2 shows as [lost: kernel mode] */
    for (int i = 0; i < 100000; i++) g_sink = g_sink * 6364136223846793005ULL + 1442695040888963407ULL;
    t = cpu_ns();
  } while (t - t0 < ns);
  return t - t0;
}
/* noipa: never merged with its identical twins (gcc's identical code
 * folding) nor inlined; the empty asm after the call keeps it a call (no
 * tail jump), so each burner shows as spin's caller. */
#define BURNER(name)                                                        \
  static __attribute__((noipa)) int64_t name(int64_t ns) {                  \
    int64_t r = spin(ns);                                                   \
    __asm__ volatile("" ::: "memory");                                      \
    return r;                                                               \
  }
BURNER(burn_a)
BURNER(burn_a_hot)
BURNER(burn_b)
BURNER(burn_outside)

static int env_int(const char *k, int def) {
  const char *v = getenv(k);
  return v && *v ? atoi(v) : def;
}

int main(void) {
  const char *dir = getenv("LW_DIR"), *portfile = getenv("LW_PORTFILE"), *done = getenv("LW_DONE");
  if (!dir || !portfile || !done) {
    fprintf(stderr, "labels_work: set LW_DIR, LW_PORTFILE, LW_DONE\n");
    return 2;
  }
  int hz = env_int("LW_HZ", 499), rounds = env_int("LW_ROUNDS", 400);
  signal(SIGTERM, on_sig);
  signal(SIGINT, on_sig);

  ptcon_server_options so;
  ptcon_server_options_init(&so);
  so.bind = "127.0.0.1:0";
  so.retention_ms = 600000;
  ptcon_server *srv = NULL;
  int rc = ptcon_server_new(&srv, &so);
  if (rc) {
    fprintf(stderr, "labels_work: console: %s\n", ptcon_strerror(rc));
    return 1;
  }
  ptprof_options po;
  ptprof_options_init(&po);
  po.hz = hz;
  po.dir = dir;
  po.prefix = "labels-";
  ptprof *p = NULL;
  if ((rc = ptprof_new(&p, &po)) || (rc = ptprof_start(p))) {
    fprintf(stderr, "labels_work: sampler: %s\n", ptprof_strerror(rc));
    return 1;
  }

  uint64_t a = ptcon_task_spawn("labels.A", "task", __FILE__, __LINE__, NULL, 0);
  uint64_t b = ptcon_task_spawn("labels.B", "task", __FILE__, __LINE__, NULL, 0);
  if (!a || !b) return 1;
  int64_t cpu_a = 0, cpu_b = 0, cpu_out = 0;
  for (int r = 0; r < rounds && !g_stop; r++) {
    ptcon_task_wake(a);
    ptcon_task_poll_begin(a);
    cpu_a += burn_a(2000000);
    if (ptprof_labels_push("phase", "hot") == 0) {
      cpu_a += burn_a_hot(2000000);
      ptprof_labels_pop();
    }
    ptcon_task_poll_end(a);
    ptcon_task_wake(b);
    ptcon_task_poll_begin(b);
    cpu_b += burn_b(2000000);
    ptcon_task_poll_end(b);
    cpu_out += burn_outside(1000000);
  }
  char path[512];
  if ((rc = ptprof_dump(p, path, sizeof path))) {
    fprintf(stderr, "labels_work: dump: %s\n", ptprof_strerror(rc));
    return 1;
  }
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", done);
  FILE *f = fopen(tmp, "w");
  if (!f) return 1;
  fprintf(f,
          "{\"snapshot\": \"%s\", \"polls\": %d, \"cpu_a_ns\": %lld, \"cpu_b_ns\": %lld, "
          "\"cpu_out_ns\": %lld, \"period_ns\": %lld}\n",
          path, rounds, (long long)cpu_a, (long long)cpu_b, (long long)cpu_out,
          (long long)(1000000000 / hz));
  if (fclose(f) != 0 || rename(tmp, done) != 0) return 1;
  /* The port last: the test reads the console only after the snapshot. */
  snprintf(tmp, sizeof tmp, "%s.tmp", portfile);
  f = fopen(tmp, "w");
  if (!f) return 1;
  fprintf(f, "%u\n", (unsigned)ptcon_server_port(srv));
  if (fclose(f) != 0 || rename(tmp, portfile) != 0) return 1;
  while (!g_stop) usleep(50000);
  ptprof_stop(p, 0, NULL, 0);
  ptprof_del(p);
  ptcon_task_end(a);
  ptcon_task_end(b);
  ptcon_server_del(srv);
  return 0;
}
