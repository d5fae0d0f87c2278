/*
 * ptp_threads.c - the thread registry (see ptp_threads.h for the model):
 * its records, the threads' entry and exit, the /proc/self/task sweep, and
 * the walks over every record that starting, stopping and dumping need.
 * What a record's source is and how it is armed is ptp_engine.c's; what an
 * exiting thread owes, ptp_exitacct.c's; /proc parsing, ptp_procfs.c's;
 * names of exited threads, ptp_graveyard.c's.
 *
 * Process-wide state (runtime/ptp_process.h): `reg`, below.
 * Locking: reg.mu guards every ptp_thread_rec field, every write to a
 * record's ptp_thread_sig half (under its publication rule,
 * signal/ptp_thread_sig.h), the free list, and the engine's settings (the
 * engine is only called with it held). reg.sweep_mu serializes sweeps (so
 * a foreign record is only created by a sweep that read /proc/self/task
 * before creating it). Order: sweep_mu, mu. Neither is held while calling
 * another module that takes a lock of its own (the graveyard is called
 * after reg.mu is released), so the modules' fork handlers may run in any
 * order. The signal handler takes neither: it reads the ptp_thread_sig
 * halves through ptp_thread_sig_lookup only.
 *
 * Fork: the handlers registered at init take sweep_mu and mu before fork
 * and release them after. In the child (which has no POSIX timers: they
 * are not inherited) every record is forgotten except the forking
 * thread's, re-keyed to its new tid; every source is forgotten
 * (ptp_engine_forget_in_child: the child's copies of the parent's perf
 * event fds are closed; the events stay the parent's); no sampler is
 * active.
 *
 * Calls: ptp_engine, ptp_exitacct, ptp_procfs, ptp_graveyard, ptp_grace,
 * ptp_perf (exclude_kernel);
 * none of them calls back.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof/runtime/ptp_engine.h"
#include "prof/runtime/ptp_exitacct.h"
#include "prof/runtime/ptp_grace.h"
#include "prof/runtime/ptp_graveyard.h"
#include "prof/runtime/ptp_own_text.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/runtime/ptp_privio.h"
#include "prof/runtime/ptp_procfs.h"
#include "prof/runtime/ptp_threads.h"
#include "prof/output/ptp_window.h"
#include "prof/signal/ptp_own_work.h"
#include "prof/signal/ptp_producer.h"
#include "prof/ptp_alloc.h"
#include "prof/signal/ptp_clock.h"

/* The registry. The tables are mapped once by init and never unmapped
 * (threads and signals may come at any time until the process exits).
 * Records [0, hwm) have been used at least once; the others were never
 * touched (their pages not even faulted in). A new thread takes the most
 * recently freed record, or else record hwm, so the scans over all records
 * (activate, deactivate, sweep, collect, fork) stop at hwm: a process with
 * ten threads reads ten records, not all PTP_MAX_THREADS (960 KiB: ~220
 * page faults of a profiling daemon's start-up). hwm is written under mu
 * only; atomic so that ptp_threads_get_stats reads it without the lock,
 * like the other counters. */
static struct {
  pthread_once_t once;
  int init_rc;
  pthread_mutex_t mu, sweep_mu;
  pthread_key_t exit_key;
  ptp_thread_rec *recs;         /* the registry's halves (record i <-> entry i) */
  uint32_t free_stack[PTP_MAX_THREADS];
  uint32_t nfree;
  _Atomic uint32_t hwm;
  uint32_t fork_parent_tid;     /* tid of the thread calling fork */
  uintptr_t main_lo, main_hi;   /* main thread's stack, read once at init */
  _Atomic uint64_t registered, live;
  ptp_cpu_exited exited;        /* exits since the last cut, by name */
} reg = {
  .once = PTHREAD_ONCE_INIT,
  .mu = PTHREAD_MUTEX_INITIALIZER,
  .sweep_mu = PTHREAD_MUTEX_INITIALIZER,
};

