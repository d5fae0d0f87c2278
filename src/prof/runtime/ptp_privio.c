/*
 * ptp_privio.c - the "ptprof-io" helper thread (see ptp_privio.h).
 *
 * DESIGN. One job slot under `mu`: a caller (serialised by `call_mu`)
 * posts fn/arg and bumps `seq`, then waits on `cv` until `done` equals it;
 * the helper waits on `cv` for `seq` to move, runs the job without the
 * lock, stores the result and `done`, and broadcasts. An idle helper
 * (no job for PTP_PRIVIO_IDLE_S s) clears `running` under `mu` and
 * returns, so the next call starts a new one; `running` is only ever read
 * and written under `mu`. The helper is detached: nobody joins it.
 * Fork: the child, which has no helper, makes the locks, the condition
 * and the slot anew (fork_child says why there is no prepare handler).
 * Process-wide state (runtime/ptp_process.h): `pio`.
 */
#include <errno.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof/runtime/ptp_libc.h"
#include "prof/runtime/ptp_privio.h"

static struct {
  pthread_mutex_t call_mu;       /* one caller at a time */
  pthread_mutex_t mu;            /* the slot and `running` */
  pthread_cond_t cv;             /* seq moved (helper) or done moved (caller) */
  pthread_once_t once;
  int running;                   /* a helper is alive (mu) */
  uint64_t seq, done;            /* job posted / finished (mu) */
  int (*fn)(void *);
  void *arg;
  int rc;
  _Atomic uint32_t tid;          /* the live helper's tid, 0 if none */
  _Atomic int private_table;     /* its unshare succeeded */
} pio = {
  .call_mu = PTHREAD_MUTEX_INITIALIZER,
  .mu = PTHREAD_MUTEX_INITIALIZER,
  .once = PTHREAD_ONCE_INIT,
};

static void cv_init(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&pio.cv, &ca);
  pthread_condattr_destroy(&ca);
}

/* The child has no helper, and any lock a parent thread held is held by
 * nobody there: everything anew. (No prepare handler taking these locks:
 * a sweep holds the registry lock while it calls here, and the registry's
 * prepare handler takes that lock, so the two orders would deadlock.) */
static void fork_child(void) {
  pthread_mutex_init(&pio.call_mu, NULL);
  pthread_mutex_init(&pio.mu, NULL);
  cv_init();
  pio.running = 0;
  pio.seq = pio.done = 0;
  atomic_store(&pio.tid, 0);
  atomic_store(&pio.private_table, 0);
}

static void init_once(void) {
  cv_init();
  (void)pthread_atfork(NULL, NULL, fork_child);
}

static void *helper_main(void *unused) {
  (void)unused;
  (void)prctl(PR_SET_NAME, "ptprof-io", 0, 0, 0);
  /* An empty table of our own: with the whole range closed, the kernel
   * copies none of the program's descriptors (it would otherwise hold
   * the program's pipes open behind its back). */
  int priv = syscall(SYS_close_range, 0u, ~0u, CLOSE_RANGE_UNSHARE) == 0;
  pthread_mutex_lock(&pio.mu);
  atomic_store(&pio.private_table, priv);
  atomic_store(&pio.tid, (uint32_t)syscall(SYS_gettid));
  for (;;) {
    while (pio.done == pio.seq) {
      struct timespec until;
      clock_gettime(CLOCK_MONOTONIC, &until);
      until.tv_sec += PTP_PRIVIO_IDLE_S;
      if (pthread_cond_timedwait(&pio.cv, &pio.mu, &until) == ETIMEDOUT && pio.done == pio.seq) {
        pio.running = 0;
        atomic_store(&pio.tid, 0);
        atomic_store(&pio.private_table, 0);
        pthread_mutex_unlock(&pio.mu);
        return NULL;
      }
    }
    int (*fn)(void *) = pio.fn;
    void *arg = pio.arg;
    uint64_t seq = pio.seq;
    pthread_mutex_unlock(&pio.mu);
    int rc = fn(arg);
    pthread_mutex_lock(&pio.mu);
    pio.rc = rc;
    pio.done = seq;
    pthread_cond_broadcast(&pio.cv);
  }
}

/* Under mu: starts a helper unless one runs. 0, or -errno. */
static int start_locked(void) {
  if (pio.running) return 0;
  pthread_attr_t at;
  if (pthread_attr_init(&at) != 0) return -ENOMEM;
  (void)pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  (void)pthread_attr_setstacksize(&at, 64 * 1024);
  /* every signal blocked, inherited by the helper: the program's signals
   * go to its own threads (the system call, not pthread_sigmask, which
   * the library interposes) */
  uint64_t all = ~0ull, old = 0;
  (void)syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, sizeof all);
  pthread_t th;
  int rc = ptp_real_pthread_create(&th, &at, helper_main, NULL);
  (void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
  pthread_attr_destroy(&at);
  if (rc != 0) return -rc;
  pio.running = 1;
  return 0;
}

int ptp_privio_call(int (*fn)(void *arg), void *arg) {
  pthread_once(&pio.once, init_once);
  pthread_mutex_lock(&pio.call_mu);
  pthread_mutex_lock(&pio.mu);
  if (start_locked() != 0) {
    pthread_mutex_unlock(&pio.mu);
    pthread_mutex_unlock(&pio.call_mu);
    return fn(arg);   /* no helper: inline, in the shared table */
  }
  pio.fn = fn;
  pio.arg = arg;
  uint64_t seq = ++pio.seq;
  pthread_cond_broadcast(&pio.cv);
  while (pio.done != seq) pthread_cond_wait(&pio.cv, &pio.mu);
  int rc = pio.rc;
  pthread_mutex_unlock(&pio.mu);
  pthread_mutex_unlock(&pio.call_mu);
  return rc;
}

int ptp_privio_is_helper(uint32_t tid) {
  return tid != 0 && atomic_load(&pio.tid) == tid;
}

int ptp_privio_private(void) { return atomic_load(&pio.private_table); }
