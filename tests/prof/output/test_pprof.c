/*
 * test_pprof.c - the pprof encoder on a synthetic window made of real PCs
 * of this binary (and libc), read back by `go tool pprof` (the real viewer)
 * and by tools/ptprof-validate.
 */
#include "pt_test.h"
#include "prof/output/ptp_gzip.h"
#include "prof/output/ptp_pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <dlfcn.h>

/* libc's own malloc (under ASan, plain `malloc` is the sanitizer's). */
static void *(*libc_malloc(void))(size_t) {
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *(*f)(size_t) = NULL;
  if (h) *(void **)&f = dlsym(h, "malloc");
  return f ? f : malloc;
}

/* ---- real code whose PCs make up the window ---- */

static uintptr_t g_ra_leaf, g_ra_mid, g_ra_inl, g_ra_alloc;

__attribute__((noinline, noclone)) static void pp_leaf(void) {
  g_ra_leaf = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
}

enum { PP_MID_DECL_LINE = __LINE__ + 1 };
__attribute__((noinline, noclone)) static void pp_mid(void) {
  pp_leaf();
  __asm__ volatile("" ::: "memory");
  g_ra_mid = (uintptr_t)__builtin_return_address(0);
}

__attribute__((noinline, noclone)) static void pp_top(void) {
  pp_mid();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) static uintptr_t pp_get_ra(void) {
  uintptr_t r = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
  return r;
}

static inline __attribute__((always_inline)) void pp_inl(void) {
  g_ra_inl = pp_get_ra();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) static void pp_outer(void) {
  pp_inl();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) static void pp_alloc(void) {
  g_ra_alloc = pp_get_ra();   /* stands in for the return address of a malloc call */
  void *volatile p = malloc(16);
  free(p);
}

#define TID_A 4242
#define TID_B 4343
#define START_NS 1700000000123456789LL
#define DURATION_NS 2000000000LL

typedef struct fixture {
  uintptr_t fa[3], fb[2], fc[1], fd[2], fe[2];
  ptp_sample samples[5];
  ptp_thread threads[2];
  ptp_window w;
} fixture;

static void fixture_init(fixture *f) {
  memset(f, 0, sizeof *f);
  pp_top();
  pp_outer();
  pp_alloc();
  void *(*volatile mp)(size_t) = libc_malloc();
  /* A: pp_leaf <- pp_mid <- pp_top, 30 samples on worker-a */
  f->fa[0] = (uintptr_t)&pp_leaf;
  f->fa[1] = g_ra_leaf;
  f->fa[2] = g_ra_mid;
  /* B: pp_leaf <- pp_inl (inlined) <- pp_outer, 10 samples on worker-b */
  f->fb[0] = (uintptr_t)&pp_leaf;
  f->fb[1] = g_ra_inl;
  /* C: truncated after the leaf */
  f->fc[0] = (uintptr_t)&pp_leaf;
  /* D: a PC in no mapping under pp_top */
  f->fd[0] = 0x10;
  f->fd[1] = g_ra_mid;
  /* E: malloc <- pp_alloc */
  f->fe[0] = (uintptr_t)mp + 4;
  f->fe[1] = g_ra_alloc;
  f->samples[0] = (ptp_sample){.count = 30, .tid = TID_A, .nframes = 3, .flags = 0, .frames = f->fa};
  f->samples[1] = (ptp_sample){.count = 10, .tid = TID_B, .nframes = 2, .flags = 0, .frames = f->fb};
  f->samples[2] = (ptp_sample){.count = 5, .tid = TID_A, .nframes = 1, .flags = PTP_SAMPLE_TRUNCATED, .frames = f->fc};
  f->samples[3] = (ptp_sample){.count = 2, .tid = TID_A, .nframes = 2, .flags = 0, .frames = f->fd};
  f->samples[4] = (ptp_sample){.count = 3, .tid = TID_B, .nframes = 2, .flags = 0, .frames = f->fe};
  f->threads[0].tid = TID_A;
  strcpy(f->threads[0].name, "worker-a");
  f->threads[1].tid = TID_B;
  strcpy(f->threads[1].name, "worker-b");
  f->w.start_ns = START_NS;
  f->w.duration_ns = DURATION_NS;
  f->w.period_ns = 1000000000 / 99;
  f->w.hz = 99;
  f->w.samples = f->samples;
  f->w.nsamples = 5;
  f->w.threads = f->threads;
  f->w.nthreads = 2;
  f->w.drops[PTP_DROP_RING_FULL] = 3;
  f->w.drops[PTP_DROP_DUMPING] = 7;
  f->w.drops[PTP_DROP_OWN_WORK] = 4;
  f->w.blind_ns = 1234567;
  f->w.own_thread_cpu_ns = 5000000;
  f->w.thread_own_ns = 40400000;     /* own-work sections on application threads */
  f->w.process_cpu_ns = 700000000;
}

