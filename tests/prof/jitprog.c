/*
 * jitprog - a program that generates its own machine code at run time, as
 * a JIT runtime does, and publishes its names in a perf map
 * (/tmp/perf-PID.map), for jit_test.sh. It links nothing of the profiler
 * (run it under LD_PRELOAD=libptprof.so). Built with -fomit-frame-pointer
 * (the C side is walked with CFI only).
 *
 *   jitprog SECONDS MODE
 *
 * Code (x86-64, written into an anonymous mapping, then made read+exec):
 * every generated function has the frame-pointer prologue `push rbp; mov
 * rbp, rsp` and its epilogue `pop rbp; ret`:
 *   path A: main -> run_a (C, rbp loaded with junk) -> JIT level0 -> JIT
 *           level1 -> JIT level2 -> burn_c (C, called back from JIT code)
 *   path B: main -> run_b (C) -> JIT entry -> JIT leafloop (the CPU is
 *           burnt in generated code)
 *   path C: main -> burn_plain (C only)
 * The main thread alternates the three, timing each with its CPU clock.
 * Under the profiler (PTPROF_DIR set) it first runs them until a snapshot
 * exists in PTPROF_DIR (a warm-up: the profiler learns of new code from
 * the first samples in it, which stay truncated until its consumer has
 * read the new ranges); then it runs them for SECONDS of CPU and prints
 * one JSON line with the CPU of each path in that part (its own split,
 * which the snapshots after the first must match), the pid, and the
 * code's address range.
 *
 * MODE says what is at /tmp/perf-PID.map (made at start, removed at exit):
 *   good      the map: one line per generated function
 *   none      no file
 *   garbage   garbage, binary bytes, bad numbers and overlong lines around
 *             the good lines
 *   overlap   a wrong name over the whole code first, then the good lines
 *             (later lines win), then one more line renaming leafloop
 *   huge      entries with huge or wrapping sizes before the good lines
 *   fifo      a FIFO (a reader that blocks on it would hang us)
 *   symlink   a symlink to a map of hostile names elsewhere
 *   other     the good map, owned by another user (root only)
 *   sparse    the good lines, then the file extended to 1 GiB (sparse)
 *   deleted   the good map, deleted once the first snapshot exists
 *   grow      level0's line and half of level1's; once the first snapshot
 *             exists, the rest (a runtime still writing its map)
 * For deleted and grow the change is made at the end of the warm-up.
 * Exit status 0; 2 on bad usage; 1 on a failed system call; 77 when MODE
 * needs root.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t (*jit_fn)(uint64_t n);

static volatile uint64_t g_sink;
static char g_map[64];
static char g_elsewhere[96];
static uint8_t *g_code;
static const size_t g_code_size = 4096;

/* Offsets of the generated functions in the code page. */
enum { OFF_L0 = 0x000, OFF_L1 = 0x040, OFF_L2 = 0x080, OFF_ENTRY = 0x0c0, OFF_LEAF = 0x100 };
static const struct { unsigned off, size; const char *name; } g_funcs[] = {
  { OFF_L0, 0x40, "JIT:level0" },
  { OFF_L1, 0x40, "JIT:level1" },
  { OFF_L2, 0x40, "JIT:level2" },
  { OFF_ENTRY, 0x40, "JIT:entry" },
  { OFF_LEAF, 0x40, "JIT:leafloop" },
};

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Called back from JIT level2: arithmetic, n rounds. */
__attribute__((noinline)) uint64_t burn_c(uint64_t n);
__attribute__((noinline)) uint64_t burn_c(uint64_t n) {
  uint64_t acc = g_sink | 1;
  for (uint64_t i = 0; i < n; i++) acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
  g_sink = acc;
  return acc;
}

__attribute__((noinline)) static uint64_t burn_plain(uint64_t n) {
  uint64_t acc = g_sink | 3;
  for (uint64_t i = 0; i < n; i++) acc = acc * 2862933555777941757ULL + 3037000493ULL;
  g_sink = acc;
  return acc;
}

/* ---- code generation ---------------------------------------------------- */

static uint8_t *emit(uint8_t *p, const void *bytes, size_t n) {
  memcpy(p, bytes, n);
  return p + n;
}

/* push rbp; mov rbp, rsp; mov rax, target; call rax; pop rbp; ret */
static void emit_caller(uint8_t *at, const void *target) {
  uint8_t *p = at;
  p = emit(p, "\x55\x48\x89\xe5\x48\xb8", 6);
  uint64_t t = (uint64_t)(uintptr_t)target;
  p = emit(p, &t, 8);
  p = emit(p, "\xff\xd0\x5d\xc3", 4);
}

/* push rbp; mov rbp, rsp; xor rax, rax;
 * L: imul rax, rax, 3; add rax, rdi; dec rdi; jnz L; pop rbp; ret */
