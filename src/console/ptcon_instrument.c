/*
 * ptcon_instrument.c - the application-thread side of the task console: task slots,
 * per-thread event rings, the tick clock. See ptcon_instr.h for the slot and
 * ring protocols.
 *
 * Every function here that an app thread calls is lock-free and does not
 * allocate, except the first event on a thread (one ring per thread, reused
 * after the thread exits) and the first spawn of the process (the slot table).
 * None of it is async-signal-safe.
 *
 * CPU per task (ptp_labels.h): the poll seam also sets the thread's current
 * task for the sampler (ptp_label_set.h, two TLS stores); the sampler names
 * tasks at dump time through resolve_for_sampler (registered with the first
 * slot table) and, for a task that ended, through the copy ptcon_task_end
 * hands it before the slot can be reused (only while a sampler runs: then
 * an end takes the labels module's mutex once).
 */
#include "console/ptcon_instr.h"
#include "prof/runtime/ptp_labels.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

ptcon_slot *ptcon_slots;
_Atomic uint32_t ptcon_slot_hwm;
_Atomic int ptcon_consumer_active;
_Atomic(ptcon_ring *) ptcon_rings;
_Atomic uint64_t ptcon_spawn_dropped;
int ptcon_clock_tsc;
_Atomic int ptcon_wake_pending;
static _Atomic int g_wake_fd = -1;
static pthread_mutex_t g_wake_mu = PTHREAD_MUTEX_INITIALIZER;

static _Atomic(ptcon_slot *) g_slots_pub;
static _Atomic uint64_t g_free_head;   /* (tag << 32) | (index + 1) */
static _Atomic uint64_t g_seq;
static _Atomic uint64_t g_live;
static _Atomic uint64_t g_threads;
static pthread_key_t g_ring_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static __thread ptcon_ring *t_ring;
static __thread uint64_t t_current;    /* task being polled on this thread */

int ptcon_clock_choose(const char *kernel_cs, int cpu_invariant) {
#if defined(__x86_64__)
  if (kernel_cs && strncmp(kernel_cs, "tsc", 3) == 0 && (kernel_cs[3] == 0 || kernel_cs[3] == '\n'))
    return 1;   /* the kernel vouches for it */
  return cpu_invariant ? 1 : 0;
#else
  (void)kernel_cs;
  (void)cpu_invariant;
  return 0;
#endif
}

int ptcon_cpu_invariant_tsc(void) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000007u &&
      __get_cpuid(0x80000007u, &a, &b, &c, &d) && (d & (1u << 8)))
    return 1;
  /* Some hypervisors hide the leaf but the kernel still reports the flags. */
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f) return 0;
  char line[4096];
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    found = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
    break;
  }
  fclose(f);
  return found;
#else
  return 0;
#endif
}

/* Decides once, before main, whether ticks can be the TSC. */
__attribute__((constructor)) static void ptcon_clock_select(void) {
#if defined(__x86_64__)
  char buf[32] = {0};
  const char *cs = NULL;
  FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (f) {
    if (fgets(buf, sizeof buf, f)) cs = buf;
    fclose(f);
  }
  ptcon_clock_tsc = ptcon_clock_choose(cs, cs && strncmp(cs, "tsc", 3) == 0 ? 0 : ptcon_cpu_invariant_tsc());
#endif
}

int ptcon_clock_force(int tsc) {
  if (atomic_load(&ptcon_consumer_active)) return -EBUSY;
#if !defined(__x86_64__)
  if (tsc) return -ENOTSUP;
#endif
  ptcon_clock_tsc = tsc ? 1 : 0;
  return 0;
}

int ptcon_wake_fd(void) {
  int fd = atomic_load_explicit(&g_wake_fd, memory_order_acquire);
  if (fd >= 0) return fd;
  pthread_mutex_lock(&g_wake_mu);
  fd = atomic_load_explicit(&g_wake_fd, memory_order_relaxed);
  if (fd < 0) {
    fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) fd = -errno;
    else atomic_store_explicit(&g_wake_fd, fd, memory_order_release);
  }
  pthread_mutex_unlock(&g_wake_mu);
  return fd;
}

void ptcon_wake_rearm(void) { atomic_store_explicit(&ptcon_wake_pending, 0, memory_order_release); }

/* Off the fast path: the producer's stale view says the ring reached a
 * multiple of the mark. Re-read head; wake the consumer if it is really
 * that full and no wake is outstanding. */