static char *go_bin(void) {
  char *out = NULL;
  char *argv[] = {"go", "version", NULL};
  int rc = pt_run(argv, &out, 60000);
  free(out);
  if (rc != 0) PT_SKIP("go (golang-go) not installed: go tool pprof unavailable");
  return "go";
}

/* go tool pprof -symbolize=none -nodefraction=0 <args...> file */
static char *pprof(const char *file, const char *a1, const char *a2, const char *a3) {
  char *argv[10];
  int n = 0;
  argv[n++] = go_bin();
  argv[n++] = "tool";
  argv[n++] = "pprof";
  argv[n++] = "-symbolize=none";
  argv[n++] = "-nodefraction=0";
  if (a1) argv[n++] = (char *)a1;
  if (a2) argv[n++] = (char *)a2;
  if (a3) argv[n++] = (char *)a3;
  argv[n++] = (char *)file;
  argv[n] = NULL;
  char *out = NULL;
  int rc = pt_run(argv, &out, 120000);
  PT_ASSERT_MSG(rc == 0, "go tool pprof %s %s failed (%d):\n%s", a1 ? a1 : "", a2 ? a2 : "", rc, out);
  return out;
}

static char *validate(const char *file, int *rc, const char *opt) {
  char *bin = pt_build_path("tools/ptprof-validate");
  char *argv[] = {bin, (char *)(opt ? opt : file), opt ? (char *)file : NULL, NULL};
  char *out = NULL;
  *rc = pt_run(argv, &out, 60000);
  free(bin);
  return out;
}

static char *write_profile(const char *dir, const char *name, const uint8_t *d, size_t n) {
  size_t len = strlen(dir) + strlen(name) + 2;
  char *p = malloc(len);
  snprintf(p, len, "%s/%s", dir, name);
  pt_write_file(p, d, n);
  return p;
}

/* The line of `out` that contains `needle`, copied (static buffer). */
static const char *line_with(const char *out, const char *needle) {
  static char buf[1024];
  const char *p = strstr(out, needle);
  if (!p) return NULL;
  const char *b = p;
  while (b > out && b[-1] != '\n') b--;
  const char *e = strchr(p, '\n');
  size_t n = e ? (size_t)(e - b) : strlen(b);
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, b, n);
  buf[n] = 0;
  return buf;
}

