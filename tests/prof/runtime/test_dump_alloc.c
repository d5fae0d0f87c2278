/*
 * test_dump_alloc.c - allocation failures in the dump path (fault_fixture.h)
 * and out of memory in the aggregation counted as its own cause.
 *
 * The dump loop: a running sampler, some CPU, then ptprof_dump with the
 * dumping thread's 1st, 2nd, ... allocation failing (the drain, the drop
 * accounting, the comments, label and name resolution, symbolization of
 * new addresses, encoding, gzip, the snapshot store), until a dump makes
 * no more. Each run: a clear error (-ENOMEM, logged once as "out of
 * memory") and no snapshot or temp file at all, or a complete snapshot;
 * the sampler goes on; no leak (asan).
 */
#include "pt_test.h"
#include "../fault_fixture.h"
#include "ptprof.h"
#include "prof/ptp_alloc.h"
#include "prof/runtime/ptprof_internal.h"
#include "prof/signal/ptp_producer.h"
#include "sampler_fixture.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct dump_ctx {
  const char *dir;
  ptprof *p;
  char *before;                /* the directory's names before the run */
  char path[1024];             /* the run's snapshot */
  int logged;                  /* error lines logged */
  int logged_before;           /* ... before the run */
  int prev_failed;             /* the run before failed (the error is latched) */
  char last[1024];
} dump_ctx;

static void log_cb(int level, const char *msg, void *user_data) {
  dump_ctx *x = user_data;
  if (level == PTPROF_LOG_ERROR) x->logged++;
  snprintf(x->last, sizeof x->last, "%s", msg);
}

/* The names in dir, sorted, one per line (malloc'd). */
static char *listing(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "ls -a '%s'", dir);
  FILE *f = popen(cmd, "r");
  PT_ASSERT(f);
  char *out = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&out, &len);
  PT_ASSERT(m);
  int c;
  while ((c = fgetc(f)) != EOF) fputc(c, m);
  pclose(f);
  fclose(m);
  return out;
}

static int dump_op(void *arg) {
  dump_ctx *x = arg;
  free(x->before);
  x->before = listing(x->dir);
  x->logged_before = x->logged;
  return ptprof_dump(x->p, x->path, sizeof x->path);
}

static void dump_check(void *arg, int rc, uint64_t n, int failed) {
  dump_ctx *x = arg;
  char *now = listing(x->dir);
  PT_ASSERT(!ptt_has_temp_file(x->dir));
  if (rc == 0) {
    /* a new, complete snapshot (gzip magic, a whole gzip stream) */
    PT_ASSERT_MSG(x->path[0] && !strstr(x->before, strrchr(x->path, '/') + 1),
                  "allocation %llu: no new snapshot (%s)", (unsigned long long)n, x->path);
    size_t len = 0;
    char *data = pt_read_file(x->path, &len);
    PT_ASSERT(data && len > 20 && (unsigned char)data[0] == 0x1f && (unsigned char)data[1] == 0x8b);
    uint32_t isize;
    memcpy(&isize, data + len - 4, 4);       /* gzip trailer: the uncompressed size */
    PT_ASSERT(isize > 0);
    free(data);
  } else {
    PT_ASSERT_MSG(failed && rc == -ENOMEM, "allocation %llu: dump %d", (unsigned long long)n, rc);
    PT_ASSERT_MSG(strcmp(now, x->before) == 0 && !x->path[0],
                  "allocation %llu: a failed dump changed the directory", (unsigned long long)n);
    /* logged once per run of failures, with its cause */
    PT_ASSERT_MSG(x->logged == x->logged_before + !x->prev_failed, "log: %d lines, %d before",
                  x->logged, x->logged_before);
    PT_ASSERT_MSG(strstr(x->last, "out of memory (-12)"), "last log line: %s", x->last);
  }
  x->prev_failed = rc != 0;
  free(now);
  /* new samples for the next run, whose dump then has work to do */
  ptt_fn_hot_a(3000000);
}