/* The calling thread's record (ptp_threads_self_sig): set by its own
 * registration (trampoline, init on the main thread), cleared at its exit.
 * Initial-exec TLS, as the label block: the mask interposers read it, also
 * inside the program's signal handlers. */
static __thread ptp_thread_sig *self_sig __attribute__((tls_model("initial-exec")));

ptp_thread_sig *ptp_threads_self_sig(void) { return self_sig; }

/* A new record's thread (the caller) starts with SIGPROF blocked (the mask
 * is inherited from its creator): its blocked time starts now (see
 * runtime/ptp_siginterpose.c). The raw system call: libc's would go
 * through the interposer. */
static void note_initial_block(ptp_thread_sig *s) {
  uint64_t cur = 0;
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &cur, sizeof cur) != 0 ||
      !(cur & (1ull << (SIGPROF - 1))))
    return;
  int64_t now = ptp_clock_ns(CLOCK_THREAD_CPUTIME_ID, -1);
  if (now >= 0) atomic_store(&s->block_cpu_ns, now);
}

/* After init these are constant: relaxed loads suffice here. */
#define SIGS (atomic_load_explicit(&ptp_g_thread_sigs, memory_order_relaxed))
#define TIDMAP (atomic_load_explicit(&ptp_g_tidmap, memory_order_relaxed))

static uint32_t self_tid(void) { return (uint32_t)gettid(); }

/* ---- records (reg.mu held) ---------------------------------------------- */

static ptp_thread_rec *rec_insert(uint32_t tid, uintptr_t lo, uintptr_t hi) {
  if (tid == 0 || tid >= PTP_TID_LIMIT) return NULL;
  uint32_t idx;
  if (reg.nfree > 0)
    idx = reg.free_stack[--reg.nfree];
  else if (reg.hwm < PTP_MAX_THREADS)
    idx = reg.hwm++;
  else
    return NULL;
  ptp_thread_rec *r = &reg.recs[idx];
  r->sig = &SIGS[idx];
  /* Publication rule 2 (signal/ptp_thread_sig.h): all of this first. */
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
  r->cpu_cut = 0;               /* a new thread's clock starts at 0; the sweep
                                   and activate read it instead */
  r->own_ns = 0;
  r->own_open = -1;
  r->name[0] = 0;
  atomic_store_explicit(&r->sig->perf_fd, -1, memory_order_relaxed);
  atomic_store_explicit(&r->sig->perf_first, 0, memory_order_relaxed);
  atomic_store_explicit(&r->sig->perf_fd_prev, -1, memory_order_relaxed);
  atomic_store_explicit(&r->sig->block_cpu_ns, -1, memory_order_relaxed);
  atomic_store_explicit(&r->sig->blocked_got, 0, memory_order_relaxed);
  atomic_store_explicit(&r->sig->unblocking, 0, memory_order_relaxed);
  r->entry = NULL;
  atomic_store_explicit(&r->sig->tid, tid, memory_order_release);
  atomic_store_explicit(&TIDMAP[tid], idx + 1, memory_order_release);
  atomic_fetch_add(&reg.live, 1);
  return r;
}

static void rec_remove(ptp_thread_rec *r) {
  uint32_t tid = atomic_load_explicit(&r->sig->tid, memory_order_relaxed);
  if (tid == 0) return;
  uint32_t idx = (uint32_t)(r - reg.recs);
  if (atomic_load_explicit(&TIDMAP[tid], memory_order_relaxed) == idx + 1)
    atomic_store_explicit(&TIDMAP[tid], 0, memory_order_release);
  atomic_store_explicit(&r->sig->tid, 0, memory_order_release);
  reg.free_stack[reg.nfree++] = idx;
  atomic_fetch_sub(&reg.live, 1);
}