static __attribute__((noinline)) void ring_mark(ptcon_ring *r, uint64_t tail) {
  r->cached_head = atomic_load_explicit(&r->head, memory_order_acquire);
  if (tail - r->cached_head < PTCON_RING_MARK) return;
  /* No eventfd yet: nobody to wake (and no pending flag to leave set). */
  int fd = atomic_load_explicit(&g_wake_fd, memory_order_acquire);
  if (fd < 0) return;
  if (atomic_exchange_explicit(&ptcon_wake_pending, 1, memory_order_acq_rel)) return;
  uint64_t one = 1;
  if (write(fd, &one, sizeof one) < 0) { /* EAGAIN: already signalled */ }
}

/* The sampler's name lookup for a live task (ptp_task_resolver_fn): a copy
 * of the slot's names, valid when the slot still holds that generation
 * (LIVE or ENDED, not yet reaped) after the copy: a slot is rewritten only
 * after it went FREE, so an unchanged generation means an untorn copy. */
static int resolve_for_sampler(uint64_t id, ptp_task_info *out) {
  ptcon_slot *slots = atomic_load_explicit(&g_slots_pub, memory_order_acquire);
  uint32_t idx = (uint32_t)(id & PTCON_SLOT_MASK);
  uint64_t gen = (id & PTCON_EV_ID_MASK) >> PTCON_SLOT_BITS;
  if (!slots || id == 0 || idx >= PTCON_MAX_LIVE_TASKS) return -ENOENT;
  ptcon_slot *s = &slots[idx];
  uint64_t st = atomic_load_explicit(&s->state, memory_order_acquire);
  if (st >> 2 != gen || (st & 3) == PTCON_SLOT_FREE) return -ENOENT;
  out->seq = s->seq;
  out->file = s->file;
  out->line = s->line;
  memcpy(out->name, s->name, sizeof out->name < sizeof s->name ? sizeof out->name : sizeof s->name);
  out->name[sizeof out->name - 1] = 0;
  atomic_thread_fence(memory_order_acquire);
  uint64_t st2 = atomic_load_explicit(&s->state, memory_order_relaxed);
  if (st2 >> 2 != gen || (st2 & 3) == PTCON_SLOT_FREE) return -EAGAIN;
  return 0;
}

