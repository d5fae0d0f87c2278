/*
 * ptcon_bucket.h - a token bucket on the caller's clock: at most `burst`
 * tokens, one more every `period_ns` (1 s / rate). The console takes one
 * per new connection and one per new watch call, so that no client, however
 * it loops, makes the server thread do more than a bounded amount of work a
 * second (docs/console.md "Bounds").
 *
 * Time is the caller's `now` (CLOCK_MONOTONIC ns, or any made-up moment in
 * a test) and the arithmetic is exact integers: with rate 16/s a token
 * comes back exactly every 62500000 ns after the one taken from a full
 * bucket. A `now` earlier than the last one seen adds nothing.
 *
 * Threads: one (the owner's). No allocation; cannot fail.
 */
#ifndef PTCON_BUCKET_H
#define PTCON_BUCKET_H

#include <stdint.h>

typedef struct ptcon_bucket {
  uint64_t period_ns;   /* ns per token; >= 1 */
  uint32_t burst;       /* capacity; >= 1 */
  uint32_t tokens;      /* 0 .. burst */
  uint64_t stamp;       /* tokens < burst: when the partial period began */
} ptcon_bucket;

/* A full bucket at now. rate_per_s 0 is taken as 1; burst 0 as 1. */
void ptcon_bucket_init(ptcon_bucket *b, uint32_t rate_per_s, uint32_t burst, uint64_t now);
/* Tokens available at now (after adding those earned since). */
uint32_t ptcon_bucket_peek(ptcon_bucket *b, uint64_t now);
/* Takes one token at now: 1 if there was one, 0 if the bucket is empty. */
int ptcon_bucket_take(ptcon_bucket *b, uint64_t now);
/* Takes up to n tokens at now; returns how many it took (0 .. n). */
uint32_t ptcon_bucket_take_n(ptcon_bucket *b, uint64_t now, uint32_t n);
/* Gives back n tokens taken but not used (never beyond the burst). */
void ptcon_bucket_give(ptcon_bucket *b, uint32_t n);
/* When the next token is available: now if one is (or has been earned by
 * now), else the moment it will be. Does not change the bucket. */
uint64_t ptcon_bucket_next(const ptcon_bucket *b, uint64_t now);
/* When n tokens (at most the burst) are available. Does not change the
 * bucket. */
uint64_t ptcon_bucket_next_n(const ptcon_bucket *b, uint64_t now, uint32_t n);

#endif