PT_TEST_T(prof_pprof_read_back_by_go_pprof, 120000) {
  fixture f;
  fixture_init(&f);
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  uint8_t *gz;
  size_t gzlen;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&f.w, s, &gz, &gzlen), 0);
  PT_ASSERT(gzlen > 20 && gz[0] == 0x1f && gz[1] == 0x8b);
  char *dir = pt_tmpdir("pprof");
  char *file = write_profile(dir, "p.pb.gz", gz, gzlen);

  /* -top with integer counts: the leaf pp_leaf has 30 + 10 + 5 */
  char *top = pprof(file, "-top", "-sample_index=samples", NULL);
  const char *l = line_with(top, " pp_leaf");
  PT_ASSERT_MSG(l, "no pp_leaf in -top:\n%s", top);
  PT_ASSERT_MSG(strncmp(l + strspn(l, " "), "45 ", 3) == 0, "pp_leaf flat: %s", l);
  PT_ASSERT_MSG(line_with(top, " malloc"), "no malloc in -top:\n%s", top);
  PT_ASSERT_MSG(line_with(top, "[truncated]"), "no [truncated] in -top:\n%s", top);
  free(top);

  /* -traces: inline mark, labels, order leaf first */
  char *tr = pprof(file, "-traces", NULL, NULL);
  PT_ASSERT_MSG(strstr(tr, "pp_inl (inline)"), "no inline mark in -traces:\n%s", tr);
  PT_ASSERT_MSG(strstr(tr, "thread_name:[worker-a]") || strstr(tr, "worker-a"), "no thread label:\n%s", tr);
  PT_ASSERT_MSG(strstr(tr, "thread_id:[4242]") || strstr(tr, "4242"), "no tid label:\n%s", tr);
  const char *a = strstr(tr, "pp_leaf"), *b = a ? strstr(a, "pp_mid") : NULL, *c = b ? strstr(b, "pp_top") : NULL;
  PT_ASSERT_MSG(a && b && c, "stack order pp_leaf, pp_mid, pp_top not found:\n%s", tr);
  PT_ASSERT_MSG(strstr(tr, "pp_alloc"), "no pp_alloc:\n%s", tr);
  free(tr);

  /* -raw: period, duration, time, comments, mappings */
  char *raw = pprof(file, "-raw", NULL, NULL);
  PT_ASSERT_MSG(strstr(raw, "PeriodType: cpu nanoseconds"), "period type:\n%s", raw);
  PT_ASSERT_MSG(strstr(raw, "Period: 10101010"), "period:\n%s", raw);
  PT_ASSERT_MSG(strstr(raw, "Duration: 2s"), "duration:\n%s", raw);
  PT_ASSERT_MSG(strstr(raw, "samples/count cpu/nanoseconds"), "sample types:\n%s", raw);
  PT_ASSERT_MSG(strstr(raw, "dropped samples: ring_full=3 dumping=7 no_stack=0 reentrant=0 "
                            "thread_exit=0 kernel_mode=0 undelivered=0 no_memory=0 own_work=4 blocked=0 fd_closed=0"),
                "drop comment:\n%s", raw);
  /* The blind window and the profiler's own work: counted with their CPU
   * (the blind window's: count x period, 7 x 10.1 ms; the own work's by
   * the threads' clocks: 40.4 + 5.0 ms, its 4 samples counted beside),
   * never samples. */
  PT_ASSERT_MSG(strstr(raw, "blind window before this one: 1.2 ms (1234567 ns, the previous dump's "
                            "encode and write): 7 samples (70.7 ms CPU) of application threads "
                            "dropped, not in this profile"), "blind comment:\n%s", raw);
  PT_ASSERT_MSG(strstr(raw, "profiler's own work in this window and the blind window before it: "
                            "45.4 ms CPU by the threads' clocks (40.4 ms on application threads, "
                            "5.0 ms on the sampler's own thread; 4 samples dropped on application "
                            "threads); not in the samples above"),
                "own work comment:\n%s", raw);
  /* Coverage: 700 ms of process CPU; own work and blind window 40.4 +
   * 5.0 + 70.7 = 116.1 ms; the program's 583.9 ms; samples 50 x 10.1 ms =
   * 505.1 ms (86 %); the rest 78.8 ms. */
  PT_ASSERT_MSG(strstr(raw, "process CPU since the previous snapshot's cut (the blind window and "
                            "this window): 700.0 ms; the profiler's own work and the blind window "
                            "116.1 ms; the program's 583.9 ms: 505.1 ms in the samples above "
                            "(pseudo-frames included, 86 %), 78.8 ms in none (each thread's "
                            "sampling period under way at the cut"),
                "coverage comment:\n%s", raw);
  PT_ASSERT_MSG(!strstr(raw, "[lost"), "a pseudo-frame for a count:\n%s", raw);
  PT_ASSERT_MSG(strstr(raw, "sampler: 99 Hz"), "hz comment:\n%s", raw);
  /* the order docs/profiling.md gives: what the file covers first */
  const char *cw = strstr(raw, "window: 2023-11-14T22:13:20.123456789Z .. 2023-11-14T22:13:22.123456789Z");
  PT_ASSERT_MSG(cw, "window comment:\n%s", raw);
  const char *order[] = {"sampler: 99 Hz", "dropped samples:", "blind window before this one:",
                         "profiler's own work", "process CPU since", NULL};
  for (int i = 0; order[i]; i++) {
    const char *next = strstr(cw, order[i]);
    PT_ASSERT_MSG(next, "comment \"%s\" not after the previous one:\n%s", order[i], raw);
    cw = next;
  }
  PT_ASSERT_MSG(strstr(raw, "unit-tests"), "main mapping:\n%s", raw);
  PT_ASSERT_MSG(strstr(raw, "[FN][FL][LN][IN]"), "has_* flags:\n%s", raw);
  /* 30 samples of A: values [30, 30 * 10101010] */
  PT_ASSERT_MSG(strstr(raw, "30  303030300:"), "values of stack A:\n%s", raw);
  free(raw);

  /* -tagfocus by thread name: only worker-b's stacks remain */
  char *tf = pprof(file, "-top", "-tagfocus=thread_name=worker-b", "-sample_index=samples");
  PT_ASSERT_MSG(line_with(tf, " pp_outer") && !line_with(tf, " pp_top"), "tagfocus:\n%s", tf);
  free(tf);

  /* -lines: the caller frame carries its call line */
  char *ln = pprof(file, "-traces", "-lines", NULL);
  char want[64];
  snprintf(want, sizeof want, "test_pprof.c:%d", PP_MID_DECL_LINE + 1);
  PT_ASSERT_MSG(strstr(ln, want), "want %s in -lines -traces:\n%s", want, ln);
  free(ln);

  int rc;
  char *v = validate(file, &rc, NULL);
  PT_ASSERT_MSG(rc == 0, "validator rejected our profile (%d):\n%s", rc, v);
  free(v);
  v = validate(file, &rc, "--summary");
  PT_ASSERT_MSG(rc == 0 && strstr(v, "samples: 50") && strstr(v, "pp_leaf"), "summary (%d):\n%s", rc, v);
  free(v);

  free(gz);
  ptp_symbolizer_del(s);
  pt_rm_rf(dir);
  free(dir);
  free(file);
}

