/*
 * ptp_threads.c - the thread registry and per-thread CPU-time timers (see
 * ptp_threads.h for the model).
 *
 * Locking: reg_mu guards every ptp_thread_rec field, every write to a
 * record's ptp_thread_sig half (under its publication rule,
 * signal/ptp_thread_sig.h), the free list, the active/magic/period
 * settings and the name graveyard.
 * sweep_mu serializes sweeps (so a foreign record is only created by a sweep
 * that read /proc/self/task before creating it). Order: sweep_mu, reg_mu.
 * The signal handler takes neither: it reads the ptp_thread_sig halves
 * through ptp_thread_sig_lookup only.
 *
 * Fork: pthread_atfork handlers take cfi_mu, sweep_mu and reg_mu before
 * fork and release them after. In the child (which has no POSIX timers,
 * they are not inherited) every record is forgotten except the forking
 * thread's, re-keyed to its new tid; the child's copies of the parent's perf
 * event fds are closed (the events stay the parent's: they watch the
 * parent's threads and signal them); nothing is active, and ptp_g_shared is
 * cleared so the parent's ring is never written.
 *
 * Calls: ptp_producer (clocks, ring push), ptp_perf (event syscalls),
 * ptp_cfi (fork handlers); none of them calls back.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "prof/unwind/ptp_cfi.h"
#include "prof/runtime/ptp_grace.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/signal/ptp_producer.h"
#include "prof/runtime/ptp_threads.h"

/* The registry's half of the records (PTP_MAX_THREADS, mapped at init;
 * record i goes with the handler's entry i, ptp_thread_sig.h). */
static ptp_thread_rec *recs;

/* After init (pthread_once) these are constant: relaxed loads suffice here. */
#define RECS recs
#define SIGS (atomic_load_explicit(&ptp_g_thread_sigs, memory_order_relaxed))
#define TIDMAP (atomic_load_explicit(&ptp_g_tidmap, memory_order_relaxed))

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sweep_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;

/* reg_mu. Records [0, rec_hwm) have been used at least once; the others
 * were never touched (their pages not even faulted in). A new thread takes
 * the most recently freed record, or else record rec_hwm, so the scans over
 * all records (activate, deactivate, sweep, collect, fork) stop at rec_hwm:
 * a process with ten threads reads ten records, not all PTP_MAX_THREADS
 * (960 KiB: ~220 page faults of a profiling daemon's start-up). Written
 * under reg_mu only; atomic so that ptp_threads_get_stats reads it without
 * the lock, like its other counters. */
static uint32_t free_stack[PTP_MAX_THREADS];
static uint32_t nfree;
static _Atomic uint32_t rec_hwm;
static int active;
static uint32_t cur_magic;
static int64_t cur_period;
static int cur_engine;
static uint64_t rng_state;
static uint32_t fork_parent_tid;   /* tid of the thread calling fork */
static uintptr_t main_lo, main_hi;  /* main thread's stack, read once at init */

#define GRAVE_N 256
static struct { uint32_t tid; char name[16]; } grave[GRAVE_N];
static unsigned grave_next;

static _Atomic uint64_t st_created, st_deleted, st_errors, st_flushed, st_registered;
static _Atomic uint64_t st_live, st_perf_fallbacks, st_lost_exit;
static _Atomic int st_last_errno;

static uint32_t self_tid(void) { return (uint32_t)gettid(); }

