/*
 * execchurn - exec churn for the preload retention test, run under
 * LD_PRELOAD=libptprof.so (it links nothing of the profiler):
 *
 *   execchurn parent N PAR MS   starts N children, PAR at a time, each one a
 *                               fork + exec of this program ("child MS"),
 *                               waits for all; burns MS of CPU itself
 *   execchurn child MS          burns about MS ms of CPU, exits 0
 *
 * Every exec'd child starts its own preload sampler and writes a final
 * snapshot under "<PTPROF_PREFIX>pid<PID>-", which is what the family
 * retention must bound. Exit status 0, 2 on bad usage, 1 on a failed call.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t g_sink;

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void __attribute__((noinline)) churn_burn(double ms) {
  double end = cpu_ms() + ms;
  uint64_t x = 1;
  while (cpu_ms() < end)
    for (int i = 0; i < 10000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  g_sink = x;
}

static int wait_one(void) {
  int st;
  pid_t w;
  while ((w = wait(&st)) < 0 && errno == EINTR) {}
  if (w < 0) { perror("wait"); return 1; }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "execchurn: child %d failed (status %#x)\n", (int)w, st);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "child")) {
    churn_burn(atof(argv[2]));
    return 0;
  }
  if (argc != 5 || strcmp(argv[1], "parent")) {
    fprintf(stderr, "usage: %s parent N PAR MS | child MS\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[2]), par = atoi(argv[3]);
  if (n < 0 || par < 1) return 2;
  int running = 0, rc = 0;
  for (int i = 0; i < n; i++) {
    if (running == par) { rc |= wait_one(); running--; }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "child", argv[4], (char *)NULL);
      perror("exec");
      _exit(1);
    }
    running++;
  }
  while (running-- > 0) rc |= wait_one();
  churn_burn(atof(argv[4]));
  return rc;
}