int ptcon_slots_init(void) {
  if (atomic_load_explicit(&g_slots_pub, memory_order_acquire)) return 0;
  /* mmap'd zero pages: only the slots actually used become resident. */
  void *p = mmap(NULL, sizeof(ptcon_slot) * PTCON_MAX_LIVE_TASKS, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -ENOMEM;
  ptcon_slot *expect = NULL;
  if (!atomic_compare_exchange_strong_explicit(&g_slots_pub, &expect, (ptcon_slot *)p,
                                               memory_order_acq_rel, memory_order_acquire)) {
    munmap(p, sizeof(ptcon_slot) * PTCON_MAX_LIVE_TASKS);  /* lost the race */
    return 0;
  }
  ptcon_slots = p;
  ptp_labels_set_task_resolver(resolve_for_sampler);
  return 0;
}

static inline ptcon_slot *slots_get(void) {
  return atomic_load_explicit(&g_slots_pub, memory_order_acquire);
}

/* Treiber stack pop; the tag defeats ABA. Returns index or -1. */
static int64_t free_pop(ptcon_slot *slots) {
  uint64_t h = atomic_load_explicit(&g_free_head, memory_order_acquire);
  for (;;) {
    uint32_t top = (uint32_t)h;
    if (top == 0) break;
    uint32_t next = atomic_load_explicit(&slots[top - 1].next_free, memory_order_relaxed);
    uint64_t nh = ((h >> 32) + 1) << 32 | next;
    if (atomic_compare_exchange_weak_explicit(&g_free_head, &h, nh, memory_order_acq_rel,
                                              memory_order_acquire))
      return top - 1;
  }
  uint32_t idx = atomic_fetch_add_explicit(&ptcon_slot_hwm, 1, memory_order_relaxed);
  if (idx < PTCON_MAX_LIVE_TASKS) return idx;
  atomic_fetch_sub_explicit(&ptcon_slot_hwm, 1, memory_order_relaxed);
  return -1;
}

static void free_push(ptcon_slot *slots, uint32_t idx) {
  uint64_t h = atomic_load_explicit(&g_free_head, memory_order_relaxed);
  for (;;) {
    atomic_store_explicit(&slots[idx].next_free, (uint32_t)h, memory_order_relaxed);
    uint64_t nh = ((h >> 32) + 1) << 32 | (idx + 1);
    if (atomic_compare_exchange_weak_explicit(&g_free_head, &h, nh, memory_order_release,
                                              memory_order_relaxed))
      return;
  }
}

uint64_t ptcon_task_spawn(const char *name, const char *kind, const char *file, uint32_t line,
                          const ptcon_field *fields, size_t nfields) {
  if (ptcon_slots_init() != 0) {
    atomic_fetch_add_explicit(&ptcon_spawn_dropped, 1, memory_order_relaxed);
    return 0;
  }
  ptcon_slot *slots = slots_get();
  int64_t idx = free_pop(slots);
  if (idx < 0) {
    atomic_fetch_add_explicit(&ptcon_spawn_dropped, 1, memory_order_relaxed);
    return 0;
  }
  ptcon_slot *s = &slots[idx];
  uint64_t gen = (atomic_load_explicit(&s->state, memory_order_relaxed) >> 2) + 1;
  s->seq = atomic_fetch_add_explicit(&g_seq, 1, memory_order_relaxed) + 1;
  s->created_ticks = ptcon_ticks();
  atomic_store_explicit(&s->ended_ticks, 0, memory_order_relaxed);
  s->kind = kind ? kind : "task";
  s->file = file;
  s->line = line;
  snprintf(s->name, sizeof s->name, "%s", name ? name : "");
  if (nfields > PTCON_MAX_FIELDS) nfields = PTCON_MAX_FIELDS;
  s->nfields = fields ? (uint32_t)nfields : 0;
  for (uint32_t i = 0; i < s->nfields; i++) {
    ptcon_slot_field *f = &s->fields[i];
    f->name = fields[i].name ? fields[i].name : "";
    f->type = (uint8_t)fields[i].type;
    f->str[0] = 0;
    f->num = 0;
    switch (fields[i].type) {
    case PTCON_FIELD_STR:
      snprintf(f->str, sizeof f->str, "%s", fields[i].v.str ? fields[i].v.str : "");
      break;
    case PTCON_FIELD_U64: f->num = fields[i].v.u64; break;
    case PTCON_FIELD_I64: f->num = (uint64_t)fields[i].v.i64; break;
    case PTCON_FIELD_BOOL: f->num = fields[i].v.b ? 1 : 0; break;
    default: f->type = PTCON_FIELD_STR; break;
    }
  }
  atomic_fetch_add_explicit(&g_live, 1, memory_order_relaxed);
  atomic_store_explicit(&s->state, gen << 2 | PTCON_SLOT_LIVE, memory_order_release);
  return gen << PTCON_SLOT_BITS | (uint64_t)idx;
}

int ptcon_slot_reap(uint32_t idx, uint64_t gen) {
  ptcon_slot *slots = slots_get();
  if (!slots || idx >= PTCON_MAX_LIVE_TASKS) return 0;
  uint64_t expect = gen << 2 | PTCON_SLOT_ENDED;
  if (!atomic_compare_exchange_strong_explicit(&slots[idx].state, &expect,
                                               gen << 2 | PTCON_SLOT_FREE,
                                               memory_order_acq_rel, memory_order_relaxed))
    return 0;
  atomic_fetch_sub_explicit(&g_live, 1, memory_order_relaxed);
  free_push(slots, idx);
  return 1;
}

/* ---- rings -------------------------------------------------------------- */

static void ring_orphan(void *p) {
  ptcon_ring *r = p;
  atomic_store_explicit(&r->owned, 0, memory_order_release);
}

static void key_init(void) { (void)pthread_key_create(&g_ring_key, ring_orphan); }

/* Registers (once per thread) this thread's ring: adopts an orphan, or
 * allocates one. NULL when out of memory (events then go uncounted). */
static __attribute__((noinline)) ptcon_ring *ring_register(void) {
  pthread_once(&g_key_once, key_init);
  ptcon_ring *r;
  for (r = atomic_load_explicit(&ptcon_rings, memory_order_acquire); r; r = r->next) {
    int expect = 0;
    if (atomic_load_explicit(&r->owned, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong_explicit(&r->owned, &expect, 1, memory_order_acq_rel,
                                                memory_order_relaxed))
      break;
  }
  if (!r) {
    r = aligned_alloc(64, sizeof *r);
    if (!r) return NULL;
    memset(r, 0, offsetof(ptcon_ring, ev));
    atomic_store_explicit(&r->owned, 1, memory_order_relaxed);
    ptcon_ring *head = atomic_load_explicit(&ptcon_rings, memory_order_relaxed);
    do {
      r->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&ptcon_rings, &head, r, memory_order_release,
                                                    memory_order_relaxed));
    atomic_fetch_add_explicit(&g_threads, 1, memory_order_relaxed);
  } else {
    /* The previous owner's producer-side cache may be stale. */
    r->cached_head = atomic_load_explicit(&r->head, memory_order_acquire);
  }
  (void)pthread_setspecific(g_ring_key, r);
  t_ring = r;
  return r;
}

static inline void ring_push(uint64_t type, uint64_t id) {
  ptcon_ring *r = t_ring;
  if (__builtin_expect(r == NULL, 0)) {
    r = ring_register();
    if (!r) return;
  }
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  if (__builtin_expect(tail - r->cached_head >= PTCON_RING_CAP, 0)) {
    r->cached_head = atomic_load_explicit(&r->head, memory_order_acquire);
    if (tail - r->cached_head >= PTCON_RING_CAP) {
      atomic_store_explicit(&r->dropped,
                            atomic_load_explicit(&r->dropped, memory_order_relaxed) + 1,
                            memory_order_relaxed);
      return;
    }
  }
  ptcon_event *e = &r->ev[tail & (PTCON_RING_CAP - 1)];
  e->w0 = type << 60 | (id & PTCON_EV_ID_MASK);
  e->ticks = ptcon_ticks();
  atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
  if (__builtin_expect(((tail + 1 - r->cached_head) & (PTCON_RING_MARK - 1)) == 0, 0))
    ring_mark(r, tail + 1);
}

void ptcon_task_end(uint64_t id) {
  ptcon_slot *slots = slots_get();
  if (!slots || id == 0) return;
  uint32_t idx = (uint32_t)(id & PTCON_SLOT_MASK);
  uint64_t gen = (id & PTCON_EV_ID_MASK) >> PTCON_SLOT_BITS;
  ptcon_slot *s = &slots[idx];
  if (t_current == id) t_current = 0;
  uint64_t expect = gen << 2 | PTCON_SLOT_LIVE;
  /* The sampler keeps the name for samples not written yet (before the
   * slot can be reaped and reused; a no-op while no sampler runs). */
  if (atomic_load_explicit(&s->state, memory_order_acquire) == expect)
    ptp_labels_task_ended(id, s->seq, s->name, s->file, s->line);
  uint64_t t = ptcon_ticks();
  atomic_store_explicit(&s->ended_ticks, t ? t : 1, memory_order_relaxed);
  if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, gen << 2 | PTCON_SLOT_ENDED,
                                               memory_order_release, memory_order_relaxed))
    return;  /* stale or double end */
  /* Nobody will reap it: do it now. If a consumer attaches in between, one
   * of the two CASes in ptcon_slot_reap wins. */
  if (!atomic_load_explicit(&ptcon_consumer_active, memory_order_acquire))
    ptcon_slot_reap(idx, gen);
  else
    ring_push(PTCON_EV_END, id);   /* prompt reaping; the scan is the fallback */
}