static int64_t cpu_ns(uint32_t tid) {
  struct timespec ts;
  if (clock_gettime(ptp_tid_cpuclock(tid), &ts) != 0) return -1;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng_next(void) {
  /* splitmix64; reg_mu held */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* ---- records (reg_mu held) ---------------------------------------------- */

static ptp_thread_rec *rec_insert(uint32_t tid, uintptr_t lo, uintptr_t hi) {
  if (tid == 0 || tid >= PTP_TID_LIMIT) return NULL;
  uint32_t idx;
  if (nfree > 0)
    idx = free_stack[--nfree];
  else if (rec_hwm < PTP_MAX_THREADS)
    idx = rec_hwm++;
  else
    return NULL;
  ptp_thread_rec *r = &RECS[idx];
  r->sig = &SIGS[idx];
  r->sig->stack_lo = lo;
  r->sig->stack_hi = hi;
  atomic_store_explicit(&r->sig->delivered, 0, memory_order_relaxed);
  atomic_store_explicit(&r->sig->busy, 0, memory_order_relaxed);
  r->self_registered = 0;
  r->excluded = 0;
  r->has_timer = 0;
  r->has_perf = 0;
  r->closing_fd = -1;
  r->exec_paused = 0;
  r->accounted = 0;
  r->start_ticks = 0;
  atomic_store_explicit(&r->sig->perf_fd, -1, memory_order_relaxed);
  atomic_store_explicit(&r->sig->perf_first, 0, memory_order_relaxed);
  r->entry = NULL;
  atomic_store_explicit(&r->sig->tid, tid, memory_order_release);
  atomic_store_explicit(&TIDMAP[tid], idx + 1, memory_order_release);
  atomic_fetch_add(&st_live, 1);
  return r;
}

static void rec_remove(ptp_thread_rec *r) {
  uint32_t tid = atomic_load_explicit(&r->sig->tid, memory_order_relaxed);
  if (tid == 0) return;
  uint32_t idx = (uint32_t)(r - RECS);
  if (atomic_load_explicit(&TIDMAP[tid], memory_order_relaxed) == idx + 1)
    atomic_store_explicit(&TIDMAP[tid], 0, memory_order_release);
  atomic_store_explicit(&r->sig->tid, 0, memory_order_release);
  free_stack[nfree++] = idx;
  atomic_fetch_sub(&st_live, 1);
}

static ptp_thread_rec *rec_find(uint32_t tid) {
  if (tid == 0 || tid >= PTP_TID_LIMIT) return NULL;
  uint32_t i = atomic_load_explicit(&TIDMAP[tid], memory_order_relaxed);
  if (!i) return NULL;
  ptp_thread_rec *r = &RECS[i - 1];
  return atomic_load_explicit(&r->sig->tid, memory_order_relaxed) == tid ? r : NULL;
}

/* Closes r's perf event. Only for a thread that cannot be inside the
 * handler with this fd right now: the calling thread itself, a thread that
 * is gone, or after unpublishing and a grace wait (deactivate). */
static void perf_close(ptp_thread_rec *r) {
  int fd = atomic_exchange_explicit(&r->sig->perf_fd, -1, memory_order_acq_rel);
  if (fd >= 0) close(fd);
  r->has_perf = 0;
  atomic_fetch_add(&st_deleted, 1);
}

static void disarm(ptp_thread_rec *r) {
  if (r->has_perf) perf_close(r);
  if (!r->has_timer) return;
  timer_delete(r->timer);
  r->has_timer = 0;
  atomic_fetch_add(&st_deleted, 1);
}

static void note_error(int e) {
  atomic_fetch_add(&st_errors, 1);
  atomic_store(&st_last_errno, e);
}

/* A thread's start time in clock ticks since boot (field 22 of
 * /proc/self/task/<tid>/stat), 0 if unreadable: tells a reused tid apart. */
static uint64_t tid_start_ticks(uint32_t tid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/self/task/%u/stat", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');            /* comm may contain spaces */
  if (!p) return 0;
  int field = 2;
  for (p++; *p && field < 22; p++)
    if (*p == ' ') field++;
  return field == 22 ? strtoull(p, NULL, 10) : 0;
}

/* Periods owed by r's perf event: completed by the thread's CPU time since
 * the event was opened but neither delivered nor reported before. The CPU
 * clock is used rather than the event's own count: on this kernel (6.18) a
 * task-clock count read back after PERF_EVENT_IOC_PERIOD was seen seconds
 * off for a 10 ms thread, while the thread CPU clock is exact. */
static uint64_t perf_owed(ptp_thread_rec *r, int64_t cpu_now) {
  if (cpu_now < 0 || r->sig->armed_cpu_ns < 0) return 0;
  uint64_t expected = ptp_expirations_due(cpu_now - r->sig->armed_cpu_ns, r->sig->first_ns, cur_period);
  uint64_t seen = atomic_load(&r->sig->delivered) + r->accounted;
  return expected > seen ? expected - seen : 0;
}

#define PERF_MIN_FIRST_NS 200000

/* Perf engine: opens r's event with a random first period. Returns 0,
 * -EMFILE/-ENFILE (caller falls back to a timer) or another -errno (already
 * counted unless the thread just exited). */
static int arm_perf(ptp_thread_rec *r, uint32_t tid) {
  int64_t first = 1 + (int64_t)(rng_next() % (uint64_t)cur_period);
  /* Not below PERF_MIN_FIRST_NS: a first period of a few us makes the
   * event's hrtimer interrupt the thread about as often as the interrupt
   * costs (a VM), so it keeps firing in kernel mode, where exclude_kernel
   * suppresses the signal that would set the regular period: seen as one
   * thread burning seconds of kernel time (~1 run in 12 of 200 short
   * threads). The price: a thread's first sample is never due before
   * 200 us of its CPU (2 % of a 99 Hz period). */
  int64_t min_first = cur_period < PERF_MIN_FIRST_NS ? cur_period : PERF_MIN_FIRST_NS;
  if (first < min_first) first = min_first;
  int64_t cpu0 = cpu_ns(tid);
  int fd;
  int rc = ptp_perf_open(tid, first, &fd);
  if (rc == -EMFILE || rc == -ENFILE) return rc;
  if (rc) {
    if (rc != -ESRCH) note_error(-rc);
    return rc;
  }
  r->sig->armed_cpu_ns = cpu0;
  r->sig->first_ns = first;
  atomic_store_explicit(&r->sig->delivered, 0, memory_order_relaxed);
  r->accounted = 0;
  if (!r->self_registered && tid != (uint32_t)getpid()) r->start_ticks = tid_start_ticks(tid);
  atomic_store_explicit(&r->sig->perf_first, 1, memory_order_relaxed);
  atomic_store_explicit(&r->sig->perf_fd, fd, memory_order_release);
  r->has_perf = 1;
  atomic_fetch_add(&st_created, 1);
  /* Enabled only now that the handler knows the fd (see ptp_perf.h). */
  if ((rc = ptp_perf_enable(fd)) != 0) {
    /* never enabled, so no signal of it can be in a handler: close now */
    if (rc != -ESRCH) note_error(-rc);
    perf_close(r);
    return rc;
  }
  return 0;
}

static void arm(ptp_thread_rec *r) {
  if (!active || r->excluded || r->has_timer || r->has_perf) return;
  uint32_t tid = atomic_load_explicit(&r->sig->tid, memory_order_relaxed);
  if (cur_engine == PTP_ENGINE_PERF) {
    int rc = arm_perf(r, tid);
    if (rc != -EMFILE && rc != -ENFILE) return;
    atomic_fetch_add(&st_perf_fallbacks, 1);     /* out of fds: a timer instead */
  }
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev._sigev_un._tid = (pid_t)tid;
  sev.sigev_value.sival_ptr = (void *)(uintptr_t)(((uint64_t)cur_magic << 32) | tid);
  timer_t t;
  if (timer_create(ptp_tid_cpuclock(tid), &sev, &t) != 0) {
    /* EINVAL: the thread exited since it was listed (sweep race), not a
     * failure to sample a live thread. */
    if (errno != EINVAL && errno != ESRCH) note_error(errno);
    return;
  }
  /* Random first expiry in (0, period]: a thread that lives shorter than a
   * period still gets a sample with probability lifetime / period. */
  int64_t first = 1 + (int64_t)(rng_next() % (uint64_t)cur_period);
  struct itimerspec its = {
    .it_value = { first / 1000000000, first % 1000000000 },
    .it_interval = { cur_period / 1000000000, cur_period % 1000000000 },
  };
  r->sig->armed_cpu_ns = cpu_ns(tid);
  r->sig->first_ns = first;
  atomic_store_explicit(&r->sig->delivered, 0, memory_order_relaxed);
  if (timer_settime(t, 0, &its, NULL) != 0) {
    int e = errno;
    timer_delete(t);
    if (e != ESRCH && e != EINVAL) note_error(e);  /* ESRCH: the thread just exited */
    return;
  }
  r->timer = t;
  r->has_timer = 1;
  atomic_fetch_add(&st_created, 1);
}

static void grave_put(uint32_t tid, const char *name) {
  unsigned i = grave_next++ % GRAVE_N;
  grave[i].tid = tid;
  snprintf(grave[i].name, sizeof grave[i].name, "%s", name);
}

/* ---- main thread bounds ------------------------------------------------- */

/* The main thread's stack: the "[stack]" mapping's top, and a bottom at most
 * RLIMIT_STACK below it (it grows down). */
static void main_stack_bounds(uintptr_t *lo, uintptr_t *hi) {
  *lo = *hi = 0;
  FILE *f = fopen("/proc/self/maps", "re");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (!strstr(line, "[stack]")) continue;
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx", &a, &b) == 2) {
      struct rlimit rl;
      uintptr_t size = 8u << 20;
      if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) size = rl.rlim_cur;
      else size = (uintptr_t)1 << 30;
      if (size < b - a) size = b - a;
      *hi = b;
      *lo = b > size ? b - size : 0;
    }
    break;
  }
  fclose(f);
}