/* The threads' CPU line (ptp_window.thread_cpu): every name with its CPU,
 * its threads when more than one, its samples and the other thread_name
 * labels they carry; the 16 with the most CPU listed, the rest summed;
 * read back by go tool pprof. */
PT_TEST_T(prof_pprof_thread_cpu_line, 120000) {
  fixture f;
  fixture_init(&f);
  ptp_thread_cpu t[18];
  memset(t, 0, sizeof t);
  t[0] = (ptp_thread_cpu){ .name = "worker-a", .nthreads = 1, .cpu_ns = 401000000, .samples = 37 };
  t[1] = (ptp_thread_cpu){ .name = "pool", .nthreads = 4, .cpu_ns = 123450000, .samples = 13,
                           .sampled_as = {"job-x", "job y"}, .sampled_as_more = 1 };
  t[2] = (ptp_thread_cpu){ .name = "", .nthreads = 1, .cpu_ns = 4000000, .samples = 1 };
  for (int i = 3; i < 18; i++) {
    snprintf(t[i].name, sizeof t[i].name, "idle-%02d", i);
    t[i].nthreads = 2;
    t[i].cpu_ns = 1000000 - i * 10000;
    t[i].samples = i == 17;
  }
  /* names holding the line's delimiters are quoted, with '"', '\\' and
   * control bytes escaped; the bucket of exits beyond the per-name slots
   * is said as such */
  strcpy(t[3].name, "a, b\"(c)\\\t");
  strcpy(t[4].name, "(other names)");
  t[4].others = 1;
  strcpy(t[5].name, "(other names)");   /* a thread of that name: quoted */
  f.w.thread_cpu = t;
  f.w.nthread_cpu = 18;
  f.w.thread_own_ns = 2500000;
  uint8_t *gz;
  size_t gzlen;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&f.w, NULL, &gz, &gzlen), 0);
  char *dir = pt_tmpdir("pprof-thr");
  char *file = write_profile(dir, "t.pb.gz", gz, gzlen);
  char *raw = pprof(file, "-raw", NULL, NULL);
  const char *want =
      "threads' CPU since the previous snapshot's cut, by each thread's CPU clock, the profiler's "
      "own work apart (2.5 ms on these threads, and its own thread), with their samples: worker-a "
      "401.0 ms (37 samples), pool 123.5 ms (4 threads, 13 samples, thread_name job-x, \"job y\", "
      "...), (no name) 4.0 ms (1 sample), \"a, b\\\"(c)\\\\\\x09\" 1.0 ms (2 threads, 0 samples), "
      "(other names) 1.0 ms (2 threads, 0 samples), \"(other names)\" 0.9 ms (2 threads, 0 samples), "
      "idle-06 0.9 ms";
  PT_ASSERT_MSG(strstr(raw, want), "thread CPU line:\n%s", raw);
  /* 18 names: idle-03 .. idle-15 listed (16 in all), idle-16 and idle-17 summed */
  PT_ASSERT_MSG(strstr(raw, "idle-15 0.8 ms (2 threads, 0 samples); 2 more names: 1.7 ms (4 "
                            "threads, 1 sample); a name with less CPU than a period (10.1 ms) has "
                            "a sample with probability CPU / period"),
                "thread CPU line's tail:\n%s", raw);
  PT_ASSERT_MSG(!strstr(raw, "idle-16"), "more than 16 names listed:\n%s", raw);
  /* after the coverage line */
  const char *cov = strstr(raw, "process CPU since");
  PT_ASSERT_MSG(cov && strstr(cov, "threads' CPU"), "thread CPU line not after coverage:\n%s", raw);
  free(raw);
  /* no list, no line */
  f.w.nthread_cpu = 0;
  free(gz);
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&f.w, NULL, &gz, &gzlen), 0);
  free(file);
  file = write_profile(dir, "n.pb.gz", gz, gzlen);
  raw = pprof(file, "-raw", NULL, NULL);
  PT_ASSERT_MSG(!strstr(raw, "threads' CPU"), "a line without a list:\n%s", raw);
  free(raw);
  free(gz);
  pt_rm_rf(dir);
  free(dir);
  free(file);
}