static void emit_leafloop(uint8_t *at) {
  emit(at, "\x55\x48\x89\xe5\x48\x31\xc0"
           "\x48\x6b\xc0\x03\x48\x01\xf8\x48\xff\xcf\x75\xf4"
           "\x5d\xc3", 21);
}

static int make_code(void) {
  g_code = mmap(NULL, g_code_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_code == MAP_FAILED) return -1;
  memset(g_code, 0xcc, g_code_size);   /* int3 between functions */
  emit_caller(g_code + OFF_L0, g_code + OFF_L1);
  emit_caller(g_code + OFF_L1, g_code + OFF_L2);
  emit_caller(g_code + OFF_L2, (const void *)burn_c);
  emit_caller(g_code + OFF_ENTRY, g_code + OFF_LEAF);
  emit_leafloop(g_code + OFF_LEAF);
  /* W^X, as runtimes do: writable while written, then read+exec. */
  return mprotect(g_code, g_code_size, PROT_READ | PROT_EXEC);
}

/* ---- the perf map --------------------------------------------------------- */

static int good_lines(char *buf, size_t cap, size_t from, size_t to) {
  int n = 0;
  for (size_t i = from; i < to; i++)
    n += snprintf(buf + n, cap - (size_t)n, "%lx %x %s\n",
                  (unsigned long)((uintptr_t)g_code + g_funcs[i].off), g_funcs[i].size, g_funcs[i].name);
  return n;
}

static int write_all(const char *path, const char *text, size_t n, int flags) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0) return -1;
  ssize_t w = write(fd, text, n);
  int rc = w == (ssize_t)n ? 0 : -1;
  if (close(fd) != 0) rc = -1;
  return rc;
}

static int make_map(const char *mode) {
  char buf[16384];
  int n = 0;
  if (!strcmp(mode, "none")) return 0;
  if (!strcmp(mode, "good") || !strcmp(mode, "deleted") || !strcmp(mode, "other")) {
    n = good_lines(buf, sizeof buf, 0, 5);
    if (write_all(g_map, buf, (size_t)n, O_TRUNC)) return -1;
    if (!strcmp(mode, "other") && chown(g_map, 65534, 65534) != 0) return -1;
    return 0;
  }
  if (!strcmp(mode, "garbage")) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, "garbage line\n\x01\x02\x03\xff\xfe binary\n");
    n += good_lines(buf + n, sizeof buf - (size_t)n, 0, 2);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "zzzz 10 not hex\n%lx\n%lx 0 zero\n\n",
                  (unsigned long)(uintptr_t)g_code, (unsigned long)(uintptr_t)g_code);
    memset(buf + n, 'x', 6000);               /* an overlong line */
    n += 6000;
    buf[n++] = '\n';
    n += good_lines(buf + n, sizeof buf - (size_t)n, 2, 5);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%lx 10 unterminated", (unsigned long)(uintptr_t)g_code);
    return write_all(g_map, buf, (size_t)n, O_TRUNC);
  }
  if (!strcmp(mode, "overlap")) {
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%lx %zx JIT:stale-everything\n",
                  (unsigned long)(uintptr_t)g_code, g_code_size);
    n += good_lines(buf + n, sizeof buf - (size_t)n, 0, 5);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%lx 40 JIT:leafloop-v2\n",
                  (unsigned long)((uintptr_t)g_code + OFF_LEAF));
    return write_all(g_map, buf, (size_t)n, O_TRUNC);
  }
  if (!strcmp(mode, "huge")) {
    n += snprintf(buf + n, sizeof buf - (size_t)n,
                  "%lx ffffffffffff JIT:huge\nffffffffffffff00 1000 JIT:wraps\n0 ffffffffffffffff JIT:all\n",
                  (unsigned long)(uintptr_t)g_code);
    n += good_lines(buf + n, sizeof buf - (size_t)n, 0, 5);
    return write_all(g_map, buf, (size_t)n, O_TRUNC);
  }
  if (!strcmp(mode, "fifo")) return mkfifo(g_map, 0600);
  if (!strcmp(mode, "symlink")) {
    n = snprintf(buf, sizeof buf, "%lx %zx HOSTILE:via-symlink\n", (unsigned long)(uintptr_t)g_code,
                 g_code_size);
    if (write_all(g_elsewhere, buf, (size_t)n, O_TRUNC)) return -1;
    return symlink(g_elsewhere, g_map);
  }
  if (!strcmp(mode, "sparse")) {
    n = good_lines(buf, sizeof buf, 0, 5);
    if (write_all(g_map, buf, (size_t)n, O_TRUNC)) return -1;
    return truncate(g_map, (off_t)1 << 30);
  }
  if (!strcmp(mode, "grow")) {
    n = good_lines(buf, sizeof buf, 0, 2);
    n -= 6;                                   /* level1's line cut short */
    return write_all(g_map, buf, (size_t)n, O_TRUNC);
  }
  errno = EINVAL;
  return -1;
}