/* ---- fork ------------------------------------------------------------- */

static void atfork_prepare(void) {
  ptp_cfi_atfork_prepare();
  pthread_mutex_lock(&sweep_mu);
  pthread_mutex_lock(&reg_mu);
  fork_parent_tid = self_tid();
}

static void atfork_parent(void) {
  pthread_mutex_unlock(&reg_mu);
  pthread_mutex_unlock(&sweep_mu);
  ptp_cfi_atfork_parent();
}

static void atfork_child(void) {
  /* The parent's sampler must never be written from here. */
  atomic_store(&ptp_g_shared, NULL);
  active = 0;
  uint32_t me = self_tid();
  ptp_thread_rec *mine = rec_find(fork_parent_tid);
  for (uint32_t i = 0; i < rec_hwm; i++) {
    ptp_thread_rec *r = &RECS[i];
    if (atomic_load_explicit(&r->sig->tid, memory_order_relaxed) == 0) continue;
    int fd = atomic_exchange_explicit(&r->sig->perf_fd, -1, memory_order_relaxed);
    if (fd >= 0) close(fd);                             /* our copy only */
    r->has_perf = 0;
    if (r == mine) continue;
    r->has_timer = 0;                                   /* not inherited */
    rec_remove(r);
  }
  if (mine) {
    /* Same stack, new tid: re-key the record (its exit destructor, if any,
     * still points at it). */
    atomic_store_explicit(&TIDMAP[fork_parent_tid], 0, memory_order_relaxed);
    mine->has_timer = 0;
    mine->excluded = 0;
    atomic_store_explicit(&mine->sig->tid, me, memory_order_release);
    atomic_store_explicit(&TIDMAP[me], (uint32_t)(mine - RECS) + 1,
                          memory_order_release);
  }
  pthread_mutex_unlock(&reg_mu);
  pthread_mutex_unlock(&sweep_mu);
  ptp_cfi_atfork_child();
}

