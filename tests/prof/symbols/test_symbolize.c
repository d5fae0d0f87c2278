/*
 * test_symbolize.c - the in-process symbolizer on real PCs of this binary
 * (built -O2 -g), of libc and of the vDSO.
 */
#include "pt_test.h"
#include "prof/symbols/ptp_symbolize.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

/* libc's own malloc (under ASan, plain `malloc` is the sanitizer's). */
static void *(*libc_malloc(void))(size_t) {
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *(*f)(size_t) = NULL;
  if (h) *(void **)&f = dlsym(h, "malloc");
  return f ? f : malloc;
}

/* noclone: keep the names exact (no .constprop/.isra copies). */
__attribute__((noinline, noclone)) static uintptr_t sym_get_ra(void) {
  uintptr_t r = (uintptr_t)__builtin_return_address(0);
  __asm__ volatile("" ::: "memory");
  return r;
}

enum { SYM_INL_DECL_LINE = __LINE__ + 1 };
static inline __attribute__((always_inline)) uintptr_t sym_inl(void) {
  uintptr_t r = sym_get_ra();
  __asm__ volatile("" ::: "memory");   /* no tail call: the call stays inside */
  return r;
}

enum { SYM_OUTER_DECL_LINE = __LINE__ + 1 };
__attribute__((noinline, noclone)) static uintptr_t sym_outer(void) {
  uintptr_t r = sym_inl();
  __asm__ volatile("" ::: "memory");
  return r;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

PT_TEST(prof_sym_inline_chain_and_lines) {
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  uintptr_t ra = sym_outer();
  ptp_sym_result r;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, ra - 1, &r), 0);
  PT_ASSERT(r.mapping >= 0);
  PT_ASSERT_MSG(r.nframes == 2, "expected sym_inl inlined into sym_outer, got %u frames (%s)",
                r.nframes, r.nframes ? r.frames[0].name : "-");
  PT_ASSERT_STR_EQ(r.frames[0].name, "sym_inl");
  PT_ASSERT_INT_EQ(r.frames[0].line, SYM_INL_DECL_LINE + 1);
  PT_ASSERT_INT_EQ(r.frames[0].start_line, SYM_INL_DECL_LINE);
  PT_ASSERT(ends_with(r.frames[0].file, "tests/prof/symbols/test_symbolize.c"));
  PT_ASSERT_STR_EQ(r.frames[1].name, "sym_outer");
  PT_ASSERT_INT_EQ(r.frames[1].line, SYM_OUTER_DECL_LINE + 1);
  PT_ASSERT_INT_EQ(r.frames[1].start_line, SYM_OUTER_DECL_LINE);
  PT_ASSERT(r.frames[1].column > 0);
  PT_ASSERT(ends_with(r.frames[1].file, "tests/prof/symbols/test_symbolize.c"));

  const ptp_sym_mapping *maps;
  size_t n = ptp_symbolizer_mappings(s, &maps);
  PT_ASSERT(n >= 2);
  PT_ASSERT(maps[0].is_main);
  PT_ASSERT_INT_EQ(r.mapping, 0);
  PT_ASSERT(ends_with(maps[0].file, "/unit-tests"));
  PT_ASSERT(strlen(maps[0].build_id) == 40);
  PT_ASSERT(maps[0].has_functions && maps[0].has_filenames && maps[0].has_line_numbers &&
            maps[0].has_inline_frames);
  PT_ASSERT(ra >= maps[0].start && ra < maps[0].limit);
  /* cached: same answer again */
  ptp_sym_result r2;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, ra - 1, &r2), 0);
  PT_ASSERT_UINT_EQ(r2.nframes, 2);
  PT_ASSERT_STR_EQ(r2.frames[1].name, "sym_outer");
  ptp_symbolizer_del(s);
}

PT_TEST(prof_sym_leaf_at_entry) {
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  ptp_sym_result r;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)&sym_outer, &r), 0);
  PT_ASSERT_UINT_EQ(r.nframes, 1);
  PT_ASSERT_STR_EQ(r.frames[0].name, "sym_outer");
  PT_ASSERT_INT_EQ(r.frames[0].start_line, SYM_OUTER_DECL_LINE);
  PT_ASSERT_INT_EQ(r.frames[0].line, SYM_OUTER_DECL_LINE);
  ptp_symbolizer_del(s);
}

