/*
 * ptp_interpose.c - interposition of the libc entry points the sampler must
 * follow in the calling thread:
 *
 *  - pthread_create: every thread created through it (by the program or any
 *    library, e.g. libuv's thread pool) starts in ptp_thread_trampoline,
 *    which registers the thread (stack bounds; a timer when a sampler runs)
 *    before the real start routine runs.
 *  - dlopen, dlmopen: after the real call returned a handle, while a sampler
 *    runs, the unwind-table set is refreshed synchronously in the calling
 *    thread (ptp_cfi_refresh: the new object's table is built and the set
 *    published before the caller can run its code), so the first samples
 *    in a library used at once are complete (python importing an extension
 *    module and calling it). The loader lock is no longer held then; the
 *    refresh takes only the table mutex and dl_iterate_phdr's lock, never a
 *    lock of the caller. Code the new object runs inside dlopen (its
 *    constructors) still meets no table: those samples are truncated and
 *    the consumer thread builds the table as before.
 *  - the exec family (execve, execv, execvp, execvpe, execl, execle,
 *    execlp, fexecve, execveat): a SIGPROF pending on the calling thread
 *    when it execs stays pending in the new program, where the disposition
 *    is SIG_DFL again, and kills it ("Profiling timer expired"); the perf
 *    engine's event also counts the exec's own kernel time until the
 *    close-on-exec step, so at 99 Hz about one preloaded `taskset`/`env`
 *    style exec in ten died that way. Each wrapper, while our handler is
 *    installed, blocks SIGPROF, disarms the calling thread's source
 *    (ptp_threads_exec_pause), discards the pending SIGPROF, restores the
 *    mask and calls the real function; if that returns (the exec failed)
 *    the thread is armed again and errno is the exec's. The CPU the
 *    process used before a successful exec is not written (atexit does not
 *    run at exec; the new program, if preloaded, profiles itself).
 *    posix_spawn, system and popen need nothing: their child is a new task
 *    with no event, timer or pending signal of ours.
 *
 * dlopen's caller matters: glibc looks at dlopen's return address to pick
 * the calling object, whose DT_RPATH/DT_RUNPATH and $ORIGIN it uses for a
 * name without '/' or with '$', and whose namespace receives the object. A
 * wrapper that calls the real dlopen makes libptprof the caller (the known
 * bug of sanitizer and other dlopen interposers). So the exported dlopen and
 * dlmopen are assembly stubs that ask route_dlopen where to go and then
 * JUMP there with the caller's arguments and return address untouched:
 * when the answer could depend on the caller (name without '/', a '$', a
 * caller in another namespace than ours, or no sampler running) to the real
 * function, exactly as if nothing were interposed (the consumer thread
 * then notices the new object as before); otherwise to ptp_dlopen_sync /
 * ptp_dlmopen_sync, which call the real function (caller libptprof: same
 * result, glibc's dl_open_worker reads the caller only in those cases) and
 * refresh. Recursion: a dlopen made by the refresh itself (none today) would
 * skip the refresh (per-thread flag); libdw's own dlopen calls go through
 * the stubs like any other and only cost a cheap refresh. Fork: the table
 * module keeps its mutex consistent (ptp_process.h); a forked child runs no
 * sampler (ptp_g_shared is cleared there), so its dlopen calls go straight
 * to libc.
 *
 * How it binds: the symbols are exported with default visibility. Linked
 * statically into an executable, they take precedence over libc's for the
 * executable and every shared library (the executable comes first in the
 * global lookup scope). In libptprof.so used with LD_PRELOAD they precede
 * libc the same way. The real functions are found with dlsym(RTLD_NEXT).
 *
 * Cost while no sampler runs: pthread_create: one malloc/free of 16 bytes
 * and the registration (pthread_getattr_np, a mutex) per thread creation;
 * dlopen/dlmopen: one atomic load and a jump.
 */
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ptprof.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/signal/ptp_handler.h"
#include "prof/runtime/ptp_interpose.h"
#include "prof/runtime/ptp_libc.h"
#include "prof/runtime/ptp_siginterpose.h"
#include "prof/runtime/ptp_shim.h"
#include "prof/signal/ptp_sigstate.h"
#include "prof/signal/ptp_own_work.h"
#include "prof/signal/ptp_producer.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/ptp_alloc.h"

typedef ptp_create_fn create_fn;

/* This file's process-wide state (runtime/ptp_process.h): libc's
 * definitions of what we interpose, each looked up once (dlsym) and never
 * reset (a fork child has the same libc); pthread_create's is ptp_libc.c's. */
static struct {
  _Atomic(void *) execve, execv, execvp, execvpe, fexecve, execveat;
  _Atomic(void *) dlopen, dlmopen;
} libc;