/* ---- exit ------------------------------------------------------------- */

/* TLS-key destructor: runs on the exiting thread (return from the start
 * routine, pthread_exit, cancellation). */
static void on_thread_exit(void *arg) {
  ptp_thread_rec *r = arg;
  uint32_t me = self_tid();
  char name[16] = "";
  prctl(PR_GET_NAME, name, 0, 0, 0);
  name[15] = 0;
  pthread_mutex_lock(&reg_mu);
  if (atomic_load_explicit(&r->sig->tid, memory_order_relaxed) != me) {
    pthread_mutex_unlock(&reg_mu);     /* re-keyed or removed meanwhile */
    return;
  }
  /* Exit accounting: expirations that were due by the thread's CPU time but
   * never delivered are owed. Timer engine: the kernel checks CPU-time
   * timers only at its tick, so one that fell due since the last tick is
   * lost when the thread exits first (about a quarter of a 10 ms thread's
   * samples at 99 Hz). Perf engine: the event fires at the exact CPU time,
   * so little is owed (a signal still pending at exit; periods that ended in
   * kernel mode under exclude_kernel). Nobody knows which stack had them:
   * they are recorded under the thread's "[lost: thread exit]" pseudo-frame
   * (PTP_SLOT_FLUSH, see ptprof.c), never under a guessed stack. */
  int64_t el = -1;
  if (r->has_perf) {
    uint64_t owed = perf_owed(r, cpu_ns(me));
    uintptr_t cause = ptp_perf_excludes_kernel() ? PTP_DROP_KERNEL : PTP_DROP_THREAD_EXIT;
    if (owed && ptp_push_sample(me, (uint32_t)owed, PTP_SLOT_FLUSH, &cause, 1) == 0) {
      atomic_fetch_add(&st_flushed, 1);
      if (cause == PTP_DROP_THREAD_EXIT) atomic_fetch_add(&st_lost_exit, owed);
    }
  } else if (r->has_timer) {
    int64_t now = cpu_ns(me);
    if (now >= 0 && r->sig->armed_cpu_ns >= 0) el = now - r->sig->armed_cpu_ns;
  }
  disarm(r);
  if (el >= 0 && cur_period > 0) {
    uint64_t expected = ptp_expirations_due(el, r->sig->first_ns, cur_period);
    uint64_t got = atomic_load(&r->sig->delivered);
    /* At most what one tick (10 ms at HZ=100) can hide. */
    uint64_t cap = 1 + (uint64_t)(10000000 / cur_period);
    if (expected > got) {
      uint64_t owed = expected - got;
      if (owed > cap) owed = cap;
      uintptr_t cause = PTP_DROP_THREAD_EXIT;
      if (ptp_push_sample(me, (uint32_t)owed, PTP_SLOT_FLUSH, &cause, 1) == 0) {
        atomic_fetch_add(&st_flushed, 1);
        atomic_fetch_add(&st_lost_exit, owed);
      }
    }
  }
  grave_put(me, name);
  rec_remove(r);
  pthread_mutex_unlock(&reg_mu);
}