PT_TEST(prof_sym_libc_and_vdso) {
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  void *(*volatile mp)(size_t) = libc_malloc();
  ptp_sym_result r;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)mp + 4, &r), 0);
  PT_ASSERT(r.mapping > 0);
  PT_ASSERT(r.nframes >= 1);
  PT_ASSERT_STR_EQ(r.frames[r.nframes - 1].name, "malloc");
  const ptp_sym_mapping *maps;
  size_t n = ptp_symbolizer_mappings(s, &maps);
  PT_ASSERT(strstr(maps[r.mapping].file, "libc.so") != NULL);
  PT_ASSERT(strlen(maps[r.mapping].build_id) == 40);
  PT_ASSERT(maps[r.mapping].has_functions);
  /* aliases: free, not cfree (compat) or __libc_free (internal) */
  void *lc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *fr = lc ? dlsym(lc, "free") : NULL;
  PT_ASSERT(fr != NULL);
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)fr, &r), 0);
  PT_ASSERT(r.nframes >= 1);
  PT_ASSERT_STR_EQ(r.frames[r.nframes - 1].name, "free");

  /* the vDSO: a mapping named [vdso]; clock_gettime lives there */
  uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (!vdso) PT_SKIP("no vDSO");
  size_t vi = n;
  for (size_t i = 0; i < n; i++)
    if (strcmp(maps[i].file, "[vdso]") == 0) vi = i;
  PT_ASSERT_MSG(vi < n, "no [vdso] mapping");
  PT_ASSERT(strcmp(maps[vi].file, "[vvar]") != 0);
  void *h = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
  void *cg = h ? dlsym(h, "__vdso_clock_gettime") : NULL;
  if (cg) {
    PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)cg, &r), 0);
    PT_ASSERT_INT_EQ(r.mapping, (int)vi);
    PT_ASSERT_UINT_EQ(r.nframes, 1);
    PT_ASSERT(strstr(r.frames[0].name, "clock_gettime") != NULL);
    PT_ASSERT(maps[vi].has_functions);
  }
  /* an address nowhere: no mapping, no frames */
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, 0x10, &r), 0);
  PT_ASSERT_INT_EQ(r.mapping, -1);
  PT_ASSERT_UINT_EQ(r.nframes, 0);
  ptp_symbolizer_del(s);
}

static int count_objs(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info; (void)size;
  ++*(int *)data;
  return 0;
}

PT_TEST(prof_sym_refresh_after_dlopen) {
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  const ptp_sym_mapping *maps;
  size_t n0 = ptp_symbolizer_mappings(s, &maps);
  /* unchanged: refresh keeps the list */
  PT_ASSERT_INT_EQ(ptp_symbolizer_refresh(s), 0);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_mappings(s, &maps), n0);
  void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) PT_SKIP("libz.so.1 not loadable");
  int nobj = 0;
  dl_iterate_phdr(count_objs, &nobj);
  PT_ASSERT_INT_EQ(ptp_symbolizer_refresh(s), 0);
  size_t n1 = ptp_symbolizer_mappings(s, &maps);
  int found = 0;
  for (size_t i = 0; i < n1; i++) found |= strstr(maps[i].file, "libz.so") != NULL;
  void *fn = dlsym(h, "crc32");
  PT_ASSERT(fn != NULL);
  ptp_sym_result r;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)fn + 1, &r), 0);
  PT_ASSERT(r.mapping >= 0);
  PT_ASSERT(strstr(maps[r.mapping].file, "libz.so") != NULL);
  PT_ASSERT(r.nframes >= 1);
  PT_ASSERT_STR_EQ(r.frames[r.nframes - 1].name, "crc32");   /* no @VERSION suffix */
  PT_ASSERT(found);
  /* The test binary may already link zlib (libptprof does); then dlopen
   * only bumped a refcount and the list is the same size. */
  PT_ASSERT(n1 >= n0);
  ptp_symbolizer_del(s);
}

