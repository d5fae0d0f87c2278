/*
 * ptcon_instr.h - internals shared by the instrumentation (ptcon_instrument.c,
 * app threads) and its single consumer, the aggregator (ptcon_agg.c, server
 * thread or a unit test).
 *
 * Task slots: a process-wide table of PTCON_MAX_LIVE_TASKS slots, allocated
 * once on first use. A task id is (generation << PTCON_SLOT_BITS) | index,
 * generation >= 1, so ids are nonzero and a reused slot yields a new id.
 * slot.state = (generation << 2) | st, st in {FREE, LIVE, ENDED}:
 *   spawn (any app thread): pops a free index, writes the descriptive fields,
 *     then publishes state = gen|LIVE with release order;
 *   end (any app thread): writes ended_ticks, CAS gen|LIVE -> gen|ENDED
 *     (release); if no consumer is attached it also reaps (CAS ENDED->FREE and
 *     pushes the index back), else it pushes an END event so the consumer
 *     completes and reaps the task at its next drain (if that event is
 *     dropped, the consumer's periodic slot scan does it);
 *   reap (consumer): CAS gen|ENDED -> gen|FREE and pushes the index back.
 * Exactly one CAS wins each transition, so an index is pushed once.
 *
 * Rings: one single-producer single-consumer ring per recording thread,
 * linked into a global list (push-only, never unlinked). A thread's ring is
 * orphaned by its TLS destructor and adopted by the next new thread.
 *
 * Fill mark (wake on work): when a producer's view of its ring's fill
 * reaches a multiple of PTCON_RING_MARK it re-reads head, and if the ring
 * really holds >= PTCON_RING_MARK events it writes the process's wake
 * eventfd (ptcon_wake_fd), once until the consumer re-arms
 * (ptcon_wake_rearm). The consumer therefore needs no polling timer: it
 * drains when a ring is an eighth full, and at its own ticks (every 1 ms
 * while rings keep filling fast). The eventfd
 * is created once and never closed, so a producer racing a stopping server
 * never writes a closed (or reused) descriptor.
 *
 * Clock: "ticks" are rdtsc on x86-64 when the kernel itself uses the TSC,
 * or when the CPU guarantees an invariant TSC (CPUID 0x80000007 EDX bit 8,
 * or the constant_tsc + nonstop_tsc flags: a constant rate that does not
 * stop in idle states), else CLOCK_MONOTONIC nanoseconds. The consumer
 * converts with ptcon_clock_to_mono_ns(), calibrated against
 * CLOCK_MONOTONIC. The TSCs of different CPUs may then be offset by a
 * little: durations are measured on one thread and clamped at 0.
 */
#ifndef PTCON_INSTR_H
#define PTCON_INSTR_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "ptprof_console.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define PTCON_SLOT_BITS 15u
#define PTCON_SLOT_MASK ((1u << PTCON_SLOT_BITS) - 1u)
_Static_assert((1u << PTCON_SLOT_BITS) == PTCON_MAX_LIVE_TASKS, "slot bits");

enum { PTCON_SLOT_FREE = 0, PTCON_SLOT_LIVE = 1, PTCON_SLOT_ENDED = 2 };

typedef struct ptcon_slot_field {
  const char *name;
  uint8_t type;   /* ptcon_field_type */
  uint64_t num;   /* u64 / i64 bits / bool */
  char str[PTCON_FIELD_STR_MAX];
} ptcon_slot_field;

typedef struct ptcon_slot {
  _Atomic uint64_t state;
  _Atomic uint32_t next_free;   /* free-list link: index + 1, 0 = end */
  uint32_t line;
  uint64_t seq;                 /* display id (task.id field), 1, 2, ... */
  uint64_t created_ticks;
  _Atomic uint64_t ended_ticks;
  const char *kind;
  const char *file;
  uint32_t nfields;
  char name[PTCON_NAME_MAX];
  ptcon_slot_field fields[PTCON_MAX_FIELDS];
} ptcon_slot;

/* Event word 0: (type << 60) | id. Ids stay below 2^60 (generations below
 * 2^45 per slot). */
enum {
  PTCON_EV_POLL_BEGIN = 1,
  PTCON_EV_POLL_END,
  PTCON_EV_WAKE,
  PTCON_EV_SELF_WAKE,
  PTCON_EV_WAKER_CLONE,
  PTCON_EV_WAKER_DROP,
  PTCON_EV_END,   /* a hint only: the slot's ENDED state is the truth */
};
#define PTCON_EV_ID_MASK ((UINT64_C(1) << 60) - 1)

