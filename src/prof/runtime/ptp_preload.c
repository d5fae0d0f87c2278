/*
 * ptp_preload.c - preload mode: LD_PRELOAD=libptprof.so profiles an
 * unmodified program, configured by PTPROF_* environment variables (see
 * include/ptprof.h), with a final snapshot at exit.
 *
 * Only the shared library activates this. The file defines no global
 * symbol, so a static link of libptprof.a never extracts it (archive
 * members are pulled only to resolve undefined symbols): the daemon and TUI
 * never auto-start a sampler, whatever their environment says. As a second
 * guard the constructor does nothing when its own code lies in the main
 * executable (a --whole-archive link).
 *
 * Processes: the first process to start the preload sampler exports
 * PTPROF_ROOT_PID=<its pid> and uses PTPROF_PREFIX as is. Any other process
 * (a program exec'd below it, with the environment inherited)
 * uses "<PTPROF_PREFIX>pid<PID>-", so each process rotates only its own
 * files (the store matches "<prefix><timestamp>-<seq>.pb.gz" exactly).
 * The whole family (PTPROF_PREFIX and its "pid<PID>-" children) is bounded
 * by PTPROF_KEEP_TOTAL (default 64) files in the directory: every process
 * of the family prunes the family's oldest after each write (ptp_snapstore.h,
 * family retention), so exec churn cannot fill the disk.
 *
 * Privacy: files are 0600 and a directory we create 0700 (ptp_snapstore); an
 * existing PTPROF_DIR that others may read gets one warning on stderr from
 * the family's first process.
 *
 * Fork: a forked child stops sampling: its copy of the parent's sampler is
 * abandoned (never written, its memory not freed) and no new one starts. A
 * program exec'd later starts its own through this constructor (it inherits
 * LD_PRELOAD and PTPROF_*). Why not a fresh sampler in the child: starting
 * one needs dl_iterate_phdr (unwind tables, symbolizer), and glibc does not
 * reset the loader's write lock in a forked child; if another thread of the
 * parent was inside dlopen/dlclose/dl_iterate_phdr at the moment of the fork,
 * the child would hang forever (the stress test hit this).
 */
#include <errno.h>
#include <stdbool.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptprof.h"
#include "prof/ptp_alloc.h"

/* This file's process-wide state (runtime/ptp_process.h): the preload
 * mode's sampler, written by the constructor and the atexit/fork handlers
 * only. */
static struct {
  ptprof *p;
  pid_t pid;                    /* the process that started it */
  ptprof_options opt;
  char base_prefix[80];
  char prefix[112];
  char *dir;                    /* a copy: the environment may change later */
} pre;

static void log_stderr(int level, const char *msg, void *ctx) {
  (void)level;
  (void)ctx;
  fprintf(stderr, "%s\n", msg);
}

/* Nonzero if addr lies in the main executable's loaded segments. */
typedef struct where { uintptr_t addr; int in_main; } where;

static int where_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  where *w = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (w->addr >= lo && w->addr < lo + ph->p_memsz) w->in_main = 1;
  }
  return 1;                               /* the first entry is the main program */
}

static int parse_num(const char *name, double lo, double hi, double *out) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || *end || d < lo || d > hi) {
    fprintf(stderr, "ptprof: %s=%s is not a number in [%g, %g]; profiler not started\n", name, v, lo, hi);
    return -1;
  }
  *out = d;
  return 1;
}

static void warn_exposed_dir(const char *dir) {
  struct stat sb;
  if (stat(dir, &sb) != 0 || !(sb.st_mode & (S_IRWXG | S_IRWXO))) return;
  fprintf(stderr, "ptprof: warning: PTPROF_DIR %s has mode %04o: other users can list%s the "
          "profiles (symbol names, paths); chmod 700 it\n", dir, (unsigned)(sb.st_mode & 07777),
          (sb.st_mode & (S_IRGRP | S_IROTH)) ? " and read" : "");
}