PT_TEST(prof_pprof_single_gzip_member_and_header) {
  fixture f;
  fixture_init(&f);
  uint8_t *gz, *raw, *plain;
  size_t gzlen, rawlen, plainlen;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&f.w, NULL, &gz, &gzlen), 0);
  PT_ASSERT_INT_EQ(ptp_pprof_encode_raw(&f.w, NULL, &raw, &rawlen), 0);
  /* exactly one member, and it is the raw encoding */
  PT_ASSERT_INT_EQ(ptp_gunzip(gz, gzlen, 1 << 20, &plain, &plainlen), 0);
  PT_ASSERT_UINT_EQ(plainlen, rawlen);
  PT_ASSERT_MEM_EQ(plain, raw, rawlen);
  /* first field: sample_type (field 1, wire type 2) */
  PT_ASSERT_UINT_EQ(raw[0], 0x0a);
  free(gz);
  free(raw);
  free(plain);
}

PT_TEST(prof_pprof_bad_windows) {
  fixture f;
  fixture_init(&f);
  uint8_t *out = NULL;
  size_t len = 0;
  f.w.period_ns = 0;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&f.w, NULL, &out, &len), -EINVAL);
  fixture_init(&f);
  f.samples[1].nframes = 0;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&f.w, NULL, &out, &len), -EINVAL);
  fixture_init(&f);
  f.samples[1].count = 0;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&f.w, NULL, &out, &len), -EINVAL);
  PT_ASSERT_INT_EQ(ptp_pprof_encode(NULL, NULL, &out, &len), -EINVAL);
  PT_ASSERT(out == NULL);
}

PT_TEST_T(prof_pprof_empty_window_is_valid, 60000) {
  ptp_window w = {0};
  w.start_ns = START_NS;
  w.duration_ns = 1000;
  w.period_ns = 10101010;
  w.hz = 99;
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  uint8_t *gz;
  size_t gzlen;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&w, s, &gz, &gzlen), 0);
  char *dir = pt_tmpdir("pprof");
  char *file = write_profile(dir, "empty.pb.gz", gz, gzlen);
  char *raw = pprof(file, "-raw", NULL, NULL);
  PT_ASSERT_MSG(strstr(raw, "Period: 10101010"), "%s", raw);
  free(raw);
  int rc;
  char *v = validate(file, &rc, NULL);
  PT_ASSERT_MSG(rc == 0, "validator (%d):\n%s", rc, v);
  free(v);
  free(gz);
  ptp_symbolizer_del(s);
  pt_rm_rf(dir);
  free(dir);
  free(file);
}

