/*
 * sampler_fixture.c - helpers of the sampler's unit tests (see
 * sampler_fixture.h).
 */
#include "pt_test.h"
#include "prof/runtime/ptp_perf.h"
#include "prof/runtime/ptprof_internal.h"
#include "sampler_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

int64_t ptt_thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The CPU time of the thread behind clk (pthread_getcpuclockid). */
int64_t ptt_clock_ns(clockid_t clk) {
  struct timespec ts;
  PT_ASSERT_INT_EQ(clock_gettime(clk, &ts), 0);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits until the thread behind clk has used CPU up to `until` (its CPU
 * clock), in 1 ms naps: a readiness condition, not a duration. The thread
 * must be runnable; the test's own time-out bounds the wait. */
void ptt_wait_cpu(clockid_t clk, int64_t until) {
  while (ptt_clock_ns(clk) < until) nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}
static _Atomic uint64_t g_sink; /* atomic: several worker threads add to it */

HOT SECTION("ptt_hot_a") void ptt_fn_hot_a(int64_t cpu_ns) {
  uint64_t acc = 1;
  int64_t end = ptt_thread_cpu_ns() + cpu_ns;
  while (ptt_thread_cpu_ns() < end) { SPIN_ROUND(acc); }
  g_sink += acc;
}

HOT SECTION("ptt_hot_b") void ptt_fn_hot_b(int64_t cpu_ns) {
  uint64_t acc = 3;
  int64_t end = ptt_thread_cpu_ns() + cpu_ns;
  while (ptt_thread_cpu_ns() < end) { SPIN_ROUND(acc); }
  g_sink += acc;
}

HOT SECTION("ptt_hot_c") void ptt_fn_hot_c(int64_t cpu_ns) {
  uint64_t acc = 5;
  int64_t end = ptt_thread_cpu_ns() + cpu_ns;
  while (ptt_thread_cpu_ns() < end) { SPIN_ROUND(acc); }
  g_sink += acc;
}

/* A short thread's life: three functions in a fixed order (8 : 10 : 12). */
HOT SECTION("ptt_three") void ptt_fn_three(int64_t cpu_ns) {
  ptt_fn_hot_a(cpu_ns * 8 / 30);
  ptt_fn_hot_b(cpu_ns * 10 / 30);
  ptt_fn_hot_c(cpu_ns * 12 / 30);
  __asm__ volatile("" ::: "memory");   /* a call, not a tail jump */
}

/* Spends most of its time inside libc's malloc/free/memset. */
HOT SECTION("ptt_malloc_caller") void ptt_fn_malloc_caller(int64_t cpu_ns) {
  int64_t end = ptt_thread_cpu_ns() + cpu_ns;
  void *keep[64] = { 0 };
  unsigned k = 0;
  while (ptt_thread_cpu_ns() < end) {
    for (int i = 0; i < 2000; i++) {
      size_t sz = 16 + ((k * 2654435761u) % 4000);
      free(keep[k % 64]);
      keep[k % 64] = malloc(sz);
      if (keep[k % 64]) memset(keep[k % 64], (int)k, sz);
      k++;
    }
  }
  for (int i = 0; i < 64; i++) free(keep[i]);
}

int ptt_in_range(uintptr_t pc, const char *lo, const char *hi) {
  return pc >= (uintptr_t)lo && pc < (uintptr_t)hi;
}

/* Whether frame i of a sample lies in [lo, hi) (callers as RA - 1). */
int ptt_frame_in(const uintptr_t *f, int i, const char *lo, const char *hi) {
  return ptt_in_range(i == 0 ? f[0] : f[i] - 1, lo, hi);
}

void ptt_cap_hook(const ptp_window *w, void *ctx) {
  capture *c = ctx;
  pthread_mutex_lock(&c->mu);
  int wi = c->nw < CAP_MAXW ? c->nw : CAP_MAXW - 1;
  c->w[wi] = *w;
  c->nnames[wi] = 0;
  if (wi == 0)
    for (size_t i = 0; i < w->ncomments && i < 8; i++, c->ncomments++)
      snprintf(c->comments[i], sizeof c->comments[i], "%s", w->comments[i]);
  for (size_t i = 0; i < w->nthreads && i < 64; i++) {
    memcpy(c->names[wi][i], w->threads[i].name, 16);
    c->name_tids[wi][i] = w->threads[i].tid;
    c->nnames[wi]++;
  }
  for (size_t i = 0; i < w->nsamples; i++) {
    if (c->n == c->cap) {
      c->cap = c->cap ? c->cap * 2 : 1024;
      c->s = realloc(c->s, c->cap * sizeof *c->s);
      PT_ASSERT(c->s);
    }
    const ptp_sample *s = &w->samples[i];
    cap_sample *d = &c->s[c->n++];
    d->count = s->count;
    d->tid = s->tid;
    d->n = s->nframes;
    d->flags = s->flags;
    d->window = wi;
    PT_ASSERT(s->nframes >= 1 && s->nframes <= 64);
    memcpy(d->frames, s->frames, s->nframes * sizeof *s->frames);
  }
  c->dump_tid[wi] = (uint32_t)gettid();
  c->nw++;
  int has_clk = c->has_clk;
  clockid_t clk = c->clk;
  int64_t want = c->blind_cpu_ns;
  int64_t burn = c->hook_burn_ns;
  pthread_mutex_unlock(&c->mu);
  /* Work of the profiler on the dumping thread (as a cold symbolization
   * is): never a sample of the program, counted as the profiler's own. */
  if (burn) ptt_fn_hot_c(burn);
  if (has_clk) {
    /* A slow "encode" that lasts until the watched thread has run for
     * `want` of CPU: the blind period then holds that much of its CPU,
     * however loaded the machine (the hook runs on the dumping thread). */
    int64_t in = ptt_clock_ns(clk);
    if (want) ptt_wait_cpu(clk, in + want);
    c->cpu_in[wi] = in;
    c->cpu_out[wi] = ptt_clock_ns(clk);
  }
}

void ptt_cap_resume_hook(void *ctx) {
  capture *c = ctx;
  pthread_mutex_lock(&c->mu);
  int64_t burn = c->resume_burn_ns;
  pthread_mutex_unlock(&c->mu);
  if (burn) ptt_fn_hot_c(burn);
}

void ptt_cap_init(capture *c) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
}