/* The next definition of name after ours (libc's), looked up once. */
static void *real_fn(_Atomic(void *) *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (!f) {
    f = dlsym(RTLD_NEXT, name);
    if (f) atomic_store_explicit(slot, f, memory_order_release);
  }
  return f;
}


static create_fn get_real(void) { return ptp_libc_pthread_create(); }

typedef struct tramp {
  void *(*fn)(void *);
  void *arg;
} tramp;

/* A real frame in every thread's stack, between libc's start_thread and
 * the start routine, left out of samples' stacks (PTP_SHIM, ptp_shim.h:
 * unprofiled it does not exist). Everything before the start routine is
 * the profiler's own work, the copy's free included. */
static PTP_SHIM void *ptp_thread_trampoline(void *p) {
  ptp_own_work_enter();                 /* registration is ours, not the program's */
  tramp t = *(tramp *)p;
  free(p);
  ptp_threads_on_thread_start((void *)t.fn);
  ptp_own_work_leave();
  void *ret = t.fn(t.arg);
  __asm__ volatile("" ::: "memory");   /* keep the call a call, not a tail jump */
  return ret;
}

PTPROF_API PTP_SHIM int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                              void *(*start)(void *), void *arg) {
  create_fn real = get_real();
  if (!real) return EAGAIN;
  /* Our bookkeeping on the program's thread is the profiler's own work
   * (signal/ptp_own_work.h): a sample in this malloc was seen under
   * pthread_create -> ptp_malloc in a user's profile. The thread's
   * creation itself (real) is the program's. */
  ptp_own_work_enter();
  tramp *t = ptp_malloc(sizeof *t);
  ptp_own_work_leave();
  if (!t) return real(thread, attr, start, arg);   /* unregistered, still correct */
  t->fn = start;
  t->arg = arg;
  int rc = real(thread, attr, ptp_thread_trampoline, t);
  if (rc != 0) free(t);
  return rc;
}


/* ---- exec family ---------------------------------------------------------- */

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);


/* Resolved at load time, not at the first exec: an exec made in a vfork
 * child must not run dlsym (it takes the loader lock and may allocate in
 * memory the parent's other threads are using). */
__attribute__((constructor)) static void resolve_exec(void) {
  (void)real_fn(&libc.execve, "execve");
  (void)real_fn(&libc.execv, "execv");
  (void)real_fn(&libc.execvp, "execvp");
  (void)real_fn(&libc.execvpe, "execvpe");
  (void)real_fn(&libc.fexecve, "fexecve");
  (void)real_fn(&libc.execveat, "execveat");
}

/* Before an exec: returns 1 if the thread was quiesced (the caller must call
 * exec_failed if the exec returns), 0 when our handler is not installed
 * (then nothing of ours can send SIGPROF: the exec goes straight through). */
static int exec_prepare(void) {
  if (!ptp_sig_is_installed()) return 0;
  int saved = errno;
  /* The raw mask calls: libc's would go through the mask interposers. */
  uint64_t prof = 1ull << (SIGPROF - 1), old = 0;
  (void)syscall(SYS_rt_sigprocmask, SIG_BLOCK, &prof, &old, sizeof prof);
  ptp_threads_exec_pause();
  /* With the source disarmed nothing new is sent to this thread; take
   * what was already sent if it is ours (our handler would have ignored or
   * sampled it; the new program would die of it). A SIGPROF of the
   * program's stays pending, as it would without us. */
  const struct timespec zero = { 0, 0 };
  siginfo_t si;
  while (syscall(SYS_rt_sigtimedwait, &prof, &si, &zero, sizeof prof) == SIGPROF) {
    ptp_thread_sig *rec;
    if (ptp_sig_ours(&si, &rec)) continue;
    (void)syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), SIGPROF, &si);
    break;
  }
  /* The program's SIG_IGN is inherited by the new program: the real
   * disposition must be SIG_IGN at the exec (ours resets to SIG_DFL). */
  int ign = ptp_sig_exec_prepare();
  (void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
  errno = saved;
  return 1 | (ign << 1);
}

static int exec_failed(int quiesced, int rc) {
  if (quiesced) {
    int saved = errno;
    ptp_sig_exec_failed(quiesced >> 1);
    ptp_threads_exec_resume();
    errno = saved;
  }
  return rc;
}

#define PTP_REAL_OR_ENOSYS(slot, type, name)                                       \
  type real = (type)real_fn(&(slot), name);                                        \
  if (!real) { errno = ENOSYS; return -1; }

PTPROF_API PTP_SHIM int execve(const char *path, char *const argv[], char *const envp[]) {
  PTP_REAL_OR_ENOSYS(libc.execve, execve_fn, "execve");
  int q = exec_prepare();
  return exec_failed(q, real(path, argv, envp));
}