static void start_preload(void) {
  pid_t pid = getpid();
  const char *root = getenv("PTPROF_ROOT_PID");
  char pidbuf[24];
  snprintf(pidbuf, sizeof pidbuf, "%d", (int)pid);
  bool first = !root || !*root;
  if (!root || !*root) {
    setenv("PTPROF_ROOT_PID", pidbuf, 1);
    snprintf(pre.prefix, sizeof pre.prefix, "%s", pre.base_prefix);
  } else if (strcmp(root, pidbuf) == 0) {
    snprintf(pre.prefix, sizeof pre.prefix, "%s", pre.base_prefix);
  } else {
    snprintf(pre.prefix, sizeof pre.prefix, "%spid%d-", pre.base_prefix, (int)pid);
  }
  pre.opt.prefix = pre.prefix;
  pre.opt.family_prefix = pre.base_prefix;
  ptprof *p;
  int rc = ptprof_new(&p, &pre.opt);
  if (rc < 0) {
    fprintf(stderr, "ptprof: cannot create the profiler (dir %s, prefix %s): %s\n", pre.opt.dir,
            pre.prefix, ptprof_strerror(rc));
    return;
  }
  if (first) warn_exposed_dir(pre.opt.dir);
  rc = ptprof_start(p);
  if (rc < 0) {
    fprintf(stderr, "ptprof: cannot start the profiler: %s\n", ptprof_strerror(rc));
    ptprof_del(p);
    return;
  }
  pre.p = p;
  pre.pid = pid;
}

static void preload_at_exit(void) {
  if (!pre.p || pre.pid != getpid()) return;
  char path[4096];
  int rc = ptprof_stop(pre.p, 1, path, sizeof path);
  if (rc < 0)
    fprintf(stderr, "ptprof: final snapshot not written: %s\n", ptprof_strerror(rc));
  /* Not freed: other threads and later atexit handlers may still run; the
   * process is ending. */
}

static void preload_child(void) {
  pre.p = NULL;                           /* the parent's: abandoned, see top */
}

__attribute__((constructor)) static void ptp_preload_init(void) {
  const char *dir = getenv("PTPROF_DIR");
  if (!dir || !*dir) return;
  where w = { (uintptr_t)&ptp_preload_init, 0 };
  dl_iterate_phdr(where_cb, &w);
  if (w.in_main) return;                  /* statically linked: never auto-start */
  ptprof_options_init(&pre.opt);
  if (!(pre.dir = ptp_strdup(dir))) return;
  pre.opt.dir = pre.dir;
  pre.opt.log = log_stderr;
  double d;
  int r;
  if ((r = parse_num("PTPROF_HZ", 1, 10000, &d)) < 0) return;
  if (r) pre.opt.hz = (int)d;
  if ((r = parse_num("PTPROF_KEEP", 1, 1000000, &d)) < 0) return;
  if (r) pre.opt.keep = (int)d;
  pre.opt.keep_total = 64;
  if ((r = parse_num("PTPROF_KEEP_TOTAL", 1, 1000000, &d)) < 0) return;
  if (r) pre.opt.keep_total = (int)d;
  if ((r = parse_num("PTPROF_INTERVAL", 0, 1e7, &d)) < 0) return;
  if (r) pre.opt.interval_ms = (int64_t)(d * 1000.0 + 0.5);
  pre.opt.skip_empty = 1;    /* PTPROF_SKIP_EMPTY=0: write every interval, empty ones too */
  if ((r = parse_num("PTPROF_SKIP_EMPTY", 0, 1, &d)) < 0) return;
  if (r) pre.opt.skip_empty = d != 0;
  const char *eng = getenv("PTPROF_ENGINE");   /* auto|perf|timer, see ptprof.h */
  if (eng && *eng) {
    int e = ptprof_engine_from_name(eng);
    if (e < 0) {
      fprintf(stderr, "ptprof: PTPROF_ENGINE=%s is not auto, perf or timer; profiler not started\n", eng);
      return;
    }
    pre.opt.engine = e;
  }
  const char *prefix = getenv("PTPROF_PREFIX");
  if (prefix && *prefix) {
    if (strlen(prefix) >= 48 || strchr(prefix, '/') || prefix[0] == '.') {
      fprintf(stderr, "ptprof: PTPROF_PREFIX=%s is invalid (at most 47 bytes, no '/', not starting "
              "with '.'); profiler not started\n", prefix);
      return;
    }
    snprintf(pre.base_prefix, sizeof pre.base_prefix, "%s", prefix);
  } else {
    snprintf(pre.base_prefix, sizeof pre.base_prefix, "profile-");
  }
  start_preload();
  if (!pre.p) return;
  atexit(preload_at_exit);
  pthread_atfork(NULL, NULL, preload_child);
}