void ptt_cap_free(capture *c) { free(c->s); }

/* Expirations of tid in the captured windows (optionally only samples with
 * a frame in [lo, hi)). */
uint64_t ptt_count_tid(const capture *c, uint32_t tid, const char *lo, const char *hi) {
  uint64_t n = 0;
  for (size_t i = 0; i < c->n; i++) {
    const cap_sample *s = &c->s[i];
    if (s->tid != tid) continue;
    if (!lo) { n += s->count; continue; }
    for (int k = 0; k < s->n; k++)
      if (ptt_frame_in(s->frames, k, lo, hi)) { n += s->count; break; }
  }
  return n;
}

/* Expirations of tid under a "[lost: ...]" pseudo-frame. */
uint64_t ptt_count_lost_tid(const capture *c, uint32_t tid) {
  uint64_t n = 0;
  for (size_t i = 0; i < c->n; i++)
    if (c->s[i].tid == tid && (c->s[i].flags & PTP_SAMPLE_LOST)) n += c->s[i].count;
  return n;
}

/* Expirations under the pseudo-frame of `cause`, any thread. */
uint64_t ptt_count_lost_cause(const capture *c, int cause) {
  uint64_t n = 0;
  for (size_t i = 0; i < c->n; i++)
    if ((c->s[i].flags & PTP_SAMPLE_LOST) && c->s[i].frames[0] == (uintptr_t)cause) n += c->s[i].count;
  return n;
}

