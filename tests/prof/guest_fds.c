/*
 * guest_fds.c - programs that do unusual but legal things with their
 * descriptors, for guest_fds_test.sh and guest_nofile_test.sh: each writes
 * what it saw and did to stdout and to files in the current directory,
 * so a profiled run can be compared byte for byte with an unprofiled one.
 *
 *   guest_fds closefrom MS    close_range(3, ~0U, 0) first, then open
 *       "a" (fd 3), "b" (fd 4) and fopen "report" (fd 5); burn MS ms of
 *       CPU writing 100 buffered lines to report (left for exit's stdio
 *       flush, after every atexit handler), one line to a.
 *   guest_fds closeloop MS    the same, but closing with close(2) on every
 *       number from 3 to sysconf(_SC_OPEN_MAX) (an old daemon's start).
 *   guest_fds reuse MS        close_range as above, then read the 10000
 *       bytes of "input" (written by the test) through fd 3 in 100-byte
 *       reads while burning MS ms of CPU; write what was read to "copy".
 *   guest_fds many N MS       close_range, then fopen N files many-<i>
 *       (numbers reach the library's descriptor range above its floor),
 *       burn MS ms, one buffered line per file left for exit's flush.
 *   guest_fds nofile T MS     T threads each open their own file (held
 *       open while all burn MS ms of CPU together), write and close it;
 *       prints how many files each thread could open (run it under
 *       `ulimit -n 12`).
 *   guest_fds waitfile PATH MS  burns CPU until PATH exists, then MS ms
 *       more (the test does something to the library's files meanwhile).
 * Exit code 0; 3 when a descriptor was not the number a program may
 * count on (the first open after close_range must be 3), 4 on an I/O
 * error (printed).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static unsigned long burn(double ms) {
  double end = cpu_now() + ms;
  volatile unsigned long x = 0;
  while (cpu_now() < end)
    for (int i = 0; i < 20000; i++) x += (unsigned long)i * 2654435761u;
  return x;
}

static void close_all(void) {
  if (close_range(3, ~0u, 0) != 0) {
    perror("close_range");
    exit(4);
  }
}

/* The old daemon way: close(2) on every number up to the limit, errors
 * (EBADF on the numbers not open) ignored. */
static void close_loop(void) {
  long max = sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < max; fd++) (void)close((int)fd);
}

static int open_w(const char *name, int want) {
  int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) { perror(name); exit(4); }
  if (want >= 0 && fd != want) {
    printf("%s: fd %d, want %d\n", name, fd, want);
    exit(3);
  }
  return fd;
}

static int do_closefrom(double ms, int loop) {
  if (loop) close_loop();
  else close_all();
  int a = open_w("a", 3);
  int b = open_w("b", 4);
  FILE *r = fopen("report", "w");
  if (!r) { perror("report"); return 4; }
  if (fileno(r) != 5) { printf("report: fd %d, want 5\n", fileno(r)); return 3; }
  for (int i = 0; i < 100; i++) {
    burn(ms / 100);
    fprintf(r, "report line %03d: the quick brown fox\n", i);
  }
  if (write(a, "a line\n", 7) != 7) { perror("write a"); return 4; }
  printf("a=%d b=%d report=%d\n", a, b, fileno(r));
  (void)b;
  return 0;   /* report's 100 lines are flushed by exit(), after atexit handlers */
}

static int do_reuse(double ms) {
  close_all();
  int in = open("input", O_RDONLY | O_CLOEXEC);
  if (in != 3) { printf("input: fd %d, want 3\n", in); return 3; }
  int out = open_w("copy", 4);
  char buf[100];
  size_t total = 0;
  for (;;) {
    burn(ms / 100);
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0) { perror("read input"); return 4; }
    if (n == 0) break;
    if (write(out, buf, (size_t)n) != n) { perror("write copy"); return 4; }
    total += (size_t)n;
  }
  printf("read %zu bytes through fd %d\n", total, in);
  return 0;
}

static int do_many(int n, double ms) {
  close_all();
  FILE **f = calloc((size_t)n, sizeof *f);
  if (!f) return 4;
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "many-%04d", i);
    if (!(f[i] = fopen(name, "w"))) { perror(name); return 4; }
    if (fileno(f[i]) != 3 + i) { printf("%s: fd %d, want %d\n", name, fileno(f[i]), 3 + i); return 3; }
  }
  burn(ms);
  for (int i = 0; i < n; i++) fprintf(f[i], "file %d, fd %d\n", i, fileno(f[i]));
  printf("%d files open, fds 3..%d\n", n, n + 2);
  return 0;   /* flushed and closed by exit() */
}

typedef struct nf_arg {
  int i;
  double ms;
  pthread_barrier_t *opened, *done;
  int ok;
} nf_arg;

static void *nofile_thread(void *p) {
  nf_arg *a = p;
  char name[32];
  snprintf(name, sizeof name, "thread-%d", a->i);
  int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  a->ok = fd >= 0;
  pthread_barrier_wait(a->opened);     /* every file open at once */
  burn(a->ms);
  if (fd >= 0) {
    char line[64];
    int n = snprintf(line, sizeof line, "thread %d wrote this\n", a->i);
    if (write(fd, line, (size_t)n) != n) a->ok = 0;
  }
  pthread_barrier_wait(a->done);
  if (fd >= 0) close(fd);
  return NULL;
}

static int do_nofile(int nt, double ms) {
  pthread_t t[64];
  nf_arg a[64];
  pthread_barrier_t opened, done;
  if (nt > 64) nt = 64;
  pthread_barrier_init(&opened, NULL, (unsigned)nt);
  pthread_barrier_init(&done, NULL, (unsigned)nt);
  for (int i = 0; i < nt; i++) {
    a[i] = (nf_arg){ i, ms, &opened, &done, 0 };
    if (pthread_create(&t[i], NULL, nofile_thread, &a[i]) != 0) { perror("pthread_create"); return 4; }
  }
  int ok = 0;
  for (int i = 0; i < nt; i++) {
    pthread_join(t[i], NULL);
    ok += a[i].ok;
  }
  printf("%d of %d threads opened and wrote their file\n", ok, nt);
  return 0;
}

/* Burns CPU until path exists (the test made it: it has done what it
 * wanted while we run), then ms more. */
static int do_waitfile(const char *path, double ms) {
  while (access(path, F_OK) != 0) burn(5);
  burn(ms);
  printf("saw %s, worked on\n", path);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "closefrom")) return do_closefrom(atof(argv[2]), 0);
  if (argc >= 3 && !strcmp(argv[1], "closeloop")) return do_closefrom(atof(argv[2]), 1);
  if (argc >= 3 && !strcmp(argv[1], "reuse")) return do_reuse(atof(argv[2]));
  if (argc >= 4 && !strcmp(argv[1], "many")) return do_many(atoi(argv[2]), atof(argv[3]));
  if (argc >= 4 && !strcmp(argv[1], "nofile")) return do_nofile(atoi(argv[2]), atof(argv[3]));
  if (argc >= 4 && !strcmp(argv[1], "waitfile")) return do_waitfile(argv[2], atof(argv[3]));
  fprintf(stderr, "usage: guest_fds closefrom MS | reuse MS | many N MS | nofile T MS | "
          "waitfile PATH MS\n");
  return 2;
}
