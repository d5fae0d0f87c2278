/* ptcon_bucket.c - see ptcon_bucket.h. One thread; exact integer time. */
#include "console/ptcon_bucket.h"

void ptcon_bucket_init(ptcon_bucket *b, uint32_t rate_per_s, uint32_t burst, uint64_t now) {
  if (!rate_per_s) rate_per_s = 1;
  b->period_ns = 1000000000u / rate_per_s;
  if (!b->period_ns) b->period_ns = 1;
  b->burst = burst ? burst : 1;
  b->tokens = b->burst;
  b->stamp = now;
}

/* Adds the tokens earned between stamp and now. A full bucket earns
 * nothing: its partial period starts when a token is taken. */
static void refill(ptcon_bucket *b, uint64_t now) {
  if (b->tokens >= b->burst) {
    if (now > b->stamp) b->stamp = now;
    return;
  }
  if (now <= b->stamp) return;
  uint64_t k = (now - b->stamp) / b->period_ns;
  if (k >= (uint64_t)(b->burst - b->tokens)) {
    b->tokens = b->burst;
    b->stamp = now;
  } else {
    b->tokens += (uint32_t)k;
    b->stamp += k * b->period_ns;
  }
}

uint32_t ptcon_bucket_peek(ptcon_bucket *b, uint64_t now) {
  refill(b, now);
  return b->tokens;
}

int ptcon_bucket_take(ptcon_bucket *b, uint64_t now) {
  refill(b, now);
  if (!b->tokens) return 0;
  b->tokens--;
  return 1;
}

uint32_t ptcon_bucket_take_n(ptcon_bucket *b, uint64_t now, uint32_t n) {
  refill(b, now);
  uint32_t k = n < b->tokens ? n : b->tokens;
  b->tokens -= k;
  return k;
}

void ptcon_bucket_give(ptcon_bucket *b, uint32_t n) {
  /* stamp stays: it starts the partial period of the tokens still
   * missing, or is reset by refill once the bucket is full. */
  b->tokens = n >= b->burst - b->tokens ? b->burst : b->tokens + n;
}

uint64_t ptcon_bucket_next_n(const ptcon_bucket *b, uint64_t now, uint32_t n) {
  if (n > b->burst) n = b->burst;
  if (b->tokens >= n) return now;
  uint64_t t = b->stamp + (uint64_t)(n - b->tokens) * b->period_ns;
  return t > now ? t : now;
}

uint64_t ptcon_bucket_next(const ptcon_bucket *b, uint64_t now) {
  /* Empty means short of the burst, so stamp starts the partial period
   * (refill moves it only when a token is earned, i.e. by then). */
  if (b->tokens) return now;
  uint64_t t = b->stamp + b->period_ns;
  return t > now ? t : now;
}