#define ACTIVE() __builtin_expect(atomic_load_explicit(&ptcon_consumer_active, memory_order_relaxed), 1)

void ptcon_task_poll_begin(uint64_t id) {
  t_current = id;
  ptp_label_set_poll_begin(id);
  if (ACTIVE()) ring_push(PTCON_EV_POLL_BEGIN, id);
}

void ptcon_task_poll_end(uint64_t id) {
  if (t_current == id) t_current = 0;
  ptp_label_set_poll_end();
  if (ACTIVE()) ring_push(PTCON_EV_POLL_END, id);
}

void ptcon_task_wake(uint64_t id) {
  if (ACTIVE()) ring_push(t_current == id ? PTCON_EV_SELF_WAKE : PTCON_EV_WAKE, id);
}

void ptcon_task_waker_clone(uint64_t id) {
  if (ACTIVE()) ring_push(PTCON_EV_WAKER_CLONE, id);
}

void ptcon_task_waker_drop(uint64_t id) {
  if (ACTIVE()) ring_push(PTCON_EV_WAKER_DROP, id);
}

void ptcon_instrument_get_stats(ptcon_instrument_stats *out) {
  uint64_t dropped = atomic_load_explicit(&ptcon_spawn_dropped, memory_order_relaxed);
  for (ptcon_ring *r = atomic_load_explicit(&ptcon_rings, memory_order_acquire); r; r = r->next)
    dropped += atomic_load_explicit(&r->dropped, memory_order_relaxed);
  out->live_tasks = atomic_load_explicit(&g_live, memory_order_relaxed);
  out->dropped_events = dropped;
  out->threads = atomic_load_explicit(&g_threads, memory_order_relaxed);
}