/* ---- init ------------------------------------------------------------- */

static void do_init(void) {
  void *map = mmap(NULL, (size_t)PTP_TID_LIMIT * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void *sigs = mmap(NULL, (size_t)PTP_MAX_THREADS * sizeof(ptp_thread_sig), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void *rmap = mmap(NULL, (size_t)PTP_MAX_THREADS * sizeof(ptp_thread_rec), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  int rc = -ENOMEM;
  if (map == MAP_FAILED || sigs == MAP_FAILED || rmap == MAP_FAILED) goto fail_maps;
  rc = -pthread_key_create(&exit_key, on_thread_exit);
  if (rc != 0) goto fail_maps;
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  main_stack_bounds(&main_lo, &main_hi);
  pthread_mutex_lock(&reg_mu);
  recs = rmap;
  atomic_store_explicit(&ptp_g_thread_sigs, sigs, memory_order_relaxed);
  nfree = 0;
  rec_hwm = 0;
  rng_state = (uint64_t)ptp_now_mono() ^ ((uint64_t)getpid() << 32);
  atomic_store_explicit(&ptp_g_tidmap, map, memory_order_release);
  if (rec_insert((uint32_t)getpid(), main_lo, main_hi)) atomic_fetch_add(&st_registered, 1);
  pthread_mutex_unlock(&reg_mu);
  return;

fail_maps:
  if (rmap != MAP_FAILED) munmap(rmap, (size_t)PTP_MAX_THREADS * sizeof(ptp_thread_rec));
  if (sigs != MAP_FAILED) munmap(sigs, (size_t)PTP_MAX_THREADS * sizeof(ptp_thread_sig));
  if (map != MAP_FAILED) munmap(map, (size_t)PTP_TID_LIMIT * sizeof(uint32_t));
  init_rc = rc;
}

int ptp_threads_init(void) {
  pthread_once(&init_once, do_init);
  return init_rc;
}

/* ---- registration ---------------------------------------------------- */

void ptp_threads_self_stack(uintptr_t *lo, uintptr_t *hi) {
  *lo = *hi = 0;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void *addr;
  size_t size;
  if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
    *lo = (uintptr_t)addr;
    *hi = *lo + size;
  }
  pthread_attr_destroy(&attr);
}

void ptp_threads_on_thread_start(void *entry) {
  if (ptp_threads_init() != 0) return;
  uint32_t me = self_tid();
  uintptr_t lo, hi;
  ptp_threads_self_stack(&lo, &hi);
  pthread_mutex_lock(&reg_mu);
  ptp_thread_rec *r = rec_find(me);
  if (r) {
    /* A sweep saw this thread first, or a dead thread's record kept its tid:
     * start over (its timer may belong to the dead thread). */
    disarm(r);
    rec_remove(r);
  }
  r = rec_insert(me, lo, hi);
  if (r) {
    r->self_registered = 1;
    r->entry = entry;
    atomic_fetch_add(&st_registered, 1);
    arm(r);
  }
  pthread_mutex_unlock(&reg_mu);
  if (r) pthread_setspecific(exit_key, r);
}

void ptp_threads_exclude_self(void) {
  if (ptp_threads_init() != 0) return;
  uint32_t me = self_tid();
  pthread_mutex_lock(&reg_mu);
  ptp_thread_rec *r = rec_find(me);
  if (!r) r = rec_insert(me, 0, 0);
  if (r) {
    r->excluded = 1;
    disarm(r);
  }
  pthread_mutex_unlock(&reg_mu);
}

void ptp_threads_forget_self(void) {
  if (ptp_threads_init() != 0) return;
  pthread_mutex_lock(&reg_mu);
  ptp_thread_rec *r = rec_find(self_tid());
  if (r && !r->self_registered) {
    disarm(r);
    rec_remove(r);
  }
  pthread_mutex_unlock(&reg_mu);
}

void ptp_threads_exec_pause(void) {
  if (!atomic_load_explicit(&ptp_g_tidmap, memory_order_acquire)) return;   /* never initialized */
  pthread_mutex_lock(&reg_mu);
  ptp_thread_rec *r = rec_find(self_tid());
  if (r && (r->has_perf || r->has_timer)) {
    /* SIGPROF is blocked in this thread (the wrapper), so no handler of ours
     * can be using the fd being closed. */
    disarm(r);
    r->exec_paused = 1;
  }
  pthread_mutex_unlock(&reg_mu);
}

void ptp_threads_exec_resume(void) {
  if (!atomic_load_explicit(&ptp_g_tidmap, memory_order_acquire)) return;
  pthread_mutex_lock(&reg_mu);
  ptp_thread_rec *r = rec_find(self_tid());
  if (r && r->exec_paused) {
    r->exec_paused = 0;
    arm(r);                     /* no-op unless a sampler is still active */
  }
  pthread_mutex_unlock(&reg_mu);
}

/* ---- activation and sweep ------------------------------------------- */

int ptp_threads_activate(uint32_t magic, int64_t period_ns, int engine) {
  int rc = ptp_threads_init();
  if (rc) return rc;
  if (period_ns <= 0 || (engine != PTP_ENGINE_PERF && engine != PTP_ENGINE_TIMER)) return -EINVAL;
  pthread_mutex_lock(&reg_mu);
  if (active) {
    pthread_mutex_unlock(&reg_mu);
    return -EBUSY;
  }
  active = 1;
  cur_magic = magic;
  cur_period = period_ns;
  cur_engine = engine;
  for (uint32_t i = 0; i < rec_hwm; i++) {
    ptp_thread_rec *r = &RECS[i];
    if (atomic_load_explicit(&r->sig->tid, memory_order_relaxed)) arm(r);
  }
  pthread_mutex_unlock(&reg_mu);
  return ptp_threads_sweep();
}

void ptp_threads_deactivate(void) {
  if (ptp_threads_init() != 0) return;
  pthread_mutex_lock(&reg_mu);
  active = 0;
  /* Perf events: unpublish every fd first, wait until no handler is inside
   * (one may be about to ioctl the fd it loaded), then close. Timers carry
   * no fd: a late signal of a deleted timer only fails the magic check. */
  for (uint32_t i = 0; i < rec_hwm; i++) {
    ptp_thread_rec *r = &RECS[i];
    if (!atomic_load_explicit(&r->sig->tid, memory_order_relaxed) || !r->has_perf) continue;
    int fd = atomic_exchange_explicit(&r->sig->perf_fd, -1, memory_order_acq_rel);
    r->has_perf = 0;
    r->closing_fd = fd;
  }
  ptp_grace_wait(0);
  for (uint32_t i = 0; i < rec_hwm; i++) {
    ptp_thread_rec *r = &RECS[i];
    if (!atomic_load_explicit(&r->sig->tid, memory_order_relaxed)) continue;
    if (r->closing_fd >= 0) {
      close(r->closing_fd);
      r->closing_fd = -1;
      atomic_fetch_add(&st_deleted, 1);
    }
    disarm(r);
  }
  pthread_mutex_unlock(&reg_mu);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

int ptp_threads_sweep(void) {
  int rc = ptp_threads_init();
  if (rc) return rc;
  pthread_mutex_lock(&sweep_mu);
  DIR *d = opendir("/proc/self/task");
  if (!d) {
    rc = -errno;
    pthread_mutex_unlock(&sweep_mu);
    return rc;
  }
  size_t n = 0, cap = 64;
  uint32_t *tids = malloc(cap * sizeof *tids);
  struct dirent *e;
  while (tids && (e = readdir(d))) {
    char *end;
    unsigned long v = strtoul(e->d_name, &end, 10);
    if (*end || v == 0 || v >= PTP_TID_LIMIT) continue;
    if (n == cap) {
      uint32_t *nt = realloc(tids, cap * 2 * sizeof *nt);
      if (!nt) { free(tids); tids = NULL; break; }
      tids = nt;
      cap *= 2;
    }
    tids[n++] = (uint32_t)v;
  }
  closedir(d);
  if (!tids) {
    pthread_mutex_unlock(&sweep_mu);
    return -ENOMEM;
  }
  qsort(tids, n, sizeof *tids, cmp_u32);
  uint32_t pid = (uint32_t)getpid();
  pthread_mutex_lock(&reg_mu);
  for (size_t i = 0; i < n; i++) {
    ptp_thread_rec *r = rec_find(tids[i]);
    if (!r) {
      uintptr_t lo = 0, hi = 0;
      if (tids[i] == pid) { lo = main_lo; hi = main_hi; }
      r = rec_insert(tids[i], lo, hi);
      if (!r) continue;
      atomic_fetch_add(&st_registered, 1);
    } else if (r->has_timer && !r->self_registered) {
      /* A foreign record whose thread died and whose tid was reused: the
       * old timer is bound to the dead thread and reads as disarmed. */
      struct itimerspec cur;
      if (timer_gettime(r->timer, &cur) == 0 && cur.it_value.tv_sec == 0 &&
          cur.it_value.tv_nsec == 0)
        disarm(r);
    } else if (r->has_perf && r->start_ticks && tid_start_ticks(tids[i]) != r->start_ticks) {
      disarm(r);      /* the same for an event: another thread has the tid now */
    }
    arm(r);
  }
  /* Forget foreign records whose thread is gone. Self-registered records
   * remove themselves at thread exit (a thread that registered after our
   * readdir must not be removed here). */
  for (uint32_t i = 0; i < rec_hwm; i++) {
    ptp_thread_rec *r = &RECS[i];
    uint32_t tid = atomic_load_explicit(&r->sig->tid, memory_order_relaxed);
    if (!tid || r->self_registered) continue;
    if (bsearch(&tid, tids, n, sizeof *tids, cmp_u32)) continue;
    disarm(r);
    rec_remove(r);
  }
  pthread_mutex_unlock(&reg_mu);
  pthread_mutex_unlock(&sweep_mu);
  free(tids);
  return 0;
}

size_t ptp_threads_collect_unsignalled(ptp_unsignalled *out, size_t cap) {
  if (ptp_threads_init() != 0 || cap == 0) return 0;
  size_t n = 0;
  pthread_mutex_lock(&reg_mu);
  /* Live threads: with exclude_kernel the periods no signal reported ended
   * in the kernel (mostly; a merged pending signal looks the same); when
   * kernel time is counted every period signals, so what is missing is
   * signals merged while one was pending. Not "thread exit": the thread
   * lives. */
  int cause = ptp_perf_excludes_kernel() ? PTP_DROP_KERNEL : PTP_DROP_UNDELIVERED;
  for (uint32_t i = 0; i < rec_hwm && n < cap && active; i++) {
    ptp_thread_rec *r = &RECS[i];
    uint32_t tid = atomic_load_explicit(&r->sig->tid, memory_order_relaxed);
    if (!tid || !r->has_perf) continue;
    uint64_t owed = perf_owed(r, cpu_ns(tid));
    /* A signal may be on its way (period just completed, not yet handled):
     * leave the newest period to it rather than count it twice. */
    if (owed <= 1) continue;
    owed -= 1;
    r->accounted += owed;
    out[n++] = (ptp_unsignalled){ tid, cause, owed };
  }
  pthread_mutex_unlock(&reg_mu);
  return n;
}

/* ---- misc ------------------------------------------------------------ */

void ptp_threads_get_stats(ptp_threads_stats *out) {
  out->timers_created = atomic_load(&st_created);
  out->timers_deleted = atomic_load(&st_deleted);
  out->timer_errors = atomic_load(&st_errors);
  out->flushed = atomic_load(&st_flushed);
  out->registered = atomic_load(&st_registered);
  out->live = atomic_load(&st_live);
  out->records_used = atomic_load(&rec_hwm);
  out->last_errno = atomic_load(&st_last_errno);
  out->perf_fallbacks = atomic_load(&st_perf_fallbacks);
  out->lost_at_exit = atomic_load(&st_lost_exit);
}

void ptp_threads_name(uint32_t tid, char name[16]) {
  name[0] = 0;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, name, 15);
    close(fd);
    if (n > 0) {
      name[n] = 0;
      char *nl = strchr(name, '\n');
      if (nl) *nl = 0;
      return;
    }
    name[0] = 0;
  }
  pthread_mutex_lock(&reg_mu);
  for (unsigned i = 0; i < GRAVE_N; i++) {
    unsigned k = (grave_next - 1 - i) % GRAVE_N;   /* newest first */
    if (grave[k].tid == tid) {
      memcpy(name, grave[k].name, 16);
      break;
    }
  }
  pthread_mutex_unlock(&reg_mu);
}