PT_TEST(prof_sym_ignores_debuginfod) {
  /* A DEBUGINFOD_URLS pointing at an unroutable address must change
   * nothing: no debuginfod client is ever asked. */
  setenv("DEBUGINFOD_URLS", "http://192.0.2.1:1/", 1);
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  void *(*volatile mp)(size_t) = libc_malloc();
  ptp_sym_result r;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)mp, &r), 0);
  PT_ASSERT(r.nframes >= 1);
  PT_ASSERT(dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_NOLOAD) == NULL);
  ptp_symbolizer_del(s);
}

/* Separate debug info: a library whose DWARF lives in a .debug file found
 * through .gnu_debuglink (next to it), and a stripped one without any: ELF
 * symbols only. Built here with the system compiler and objcopy. */
static void run_ok(char *const argv[]) {
  char *out = NULL;
  int rc = pt_run(argv, &out, 60000);
  if (rc == 127) PT_SKIP("compiler/objcopy not available");
  PT_ASSERT_MSG(rc == 0, "%s failed (%d): %s", argv[0], rc, out);
  free(out);
}

PT_TEST_T(prof_sym_separate_debug_file_and_stripped, 60000) {
  char *dir = pt_tmpdir("symdbg");
  char src[512], lib[512], dbg[512], lib2[512];
  snprintf(src, sizeof src, "%s/sep.c", dir);
  snprintf(lib, sizeof lib, "%s/libsep.so", dir);
  snprintf(dbg, sizeof dbg, "%s/libsep.so.debug", dir);
  snprintf(lib2, sizeof lib2, "%s/libbare.so", dir);
  const char *code =
    "__attribute__((noinline)) int sep_fn(int x) {\n"   /* line 1 */
    "  int y = x * 3;\n"
    "  return y ^ 5;\n"
    "}\n";
  pt_write_file(src, code, strlen(code));
  char *cc1[] = {"cc", "-O2", "-g", "-fPIC", "-shared", "-Wl,--build-id", "-o", lib, src, NULL};
  run_ok(cc1);
  char *cc2[] = {"cc", "-O2", "-g", "-fPIC", "-shared", "-Wl,--build-id", "-o", lib2, src, NULL};
  run_ok(cc2);
  char *oc1[] = {"objcopy", "--only-keep-debug", lib, dbg, NULL};
  run_ok(oc1);
  char dl[600];
  snprintf(dl, sizeof dl, "--add-gnu-debuglink=%s", dbg);
  char *oc2[] = {"objcopy", "--strip-debug", dl, lib, NULL};
  run_ok(oc2);
  char *oc3[] = {"objcopy", "--strip-all", lib2, NULL};
  run_ok(oc3);

  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  PT_ASSERT_MSG(h, "dlopen: %s", dlerror());
  void *h2 = dlopen(lib2, RTLD_NOW | RTLD_LOCAL);
  PT_ASSERT_MSG(h2, "dlopen: %s", dlerror());
  void *fn = dlsym(h, "sep_fn"), *fn2 = dlsym(h2, "sep_fn");
  PT_ASSERT(fn && fn2);
  PT_ASSERT_INT_EQ(ptp_symbolizer_refresh(s), 0);

  ptp_sym_result r;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)fn, &r), 0);
  const ptp_sym_mapping *maps;
  ptp_symbolizer_mappings(s, &maps);
  PT_ASSERT(r.mapping >= 0);
  PT_ASSERT_STR_EQ(maps[r.mapping].file, lib);
  PT_ASSERT_UINT_EQ(r.nframes, 1);
  PT_ASSERT_STR_EQ(r.frames[0].name, "sep_fn");
  PT_ASSERT_INT_EQ(r.frames[0].start_line, 1);
  PT_ASSERT(ends_with(r.frames[0].file, "sep.c"));
  PT_ASSERT(maps[r.mapping].has_line_numbers);

  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)fn2 + 1, &r), 0);
  PT_ASSERT(r.mapping >= 0);
  PT_ASSERT_STR_EQ(maps[r.mapping].file, lib2);
  PT_ASSERT_UINT_EQ(r.nframes, 1);
  PT_ASSERT_STR_EQ(r.frames[0].name, "sep_fn");
  PT_ASSERT_INT_EQ(r.frames[0].line, 0);
  PT_ASSERT(maps[r.mapping].has_functions && !maps[r.mapping].has_line_numbers);

  /* dlclose: the next refresh drops the objects (and their cached PCs) */
  dlclose(h);
  dlclose(h2);
  PT_ASSERT_INT_EQ(ptp_symbolizer_refresh(s), 0);
  size_t n = ptp_symbolizer_mappings(s, &maps);
  for (size_t i = 0; i < n; i++) PT_ASSERT(strstr(maps[i].file, "libsep.so") == NULL);
  ptp_symbolizer_del(s);
  pt_rm_rf(dir);
  free(dir);
}

