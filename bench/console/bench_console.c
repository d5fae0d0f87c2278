/*
 * bench_console.c - on-demand benchmarks of the task console (not a test;
 * run by bench/console/run.sh, results in docs/performance.md).
 *
 *   bench_console poll [ITER [auto|tsc|mono]]
 *       app-thread cost of one instrumented poll (poll_begin + poll_end)
 *       against the uninstrumented loop, with a consumer draining the rings
 *       concurrently; also with no consumer (no server running), and with
 *       ~1 us of work per poll. tsc / mono force the tick source (the
 *       invariant-TSC path, or the CLOCK_MONOTONIC fallback a machine
 *       without an invariant TSC takes); auto keeps the library's choice.
 *   bench_console server TASKS EVENTS_PER_S SECONDS PORTFILE
 *       serves on 127.0.0.1:0 (port written to PORTFILE) with TASKS live
 *       tasks; the main thread generates EVENTS_PER_S poll events per second
 *       spread over them; prints the server thread's CPU time per second
 *       (measured from /proc) over SECONDS after a 2 s warm-up.
 *   bench_console memory N [POLL_NS]
 *       bytes of heap per retained (completed, polled) task, and per live
 *       task, from mallinfo2 deltas; each task is polled once for POLL_NS.
 */
#include <dirent.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "console/ptcon_agg.h"
#include "ptprof_console.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The uninstrumented seam: what pt_task.h compiles to in a normal build is
 * nothing at all; a noinline empty pair is the honest "call overhead only"
 * baseline for a loop that still has a call boundary. */
__attribute__((noinline)) static void base_begin(uint64_t id) { __asm__ volatile("" ::"r"(id)); }
__attribute__((noinline)) static void base_end(uint64_t id) { __asm__ volatile("" ::"r"(id)); }

static volatile int g_stop;
/* Drains like the server does: when a ring crosses its fill mark (the wake
 * eventfd), else once a second (the publishing tick), and while events flow
 * every 10 ms, every 1 ms while a ring is half a mark full (ptcon_grpc.c). */
static void *drainer(void *arg) {
  ptcon_agg *a = arg;
  struct pollfd p = {.fd = ptcon_wake_fd(), .events = POLLIN};
  uint32_t most = 0;
  while (!g_stop) {
    if (poll(&p, 1, most >= PTCON_RING_MARK / 2 ? 1 : most ? 10 : 1000) > 0) {
      uint64_t v;
      if (read(p.fd, &v, sizeof v) < 0) { /* raced: fine */ }
    }
    ptcon_wake_rearm();
    most = ptcon_agg_drain(a, ptcon_mono_ns());
  }
  ptcon_agg_drain(a, ptcon_mono_ns());
  return NULL;
}

