/*
 * test_ring.c - the handler-to-consumer ring (src/prof/signal/ptp_ring.h): a
 * zero-filled ring is a valid empty ring (the sampler leaves its calloc'd
 * slots untouched), FIFO order across many laps, "full" reported instead of
 * waiting, a claimed but unpublished slot stopping the consumer, and
 * concurrent producers each of whose items arrives exactly once.
 */
#include "pt_test.h"
#include "prof/signal/ptp_ring.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static ptp_ring *ring_new(uint64_t cap) {
  ptp_ring *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->slots = calloc(cap, sizeof *r->slots);   /* zero-filled: no init pass */
  if (!r->slots) { free(r); return NULL; }
  r->cap = cap;
  r->mask = cap - 1;
  return r;
}

static void ring_del(ptp_ring *r) {
  if (!r) return;
  free(r->slots);
  free(r);
}

static int put(ptp_ring *r, uint32_t v) {
  uint64_t pos;
  ptp_slot *s = ptp_ring_claim(r, &pos);
  if (!s) return -1;
  s->tid = v;
  ptp_ring_publish(r, s, pos);
  return 0;
}

static int64_t take(ptp_ring *r) {
  ptp_slot *s = ptp_ring_peek(r);
  if (!s) return -1;
  int64_t v = s->tid;
  ptp_ring_release(r, s);
  return v;
}

PT_TEST(prof_ring_zeroed_fifo_laps) {
  ptp_ring *r = ring_new(8);
  PT_ASSERT(r != NULL);
  PT_ASSERT(ptp_ring_peek(r) == NULL);          /* zero memory: empty */
  uint32_t next_in = 0, next_out = 0;
  for (int lap = 0; lap < 50; lap++) {
    int burst = 1 + lap % 8;                     /* 1..8 items, crossing slot 0 */
    for (int i = 0; i < burst; i++) PT_ASSERT_INT_EQ(put(r, next_in++), 0);
    PT_ASSERT_UINT_EQ(ptp_ring_fill(r), (uint64_t)burst);
    for (int i = 0; i < burst; i++) PT_ASSERT_INT_EQ(take(r), (int64_t)next_out++);
    PT_ASSERT(ptp_ring_peek(r) == NULL);
  }
  ring_del(r);
}

PT_TEST(prof_ring_full_and_unpublished) {
  ptp_ring *r = ring_new(4);
  PT_ASSERT(r != NULL);
  for (uint32_t i = 0; i < 4; i++) PT_ASSERT_INT_EQ(put(r, i), 0);
  PT_ASSERT_INT_EQ(put(r, 99), -1);             /* full: reported, not waited */
  PT_ASSERT_INT_EQ(take(r), 0);
  PT_ASSERT_INT_EQ(put(r, 4), 0);               /* the released slot is reusable */
  PT_ASSERT_INT_EQ(put(r, 99), -1);
  for (int64_t i = 1; i <= 4; i++) PT_ASSERT_INT_EQ(take(r), i);
  /* claimed, not published: the consumer stops there until it is */
  uint64_t pa = 0, pb = 0;
  ptp_slot *a = ptp_ring_claim(r, &pa);
  ptp_slot *b = ptp_ring_claim(r, &pb);
  PT_ASSERT(a != NULL && b != NULL && a != b);
  b->tid = 7;
  ptp_ring_publish(r, b, pb);
  PT_ASSERT(ptp_ring_peek(r) == NULL);
  a->tid = 6;
  ptp_ring_publish(r, a, pa);
  PT_ASSERT_INT_EQ(take(r), 6);
  PT_ASSERT_INT_EQ(take(r), 7);
  PT_ASSERT(ptp_ring_peek(r) == NULL);
  ring_del(r);
}

#define RP_THREADS 4
#define RP_ITEMS 100000u

typedef struct rp_arg { ptp_ring *r; uint32_t id; uint32_t full; } rp_arg;

static void *rp_producer(void *p) {
  rp_arg *a = p;
  for (uint32_t i = 0; i < RP_ITEMS;) {
    if (put(a->r, a->id << 24 | i) == 0) i++;
    else a->full++;
  }
  return NULL;
}

PT_TEST(prof_ring_concurrent_producers) {
  ptp_ring *r = ring_new(64);
  PT_ASSERT(r != NULL);
  pthread_t th[RP_THREADS];
  rp_arg args[RP_THREADS];
  for (uint32_t t = 0; t < RP_THREADS; t++) {
    args[t] = (rp_arg){r, t, 0};
    PT_ASSERT_INT_EQ(pthread_create(&th[t], NULL, rp_producer, &args[t]), 0);
  }
  uint32_t next[RP_THREADS] = {0};
  uint64_t got = 0;
  while (got < (uint64_t)RP_THREADS * RP_ITEMS) {
    int64_t v = take(r);
    if (v < 0) continue;
    uint32_t t = (uint32_t)v >> 24, i = (uint32_t)v & 0xffffff;
    PT_ASSERT(t < RP_THREADS);
    PT_ASSERT_UINT_EQ(i, next[t]);               /* each producer's items in order, once */
    next[t]++;
    got++;
  }
  for (uint32_t t = 0; t < RP_THREADS; t++) PT_ASSERT_INT_EQ(pthread_join(th[t], NULL), 0);
  PT_ASSERT(ptp_ring_peek(r) == NULL);
  ring_del(r);
}