/* Debian's -dbgsym packages are dwz-compressed: DIEs shared by several
 * objects move into a "multifile" named by .gnu_debugaltlink, and the
 * abstract origin of an inlined function may live there. */
PT_TEST_T(prof_sym_dwz_multifile, 60000) {
  char *dir = pt_tmpdir("symdwz");
  char path[8][512];
  const char *names[] = {"common.h", "a.c", "b.c", "liba.so", "libb.so", "liba.so.debug",
                         "libb.so.debug", "common.debug"};
  for (int i = 0; i < 8; i++) snprintf(path[i], sizeof path[i], "%s/%s", dir, names[i]);
  const char *hdr =
    "struct point { int x, y; const char *label; struct point *next; };\n"
    "struct shape { struct point pts[4]; double area; unsigned flags; };\n"
    "static inline __attribute__((always_inline)) int dwz_inl(const struct shape *s) {\n"
    "  return s->pts[0].x + (int)s->area;\n"
    "}\n";
  pt_write_file(path[0], hdr, strlen(hdr));
  for (int k = 0; k < 2; k++) {
    char code[512];
    int n = snprintf(code, sizeof code,
                     "#include \"common.h\"\n"
                     "__attribute__((noinline)) int fn_%c(struct shape *s, struct point *p) {\n"
                     "  s->pts[1] = *p;\n"
                     "  return dwz_inl(s) + p->y;\n"
                     "}\n", 'a' + k);
    pt_write_file(path[1 + k], code, (size_t)n);
    char *cc[] = {"cc", "-O2", "-g", "-fPIC", "-shared", "-Wl,--build-id", "-o", path[3 + k], path[1 + k], NULL};
    run_ok(cc);
    char *oc[] = {"objcopy", "--only-keep-debug", path[3 + k], path[5 + k], NULL};
    run_ok(oc);
  }
  char *dwz[] = {"dwz", "-m", path[7], "-M", path[7], path[5], path[6], NULL};
  char *out = NULL;
  int rc = pt_run(dwz, &out, 60000);
  free(out);
  if (rc == 127) PT_SKIP("dwz not installed");
  PT_ASSERT_INT_EQ(rc, 0);
  if (access(path[7], F_OK) != 0) PT_SKIP("dwz made no multifile");
  for (int k = 0; k < 2; k++) {
    char dl[600];
    snprintf(dl, sizeof dl, "--add-gnu-debuglink=%s", path[5 + k]);
    char *oc[] = {"objcopy", "--strip-debug", dl, path[3 + k], NULL};
    run_ok(oc);
  }
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  void *h = dlopen(path[3], RTLD_NOW | RTLD_LOCAL);
  PT_ASSERT_MSG(h, "dlopen: %s", dlerror());
  unsigned char *fn = dlsym(h, "fn_a");
  PT_ASSERT(fn);
  PT_ASSERT_INT_EQ(ptp_symbolizer_refresh(s), 0);
  int found = 0;
  for (int off = 0; off < 64 && !found; off++) {
    ptp_sym_result r;
    PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(s, (uintptr_t)(fn + off), &r), 0);
    PT_ASSERT(r.nframes >= 1);
    PT_ASSERT_STR_EQ(r.frames[r.nframes - 1].name, "fn_a");
    if (r.nframes == 2) {
      PT_ASSERT_STR_EQ(r.frames[0].name, "dwz_inl");
      PT_ASSERT(ends_with(r.frames[0].file, "common.h"));
      PT_ASSERT_INT_EQ(r.frames[0].start_line, 3);
      PT_ASSERT_INT_EQ(r.frames[1].line, 4);
      found = 1;
    }
  }
  PT_ASSERT_MSG(found, "no address of fn_a resolved to the inlined dwz_inl");
  ptp_symbolizer_del(s);
  dlclose(h);
  pt_rm_rf(dir);
  free(dir);
}
