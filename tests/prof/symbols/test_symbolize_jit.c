/*
 * test_symbolize_jit.c - the symbolizer on addresses in no loaded object
 * (symbols/ptp_symbolize_jit.c): JIT code in anonymous executable memory
 * named from a perf map as of each refresh (a dump), under a "[jit]"
 * mapping; remapped object code named through the object; and the encoded
 * profile read back by `go tool pprof` and tools/ptprof-validate.
 */
#include "pt_test.h"
#include "../self_text.h"
#include "prof/output/ptp_pprof.h"
#include "prof/symbols/ptp_symbolize.h"
#include "prof/unwind/ptp_xranges.h"

#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void write_text(const char *path, const char *mode, const char *text) {
  FILE *fp = fopen(path, mode);
  PT_ASSERT(fp);
  PT_ASSERT(fputs(text, fp) >= 0);
  PT_ASSERT(fclose(fp) == 0);
}

static const ptp_sym_mapping *mapping(ptp_symbolizer *s, int i) {
  const ptp_sym_mapping *m;
  size_t n = ptp_symbolizer_mappings(s, &m);
  PT_ASSERT_MSG(i >= 0 && (size_t)i < n, "mapping %d of %zu", i, n);
  return &m[i];
}

static char *run_pprof(const char *file, const char *what) {
  char *out = NULL;
  char *ver[] = {"go", "version", NULL};
  if (pt_run(ver, &out, 60000) != 0) {
    free(out);
    PT_SKIP("go (golang-go) not installed: go tool pprof unavailable");
  }
  free(out);
  out = NULL;
  char *argv[] = {"go", "tool", "pprof", "-symbolize=none", "-nodefraction=0", (char *)what,
                  (char *)file, NULL};
  int rc = pt_run(argv, &out, 120000);
  PT_ASSERT_MSG(rc == 0, "go tool pprof %s failed (%d):\n%s", what, rc, out);
  return out;
}

/* A function of this file: the JIT code's caller in the encoded stack. */
__attribute__((noinline, used)) static void prof_symbolize_jit_names_anchor(void) {
  __asm__ volatile("nop; nop; nop; nop; nop; nop; nop; nop" ::: "memory");
}