/* Many distinct stacks: ids stay unique and consistent (validator), the
 * dedup keeps one location per address. */
PT_TEST_T(prof_pprof_many_stacks_valid, 120000) {
  enum { N = 5000, DEPTH = 20 };
  fixture f;
  fixture_init(&f);
  uintptr_t *frames = malloc(sizeof(uintptr_t) * N * DEPTH);
  ptp_sample *sm = malloc(sizeof *sm * N);
  uintptr_t base = (uintptr_t)&pp_leaf;
  for (size_t i = 0; i < N; i++) {
    for (size_t d = 0; d < DEPTH; d++)
      frames[i * DEPTH + d] = d == 0 ? base + (i % 97) : g_ra_mid + ((i * 31 + d) % 64);
    sm[i] = (ptp_sample){.count = 1 + i % 5, .tid = (uint32_t)(1000 + i % 7), .nframes = DEPTH, .flags = 0, .frames = &frames[i * DEPTH]};
  }
  f.w.samples = sm;
  f.w.nsamples = N;
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  uint8_t *gz;
  size_t gzlen;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&f.w, s, &gz, &gzlen), 0);
  char *dir = pt_tmpdir("pprof");
  char *file = write_profile(dir, "many.pb.gz", gz, gzlen);
  int rc;
  char *v = validate(file, &rc, NULL);
  PT_ASSERT_MSG(rc == 0, "validator (%d):\n%s", rc, v);
  free(v);
  char *raw = pprof(file, "-top", "-sample_index=samples", NULL);
  PT_ASSERT_MSG(strstr(raw, "pp_leaf"), "%s", raw);
  free(raw);
  free(gz);
  free(frames);
  free(sm);
  ptp_symbolizer_del(s);
  pt_rm_rf(dir);
  free(dir);
  free(file);
}

/* Every drop cause that is shown as samples (ptp_drop_is_sampled: the
 * program's CPU) has its pseudo-frame in the string table, out of memory
 * included (it used to be counted as "ring full"); the profiler's own work
 * has none. */
PT_TEST(prof_pprof_lost_frames) {
  uintptr_t causes[PTP_DROP__COUNT];
  ptp_sample smp[PTP_DROP__COUNT];
  for (int i = 0; i < PTP_DROP__COUNT; i++) {
    causes[i] = (uintptr_t)i;
    smp[i] = (ptp_sample){ .count = 1, .tid = 7, .nframes = 1, .flags = PTP_SAMPLE_LOST,
                           .frames = &causes[i] };
  }
  ptp_window w;
  memset(&w, 0, sizeof w);
  w.period_ns = 1000000000 / 99;
  w.hz = 99;
  w.samples = smp;
  w.nsamples = PTP_DROP__COUNT;
  uint8_t *out;
  size_t len;
  PT_ASSERT_INT_EQ(ptp_pprof_encode_raw(&w, NULL, &out, &len), 0);
  PT_ASSERT(!ptp_drop_is_sampled(PTP_DROP_OWN_WORK));
  for (int i = 0; i < PTP_DROP__COUNT; i++) {
    if (!ptp_drop_is_sampled(i)) continue;
    const char *name = ptp_lost_frame_name(i);
    PT_ASSERT_MSG(strcmp(name, "[lost]") != 0, "cause %d has no pseudo-frame of its own", i);
    PT_ASSERT_MSG(memmem(out, len, name, strlen(name)), "%s not in the profile", name);
  }
  PT_ASSERT_STR_EQ(ptp_lost_frame_name(PTP_DROP_NO_MEMORY), "[lost: out of memory]");
  /* a window with no dump before it says so rather than "0.0 ms" */
  const char *none = "blind window before this one: none (no dump before this window)";
  PT_ASSERT_MSG(memmem(out, len, none, strlen(none)), "no \"%s\"", none);
  free(out);
}