/* The CPU bands of the short-thread tests. "real" is what the worker
 * measured around its function; the sampler also sees the thread's CPU
 * before and after it (start-up, exit, and under ASan the runtime's
 * thread teardown, mostly kernel time that the perf engine shows as
 * [lost: kernel mode]). So: nothing may be missing (all samples, lost ones
 * included, >= 0.8 of real), and nothing may be invented on real stacks
 * (samples under real stacks <= 1.3 of real). */
void ptt_check_bands(uint64_t all, uint64_t lost, int64_t real_ns, int hz) {
  double ratio = (double)all * (1e9 / hz) / (double)real_ns;
  double real_stacks = (double)(all - lost) * (1e9 / hz) / (double)real_ns;
  PT_ASSERT_MSG(ratio > 0.8, "sampled/real %.2f", ratio);
  PT_ASSERT_MSG(real_stacks < 1.3, "sampled under real stacks/real %.2f", real_stacks);
}

/* A started sampler (hz, engine; snapshots "ptt-*" in dir) whose windows
 * go to hook(w, ctx) when hook is set; resume, when set, runs after each
 * dump's sampling resumed. */
static ptprof *start_hooked(const char *dir, int hz, int engine, ptp_window_hook_fn hook,
                            ptp_resume_hook_fn resume, void *ctx) {
  ptprof_options o;
  ptprof_options_init(&o);
  if (hz) o.hz = hz;
  o.engine = engine;
  o.dir = dir;
  o.prefix = "ptt-";
  ptprof *p = NULL;
  int rc = ptprof_new(&p, &o);
  PT_ASSERT_MSG(rc == 0, "ptprof_new: %s", ptprof_strerror(rc));
  if (hook) ptp_set_window_hook(p, hook, ctx);
  if (resume) ptp_set_resume_hook(p, resume, ctx);
  rc = ptprof_start(p);
  PT_ASSERT_MSG(rc == 0, "ptprof_start: %s", ptprof_strerror(rc));
  return p;
}

ptprof *ptt_start_with_hook(const char *dir, int hz, ptp_window_hook_fn hook, void *ctx) {
  return start_hooked(dir, hz, PTPROF_ENGINE_AUTO, hook, NULL, ctx);
}

ptprof *ptt_start_sampler_engine(const char *dir, int hz, capture *c, int engine) {
  return start_hooked(dir, hz, engine, c ? ptt_cap_hook : NULL, c ? ptt_cap_resume_hook : NULL, c);
}

ptprof *ptt_start_sampler(const char *dir, int hz, capture *c) {
  return ptt_start_sampler_engine(dir, hz, c, PTPROF_ENGINE_AUTO);
}

/* Whether the perf engine can run here (perf_event_paranoid <= 2, no
 * seccomp policy against perf_event_open). */
int ptt_perf_engine_works(void) { return ptp_perf_probe() == 0; }

void *ptt_worker_main(void *arg) {
  worker *w = arg;
  atomic_store(&w->tid, (uint32_t)gettid());
  if (w->name) pthread_setname_np(pthread_self(), w->name);
  int64_t t0 = ptt_thread_cpu_ns();
  w->fn(w->cpu_ns);
  w->used_ns = ptt_thread_cpu_ns() - t0;
  return NULL;
}

void ptt_worker_start(worker *w) {
  PT_ASSERT_INT_EQ(pthread_create(&w->th, NULL, ptt_worker_main, w), 0);
}

void ptt_worker_join(worker *w) { PT_ASSERT_INT_EQ(pthread_join(w->th, NULL), 0); }

size_t ptt_count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

int ptt_objrange_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  objrange *o = arg;
  if (!info->dlpi_name || !strstr(info->dlpi_name, o->name)) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      o->lo = info->dlpi_addr + ph->p_vaddr;
      o->hi = o->lo + ph->p_memsz;
      return 1;
    }
  }
  return 0;
}