/* deleted / grow: the change a runtime makes later. */
static int change_map(const char *mode) {
  if (!strcmp(mode, "deleted")) return unlink(g_map);
  if (!strcmp(mode, "grow")) {
    char buf[4096];
    int there = good_lines(buf, sizeof buf, 0, 2) - 6;   /* what make_map wrote */
    int n = good_lines(buf, sizeof buf, 0, 5);
    return write_all(g_map, buf + there, (size_t)(n - there), O_APPEND);
  }
  return 0;
}

/* Snapshots in dir so far (temporary files, dot-named, not counted). */
static int snapshot_count(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d)))
    n += strstr(e->d_name, ".pb.gz") != NULL && e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* ---- the work --------------------------------------------------------------- */

/* rbp holds junk while the JIT code runs (callee-saved: the compiler saves
 * it and says so in .eh_frame), so only CFI gets from level0 to main. */
__attribute__((noinline)) static void run_a(uint64_t n) {
  jit_fn l0 = (jit_fn)(uintptr_t)(g_code + OFF_L0);
  __asm__ volatile("movq %0, %%rbp" : : "r"(g_sink ^ 0xa5a5a5a5a5a5a5a5ull) : "rbp");
  g_sink += l0(n);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void run_b(uint64_t n) {
  jit_fn e = (jit_fn)(uintptr_t)(g_code + OFF_ENTRY);
  g_sink += e(n);
  __asm__ volatile("" ::: "memory");
}

typedef struct split { double a, b, c; } split;

static void burn(double seconds, split *s) {
  double end = thread_cpu() + seconds;
  while (thread_cpu() < end) {
    double t0 = thread_cpu();
    run_a(400000);
    double t1 = thread_cpu();
    run_b(600000);
    double t2 = thread_cpu();
    burn_plain(300000);
    double t3 = thread_cpu();
    s->a += t1 - t0;
    s->b += t2 - t1;
    s->c += t3 - t2;
  }
}

/* Removes the maps at exit. This runs before the preloaded profiler's
 * final snapshot (seen: its comment says "not found"), so the tests read
 * the map's state in the periodic snapshots (see main). */
__attribute__((destructor)) static void cleanup(void) {
  if (g_map[0]) unlink(g_map);
  if (g_elsewhere[0]) unlink(g_elsewhere);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: jitprog SECONDS MODE\n");
    return 2;
  }
  double seconds = atof(argv[1]);
  const char *mode = argv[2];
  if (!(seconds > 0 && seconds < 60)) {
    fprintf(stderr, "jitprog: bad SECONDS '%s'\n", argv[1]);
    return 2;
  }
  const char *dir = getenv("PTPROF_DIR");
  if (!strcmp(mode, "other") && geteuid() != 0) {
    fprintf(stderr, "jitprog: MODE other needs root\n");
    return 77;
  }
  snprintf(g_map, sizeof g_map, "/tmp/perf-%ld.map", (long)getpid());
  snprintf(g_elsewhere, sizeof g_elsewhere, "/tmp/jitprog-%ld-elsewhere.map", (long)getpid());
  if (make_code() != 0) {
    perror("jitprog: code");
    return 1;
  }
  unlink(g_map);
  if (make_map(mode) != 0) {
    perror("jitprog: perf map");
    return 1;
  }
  split s = { 0, 0, 0 };
  if (dir) {
    /* Until the first snapshot (the map was read for it), then change the
     * map (deleted, grow) and go on for SECONDS. */
    while (snapshot_count(dir) < 1) burn(0.02, &s);
    if (change_map(mode) != 0) {
      perror("jitprog: perf map change");
      return 1;
    }
  }
  s = (split){ 0, 0, 0 };
  burn(seconds, &s);
  /* and on until a second periodic snapshot exists: the tests read the
   * map's state in it, and the final one (at exit) may find the map
   * removed by cleanup. A machine under load can make SECONDS of CPU end
   * before the next interval does. At most 20 s more. */
  for (int i = 0; dir && i < 1000 && snapshot_count(dir) < 2; i++) burn(0.02, &s);
  printf("{\"pid\": %ld, \"a\": %.6f, \"b\": %.6f, \"c\": %.6f, \"code_lo\": \"%#lx\", "
         "\"code_hi\": \"%#lx\", \"sink\": %llu}\n",
         (long)getpid(), s.a, s.b, s.c, (unsigned long)(uintptr_t)g_code,
         (unsigned long)((uintptr_t)g_code + g_code_size), (unsigned long long)(g_sink & 1));
  return 0;
}