typedef struct ptcon_event {
  uint64_t w0;
  uint64_t ticks;
} ptcon_event;

#define PTCON_RING_CAP 16384u  /* events; power of two; 256 KiB per thread */
#define PTCON_RING_MARK (PTCON_RING_CAP / 8)  /* fill that wakes the consumer */

typedef struct ptcon_ring {
  /* producer side */
  _Alignas(64) _Atomic uint64_t tail;
  uint64_t cached_head;          /* producer's last view of head */
  _Atomic uint64_t dropped;      /* written by the producer only */
  /* consumer side */
  _Alignas(64) _Atomic uint64_t head;
  /* list management */
  _Alignas(64) _Atomic int owned;  /* 1 while a thread records into it */
  struct ptcon_ring *next;         /* immutable once published */
  ptcon_event ev[PTCON_RING_CAP];
} ptcon_ring;

/* Global instrumentation state (instrument.c). */
extern ptcon_slot *ptcon_slots;                 /* NULL until first spawn */
extern _Atomic uint32_t ptcon_slot_hwm;         /* indices < hwm were used */
extern _Atomic int ptcon_consumer_active;       /* 1 while a consumer drains */
extern _Atomic(ptcon_ring *) ptcon_rings;       /* list head */
extern _Atomic uint64_t ptcon_spawn_dropped;    /* spawns refused (table full) */
extern int ptcon_clock_tsc;                     /* ticks are TSC */
extern _Atomic int ptcon_wake_pending;          /* a fill-mark wake was sent */

static inline uint64_t ptcon_ticks(void) {
#if defined(__x86_64__)
  if (__builtin_expect(ptcon_clock_tsc, 1)) return __rdtsc();
#endif
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ptcon_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Ensures the slot table exists (allocates once). 0 or -ENOMEM. */
int ptcon_slots_init(void);
/* Consumer side: returns the slot index to the free list after a successful
 * ENDED -> FREE transition for generation gen; no-op if the CAS fails
 * (someone else reaped). Returns 1 if this call reaped. */
int ptcon_slot_reap(uint32_t idx, uint64_t gen);
/* Consumer attach/detach: at most one consumer at a time. attach returns
 * -EBUSY if one is attached. */
int ptcon_consumer_attach(void);
void ptcon_consumer_detach(void);

/* The process's wake eventfd (created on first call, never closed; the
 * consumer polls it for reading). Returns the fd or a negative errno. */
int ptcon_wake_fd(void);
/* Consumer: allow the next fill-mark wake (call before draining). */
void ptcon_wake_rearm(void);

/* The tick source. ptcon_clock_choose is the rule (pure, for tests):
 * kernel_cs is the kernel's current clocksource ("tsc\n", "kvm-clock\n",
 * NULL if unknown), cpu_invariant is nonzero when the CPU guarantees an
 * invariant TSC. Returns 1 for the TSC, 0 for CLOCK_MONOTONIC. */
int ptcon_clock_choose(const char *kernel_cs, int cpu_invariant);
/* Whether this CPU guarantees an invariant TSC (CPUID, then /proc/cpuinfo). */
int ptcon_cpu_invariant_tsc(void);
/* Forces the tick source (1 TSC, 0 CLOCK_MONOTONIC; x86-64 only honours 1):
 * for benchmarks and tests, before any consumer attaches or task is
 * spawned. Returns 0, -EBUSY if a consumer is attached, -ENOTSUP for the
 * TSC elsewhere. */
int ptcon_clock_force(int tsc);

/* Clock calibration (consumer side): ticks -> CLOCK_MONOTONIC ns. */
typedef struct ptcon_clock {
  uint64_t t0_ticks, t0_mono;
  double ns_per_tick;
  uint64_t last_ticks, last_mono; /* latest calibration point */
} ptcon_clock;
void ptcon_clock_init(ptcon_clock *c);      /* may sleep ~5 ms when TSC */
void ptcon_clock_refine(ptcon_clock *c);    /* improves ns_per_tick over time */
uint64_t ptcon_clock_to_mono_ns(const ptcon_clock *c, uint64_t ticks);

#endif