/* ~1 us of pure computation (no clock reads, which would add noise). */
static volatile uint64_t g_sink;
__attribute__((noinline)) static void work(int units) {
  uint64_t x = g_sink;
  for (int i = 0; i < units; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
}

static double run_loop(int instrumented, uint64_t id, long iter, int units) {
  uint64_t t0 = now_ns();
  for (long i = 0; i < iter; i++) {
    if (instrumented) ptcon_task_poll_begin(id);
    else base_begin(id);
    if (units) work(units);
    if (instrumented) ptcon_task_poll_end(id);
    else base_end(id);
  }
  return (double)(now_ns() - t0) / (double)iter;
}

static double best_of(int n, int instrumented, uint64_t id, long iter, int units) {
  double best = 1e30;
  for (int i = 0; i < n; i++) {
    double v = run_loop(instrumented, id, iter, units);
    if (v < best) best = v;
  }
  return best;
}

static int bench_poll(long iter, const char *clock) {
  if (strcmp(clock, "auto") != 0 && ptcon_clock_force(strcmp(clock, "tsc") == 0) != 0) {
    fprintf(stderr, "cannot force the %s clock here\n", clock);
    return 2;
  }
  printf("tick source: %s (%s)\n", ptcon_clock_tsc ? "TSC" : "CLOCK_MONOTONIC", clock);
  uint64_t id = ptcon_task_spawn("bench", "task", __FILE__, __LINE__, NULL, 0);
  /* No consumer attached: what an app pays when no server runs. */
  double base = best_of(5, 0, id, iter, 0);
  double off = best_of(5, 1, id, iter, 0);
  ptcon_agg *a;
  if (ptcon_agg_new(&a, 60000, 0)) return 1;
  /* Recording cost into a ring that has room: batches of 4000 polls (8000
   * events < ring capacity), drained between batches outside the timing. */
  ptcon_instrument_stats s0, s1, s2;
  ptcon_instrument_get_stats(&s0);
  double on = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    uint64_t spent = 0;
    long done = 0;
    while (done < iter) {
      uint64_t t0 = now_ns();
      for (int i = 0; i < 4000; i++) {
        ptcon_task_poll_begin(id);
        ptcon_task_poll_end(id);
      }
      spent += now_ns() - t0;
      done += 4000;
      ptcon_agg_drain(a, ptcon_mono_ns());
    }
    double v = (double)spent / (double)done;
    if (v < on) on = v;
  }
  ptcon_instrument_get_stats(&s1);
  /* A loop doing ~3 us of work per poll, a drainer woken as the server is
   * (fill mark, 1 s tick), against the same loop uninstrumented. */
  pthread_t th;
  pthread_create(&th, NULL, drainer, a);
  long wi = iter / 200;
  int units = 3000;   /* ~3 us per poll: ~700k events/s, under the drain rate */
  double base_w = 1e30, on_w = 1e30;
  for (int rep = 0; rep < 7; rep++) {   /* alternate; keep the best of each */
    double b = run_loop(0, id, wi, units), o = run_loop(1, id, wi, units);
    if (b < base_w) base_w = b;
    if (o < on_w) on_w = o;
  }
  ptcon_instrument_get_stats(&s2);
  g_stop = 1;
  pthread_join(th, NULL);
  printf("poll cost (ns per poll = poll_begin + poll_end), best of 5 x %ld\n", iter);
  printf("  uninstrumented (empty noinline calls): %6.1f\n", base);
  printf("  instrumented, no server (no consumer): %6.1f  (+%.1f)\n", off, off - base);
  printf("  instrumented, consumer attached:       %6.1f  (+%.1f); dropped %llu\n", on, on - base,
         (unsigned long long)(s1.dropped_events - s0.dropped_events));
  printf("  loop with %d units (~3 us) of work per poll: %6.1f vs %.1f uninstrumented (%+.1f); "
         "dropped %llu\n",
         units, on_w, base_w, on_w - base_w,
         (unsigned long long)(s2.dropped_events - s1.dropped_events));
  ptcon_agg_del(a);
  return 0;
}

static double thread_cpu_s(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  struct dirent *e;
  double cpu = -1;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[300], comm[64] = {0};
    snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
    fclose(f);
    comm[strcspn(comm, "\n")] = 0;
    if (strcmp(comm, name) != 0) continue;
    /* schedstat: first field = ns on CPU (finer than stat's clock ticks) */
    snprintf(p, sizeof p, "/proc/self/task/%s/schedstat", e->d_name);
    f = fopen(p, "r");
    if (!f) continue;
    unsigned long long ns = 0;
    if (fscanf(f, "%llu", &ns) == 1) cpu = (double)ns / 1e9;
    fclose(f);
  }
  closedir(d);
  return cpu;
}