PTPROF_API PTP_SHIM int execv(const char *path, char *const argv[]) {
  PTP_REAL_OR_ENOSYS(libc.execv, execv_fn, "execv");
  int q = exec_prepare();
  return exec_failed(q, real(path, argv));
}

PTPROF_API PTP_SHIM int execvp(const char *file, char *const argv[]) {
  PTP_REAL_OR_ENOSYS(libc.execvp, execv_fn, "execvp");
  int q = exec_prepare();
  return exec_failed(q, real(file, argv));
}

PTPROF_API PTP_SHIM int execvpe(const char *file, char *const argv[], char *const envp[]) {
  PTP_REAL_OR_ENOSYS(libc.execvpe, execve_fn, "execvpe");
  int q = exec_prepare();
  return exec_failed(q, real(file, argv, envp));
}

PTPROF_API PTP_SHIM int fexecve(int fd, char *const argv[], char *const envp[]) {
  PTP_REAL_OR_ENOSYS(libc.fexecve, fexecve_fn, "fexecve");
  int q = exec_prepare();
  return exec_failed(q, real(fd, argv, envp));
}

PTPROF_API PTP_SHIM int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                        int flags) {
  PTP_REAL_OR_ENOSYS(libc.execveat, execveat_fn, "execveat");
  int q = exec_prepare();
  return exec_failed(q, real(dirfd, path, argv, envp, flags));
}

/* The list forms collect their arguments into an argv on the stack
 * (alloca: no malloc, which a vfork child must not call; the count is
 * bounded by what the caller passed) and go
 * through the wrappers above. */
#define PTP_COLLECT_ARGS(ap, arg0, argv)                                           \
  size_t n_ = 1;                                                                   \
  va_start(ap, arg0);                                                              \
  while (va_arg(ap, char *)) n_++;                                                 \
  va_end(ap);                                                                      \
  char **argv = alloca((n_ + 1) * sizeof *argv);                                  \
  argv[0] = (char *)(arg0);                                                        \
  va_start(ap, arg0);                                                              \
  for (size_t i_ = 1; i_ <= n_; i_++) argv[i_] = va_arg(ap, char *);

PTPROF_API PTP_SHIM int execl(const char *path, const char *arg0, ...) {
  va_list ap;
  PTP_COLLECT_ARGS(ap, arg0, argv);
  va_end(ap);
  return execv(path, argv);
}

PTPROF_API PTP_SHIM int execlp(const char *file, const char *arg0, ...) {
  va_list ap;
  PTP_COLLECT_ARGS(ap, arg0, argv);
  va_end(ap);
  return execvp(file, argv);
}

PTPROF_API PTP_SHIM int execle(const char *path, const char *arg0, ...) {
  va_list ap;
  PTP_COLLECT_ARGS(ap, arg0, argv);
  char *const *envp = va_arg(ap, char *const *);   /* after the NULL */
  va_end(ap);
  return execve(path, argv, envp);
}

/* ---- dlopen, dlmopen ------------------------------------------------------ */

typedef void *(*dlopen_fn)(const char *, int);
typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);
typedef void (*route_fn)(void);


static dlopen_fn get_real_dlopen(void) { return (dlopen_fn)real_fn(&libc.dlopen, "dlopen"); }
static dlmopen_fn get_real_dlmopen(void) { return (dlmopen_fn)real_fn(&libc.dlmopen, "dlmopen"); }

/* Set while this thread refreshes the tables: a dlopen from inside the
 * refresh goes straight to libc (no recursion into the table mutex). */
static __thread int in_refresh;

/* After a successful load, in the calling thread: publish the tables of
 * what was loaded. errno is kept as the real call left it. The build is
 * the profiler's work, not the caller's: its expirations are counted as
 * such, never sampled (signal/ptp_own_work.h). */
static void after_load(void) {
  if (in_refresh || !atomic_load_explicit(&ptp_g_shared, memory_order_acquire)) return;
  int saved = errno;
  in_refresh = 1;
  ptp_own_section own;
  ptp_threads_own_begin(&own);
  (void)ptp_cfi_refresh();   /* -ENOMEM: the consumer retries at its next pass */
  ptp_threads_own_end(&own);
  in_refresh = 0;
  errno = saved;
}

static PTP_SHIM void *ptp_dlopen_sync(const char *file, int mode) {
  dlopen_fn real = get_real_dlopen();
  void *h = real ? real(file, mode) : NULL;
  if (h) after_load();
  return h;
}

