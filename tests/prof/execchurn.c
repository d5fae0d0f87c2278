/*
 * execchurn - exec churn for the preload retention test, run under
 * LD_PRELOAD=libptprof.so (it links nothing of the profiler):
 *
 *   execchurn parent N PAR MS   starts N children, PAR at a time, each one a
 *                               fork + exec of this program ("child MS"),
 *                               waits for all; burns MS of CPU itself
 *   execchurn child MS          burns about MS ms of CPU, exits 0
 *
 *   execchurn chain N MS FN     burns MS ms (a second thread burns too),
 *                               then, while N > 0, replaces itself with
 *                               "chain N-1 MS FN" through the exec function
 *                               FN (execve execv execvp execvpe execl execle
 *                               execlp fexecve execveat); N = 0 exits 0
 *   execchurn execfail MS       burns MS ms in churn_burn, makes an exec
 *                               that must fail (ENOENT), then burns MS ms
 *                               in churn_after: exit 0, 3 if the exec did
 *                               not fail with ENOENT
 *
 * Every exec'd child starts its own preload sampler and writes a final
 * snapshot under "<PTPROF_PREFIX>pid<PID>-", which is what the family
 * retention must bound. Exit status 0, 2 on bad usage, 1 on a failed call.
 * A process killed by a SIGPROF that was pending across an exec exits by
 * that signal (what preload_exec_test.sh checks never happens).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

static void __attribute__((noinline)) churn_after(double ms) {
  double end = cpu_ms() + ms;
  uint64_t x = 3;
  while (cpu_ms() < end)
    for (int i = 0; i < 10000; i++) x = x * 2862933555777941757ULL + 3037000493ULL;
  g_sink = x;
}

static double g_side_ms;
static void *side_burn(void *arg) {
  (void)arg;
  churn_burn(g_side_ms);
  return NULL;
}

extern char **environ;

/* One link of the exec chain: the next one through fn. Returns only on a
 * failed exec (1). */
static int chain_exec(const char *self, int n, const char *ms, const char *fn) {
  char nbuf[16];
  snprintf(nbuf, sizeof nbuf, "%d", n - 1);
  char *av[] = { (char *)self, "chain", nbuf, (char *)ms, (char *)fn, NULL };
  const char *exe = "/proc/self/exe";
  if (!strcmp(fn, "execve")) execve(exe, av, environ);
  else if (!strcmp(fn, "execv")) execv(exe, av);
  else if (!strcmp(fn, "execvp")) execvp(exe, av);
  else if (!strcmp(fn, "execvpe")) execvpe(exe, av, environ);
  else if (!strcmp(fn, "execl")) execl(exe, self, "chain", nbuf, ms, fn, (char *)NULL);
  else if (!strcmp(fn, "execle")) execle(exe, self, "chain", nbuf, ms, fn, (char *)NULL, environ);
  else if (!strcmp(fn, "execlp")) execlp(exe, self, "chain", nbuf, ms, fn, (char *)NULL);
  else if (!strcmp(fn, "fexecve") || !strcmp(fn, "execveat")) {
    int fd = open(exe, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { perror("open"); return 1; }
    if (!strcmp(fn, "fexecve")) fexecve(fd, av, environ);
    else execveat(fd, "", av, environ, AT_EMPTY_PATH);
  } else {
    fprintf(stderr, "execchurn: unknown exec function %s\n", fn);
    return 2;
  }
  perror(fn);
  return 1;
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
  if (argc == 5 && !strcmp(argv[1], "chain")) {
    int n = atoi(argv[2]);
    g_side_ms = atof(argv[3]);
    pthread_t t;
    if (pthread_create(&t, NULL, side_burn, NULL) != 0) return 1;
    churn_burn(atof(argv[3]));
    pthread_join(t, NULL);
    if (n <= 0) return 0;
    /* the side thread burns again during the exec: its signals must not
     * reach the new program either */
    if (pthread_create(&t, NULL, side_burn, NULL) != 0) return 1;
    return chain_exec(argv[0], n, argv[3], argv[4]);
  }
  if (argc == 3 && !strcmp(argv[1], "execfail")) {
    churn_burn(atof(argv[2]));
    char *av[] = { "x", NULL };
    if (execv("/nonexistent/execchurn-none", av) != -1 || errno != ENOENT) return 3;
    churn_after(atof(argv[2]));
    return 0;
  }
  if (argc != 5 || strcmp(argv[1], "parent")) {
    fprintf(stderr, "usage: %s parent N PAR MS | child MS | chain N MS FN | execfail MS\n",
            argv[0]);
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