static int bench_server(int ntasks, long eps, int seconds, const char *portfile) {
  static uint64_t ids[PTCON_MAX_LIVE_TASKS];
  if (ntasks > (int)PTCON_MAX_LIVE_TASKS) ntasks = PTCON_MAX_LIVE_TASKS;
  for (int i = 0; i < ntasks; i++) {
    char name[48];
    snprintf(name, sizeof name, "bench.task.%d", i);
    ids[i] = ptcon_task_spawn(name, "task", __FILE__, __LINE__, NULL, 0);
  }
  ptcon_server_options o;
  ptcon_server_options_init(&o);
  o.bind = "127.0.0.1:0";
  ptcon_server *srv;
  int rc = ptcon_server_new(&srv, &o);
  if (rc) {
    fprintf(stderr, "server: %s\n", ptcon_strerror(rc));
    return 1;
  }
  FILE *f = fopen(portfile, "w");
  if (f) {
    fprintf(f, "%u\n", (unsigned)ptcon_server_port(srv));
    fclose(f);
  }
  /* Events in 1 ms batches: eps/1000 polls (2 events each) per batch. */
  long per_ms = eps / 2000;
  uint64_t start = now_ns(), next = start;
  uint64_t warm_end = start + 2000000000ull, end = warm_end + (uint64_t)seconds * 1000000000ull;
  double cpu0 = -1;
  long k = 0, polls = 0;
  ptcon_instrument_stats s0, s1;
  for (;;) {
    uint64_t t = now_ns();
    if (cpu0 < 0 && t >= warm_end) {
      cpu0 = thread_cpu_s("ptcon-server");
      ptcon_instrument_get_stats(&s0);
      polls = 0;
    }
    if (t >= end) break;
    for (long j = 0; j < per_ms && ntasks; j++) {
      uint64_t id = ids[k++ % ntasks];
      ptcon_task_poll_begin(id);
      ptcon_task_poll_end(id);
      polls++;
    }
    next += 1000000;
    uint64_t n2 = now_ns();
    if (next > n2) {
      struct timespec ts = {0, (long)(next - n2)};
      nanosleep(&ts, NULL);
    }
  }
  double cpu1 = thread_cpu_s("ptcon-server");
  ptcon_instrument_get_stats(&s1);
  printf("server: %d live tasks, %ld events/s offered (%ld polls measured), %d s: "
         "server thread CPU %.1f ms per second (%.2f%% of a core); dropped events %llu\n",
         ntasks, eps, polls, seconds, (cpu1 - cpu0) * 1000.0 / seconds,
         (cpu1 - cpu0) * 100.0 / seconds,
         (unsigned long long)(s1.dropped_events - s0.dropped_events));
  ptcon_server_del(srv);
  return 0;
}

static size_t heap_used(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

static void spin_ns(uint64_t ns) {
  uint64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

static int bench_memory(int n, uint64_t poll_ns) {
  ptcon_agg *a;
  if (ptcon_agg_new(&a, 600000, (uint32_t)n)) return 1;
  ptcon_agg_collect(a, ptcon_mono_ns());
  size_t h0 = heap_used();
  static uint64_t ids[PTCON_MAX_LIVE_TASKS];
  if (n > (int)PTCON_MAX_LIVE_TASKS) n = PTCON_MAX_LIVE_TASKS;
  for (int i = 0; i < n; i++) {
    ids[i] = ptcon_task_spawn("mem.task", "task", __FILE__, __LINE__, NULL, 0);
    ptcon_task_wake(ids[i]);
    ptcon_task_poll_begin(ids[i]);
    if (poll_ns) spin_ns(poll_ns);
    ptcon_task_poll_end(ids[i]);
    if (i % 1000 == 999) ptcon_agg_drain(a, ptcon_mono_ns());
  }
  ptcon_agg_collect(a, ptcon_mono_ns());
  size_t h1 = heap_used();
  for (int i = 0; i < n; i++) ptcon_task_end(ids[i]);
  ptcon_agg_collect(a, ptcon_mono_ns());
  size_t h2 = heap_used();
  printf("memory: %d tasks polled once for %llu ns: %.0f bytes heap per live task; after they end "
         "(retained): %.0f bytes per retained task (record %zu + 2 histograms, %zu + 4 per counter)\n",
         n, (unsigned long long)poll_ns, (double)(h1 - h0) / n, (double)(h2 - h0) / n,
         sizeof(ptcon_rec), sizeof(ptcon_hist));
  printf("memory: fixed: slot table %zu KiB virtual (touched as used), ring %zu KiB per "
         "recording thread\n",
         sizeof(ptcon_slot) * PTCON_MAX_LIVE_TASKS / 1024, sizeof(ptcon_ring) / 1024);
  ptcon_agg_del(a);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "poll") == 0)
    return bench_poll(argc > 2 ? atol(argv[2]) : 20000000L, argc > 3 ? argv[3] : "auto");
  if (argc >= 6 && strcmp(argv[1], "server") == 0)
    return bench_server(atoi(argv[2]), atol(argv[3]), atoi(argv[4]), argv[5]);
  if (argc >= 2 && strcmp(argv[1], "memory") == 0)
    return bench_memory(argc > 2 ? atoi(argv[2]) : 10000,
                        argc > 3 ? (uint64_t)atoll(argv[3]) : 0);
  fprintf(stderr, "usage: bench_console poll [ITER] | server TASKS EPS SECONDS PORTFILE | memory [N [POLL_NS]]\n");
  return 2;
}
