/*
 * sampler_prog - an unmodified program (it links nothing of the profiler)
 * for the sampler's integration tests, run under LD_PRELOAD=libptprof.so.
 *
 *   sampler_prog split SECONDS    two threads, "split-a" in split_a and
 *                                 "split-b" in split_b, with a 1 : 3 CPU
 *                                 split; prints each thread's CPU ms
 *   sampler_prog fork SECONDS     burns in parent_work, forks a child that
 *                                 burns in child_work and exits normally,
 *                                 then burns in parent_work again
 *   sampler_prog stress SECONDS   heavy malloc on 3 threads, thread churn
 *                                 (short threads without pause), fork+exec of
 *                                 /bin/true, dlopen/dlclose of a few
 *                                 libraries, all at once; exits 0 when done
 *   sampler_prog short3 COUNT     COUNT threads named "sh3" of ~10 ms CPU each
 *                                 (about one 99 Hz period), four alive at a
 *                                 time, each running sh3_a, sh3_b, sh3_c once
 *                                 in that order from its start routine
 *                                 sh3_main; prints their total CPU ms
 *   sampler_prog kernel SECONDS   a thread "kern" that spends SECONDS of
 *                                 CPU mostly in the kernel (kern_read:
 *                                 read(2) of /dev/zero into a 4 MiB buffer,
 *                                 the copy is kernel time), then the same
 *                                 in user mode (kern_user); prints the
 *                                 thread's user and system CPU ms
 *
 * Exit status 0 on success, 2 on bad usage, 1 on a failed system call.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t g_sink; /* atomic: every worker thread adds to it */

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define SPIN(x, n) do { for (int i_ = 0; i_ < (n); i_++) (x) = (x) * 6364136223846793005ull + 1442695040888963407ull; } while (0)

/* Burns `seconds` of this thread's CPU in a plain loop. */
__attribute__((noinline)) static void split_a(double seconds) {
  uint64_t x = 1;
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) SPIN(x, 20000);
  g_sink += x;
}

__attribute__((noinline)) static void split_b(double seconds) {
  uint64_t x = 2;
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) SPIN(x, 20000);
  g_sink += x;
}

__attribute__((noinline)) static void parent_work(double seconds) {
  uint64_t x = 3;
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) SPIN(x, 20000);
  g_sink += x;
}

__attribute__((noinline)) static void child_work(double seconds) {
  uint64_t x = 4;
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) SPIN(x, 20000);
  g_sink += x;
}

typedef struct job {
  void (*fn)(double);
  double seconds;
  const char *name;
  double used;
} job;

static void *job_main(void *arg) {
  job *j = arg;
  pthread_setname_np(pthread_self(), j->name);
  double t0 = thread_cpu();
  j->fn(j->seconds);
  j->used = thread_cpu() - t0;
  return NULL;
}

static int run_split(double seconds) {
  job a = { split_a, seconds / 4, "split-a", 0 }, b = { split_b, seconds * 3 / 4, "split-b", 0 };
  pthread_t ta, tb;
  if (pthread_create(&ta, NULL, job_main, &a) || pthread_create(&tb, NULL, job_main, &b)) return 1;
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  printf("split-a %.0f ms\nsplit-b %.0f ms\n", a.used * 1e3, b.used * 1e3);
  return 0;
}

static int run_fork(double seconds) {
  parent_work(seconds / 3);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    child_work(seconds / 3);
    printf("child %d done\n", (int)getpid());
    exit(0);                          /* normal exit: atexit handlers run */
  }
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
  parent_work(seconds / 3);
  printf("child %d\n", (int)pid);
  return 0;
}

/* ---- stress ----------------------------------------------------------- */

static _Atomic int g_stop;
static _Atomic unsigned long g_threads, g_forks, g_dlopens, g_allocs;

__attribute__((noinline)) static void stress_alloc_round(unsigned seed) {
  void *p[32] = { 0 };
  for (int i = 0; i < 2000; i++) {
    unsigned k = (seed + (unsigned)i) * 2654435761u;
    free(p[k % 32]);
    p[k % 32] = malloc(8 + k % 3000);
    if (p[k % 32]) memset(p[k % 32], i, 8);
  }
  for (int i = 0; i < 32; i++) free(p[i]);
}

static void *stress_alloc(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  while (!atomic_load(&g_stop)) {
    stress_alloc_round(seed++);
    atomic_fetch_add(&g_allocs, 2000);
  }
  return NULL;
}

static void *short_thread(void *arg) {
  (void)arg;
  uint64_t x = 5;
  SPIN(x, 20000 + (int)(x % 50000));
  void *m = malloc(100);
  free(m);
  g_sink += x;
  return NULL;
}

static void *stress_churn(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    pthread_t t[8];
    int n = 0;
    for (int i = 0; i < 8; i++)
      if (pthread_create(&t[n], NULL, short_thread, NULL) == 0) n++;
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    atomic_fetch_add(&g_threads, (unsigned long)n);
  }
  return NULL;
}