static PTP_SHIM void *ptp_dlmopen_sync(Lmid_t lmid, const char *file, int mode) {
  dlmopen_fn real = get_real_dlmopen();
  void *h = real ? real(lmid, file, mode) : NULL;
  if (h) after_load();
  return h;
}

/* Namespace of the object holding addr; LM_ID_BASE when addr is in no
 * object (glibc then takes the main program as the caller). */
static Lmid_t lmid_of(const void *addr) {
  Dl_info info;
  struct link_map *lm = NULL;
  Lmid_t id = LM_ID_BASE;
  if (dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm) {
    if (dlinfo(lm, RTLD_DI_LMID, &id) != 0) id = -1;   /* unknown: treat as foreign */
  }
  return id;
}

/* Nonzero when glibc's result does not depend on who calls: a path with
 * '/' and no dynamic string token, and (dlopen only: its namespace is the
 * caller's) a caller in our own namespace. */
static int caller_free(const char *file, const void *caller, int check_ns) {
  if (!file || !strchr(file, '/') || strchr(file, '$')) return 0;
  if (!check_ns) return 1;
  static _Atomic long our_ns = -2;                    /* -2: not looked up yet */
  long ours = atomic_load_explicit(&our_ns, memory_order_relaxed);
  if (ours == -2) {
    ours = (long)lmid_of((const void *)&caller_free);
    atomic_store_explicit(&our_ns, ours, memory_order_relaxed);
  }
  return ours >= 0 && (long)lmid_of(caller) == ours;
}

/* The routers, called only by the stubs below (hence extern, hidden by the
 * library's default visibility). */
route_fn ptp_route_dlopen(const char *file, int mode, const void *caller);
route_fn ptp_route_dlmopen(Lmid_t lmid, const char *file, int mode, const void *caller);

/* Called by the dlopen stub with its arguments and the caller's return
 * address; returns the function the stub jumps to. */
route_fn ptp_route_dlopen(const char *file, int mode, const void *caller) {
  (void)mode;
  if (atomic_load_explicit(&ptp_g_shared, memory_order_relaxed) && !in_refresh &&
      caller_free(file, caller, 1))
    return (route_fn)ptp_dlopen_sync;
  dlopen_fn real = get_real_dlopen();
  return real ? (route_fn)real : (route_fn)ptp_dlopen_sync;   /* sync: NULL, dlerror set */
}

/* Same for dlmopen (namespace given explicitly: only the name matters). */
route_fn ptp_route_dlmopen(Lmid_t lmid, const char *file, int mode, const void *caller) {
  (void)lmid, (void)mode;
  if (atomic_load_explicit(&ptp_g_shared, memory_order_relaxed) && !in_refresh &&
      caller_free(file, caller, 0))
    return (route_fn)ptp_dlmopen_sync;
  dlmopen_fn real = get_real_dlmopen();
  return real ? (route_fn)real : (route_fn)ptp_dlmopen_sync;
}

/* The stubs. Argument registers are saved around the call to the router
 * and restored for the jump; the caller's return address stays where glibc
 * reads it. Stack: entry rsp = 8 mod 16, three pushes/subs of 8 realign it
 * for the call. The CFI directives let any unwinder (ours included) walk
 * through a sample taken in the stub. */
#if defined(__x86_64__)
#ifdef __CET__
#define PTP_ENDBR "endbr64\n"
#else
#define PTP_ENDBR ""
#endif
__asm__(
    ".text\n"
    ".globl dlopen\n"
    ".type dlopen, @function\n"
    ".p2align 4\n"
    "dlopen:\n"
    ".cfi_startproc\n"
    PTP_ENDBR
    "  pushq %rdi\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  pushq %rsi\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  subq $8, %rsp\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  movq 24(%rsp), %rdx\n"             /* (file, mode, caller) */
    "  call ptp_route_dlopen\n"
    "  addq $8, %rsp\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  popq %rsi\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  popq %rdi\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  jmp *%rax\n"
    ".cfi_endproc\n"
    ".size dlopen, .-dlopen\n"
    ".globl dlmopen\n"
    ".type dlmopen, @function\n"
    ".p2align 4\n"
    "dlmopen:\n"
    ".cfi_startproc\n"
    PTP_ENDBR
    "  pushq %rdi\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  pushq %rsi\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  pushq %rdx\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  movq 24(%rsp), %rcx\n"             /* (lmid, file, mode, caller) */
    "  call ptp_route_dlmopen\n"
    "  popq %rdx\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  popq %rsi\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  popq %rdi\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  jmp *%rax\n"
    ".cfi_endproc\n"
    ".size dlmopen, .-dlmopen\n");
#else
#error "ptp_interpose.c: the dlopen stubs are written for x86-64 only"
#endif

void ptp_interpose_link(void) {}