PT_TEST_T(prof_symbolize_jit_names, 120000) {
  uint8_t *code = mmap(NULL, 2 * 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PT_ASSERT(code != MAP_FAILED);
  uintptr_t c = (uintptr_t)code;
  PT_ASSERT(ptp_xranges_refresh() >= 0);
  char *dir = pt_tmpdir("symjit");
  char path[4096];
  snprintf(path, sizeof path, "%s/perf.map", dir);
  char text[512];
  snprintf(text, sizeof text, "%lx 40 JS:*hot /app/x.js:3:7\n%lx 20 py::cold:/y.py\n"
                              "deadbeef000 100 floating\n",
           (unsigned long)(c + 0x100), (unsigned long)(c + 0x200));
  write_text(path, "w", text);

  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  ptp_symbolizer_set_perfmap_path(s, path);
  const ptp_sym_mapping *m0;
  size_t nobj = ptp_symbolizer_mappings(s, &m0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_refresh(s), 0);
  ptp_sym_result r;
  /* Named JIT code: the runtime's name, nothing invented. */
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, c + 0x110, &r), 0);
  PT_ASSERT_UINT_EQ(r.nframes, 1);
  PT_ASSERT_STR_EQ(r.frames[0].name, "JS:*hot /app/x.js:3:7");
  PT_ASSERT_STR_EQ(r.frames[0].system_name, "JS:*hot /app/x.js:3:7");
  PT_ASSERT_STR_EQ(r.frames[0].file, "");
  PT_ASSERT_INT_EQ(r.frames[0].line, 0);
  PT_ASSERT_INT_EQ(r.frames[0].start_line, 0);
  int jm = r.mapping;
  PT_ASSERT((size_t)jm >= nobj);
  const ptp_sym_mapping *mp = mapping(s, jm);
  PT_ASSERT_STR_EQ(mp->file, "[jit]");
  PT_ASSERT_STR_EQ(mp->build_id, "");
  PT_ASSERT_UINT_EQ(mp->start, c);
  PT_ASSERT_UINT_EQ(mp->limit, c + 2 * 4096);
  PT_ASSERT(mp->has_functions && !mp->has_filenames && !mp->has_line_numbers);
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, c + 0x205, &r), 0);
  PT_ASSERT_STR_EQ(r.frames[0].name, "py::cold:/y.py");
  PT_ASSERT_INT_EQ(r.mapping, jm);
  /* In the range, not in the map: the [jit] mapping, no frame. */
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, c + 0x300, &r), 0);
  PT_ASSERT_UINT_EQ(r.nframes, 0);
  PT_ASSERT_INT_EQ(r.mapping, jm);
  /* Named, but where the walker knows no range: a mapping of its entry. */
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, 0xdeadbeef010, &r), 0);
  PT_ASSERT_STR_EQ(r.frames[0].name, "floating");
  mp = mapping(s, r.mapping);
  PT_ASSERT_STR_EQ(mp->file, "[jit]");
  PT_ASSERT_UINT_EQ(mp->start, 0xdeadbeef000);
  PT_ASSERT_UINT_EQ(mp->limit, 0xdeadbeef100);
  /* Neither: nothing. */
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, 0x1234, &r), 0);
  PT_ASSERT_UINT_EQ(r.nframes, 0);
  PT_ASSERT_INT_EQ(r.mapping, -1);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(s, &st);
  PT_ASSERT_UINT_EQ(st.jit_lookups, 5);
  PT_ASSERT_UINT_EQ(st.jit_named, 3);
  PT_ASSERT_UINT_EQ(st.jit_map_reads, 1);
  ptp_symbolizer_jit_info ji;
  ptp_symbolizer_get_jit_info(s, &ji);
  PT_ASSERT_STR_EQ(ji.perfmap_path, path);
  PT_ASSERT_STR_EQ(ji.perfmap_state, "read");
  PT_ASSERT_UINT_EQ(ji.entries, 3);
  PT_ASSERT(ji.exec_ranges >= 1);

  /* The runtime moves code; the name changes at the next dump (refresh),
   * not within this one. */
  snprintf(text, sizeof text, "%lx 40 JS:*moved\n", (unsigned long)(c + 0x100));
  write_text(path, "a", text);
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, c + 0x110, &r), 0);
  PT_ASSERT_STR_EQ(r.frames[0].name, "JS:*hot /app/x.js:3:7");
  PT_ASSERT_INT_EQ(ptp_symbolizer_refresh(s), 0);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_mappings(s, &m0), nobj);   /* extras went */
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, c + 0x110, &r), 0);
  PT_ASSERT_STR_EQ(r.frames[0].name, "JS:*moved");
  /* The map goes away: the names stay. */
  PT_ASSERT(unlink(path) == 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_refresh(s), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, c + 0x110, &r), 0);
  PT_ASSERT_STR_EQ(r.frames[0].name, "JS:*moved");
  ptp_symbolizer_get_jit_info(s, &ji);
  PT_ASSERT_STR_EQ(ji.perfmap_state, "not found");

  /* Encoded: leaf in JIT code, its caller (return address) in JIT code,
   * then this test's own code; read back by the viewer and the validator. */
  write_text(path, "w", text);
  uintptr_t frames[3] = { c + 0x110, c + 0x205 + 1, (uintptr_t)prof_symbolize_jit_names_anchor + 4 };
  ptp_sample sm = { .count = 7, .tid = 77, .nframes = 3, .frames = frames };
  ptp_window w = { .start_ns = 1700000000000000000LL, .duration_ns = 1000000000, .period_ns = 10101010,
                   .hz = 99, .samples = &sm, .nsamples = 1 };
  uint8_t *gz;
  size_t gzlen;
  PT_ASSERT_INT_EQ(ptp_pprof_encode(&w, s, &gz, &gzlen), 0);
  char file[4200];
  snprintf(file, sizeof file, "%s/p.pb.gz", dir);
  pt_write_file(file, gz, gzlen);
  free(gz);
  char *raw = run_pprof(file, "-raw");
  PT_ASSERT_MSG(strstr(raw, "JS:*moved"), "no JIT name in -raw:\n%s", raw);
  PT_ASSERT_MSG(strstr(raw, "py::cold:/y.py"), "no caller name in -raw:\n%s", raw);
  char want[128];
  snprintf(want, sizeof want, "0x%lx/0x%lx/0x0 [jit]", (unsigned long)c, (unsigned long)(c + 2 * 4096));
  PT_ASSERT_MSG(strstr(raw, want), "no %s mapping in -raw:\n%s", want, raw);
  PT_ASSERT_MSG(strstr(raw, "jit code: 2 addresses in no loaded object, 2 named by the runtime's perf map, "
                            "0 in remapped object code; perf map "),
                "no jit comment in -raw:\n%s", raw);
  free(raw);
  char *tr = run_pprof(file, "-traces");
  const char *a = strstr(tr, "JS:*moved"), *b = a ? strstr(a, "py::cold:/y.py") : NULL;
  PT_ASSERT_MSG(a && b && strstr(b, "prof_symbolize_jit_names_anchor"), "stack order:\n%s", tr);
  free(tr);
  char *vbin = pt_build_path("tools/ptprof-validate");
  char *argv[] = {vbin, file, NULL};
  char *out = NULL;
  int rc = pt_run(argv, &out, 60000);
  PT_ASSERT_MSG(rc == 0, "validator rejected the profile (%d):\n%s", rc, out);
  free(out);
  free(vbin);
  ptp_symbolizer_del(s);
  munmap(code, 2 * 4096);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_symbolize_jit_alias) {
  /* This binary's text page holding pt_self_text_code, mapped again
   * elsewhere (as V8 remaps its builtins): named through the object, under
   * a mapping of the object's file at the alias's place and file offset. */
  pt_self_text t;
  PT_ASSERT_INT_EQ(pt_self_text_find(&t), 0);
  uintptr_t page = (uintptr_t)pt_self_text_code & ~(uintptr_t)4095;
  uint64_t off = (t.fileoff & ~(uint64_t)4095) + (page - (t.lo & ~(uintptr_t)4095));
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  PT_ASSERT(fd >= 0);
  uint8_t *alias = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)off);
  PT_ASSERT(alias != MAP_FAILED);
  close(fd);
  PT_ASSERT(ptp_xranges_refresh() >= 0);
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  char *dir = pt_tmpdir("symjit");
  char path[4096];
  snprintf(path, sizeof path, "%s/none.map", dir);
  ptp_symbolizer_set_perfmap_path(s, path);
  uintptr_t k = (uintptr_t)pt_self_text_code - page + 1;   /* inside it: it may be 3 bytes */
  ptp_sym_result r;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, page + k, &r), 0);
  PT_ASSERT(r.nframes >= 1);
  char name[256];
  snprintf(name, sizeof name, "%s", r.frames[r.nframes - 1].name);
  PT_ASSERT_STR_EQ(name, "pt_self_text_code");
  int objm = r.mapping;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)alias + k, &r), 0);
  PT_ASSERT(r.nframes >= 1);
  PT_ASSERT_STR_EQ(r.frames[r.nframes - 1].name, "pt_self_text_code");
  PT_ASSERT(r.mapping != objm);
  const ptp_sym_mapping *mp = mapping(s, r.mapping), *om = mapping(s, objm);
  PT_ASSERT_STR_EQ(mp->file, om->file);
  PT_ASSERT_STR_EQ(mp->build_id, om->build_id);
  PT_ASSERT_UINT_EQ(mp->start, (uintptr_t)alias);
  PT_ASSERT_UINT_EQ(mp->limit, (uintptr_t)alias + 4096);
  PT_ASSERT_UINT_EQ(mp->offset, off);
  PT_ASSERT(mp->has_functions == om->has_functions && mp->has_line_numbers == om->has_line_numbers);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(s, &st);
  PT_ASSERT_UINT_EQ(st.jit_alias, 1);
  ptp_symbolizer_del(s);
  munmap(alias, 4096);
  pt_rm_rf(dir);
  free(dir);
}