static ptp_thread_rec *rec_find(uint32_t tid) {
  if (tid == 0 || tid >= PTP_TID_LIMIT) return NULL;
  uint32_t i = atomic_load_explicit(&TIDMAP[tid], memory_order_relaxed);
  if (!i) return NULL;
  ptp_thread_rec *r = &reg.recs[i - 1];
  return atomic_load_explicit(&r->sig->tid, memory_order_relaxed) == tid ? r : NULL;
}

static uint32_t rec_tid(const ptp_thread_rec *r) {
  return atomic_load_explicit(&r->sig->tid, memory_order_relaxed);
}

/* ---- fork ------------------------------------------------------------- */

static void atfork_prepare(void) {
  pthread_mutex_lock(&reg.sweep_mu);
  pthread_mutex_lock(&reg.mu);
  reg.fork_parent_tid = self_tid();
}

static void atfork_parent(void) {
  pthread_mutex_unlock(&reg.mu);
  pthread_mutex_unlock(&reg.sweep_mu);
}

static void atfork_child(void) {
  ptp_engine_stop();
  uint32_t me = self_tid();
  ptp_thread_rec *mine = rec_find(reg.fork_parent_tid);
  for (uint32_t i = 0; i < reg.hwm; i++) {
    ptp_thread_rec *r = &reg.recs[i];
    if (!rec_tid(r)) continue;
    ptp_engine_forget_in_child(r);
    if (r != mine) rec_remove(r);
  }
  memset(&reg.exited, 0, sizeof reg.exited);   /* the parent's exits */
  if (mine) {
    /* Same stack, new tid: re-key the record (its exit destructor, if any,
     * still points at it). */
    atomic_store_explicit(&TIDMAP[reg.fork_parent_tid], 0, memory_order_relaxed);
    mine->excluded = 0;
    mine->cpu_cut = 0;          /* the child's CPU clock starts at 0 */
    atomic_store_explicit(&mine->sig->tid, me, memory_order_release);
    atomic_store_explicit(&TIDMAP[me], (uint32_t)(mine - reg.recs) + 1, memory_order_release);
  }
  pthread_mutex_unlock(&reg.mu);
  pthread_mutex_unlock(&reg.sweep_mu);
}

/* The blocked time of r (SIGPROF blocked since block_cpu_ns) up to the
 * thread's CPU clock now goes under [lost: signal blocked] and the block
 * goes on from now (a compare-and-swap: the thread unblocking meanwhile
 * accounts it itself). reg.mu held. */
static void account_blocked(ptp_thread_rec *r, uint32_t tid) {
  int64_t b = atomic_load(&r->sig->block_cpu_ns);
  if (b < 0) return;
  int64_t now = ptp_engine_cpu_ns(tid);
  if (now < b || !atomic_compare_exchange_strong(&r->sig->block_cpu_ns, &b, now)) return;
  uint64_t n = ptp_expirations_between(r->sig->armed_cpu_ns, r->sig->first_ns, ptp_engine_period(),
                                       b, now);
  uint64_t got = atomic_exchange(&r->sig->blocked_got, 0);
  if (n > got) atomic_fetch_add(&r->sig->delivered, n - got);
  if (n == 0) return;
  uintptr_t cause = PTP_DROP_BLOCKED;
  (void)ptp_push_sample(tid, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, PTP_SLOT_FLUSH, &cause, 1);
}

/* ---- exit ------------------------------------------------------------- */

/* The CPU of r's own-work sections since the last cut, up to its clock
 * now: the closed ones and the open one's part. reg.mu held. */
static int64_t own_since_cut(const ptp_thread_rec *r, int64_t now) {
  return r->own_ns + (r->own_open >= 0 && now > r->own_open ? now - r->own_open : 0);
}

/* An exiting thread's CPU since the last cut, summed by name until the
 * next cut takes it (ptp_threads_cpu_cut). reg.mu held; no allocation
 * (exit destructors run in any thread, also under memory pressure). */