int ptcon_consumer_attach(void) {
  int expect = 0;
  int rc = ptcon_slots_init();
  if (rc) return rc;
  if (!atomic_compare_exchange_strong_explicit(&ptcon_consumer_active, &expect, 1,
                                               memory_order_acq_rel, memory_order_relaxed))
    return -EBUSY;
  return 0;
}

void ptcon_consumer_detach(void) {
  atomic_store_explicit(&ptcon_consumer_active, 0, memory_order_release);
  /* Slots that ended while we were attached are reaped by the detaching
   * consumer (aggregator) before it calls this; any that end from now on
   * are reaped by ptcon_task_end itself. Sweep once more for the window in
   * between. */
  ptcon_slot *slots = slots_get();
  if (!slots) return;
  uint32_t hwm = atomic_load_explicit(&ptcon_slot_hwm, memory_order_acquire);
  for (uint32_t i = 0; i < hwm && i < PTCON_MAX_LIVE_TASKS; i++) {
    uint64_t st = atomic_load_explicit(&slots[i].state, memory_order_acquire);
    if ((st & 3) == PTCON_SLOT_ENDED) ptcon_slot_reap(i, st >> 2);
  }
}

/* ---- clock -------------------------------------------------------------- */

/* A (ticks, mono ns) pair read as close together as we can: the tick value
 * is the midpoint of two reads around clock_gettime, best of 5 tries. */
static void clock_pair(uint64_t *ticks, uint64_t *mono) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t t1 = ptcon_ticks();
    uint64_t m = ptcon_mono_ns();
    uint64_t t2 = ptcon_ticks();
    if (t2 - t1 < best) {
      best = t2 - t1;
      *ticks = t1 + (t2 - t1) / 2;
      *mono = m;
    }
  }
}

void ptcon_clock_init(ptcon_clock *c) {
  memset(c, 0, sizeof *c);
  c->ns_per_tick = 1.0;
  if (!ptcon_clock_tsc) return;
  clock_pair(&c->t0_ticks, &c->t0_mono);
  /* A first estimate over ~5 ms; refined at every collect afterwards, so
   * the error shrinks as the baseline grows. Slept, not spun: spinning
   * cost every profiling daemon and TUI 5 ms of CPU at start
   * (bench/daemon, docs/performance.md). */
  uint64_t t1, m1;
  for (;;) {
    clock_pair(&t1, &m1);
    if (m1 - c->t0_mono >= 5000000u) break;
    uint64_t left = 5000000u - (m1 - c->t0_mono);
    struct timespec ts = {0, (long)left};
    nanosleep(&ts, NULL);   /* EINTR: the loop re-reads the clocks */
  }
  c->ns_per_tick = (double)(m1 - c->t0_mono) / (double)(t1 - c->t0_ticks);
  c->last_ticks = t1;
  c->last_mono = m1;
}

void ptcon_clock_refine(ptcon_clock *c) {
  if (!ptcon_clock_tsc) return;
  uint64_t t, m;
  clock_pair(&t, &m);
  if (t > c->t0_ticks && m > c->t0_mono) {
    c->ns_per_tick = (double)(m - c->t0_mono) / (double)(t - c->t0_ticks);
    c->last_ticks = t;
    c->last_mono = m;
  }
}

uint64_t ptcon_clock_to_mono_ns(const ptcon_clock *c, uint64_t ticks) {
  if (!ptcon_clock_tsc) return ticks;
  /* Anchor at the latest calibration point: errors grow with distance
   * from it, and most events are recent. */
  uint64_t at = c->last_ticks ? c->last_ticks : c->t0_ticks;
  uint64_t am = c->last_ticks ? c->last_mono : c->t0_mono;
  double d = ((double)ticks - (double)at) * c->ns_per_tick;
  double r = (double)am + d;
  return r <= 0 ? 0 : (uint64_t)r;
}