static void *stress_fork(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/true", "true", (char *)NULL);
      _exit(127);
    }
    if (pid > 0) {
      int st;
      waitpid(pid, &st, 0);
      atomic_fetch_add(&g_forks, 1);
    }
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void *stress_dl(void *arg) {
  (void)arg;
  static const char *libs[] = { "libgcc_s.so.1", "libjansson.so.4", "libuv.so.1", "libncursesw.so.6" };
  unsigned i = 0;
  while (!atomic_load(&g_stop)) {
    void *h = dlopen(libs[i++ % 4], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      atomic_fetch_add(&g_dlopens, 1);
      dlclose(h);
    }
    struct timespec ts = { 0, 5 * 1000 * 1000 };
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* Fixed iteration counts (no clock read inside: all of it is user time). */
__attribute__((noinline)) static void sh3_a(void) { uint64_t x = 3; SPIN(x, 8000000); g_sink += x; }
__attribute__((noinline)) static void sh3_b(void) { uint64_t x = 5; SPIN(x, 10000000); g_sink += x; }
__attribute__((noinline)) static void sh3_c(void) { uint64_t x = 7; SPIN(x, 12000000); g_sink += x; }

static _Atomic uint64_t g_sh3_ns;

__attribute__((noinline)) static void *sh3_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "sh3");
  double t0 = thread_cpu();
  sh3_a();
  sh3_b();
  sh3_c();
  atomic_fetch_add(&g_sh3_ns, (uint64_t)((thread_cpu() - t0) * 1e9));
  return NULL;
}

static int run_short3(int count) {
  for (int i = 0; i < count; i += 4) {
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
      if (pthread_create(&t[k], NULL, sh3_main, NULL) != 0) return 1;
    for (int k = 0; k < 4; k++) pthread_join(t[k], NULL);
  }
  printf("sh3 cpu_ms %.1f\n", atomic_load(&g_sh3_ns) / 1e6);
  return 0;
}

/* kern_read: CPU spent inside read(2) (clearing user pages is kernel
 * time). The stack the thread has meanwhile is main -> ... -> kern_main ->
 * kern_read -> read: a profiler that samples kernel time must show it
 * there, one that cannot must say so, never anything else. */
__attribute__((noinline)) static int kern_read(double seconds, char *buf, size_t len) {
  int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end)
    if (read(fd, buf, len) < 0) { close(fd); return -1; }
  close(fd);
  return 0;
}

__attribute__((noinline)) static void kern_user(double seconds) {
  uint64_t x = 11;
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) SPIN(x, 20000);
  g_sink += x;
}

static int g_kern_rc;

__attribute__((noinline)) static void *kern_main(void *arg) {
  double seconds = *(const double *)arg;
  pthread_setname_np(pthread_self(), "kern");
  size_t len = (size_t)4 << 20;
  char *buf = malloc(len);
  if (!buf || kern_read(seconds, buf, len) != 0) g_kern_rc = 1;
  free(buf);
  kern_user(seconds);
  return NULL;
}

static int run_kernel(double seconds) {
  pthread_t t;
  if (pthread_create(&t, NULL, kern_main, &seconds) != 0) return 1;
  pthread_join(t, NULL);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("kern user_ms %.1f sys_ms %.1f\n",
         ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3,
         ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3);
  return g_kern_rc;
}

static int run_stress(double seconds) {
  pthread_t t[6];
  int n = 0;
  for (int i = 0; i < 3; i++)
    if (pthread_create(&t[n], NULL, stress_alloc, (void *)(uintptr_t)(i * 7919)) == 0) n++;
  if (pthread_create(&t[n], NULL, stress_churn, NULL) == 0) n++;
  if (pthread_create(&t[n], NULL, stress_fork, NULL) == 0) n++;
  if (pthread_create(&t[n], NULL, stress_dl, NULL) == 0) n++;
  if (n != 6) { atomic_store(&g_stop, 1); for (int i = 0; i < n; i++) pthread_join(t[i], NULL); return 1; }
  double end = mono() + seconds;
  while (mono() < end) {
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  printf("threads %lu forks %lu dlopens %lu allocs %lu\n", atomic_load(&g_threads),
         atomic_load(&g_forks), atomic_load(&g_dlopens), atomic_load(&g_allocs));
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s split|fork|stress|kernel SECONDS | short3 COUNT\n", argv[0]);
    return 2;
  }
  double s = atof(argv[2]);
  if (s <= 0) return 2;
  pthread_setname_np(pthread_self(), "sampler-main");
  /* Readiness marker for the tests: main runs after every constructor (the
   * preloaded sampler's included), so once this file exists a SIGPROF
   * handler that is not installed will not be. */
  const char *ready = getenv("PTT_READY_FILE");
  if (ready) {
    int fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
  }
  if (!strcmp(argv[1], "split")) return run_split(s);
  if (!strcmp(argv[1], "fork")) return run_fork(s);
  if (!strcmp(argv[1], "stress")) return run_stress(s);
  if (!strcmp(argv[1], "short3")) return run_short3((int)s);
  if (!strcmp(argv[1], "kernel")) return run_kernel(s);
  fprintf(stderr, "unknown mode %s\n", argv[1]);
  return 2;
}