static void add_exited(const char *name, int64_t ns) {
  if (ns < 0) ns = 0;
  ptp_cpu_exited *x = &reg.exited;
  ptp_thread_cpu *e = NULL;
  for (size_t i = 0; i < x->n && !e; i++)
    if (strncmp(x->by_name[i].name, name, sizeof x->by_name[i].name) == 0) e = &x->by_name[i];
  if (!e && x->n < PTP_EXITED_NAMES) {
    e = &x->by_name[x->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
  }
  if (!e) e = &x->others;
  e->nthreads++;
  e->cpu_ns += ns;
}

/* TLS-key destructor: runs on the exiting thread (return from the start
 * routine, pthread_exit, cancellation). */
static void on_thread_exit(void *arg) {
  ptp_thread_rec *r = arg;
  uint32_t me = self_tid();
  char name[16] = "";
  prctl(PR_GET_NAME, name, 0, 0, 0);
  name[15] = 0;
  pthread_mutex_lock(&reg.mu);
  self_sig = NULL;
  if (rec_tid(r) != me) {
    pthread_mutex_unlock(&reg.mu);     /* re-keyed or removed meanwhile */
    return;
  }
  if (r->has_perf || r->has_timer) account_blocked(r, me);   /* exits with SIGPROF blocked */
  if (ptp_engine_active() && !r->excluded) {
    int64_t now = ptp_engine_cpu_ns(me);
    if (now >= 0) {
      int64_t own = own_since_cut(r, now);
      reg.exited.own_ns += own;
      add_exited(name, now - r->cpu_cut - own);
    }
  }
  ptp_exitacct_exit(r, me);            /* disarms the source too */
  rec_remove(r);
  pthread_mutex_unlock(&reg.mu);
  ptp_graveyard_put(me, name);
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
  rc = -pthread_key_create(&reg.exit_key, on_thread_exit);
  if (rc != 0) goto fail_maps;
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  ptp_procfs_main_stack(&reg.main_lo, &reg.main_hi);
  pthread_mutex_lock(&reg.mu);
  reg.recs = rmap;
  /* Publication rule 1: the entries before the map. */
  atomic_store_explicit(&ptp_g_thread_sigs, sigs, memory_order_relaxed);
  reg.nfree = 0;
  reg.hwm = 0;
  atomic_store_explicit(&ptp_g_tidmap, map, memory_order_release);
  ptp_thread_rec *m = rec_insert((uint32_t)getpid(), reg.main_lo, reg.main_hi);
  if (m) atomic_fetch_add(&reg.registered, 1);
  if (m && self_tid() == (uint32_t)getpid()) {
    self_sig = m->sig;
    note_initial_block(m->sig);
  }
  pthread_mutex_unlock(&reg.mu);
  return;

fail_maps:
  if (rmap != MAP_FAILED) munmap(rmap, (size_t)PTP_MAX_THREADS * sizeof(ptp_thread_rec));
  if (sigs != MAP_FAILED) munmap(sigs, (size_t)PTP_MAX_THREADS * sizeof(ptp_thread_sig));
  if (map != MAP_FAILED) munmap(map, (size_t)PTP_TID_LIMIT * sizeof(uint32_t));
  reg.init_rc = rc;
}

int ptp_threads_init(void) {
  pthread_once(&reg.once, do_init);
  return reg.init_rc;
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
  pthread_mutex_lock(&reg.mu);
  ptp_thread_rec *r = rec_find(me);
  if (r) {
    /* A sweep saw this thread first, or a dead thread's record kept its tid:
     * start over (its timer may belong to the dead thread). */
    ptp_engine_disarm(r);
    rec_remove(r);
  }
  r = rec_insert(me, lo, hi);
  if (r) {
    self_sig = r->sig;
    note_initial_block(r->sig);
    r->self_registered = 1;
    r->entry = entry;
    atomic_fetch_add(&reg.registered, 1);
    ptp_engine_arm(r);
  }
  pthread_mutex_unlock(&reg.mu);
  if (r) pthread_setspecific(reg.exit_key, r);
}

void ptp_threads_exclude_self(void) {
  if (ptp_threads_init() != 0) return;
  uint32_t me = self_tid();
  pthread_mutex_lock(&reg.mu);
  ptp_thread_rec *r = rec_find(me);
  if (!r) r = rec_insert(me, 0, 0);
  if (r) {
    r->excluded = 1;
    ptp_engine_disarm(r);
  }
  pthread_mutex_unlock(&reg.mu);
}

void ptp_threads_forget_self(void) {
  if (ptp_threads_init() != 0) return;
  pthread_mutex_lock(&reg.mu);
  ptp_thread_rec *r = rec_find(self_tid());
  if (r && !r->self_registered) {
    ptp_engine_disarm(r);
    rec_remove(r);
  }
  pthread_mutex_unlock(&reg.mu);
}

void ptp_threads_exec_pause(void) {
  if (!atomic_load_explicit(&ptp_g_tidmap, memory_order_acquire)) return;   /* never initialized */
  pthread_mutex_lock(&reg.mu);
  ptp_thread_rec *r = rec_find(self_tid());
  if (r && (r->has_perf || r->has_timer)) {
    /* SIGPROF is blocked in this thread (the wrapper), so no handler of ours
     * can be using the fd being closed. */
    ptp_engine_disarm(r);
    r->exec_paused = 1;
  }
  pthread_mutex_unlock(&reg.mu);
}

void ptp_threads_exec_resume(void) {
  if (!atomic_load_explicit(&ptp_g_tidmap, memory_order_acquire)) return;
  pthread_mutex_lock(&reg.mu);
  ptp_thread_rec *r = rec_find(self_tid());
  if (r && r->exec_paused) {
    r->exec_paused = 0;
    ptp_engine_arm(r);          /* no-op unless a sampler is still active */
  }
  pthread_mutex_unlock(&reg.mu);
}

/* ---- activation and sweep ------------------------------------------- */

int ptp_threads_activate(uint32_t magic, int64_t period_ns, int engine) {
  int rc = ptp_threads_init();
  if (rc) return rc;
  if (period_ns <= 0 || (engine != PTP_ENGINE_PERF && engine != PTP_ENGINE_TIMER)) return -EINVAL;
  pthread_mutex_lock(&reg.mu);
  if (ptp_engine_active()) {
    pthread_mutex_unlock(&reg.mu);
    return -EBUSY;
  }
  ptp_engine_start(magic, period_ns, engine);
  memset(&reg.exited, 0, sizeof reg.exited);
  for (uint32_t i = 0; i < reg.hwm; i++) {
    ptp_thread_rec *r = &reg.recs[i];
    uint32_t tid = rec_tid(r);
    if (!tid) continue;
    r->cpu_cut = ptp_engine_cpu_ns(tid);      /* the window starts now */
    r->own_ns = 0;
    if (r->own_open >= 0) r->own_open = r->cpu_cut;
    ptp_engine_arm(r);
  }
  pthread_mutex_unlock(&reg.mu);
  return ptp_threads_sweep();
}

void ptp_threads_deactivate(void) {
  if (ptp_threads_init() != 0) return;
  pthread_mutex_lock(&reg.mu);
  ptp_engine_stop();
  /* Perf events: unpublish every fd first, wait until no handler is inside
   * (one may be about to ioctl the fd it loaded), then close. Timers carry
   * no fd: a late signal of a deleted timer only fails the magic check. */
  for (uint32_t i = 0; i < reg.hwm; i++) {
    ptp_thread_rec *r = &reg.recs[i];
    if (rec_tid(r)) ptp_engine_unpublish(r);
  }
  ptp_grace_wait(0);
  for (uint32_t i = 0; i < reg.hwm; i++) {
    ptp_thread_rec *r = &reg.recs[i];
    if (rec_tid(r)) ptp_engine_disarm(r);
  }
  pthread_mutex_unlock(&reg.mu);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

int ptp_threads_sweep(void) {
  int rc = ptp_threads_init();
  if (rc) return rc;
  pthread_mutex_lock(&reg.sweep_mu);
  uint32_t *tids;
  size_t n;
  if ((rc = ptp_procfs_tasks(&tids, &n)) < 0) {
    pthread_mutex_unlock(&reg.sweep_mu);
    return rc;
  }
  uint32_t pid = (uint32_t)getpid();
  pthread_mutex_lock(&reg.mu);
  for (size_t i = 0; i < n; i++) {
    if (ptp_privio_is_helper(tids[i])) continue;    /* ours: never sampled */
    ptp_thread_rec *r = rec_find(tids[i]);
    if (!r) {
      uintptr_t lo = 0, hi = 0;
      if (tids[i] == pid) { lo = reg.main_lo; hi = reg.main_hi; }
      r = rec_insert(tids[i], lo, hi);
      if (!r) continue;
      /* its CPU before we saw it is not known to be the window's */
      r->cpu_cut = ptp_engine_cpu_ns(tids[i]);
      atomic_fetch_add(&reg.registered, 1);
    } else if (ptp_engine_source_stale(r, tids[i])) {
      ptp_engine_disarm(r);     /* the dead thread's; the live one gets its own */
    } else {
      /* the program closed the event's descriptor: forgotten, re-opened */
      (void)ptp_engine_check(r);
    }
    /* A foreign thread has no exit destructor to say its name when it
     * ends: keep the name it has now (few such threads: raw clone, libc
     * helpers), remembered below when a sweep finds it gone. */
    if (!r->self_registered) (void)ptp_procfs_comm(tids[i], r->name);
    ptp_engine_arm(r);
  }
  /* Forget foreign records whose thread is gone. Self-registered records
   * remove themselves at thread exit (a thread that registered after our
   * readdir must not be removed here). Their names go to the graveyard
   * after reg.mu is released (it has its own lock). */
  enum { GONE_MAX = 64 };
  struct { uint32_t tid; char name[16]; } gone[GONE_MAX];
  size_t ngone = 0;
  for (uint32_t i = 0; i < reg.hwm; i++) {
    ptp_thread_rec *r = &reg.recs[i];
    uint32_t tid = rec_tid(r);
    if (!tid || r->self_registered) continue;
    if (bsearch(&tid, tids, n, sizeof *tids, cmp_u32)) continue;
    if (r->name[0] && ngone < GONE_MAX) {
      gone[ngone].tid = tid;
      memcpy(gone[ngone++].name, r->name, sizeof r->name);
    }
    ptp_engine_disarm(r);
    rec_remove(r);
  }
  pthread_mutex_unlock(&reg.mu);
  pthread_mutex_unlock(&reg.sweep_mu);
  free(tids);
  for (size_t i = 0; i < ngone; i++) ptp_graveyard_put(gone[i].tid, gone[i].name);
  return 0;
}

void ptp_threads_account_blocked(void) {
  if (ptp_threads_init() != 0) return;
  pthread_mutex_lock(&reg.mu);
  for (uint32_t i = 0; i < reg.hwm && ptp_engine_active(); i++) {
    ptp_thread_rec *r = &reg.recs[i];
    uint32_t tid = rec_tid(r);
    if (tid && (r->has_perf || r->has_timer)) account_blocked(r, tid);
  }
  pthread_mutex_unlock(&reg.mu);
}

size_t ptp_threads_check_fds(void) {
  if (ptp_threads_init() != 0) return 0;
  size_t n = 0;
  pthread_mutex_lock(&reg.mu);
  for (uint32_t i = 0; i < reg.hwm; i++) {
    ptp_thread_rec *r = &reg.recs[i];
    if (!rec_tid(r) || !ptp_engine_check(r)) continue;
    n++;
    ptp_engine_arm(r);        /* a new event (or a timer), if a sampler runs */
  }
  pthread_mutex_unlock(&reg.mu);
  return n;
}

size_t ptp_threads_collect_unsignalled(ptp_unsignalled *out, size_t cap) {
  if (ptp_threads_init() != 0 || cap == 0) return 0;
  size_t n = 0;
  pthread_mutex_lock(&reg.mu);
  /* Live threads: with exclude_kernel the periods no signal reported ended
   * in the kernel (mostly; a merged pending signal looks the same); when
   * kernel time is counted every period signals, so what is missing is
   * signals merged while one was pending. Not "thread exit": the thread
   * lives. */
  int cause = ptp_perf_excludes_kernel() ? PTP_DROP_KERNEL : PTP_DROP_UNDELIVERED;
  for (uint32_t i = 0; i < reg.hwm && n < cap && ptp_engine_active(); i++) {
    ptp_thread_rec *r = &reg.recs[i];
    uint32_t tid = rec_tid(r);
    if (!tid || !r->has_perf) continue;
    uint64_t owed = ptp_engine_owed(r, ptp_engine_cpu_ns(tid));
    /* A signal may be on its way (period just completed, not yet handled):
     * leave the newest period to it rather than count it twice. */
    if (owed <= 1) continue;
    owed -= 1;
    r->accounted += owed;
    out[n++] = (ptp_unsignalled){ tid, cause, owed };
  }
  pthread_mutex_unlock(&reg.mu);
  return n;
}

size_t ptp_threads_cpu_cut(ptp_cpu_live *live, size_t cap, ptp_cpu_exited *exited) {
  memset(exited, 0, sizeof *exited);
  if (ptp_threads_init() != 0) return 0;
  size_t n = 0;
  pthread_mutex_lock(&reg.mu);
  for (uint32_t i = 0; i < reg.hwm; i++) {
    ptp_thread_rec *r = &reg.recs[i];
    uint32_t tid = rec_tid(r);
    if (!tid || r->excluded) continue;
    int64_t now = ptp_engine_cpu_ns(tid);
    if (now < 0) continue;             /* gone (a foreign thread the sweep has not seen go) */
    int64_t own = own_since_cut(r, now);
    int64_t prog = now - r->cpu_cut - own;
    if (n < cap) live[n] = (ptp_cpu_live){ tid, prog > 0 ? prog : 0 };
    n++;
    reg.exited.own_ns += own;
    r->cpu_cut = now;
    r->own_ns = 0;
    if (r->own_open >= 0) r->own_open = now;   /* the section's rest: the next span's */
  }
  *exited = reg.exited;
  memset(&reg.exited, 0, sizeof reg.exited);
  pthread_mutex_unlock(&reg.mu);
  return n;
}

/* ---- misc ------------------------------------------------------------ */

void ptp_threads_get_stats(ptp_threads_stats *out) {
  ptp_engine_stats es;
  ptp_engine_get_stats(&es);
  ptp_exitacct_stats xs;
  ptp_exitacct_get_stats(&xs);
  out->timers_created = es.created;
  out->timers_deleted = es.deleted;
  out->timer_errors = es.errors;
  out->last_errno = es.last_errno;
  out->perf_fallbacks = es.fallbacks;
  out->perf_budget_fallbacks = es.budget_fallbacks;
  out->fds_lost = es.fds_lost;
  out->flushed = xs.flushed;
  out->lost_at_exit = xs.lost_at_exit;
  out->registered = atomic_load(&reg.registered);
  out->live = atomic_load(&reg.live);
  out->records_used = atomic_load(&reg.hwm);
}

static int64_t self_cpu_ns(void) {
  return ptp_clock_ns(CLOCK_THREAD_CPUTIME_ID, -1);
}

/* The outermost section of a thread with a record, while a sampler runs,
 * is timed by the thread's CPU clock (own_open, own_ns): the threads' CPU
 * line keeps it apart (ptp_threads_cpu_cut). Under the perf engine with
 * exclude_kernel it also counts the section's unsignalled periods (below). */
PTP_OWN_TEXT void ptp_threads_own_begin(ptp_own_section *s) {
  s->timed_ = 0;
  if (ptp_own_work_enter() != 1) return;     /* nested: the outermost one counts */
  if (!atomic_load(&ptp_g_shared) || ptp_threads_init() != 0) return;
  s->hits0_ = ptp_own_work_hits();
  s->cpu0_ = self_cpu_ns();
  if (s->cpu0_ < 0) return;
  pthread_mutex_lock(&reg.mu);
  ptp_thread_rec *r = rec_find(self_tid());
  if (r && ptp_engine_active()) {
    r->own_open = s->cpu0_;
    s->timed_ = 1;
  }
  pthread_mutex_unlock(&reg.mu);
}

PTP_OWN_TEXT void ptp_threads_own_end(ptp_own_section *s) {
  if (s->timed_) {
    int64_t cpu1 = self_cpu_ns();
    uint64_t hits = ptp_own_work_hits() - s->hits0_;
    uint64_t n = 0;
    pthread_mutex_lock(&reg.mu);
    ptp_thread_rec *r = rec_find(self_tid());
    if (r && r->own_open >= 0) {
      /* from the section's start, or from the last cut inside it */
      if (cpu1 > r->own_open) r->own_ns += cpu1 - r->own_open;
      r->own_open = -1;
    }
    if (!ptp_perf_excludes_kernel()) cpu1 = -1;   /* no kernel-mode periods to count */
    if (cpu1 >= 0 && r && r->has_perf && ptp_engine_active() && r->sig->armed_cpu_ns >= 0) {
      /* the section's periods by the schedule the event follows (armed
       * CPU, first period, period), minus those the handler saw */
      int64_t armed = r->sig->armed_cpu_ns, from = s->cpu0_ > armed ? s->cpu0_ : armed;
      int64_t period = ptp_engine_period();
      uint64_t due = ptp_expirations_due(cpu1 - armed, r->sig->first_ns, period) -
                     ptp_expirations_due(from - armed, r->sig->first_ns, period);
      n = due > hits ? due - hits : 0;
      uint64_t owed = ptp_engine_owed(r, cpu1);   /* never more than is owed */
      if (n > owed) n = owed;
      r->accounted += n;
    }
    pthread_mutex_unlock(&reg.mu);
    if (n) {
      atomic_fetch_add(&ptp_g_inside, 1);     /* the grace protocol: sh stays valid */
      ptp_shared *sh = atomic_load(&ptp_g_shared);
      if (sh) ptp_drop(sh, PTP_DROP_OWN_WORK, (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n));
      atomic_fetch_sub(&ptp_g_inside, 1);
    }
  }
  ptp_own_work_leave();
}

void ptp_threads_names(ptp_thread *threads, size_t n) {
  if (n == 0) return;
  uint32_t *tids = ptp_malloc(n * sizeof *tids);
  char (*names)[16] = ptp_malloc(n * sizeof *names);
  if (!tids || !names) {
    free(tids);
    free(names);
    for (size_t i = 0; i < n; i++)
      if (ptp_procfs_comm(threads[i].tid, threads[i].name) != 0)
        (void)ptp_graveyard_get(threads[i].tid, threads[i].name);
    return;
  }
  for (size_t i = 0; i < n; i++) tids[i] = threads[i].tid;
  /* Live threads: their names now, all in one hand-off to the ptprof-io
   * helper (a window of a program that churns threads names thousands).
   * Exited ones: one sorted pass over the graveyard. */
  if (ptp_procfs_comms(tids, n, names) > 0) ptp_graveyard_get_many(tids, n, names);
  for (size_t i = 0; i < n; i++) memcpy(threads[i].name, names[i], 16);
  free(tids);
  free(names);
}