PT_TEST_T(prof_alloc_dump, 120000) {
  ptt_fault_require();
  setenv("PTPROF_SYMCACHE", "off", 1);     /* no cache directory of the user's */
  char *dir = pt_tmpdir("alloc-dump");
  dump_ctx x;
  memset(&x, 0, sizeof x);
  x.dir = dir;
  ptprof_options o;
  ptprof_options_init(&o);
  o.hz = 999;
  o.dir = dir;
  o.prefix = "ptt-";
  o.keep = 2;
  o.log = log_cb;
  o.log_user_data = &x;
  PT_ASSERT_INT_EQ(ptprof_new(&x.p, &o), 0);
  PT_ASSERT_INT_EQ(ptprof_start(x.p), 0);
  ptt_fn_hot_a(20000000);
  uint64_t runs = ptt_fault_loop(dump_op, dump_check, &x, 20000);
  ptprof_stats st;
  ptprof_get_stats(x.p, &st);
  printf("# dump: %llu allocations on the dumping thread, each failed in turn: %llu dumps "
         "failed, %llu written\n", (unsigned long long)(runs - 1),
         (unsigned long long)st.dump_errors, (unsigned long long)st.dumps);
  PT_ASSERT(runs > 10 && st.dump_errors > 0);
  /* still sampling, still writing */
  ptt_fn_hot_a(20000000);
  PT_ASSERT_INT_EQ(ptprof_stop(x.p, 1, NULL, 0), 0);
  ptprof_get_stats(x.p, &st);
  PT_ASSERT(st.samples > 0);
  ptprof_del(x.p);
  free(x.before);
  pt_rm_rf(dir);
  free(dir);
  ptt_no_leaks();
}

/* Out of memory in the aggregation is its own cause (it was counted as
 * "ring full"): samples taken while no allocation can succeed are counted
 * under PTPROF_DROP_NO_MEMORY, whichever thread drains them, and the ring
 * full count stays 0. Every thread's allocations fail here
 * (ptp_alloc_fail_all), because the consumer thread may drain first. */
PT_TEST_T(prof_alloc_agg_no_memory, 30000) {
  ptt_fault_require();
  setenv("PTPROF_SYMCACHE", "off", 1);
  char *dir = pt_tmpdir("alloc-agg");
  ptprof *p = ptt_start_sampler_engine(dir, 1, NULL, PTPROF_ENGINE_TIMER);   /* quiet */
  enum { K = 40 };
  uintptr_t frames[3] = { 0x1000, 0x2000, 0 };
  ptp_alloc_fail_all(1);
  for (int i = 0; i < K; i++) {
    frames[2] = 0x3000 + (uintptr_t)i * 16;        /* K distinct stacks */
    PT_ASSERT_INT_EQ(ptp_push_sample((uint32_t)gettid(), 1, 0, frames, 3), 0);
  }
  int rc = ptprof_dump(p, NULL, 0);                /* drains all K, if the consumer did not */
  ptp_alloc_fail_all(0);
  PT_ASSERT_INT_EQ(rc, -ENOMEM);                   /* nothing can be written without memory */
  ptprof_stats st;
  ptprof_get_stats(p, &st);
  PT_ASSERT_MSG(st.drops[PTPROF_DROP_NO_MEMORY] == K, "no_memory drops %llu of %d",
                (unsigned long long)st.drops[PTPROF_DROP_NO_MEMORY], K);
  PT_ASSERT_UINT_EQ(st.drops[PTPROF_DROP_RING_FULL], 0);
  PT_ASSERT_INT_EQ(ptprof_dump(p, NULL, 0), 0);    /* memory back: written again */
  PT_ASSERT_INT_EQ(ptprof_stop(p, 0, NULL, 0), 0);
  ptprof_del(p);
  pt_rm_rf(dir);
  free(dir);
}
