/*
 * fuzz_grpc.c - libFuzzer target for the console's gRPC layer
 * (src/console/ptcon_grpc.c, with nghttp2 and the service behind it): the
 * input is what a client sends on one connection, cut into chunks; between
 * chunks time advances (the time-outs, ticks and budget run) and the
 * server's output is taken (or, for odd chunk lengths, left queued: a
 * client that does not read). Must not crash; memory stays bounded (the
 * run sets -rss_limit_mb and -malloc_limit_mb). Built by
 * tests/console/console_fuzz_grpc_test.sh with
 * clang -fsanitize=fuzzer,address,undefined.
 *
 * Input: repeated [n (1 byte)][n bytes]; a chunk with n == 0 ends the
 * connection and opens a new one on the same service.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "console/ptcon_agg.h"
#include "console/ptcon_grpc.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ptcon_agg *g_agg;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  if (ptcon_agg_new(&g_agg, 60000, 64) != 0) abort();
  /* A few tasks, some with stats, so Updates and TaskDetails have content. */
  for (int i = 0; i < 40; i++) {
    uint64_t t = ptcon_task_spawn("fuzz.task", i % 3 ? "task" : "blocking", "fuzz.c",
                                  (uint32_t)(i % 7), NULL, 0);
    ptcon_task_poll_begin(t);
    ptcon_task_wake(t);
    ptcon_task_poll_end(t);
    if (i % 4 == 0) ptcon_task_end(t);
  }
  ptcon_agg_collect(g_agg, ptcon_mono_ns());
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t now = 1000000000000ull;
  /* Small limits so that every bound is reachable by short inputs. */
  ptcon_grpc_limits lim = {
    .publish_interval_ns = 100000000u,
    .max_message_bytes = 4096,
    .max_queued_bytes = 64u * 1024,
    .max_total_queued_bytes = 96u * 1024,
    .stall_timeout_ns = 1000000000u,
    .idle_timeout_ns = 2000000000u,
    .preface_timeout_ns = 500000000u,
    .watch_rate_per_s = 10,
    .watch_burst = 4,
  };
  ptcon_grpc *g;
  if (ptcon_grpc_new(&g, g_agg, &lim, now) != 0) return 0;
  ptcon_gconn *c = NULL;
  size_t off = 0;
  while (off < size) {
    if (!c && ptcon_gconn_new(g, NULL, now, &c) != 0) break;
    size_t n = data[off++];
    if (n > size - off) n = size - off;
    if (n == 0) {
      ptcon_gconn_del(c);
      c = NULL;
      continue;
    }
    /* Exact-size copy so ASan sees any over-read. */
    uint8_t *chunk = malloc(n);
    if (!chunk) break;
    memcpy(chunk, data + off, n);
    off += n;
    int rc = ptcon_gconn_recv(c, chunk, n, now);
    free(chunk);
    if (rc == 0 && !(n & 1)) {
      const uint8_t *out;
      for (int i = 0; i < 64 && ptcon_gconn_send(c, &out, now) > 0; i++) {
      }
    }
    now += 50000000u;
    ptcon_grpc_timer(g, now);
    if (ptcon_grpc_queued(g) > lim.max_total_queued_bytes) abort();
    if (ptcon_gconn_closing(c)) {
      ptcon_gconn_del(c);
      c = NULL;
    }
  }
  ptcon_grpc_del(g);
  return 0;
}
