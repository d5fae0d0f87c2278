/*
 * test_symcache.c - the persistent symbol cache (ptp_symcache + its use by
 * the symbolizer) on real PCs of this binary (-O2 -g, inline chains) and of
 * libc (DWARF from libc6-dbg when installed, else its ELF symbols):
 *   - every result from the cache, cold (filling) and warm (hit), equals the
 *     result without any cache, field by field, for thousands of PCs;
 *   - a warm process opens no object at all for the PCs seen before, and
 *     hits for PCs never seen in a compile unit seen before;
 *   - a corrupt or truncated cache file is ignored and rebuilt; a file of
 *     another build id is never used;
 *   - two processes filling the same cache at once leave a valid file, no
 *     temp files, and correct results;
 *   - files 0600, the directory 0700 under umask 000; a directory others may
 *     write into is refused;
 *   - a "not whole" mark decided under lower limits than the library's is
 *     expired: the object is filled whole and the mark cleared (or, when
 *     the fill fails again, the mark records the library's limits); one
 *     decided under the library's limits or higher stands (no fill tried).
 */
#include "pt_test.h"
#include "prof/symbols/ptp_symbolize.h"
#include "prof/cache/ptp_cachefile.h"
#include "prof/symbols/ptp_symcache.h"
#include "sym_results.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned g_sc_sink;

/* libptt_nofp (tests/prof/sampler_nofp_lib.c, linked into this binary):
 * a small library with DWARF */
uint64_t ptt_nofp_outer(void (*cb)(void *), void *arg, int n);

__attribute__((noinline, noclone)) static unsigned sc_leaf(unsigned x) {
  g_sc_sink = x * 3u;
  __asm__ volatile("" ::: "memory");
  return g_sc_sink + 1;
}

static inline __attribute__((always_inline)) unsigned sc_inl(unsigned x) {
  unsigned r = sc_leaf(x) * 5u;
  __asm__ volatile("" ::: "memory");
  return r + sc_leaf(r);
}

__attribute__((noinline, noclone)) static unsigned sc_host_a(unsigned x) {
  unsigned r = sc_inl(x);
  for (unsigned i = 0; i < (x & 7u); i++) r += sc_inl(r + i);
  return r;
}

__attribute__((noinline, noclone)) static unsigned sc_host_b(unsigned x) {
  unsigned r = sc_leaf(x + 1);
  if (x & 1u) r += sc_inl(r);
  return r ^ sc_leaf(r);
}

static void *libc_sym(const char *name) {
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  PT_ASSERT(h);
  void *p = dlsym(h, name);
  PT_ASSERT_MSG(p, "no %s in libc", name);
  return p;
}

static pcset main_pcs_a(void) {
  pcset s = {0};
  ptt_pcs_add_range(&s, (const void *)sc_host_a, 160);
  ptt_pcs_add_range(&s, (const void *)sc_leaf, 32);
  return s;
}

static pcset libc_pcs(int which) {
  static const char *a[] = {"malloc", "free", "qsort", NULL};
  static const char *b[] = {"snprintf", "strtol", "fopen", NULL};
  pcset s = {0};
  for (const char **n = which ? b : a; *n; n++) ptt_pcs_add_range(&s, libc_sym(*n), 400);
  return s;
}

/* Resolves every PC of s with sym and checks each result against want (an
 * uncached symbolizer's). */
static void assert_resolves_as(ptp_symbolizer *sym, const pcset *s, char **want, const char *what) {
  char **got = ptt_resolve_all(sym, s);
  for (size_t i = 0; i < s->n; i++)
    PT_ASSERT_MSG(!strcmp(want[i], got[i]), "%s: pc %#llx differs:\n  without cache: %s\n  with cache:    %s",
                  what, (unsigned long long)s->pc[i], want[i], got[i]);
  ptt_free_results(got, s->n);
}

static ptp_symbolizer *sym_with(const char *dir) {
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(s, dir), 0);
  return s;
}

static const ptp_sym_mapping *mapping_of(ptp_symbolizer *s, uint64_t pc) {
  const ptp_sym_mapping *maps;
  size_t n = ptp_symbolizer_mappings(s, &maps);
  for (size_t i = 0; i < n; i++)
    if (pc >= maps[i].start && pc < maps[i].limit) return &maps[i];
  return NULL;
}

/* Path of the cache file of the object holding pc. */
static char *cache_file_of(ptp_symbolizer *s, const char *dir, uint64_t pc) {
  const ptp_sym_mapping *m = mapping_of(s, pc);
  PT_ASSERT(m && m->build_id[0]);
  size_t n = strlen(dir) + strlen(m->build_id) + 8;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s.sym", dir, m->build_id);
  return p;
}

PT_TEST_T(prof_symcache_hit_miss_same_results, 120000) {
  char *root = pt_tmpdir("symcache");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/c/symbols", root);
  pcset a = main_pcs_a(), l = libc_pcs(0);
  PT_ASSERT(sc_host_a(3) && sc_host_b(3));

  ptp_symbolizer *plain = sym_with(NULL);
  char **want_a = ptt_resolve_all(plain, &a), **want_l = ptt_resolve_all(plain, &l);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(plain, &st);
  PT_ASSERT_UINT_EQ(st.cache_hits, 0);

  /* cold: misses fill the cache; results unchanged */
  ptp_symbolizer *cold = sym_with(dir);
  assert_resolves_as(cold, &a, want_a, "cold, main");
  assert_resolves_as(cold, &l, want_l, "cold, libc");
  ptp_symbolizer_get_stats(cold, &st);
  PT_ASSERT(st.resolved > 0 && st.modules_opened >= 2);
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(cold), 0);
  char *fmain = cache_file_of(cold, dir, a.pc[0]);
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(fmain, &sb), 0);
  PT_ASSERT_UINT_EQ(sb.st_mode & 07777, 0600);
  PT_ASSERT_INT_EQ(stat(dir, &sb), 0);
  PT_ASSERT_UINT_EQ(sb.st_mode & 07777, 0700);
  ptp_symbolizer_del(cold);

  /* warm: all hits, nothing opened, same results */
  ptp_symbolizer *warm = sym_with(dir);
  assert_resolves_as(warm, &a, want_a, "warm, main");
  assert_resolves_as(warm, &l, want_l, "warm, libc");
  ptp_symbolizer_get_stats(warm, &st);
  PT_ASSERT_UINT_EQ(st.modules_opened, 0);
  PT_ASSERT_UINT_EQ(st.cache_hits, st.lookups);
  PT_ASSERT(st.cache_files_loaded >= 2);
  /* the mapping flags come from the cache too */
  const ptp_sym_mapping *mm = mapping_of(warm, a.pc[0]);
  PT_ASSERT(mm->has_functions && mm->has_filenames && mm->has_line_numbers && mm->has_inline_frames);
  /* PCs never looked up, in a compile unit seen before: hits as well */
  pcset b = {0};
  ptt_pcs_add_range(&b, (const void *)sc_host_b, 96);
  char **want_b = ptt_resolve_all(plain, &b);
  ptp_symbolizer_stats st0;
  ptp_symbolizer_get_stats(warm, &st0);
  assert_resolves_as(warm, &b, want_b, "warm, same CU, new PCs");
  ptp_symbolizer_get_stats(warm, &st);
  PT_ASSERT_UINT_EQ(st.modules_opened, 0);
  PT_ASSERT(st.lookups > st0.lookups);   /* some of b lie past sc_host_a's 160 bytes */
  PT_ASSERT_UINT_EQ(st.cache_hits - st0.cache_hits, st.lookups - st0.lookups);
  ptp_symbolizer_del(warm);

  ptt_free_results(want_a, a.n);
  ptt_free_results(want_l, l.n);
  ptt_free_results(want_b, b.n);
  ptp_symbolizer_del(plain);
  free(a.pc);
  free(l.pc);
  free(b.pc);
  free(fmain);
  pt_rm_rf(root);
  free(root);
}

/* One symbolizer on dir resolving pcs (checked against want); its stats. */
static ptp_symbolizer_stats run_pcs(const char *dir, const pcset *pcs, char **want, const char *what) {
  ptp_symbolizer *s = sym_with(dir);
  assert_resolves_as(s, pcs, want, what);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(s, &st);
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(s), 0);
  ptp_symbolizer_del(s);
  return st;
}

static void corrupt_and_check(const char *dir, const pcset *a, char **want, const char *fmain,
                              void (*damage)(const char *path), const char *what) {
  damage(fmain);
  ptp_symbolizer_stats st = run_pcs(dir, a, want, what);
  PT_ASSERT_MSG(st.cache_files_rejected == 1, "%s: %llu files rejected", what,
                (unsigned long long)st.cache_files_rejected);
  PT_ASSERT_MSG(st.modules_opened >= 1, "%s: nothing resolved again", what);
  /* rebuilt: the next process loads it and opens nothing */
  ptp_symbolizer *s = sym_with(dir);
  assert_resolves_as(s, a, want, what);
  ptp_symbolizer_get_stats(s, &st);
  PT_ASSERT_UINT_EQ(st.cache_files_rejected, 0);
  PT_ASSERT_UINT_EQ(st.modules_opened, 0);
  ptp_symbolizer_del(s);
}

/* One byte of every copy of a name the lookups return (sc_host_a): blocks
 * are read as lookups need them, so the damage must lie where they read;
 * a file whose strings' checksums were not checked would hand out the
 * damaged name. */
static void flip_name(const char *path) {
  size_t n, hits = 0;
  char *b = pt_read_file(path, &n);
  PT_ASSERT(b && n > 400);
  for (char *p = b; (p = memmem(p, (size_t)(b + n - p), "sc_host_a", 9)) != NULL; p += 9, hits++)
    p[3] ^= 0x20;   /* sc_Host_a */
  PT_ASSERT(hits > 0);
  pt_write_file(path, b, n);
  free(b);
}

static void truncate_half(const char *path) {
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(path, &sb), 0);
  PT_ASSERT_INT_EQ(truncate(path, sb.st_size / 2), 0);
}

static void garbage(const char *path) { pt_write_file(path, "PTPSYMC\nnot really", 18); }

PT_TEST_T(prof_symcache_corrupt_file_rebuilt, 120000) {
  char *root = pt_tmpdir("symcache-bad");
  pcset a = main_pcs_a();
  ptp_symbolizer *plain = sym_with(NULL);
  char **want = ptt_resolve_all(plain, &a);
  ptp_symbolizer *s = sym_with(root);
  ptt_free_results(ptt_resolve_all(s, &a), a.n);
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(s), 0);
  char *fmain = cache_file_of(s, root, a.pc[0]);
  ptp_symbolizer_del(s);
  corrupt_and_check(root, &a, want, fmain, flip_name, "a flipped byte in a name");
  corrupt_and_check(root, &a, want, fmain, truncate_half, "truncated");
  corrupt_and_check(root, &a, want, fmain, garbage, "garbage");
  ptt_free_results(want, a.n);
  ptp_symbolizer_del(plain);
  free(a.pc);
  free(fmain);
  pt_rm_rf(root);
  free(root);
}

/* A file renamed to another build id's name (a rebuilt object reusing a
 * path is keyed by its new id) is never used for it. */
PT_TEST(prof_symcache_other_build_id_ignored) {
  char *root = pt_tmpdir("symcache-bid");
  ptp_symcache *c;
  const char *ida = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", *idb = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, root, ida), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_MISSING);
  ptp_sym_frame f = {"fa", "fa", "a.c", 1, 2, 3};
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, 0x100, 0x200, &f, 1), 0);
  ptp_sym_frame f2 = {"fb", "fb", "b.c", 4, 5, 6};
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, 0x180, 0x280, &f2, 1), 0);   /* overlap: trimmed */
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, 0x120, 0x1f0, &f2, 1), 0);   /* inside: dropped */
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, 0x300, 0x300, &f, 1), -EINVAL);
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, root, ida), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);
  const ptp_sym_frame *got;
  uint32_t n;
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x1ff, &got, &n), 1);
  PT_ASSERT_UINT_EQ(n, 1);
  PT_ASSERT_STR_EQ(got[0].name, "fa");
  PT_ASSERT_INT_EQ(got[0].column, 3);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x180, &got, &n), 1);   /* the older one */
  PT_ASSERT_STR_EQ(got[0].name, "fa");
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x200, &got, &n), 1);   /* what lies past it */
  PT_ASSERT_STR_EQ(got[0].name, "fb");
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x27f, &got, &n), 1);
  PT_ASSERT_STR_EQ(got[0].name, "fb");
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x280, &got, &n), 0);
  ptp_symcache_del(c);
  char pa[600], pb[600];
  snprintf(pa, sizeof pa, "%s/%s.sym", root, ida);
  snprintf(pb, sizeof pb, "%s/%s.sym", root, idb);
  PT_ASSERT_INT_EQ(rename(pa, pb), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, root, idb), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_REJECTED);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x150, &got, &n), 0);
  ptp_symcache_del(c);
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, root, "../x"), -EINVAL);
  pt_rm_rf(root);
  free(root);
}

static size_t count_tmp(const char *dir) {
  DIR *d = opendir(dir);
  PT_ASSERT(d);
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (strstr(de->d_name, ".tmp")) n++;
  closedir(d);
  return n;
}

PT_TEST_T(prof_symcache_two_writers, 180000) {
  char *root = pt_tmpdir("symcache-two");
  pcset sets[2] = {libc_pcs(0), libc_pcs(1)};
  ptp_symbolizer *plain = sym_with(NULL);
  char **want[2] = {ptt_resolve_all(plain, &sets[0]), ptt_resolve_all(plain, &sets[1])};
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    PT_ASSERT(kids[k] >= 0);
    if (kids[k] == 0) {
      /* each round: a fresh process-like symbolizer, half the PCs, a save */
      for (int round = 0; round < 8; round++) {
        ptp_symbolizer *s;
        if (ptp_symbolizer_new(&s) || ptp_symbolizer_set_cache_dir(s, root)) _exit(2);
        pcset half = {sets[k].pc + (round % 2) * (sets[k].n / 2), sets[k].n / 2};
        for (size_t i = 0; i < half.n; i++) {
          ptp_sym_result r;
          if (ptp_symbolizer_lookup(s, half.pc[i], &r)) _exit(3);
        }
        if (ptp_symbolizer_flush(s)) _exit(4);
        ptp_symbolizer_del(s);
      }
      _exit(0);
    }
  }
  for (int k = 0; k < 2; k++) {
    int st;
    PT_ASSERT_INT_EQ(waitpid(kids[k], &st, 0), kids[k]);
    PT_ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed: status %#x", k, st);
  }
  PT_ASSERT_UINT_EQ(count_tmp(root), 0);
  ptp_symbolizer *s = sym_with(root);
  for (int k = 0; k < 2; k++) {
    assert_resolves_as(s, &sets[k], want[k], "after two writers");
  }
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(s, &st);
  PT_ASSERT_UINT_EQ(st.cache_files_rejected, 0);
  PT_ASSERT(st.cache_files_loaded >= 1);
  PT_ASSERT(st.cache_hits > 0);
  ptp_symbolizer_del(s);
  for (int k = 0; k < 2; k++) {
    ptt_free_results(want[k], sets[k].n);
    free(sets[k].pc);
  }
  ptp_symbolizer_del(plain);
  pt_rm_rf(root);
  free(root);
}

PT_TEST(prof_symcache_dir_safety) {
  char *root = pt_tmpdir("symcache-dir");
  char d[512], e[512], l[512], buf[600];
  snprintf(d, sizeof d, "%s/a/b", root);
  mode_t old = umask(0);
  PT_ASSERT_INT_EQ(ptp_cachefile_prepare_dir(d), 0);
  umask(old);
  struct stat sb;
  snprintf(buf, sizeof buf, "%s/a", root);
  PT_ASSERT_INT_EQ(stat(buf, &sb), 0);
  PT_ASSERT_UINT_EQ(sb.st_mode & 07777, 0700);
  PT_ASSERT_INT_EQ(stat(d, &sb), 0);
  PT_ASSERT_UINT_EQ(sb.st_mode & 07777, 0700);
  snprintf(e, sizeof e, "%s/open", root);
  PT_ASSERT_INT_EQ(mkdir(e, 0700), 0);
  PT_ASSERT_INT_EQ(chmod(e, 0777), 0);
  PT_ASSERT_INT_EQ(ptp_cachefile_prepare_dir(e), -EPERM);
  ptp_symbolizer *s;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&s), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(s, e), -EPERM);
  PT_ASSERT(ptp_symbolizer_cache_dir(s) == NULL);
  ptp_symbolizer_del(s);
  snprintf(l, sizeof l, "%s/link", root);
  PT_ASSERT_INT_EQ(symlink(d, l), 0);
  PT_ASSERT_INT_EQ(ptp_cachefile_prepare_dir(l), -ENOTDIR);
  /* the default location */
  char *saved = getenv("PTPROF_SYMCACHE") ? strdup(getenv("PTPROF_SYMCACHE")) : NULL;
  setenv("PTPROF_SYMCACHE", "off", 1);
  PT_ASSERT_INT_EQ(ptp_symcache_default_dir(buf, sizeof buf), -ENOENT);
  unsetenv("PTPROF_SYMCACHE");
  char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  setenv("XDG_CACHE_HOME", "/x/y", 1);
  PT_ASSERT_INT_EQ(ptp_symcache_default_dir(buf, sizeof buf), 0);
  PT_ASSERT_STR_EQ(buf, "/x/y/ptprof/symbols");
  if (xdg) setenv("XDG_CACHE_HOME", xdg, 1); else unsetenv("XDG_CACHE_HOME");
  if (saved) setenv("PTPROF_SYMCACHE", saved, 1);
  free(xdg);
  free(saved);
  pt_rm_rf(root);
  free(root);
}

/* Every address of the executable mappings of the object holding fn, one
 * in `stride`. */
static pcset object_pcs(ptp_symbolizer *s, const void *fn, size_t stride) {
  const ptp_sym_mapping *m = mapping_of(s, (uint64_t)(uintptr_t)fn), *maps;
  PT_ASSERT(m && m->build_id[0]);
  size_t n = ptp_symbolizer_mappings(s, &maps);
  pcset out = {0};
  for (size_t i = 0; i < n; i++) {
    if (strcmp(maps[i].file, m->file) != 0) continue;
    for (uint64_t a = maps[i].start; a < maps[i].limit; a += stride) {
      out.pc = realloc(out.pc, (out.n + 1) * sizeof *out.pc);
      PT_ASSERT(out.pc);
      out.pc[out.n++] = a;
    }
  }
  PT_ASSERT(out.n > 0);
  return out;
}

/* The two objects the whole-object tests use: a small library with DWARF
 * (libptt_nofp, built here: dfn) and a Debian one without (zlib: zfn),
 * with a fresh cache directory below a temp root. */
typedef struct two_objs {
  char *root;
  char dir[512];
  void *z;
  const void *zfn, *dfn;
} two_objs;

static two_objs two_objs_open(const char *tag) {
  two_objs o = {.root = pt_tmpdir(tag)};
  snprintf(o.dir, sizeof o.dir, "%s/c/symbols", o.root);
  o.z = dlopen("libz.so.1", RTLD_NOW);
  PT_ASSERT(o.z);
  o.zfn = dlsym(o.z, "crc32");
  o.dfn = (const void *)ptt_nofp_outer;
  PT_ASSERT(o.zfn);
  return o;
}

static void two_objs_close(two_objs *o) {
  dlclose(o->z);
  pt_rm_rf(o->root);
  free(o->root);
}

/* Frees what a two-object test resolved with plain: both address sets
 * and their expected results, and plain. */
static void free_two_sets(ptp_symbolizer *plain, pcset *d, char **want_d, pcset *zs,
                          char **want_z) {
  ptt_free_results(want_d, d->n);
  ptt_free_results(want_z, zs->n);
  ptp_symbolizer_del(plain);
  free(d->pc);
  free(zs->pc);
}

/* An object opened once for a miss is cached whole: a later process
 * answers every address of it (other functions, other compile units, the
 * PLT, padding, code outside any CU or symbol) from the cache without
 * opening it, exactly as resolving from the object does. A small library
 * with DWARF (libptt_nofp, built here) and a Debian library without
 * (zlib): every address of the first, one in seven of the second. */
PT_TEST_T(prof_symcache_object_whole, 120000) {
  two_objs o = two_objs_open("symwhole");
  const char *dir = o.dir;
  const void *zfn = o.zfn, *dfn = o.dfn;

  ptp_symbolizer *plain = sym_with(NULL);
  pcset d = object_pcs(plain, dfn, 1), zs = object_pcs(plain, zfn, 7);
  char **want_d = ptt_resolve_all(plain, &d), **want_z = ptt_resolve_all(plain, &zs);
  PT_ASSERT(mapping_of(plain, d.pc[0])->has_filenames);   /* the library has DWARF */
  PT_ASSERT(!mapping_of(plain, zs.pc[0])->has_filenames);  /* zlib has none here */

  /* A file of an earlier run that cached one address alone (what a PC
   * outside every CU got): its interval starts where one of the whole
   * fill's starts, so the rewrite below must keep the rest of that one. */
  const ptp_sym_mapping *mp = mapping_of(plain, (uint64_t)(uintptr_t)dfn);
  struct link_map *lm = NULL;
  Dl_info dli;
  PT_ASSERT(dladdr1(dfn, &dli, (void **)&lm, RTLD_DL_LINKMAP) && lm);
  uint64_t rel = (uint64_t)(uintptr_t)dfn - lm->l_addr;
  ptp_sym_result r0;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(plain, (uint64_t)(uintptr_t)dfn, &r0), 0);
  PT_ASSERT(r0.nframes > 0);
  ptp_symcache *seed;
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(plain, dir), 0);   /* makes the directory */
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(plain, NULL), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_open(&seed, dir, mp->build_id), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_add(seed, rel, rel + 1, r0.frames, r0.nframes), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_save(seed), 0);
  ptp_symcache_del(seed);

  /* one miss in each: both filled whole, both marked complete */
  ptp_symbolizer *cold = sym_with(dir);
  pcset one = {0};
  ptt_pcs_add_range(&one, (const char *)dfn + 1, 1);   /* dfn itself is seeded */
  ptt_pcs_add_range(&one, zfn, 1);
  char **got = ptt_resolve_all(cold, &one);
  ptt_free_results(got, one.n);
  /* another process touched the file since: the save rewrites it, merging
   * the seeded interval with the fill's */
  char *seeded = cache_file_of(cold, dir, d.pc[0]);
  struct timespec old[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
  PT_ASSERT_INT_EQ(utimensat(AT_FDCWD, seeded, old, 0), 0);
  free(seeded);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(cold, &st);
  PT_ASSERT_UINT_EQ(st.modules_opened, 2);
  PT_ASSERT_UINT_EQ(st.objects_filled, 2);
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(cold), 0);
  const char *files[2] = {cache_file_of(cold, dir, d.pc[0]), cache_file_of(cold, dir, zs.pc[0])};
  ptp_symbolizer_del(cold);
  for (int i = 0; i < 2; i++) {
    ptp_symcache *c;
    const char *slash = strrchr(files[i], '/');
    char bid[160];
    snprintf(bid, sizeof bid, "%.*s", (int)(strlen(slash + 1) - 4), slash + 1);
    PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, bid), 0);
    PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);
    PT_ASSERT_MSG(ptp_symcache_flags(c) & PTP_SYMCACHE_COMPLETE, "%s not complete", files[i]);
    ptp_symcache_del(c);
  }

  /* a new process: every address from the cache, nothing opened */
  ptp_symbolizer *warm = sym_with(dir);
  assert_resolves_as(warm, &d, want_d, "whole object, DWARF");
  assert_resolves_as(warm, &zs, want_z, "whole object, ELF symbols");
  ptp_symbolizer_get_stats(warm, &st);
  PT_ASSERT_UINT_EQ(st.modules_opened, 0);
  PT_ASSERT_UINT_EQ(st.resolved, 0);
  PT_ASSERT_UINT_EQ(st.cache_hits, st.lookups);
  /* addresses that resolve to no frames (the PLT, padding) are answered
   * by the complete mark, not stored */
  PT_ASSERT(st.cache_complete_misses > 0);
  PT_ASSERT(mapping_of(warm, d.pc[0])->has_filenames);
  ptp_symbolizer_del(warm);

  free_two_sets(plain, &d, want_d, &zs, want_z);
  free(one.pc);
  free((void *)files[0]);
  free((void *)files[1]);
  two_objs_close(&o);
}

/* Once an object is cached whole and saved, the dump's release step closes
 * it (its Dwfl, symbol tables and indexes are freed, the cache's in-memory
 * copy too): the same addresses then resolve as before, from the cache,
 * without opening anything; an object whose cache is not complete (here:
 * none with the cache off) is never closed. */
/* d and zs resolved by s again as want_d and want_z say, every address
 * from the cache: no object opened and nothing resolved since st. Returns
 * s's stats after. */
static ptp_symbolizer_stats again_from_cache(ptp_symbolizer *s, const pcset *d, char **want_d,
                                             const pcset *zs, char **want_z,
                                             const ptp_symbolizer_stats *st, const char *what) {
  assert_resolves_as(s, d, want_d, what);
  assert_resolves_as(s, zs, want_z, what);
  ptp_symbolizer_stats st2;
  ptp_symbolizer_get_stats(s, &st2);
  PT_ASSERT_MSG(st2.modules_opened == st->modules_opened, "%s: an object opened again", what);
  PT_ASSERT_MSG(st2.resolved == st->resolved, "%s: resolved again", what);
  PT_ASSERT_MSG(st2.cache_hits - st->cache_hits == st2.lookups - st->lookups,
                "%s: a lookup not answered by the cache", what);
  return st2;
}

PT_TEST_T(prof_symcache_release_filled, 120000) {
  two_objs o = two_objs_open("symrel");
  const char *dir = o.dir;
  const void *zfn = o.zfn, *dfn = o.dfn;
  ptp_symbolizer *plain = sym_with(NULL);
  pcset d = object_pcs(plain, dfn, 3), zs = object_pcs(plain, zfn, 11);
  char **want_d = ptt_resolve_all(plain, &d), **want_z = ptt_resolve_all(plain, &zs);
  /* no cache: nothing is complete, nothing is closed */
  PT_ASSERT_UINT_EQ(ptp_symbolizer_release_filled(plain), 0);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(plain, &st);
  PT_ASSERT_UINT_EQ(st.modules_released, 0);

  ptp_symbolizer *s = sym_with(dir);
  assert_resolves_as(s, &d, want_d, "before the release, DWARF");
  assert_resolves_as(s, &zs, want_z, "before the release, ELF symbols");
  ptp_symbolizer_get_stats(s, &st);
  PT_ASSERT_UINT_EQ(st.objects_filled, 2);
  /* not saved yet: the cache does not hold the fill on disk, kept open */
  PT_ASSERT_UINT_EQ(ptp_symbolizer_release_filled(s), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(s), 0);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_release_filled(s), 2);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_release_filled(s), 0);   /* nothing left open */
  /* the same answers, every one from the cache, nothing opened again */
  ptp_symbolizer_stats st2 = again_from_cache(s, &d, want_d, &zs, want_z, &st, "after the release");
  PT_ASSERT_UINT_EQ(st2.modules_released, 2);
  PT_ASSERT(mapping_of(s, d.pc[0])->has_filenames);
  PT_ASSERT(mapping_of(s, zs.pc[0])->has_functions);
  ptp_symbolizer_del(s);

  free_two_sets(plain, &d, want_d, &zs, want_z);
  two_objs_close(&o);
}

/* What a long run keeps between snapshots, bounded: the PC cache and the
 * cache blocks its lookups read are counted (held); under the bound trim
 * does nothing; past it, everything is given back (held 0, one reset
 * counted, no descriptor left open), and the same addresses resolve the
 * same again, from the cache, opening nothing. */
PT_TEST_T(prof_symcache_trim_bounds_held, 120000) {
  two_objs o = two_objs_open("symtrim");
  ptp_symbolizer *plain = sym_with(NULL);
  pcset d = object_pcs(plain, o.dfn, 3), zs = object_pcs(plain, o.zfn, 11);
  char **want_d = ptt_resolve_all(plain, &d), **want_z = ptt_resolve_all(plain, &zs);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_held_max(plain), PTP_SYMBOLIZER_HELD_MAX);

  ptp_symbolizer *s = sym_with(o.dir);
  assert_resolves_as(s, &d, want_d, "filling");
  assert_resolves_as(s, &zs, want_z, "filling");
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(s), 0);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_release_filled(s), 2);   /* caches read lazily from now */
  assert_resolves_as(s, &d, want_d, "from the cache");
  assert_resolves_as(s, &zs, want_z, "from the cache");
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(s), 0);
  size_t held = ptp_symbolizer_held(s);
  PT_ASSERT(held > 0);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_trim(s), 0);              /* under the default bound */
  PT_ASSERT_UINT_EQ(ptp_symbolizer_held(s), held);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(s, &st);
  PT_ASSERT_UINT_EQ(st.held_resets, 0);

  int fds0 = ptt_count_fds();
  ptp_symbolizer_set_held_max(s, held - 1);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_trim(s), held);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_held(s), 0);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);
  ptp_symbolizer_get_stats(s, &st);
  PT_ASSERT_UINT_EQ(st.held_resets, 1);
  ptp_symbolizer_stats st2 = again_from_cache(s, &d, want_d, &zs, want_z, &st, "after the trim");
  PT_ASSERT(st2.lookups > st.lookups);                      /* looked up again, not remembered */
  PT_ASSERT(ptp_symbolizer_held(s) > 0);
  ptp_symbolizer_del(s);

  free_two_sets(plain, &d, want_d, &zs, want_z);
  two_objs_close(&o);
}

/* Another process's rewrite of the cache file at path: a new file with
 * the same bytes renamed over it (what a rewrite that found nothing new
 * writes). */
static void rewrite_as_other(const char *path) {
  size_t len;
  char *b = pt_read_file(path, &len);
  PT_ASSERT(b);
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.other-tmp", path);
  pt_write_file(tmp, b, len);
  PT_ASSERT_INT_EQ(rename(tmp, path), 0);
  free(b);
}

/* A cache file replaced between two snapshots by another process's
 * rewrite is followed: the addresses whose blocks were not read yet
 * resolve as before, from the new file, opening nothing (before, the
 * file was dropped and the object's debug info opened again); the old
 * file's memory counts as held until a trim gives it back. */
PT_TEST_T(prof_symcache_replaced_file_followed, 120000) {
  two_objs o = two_objs_open("symfollow");
  ptp_symbolizer *plain = sym_with(NULL);
  pcset d = object_pcs(plain, o.dfn, 3), zs = object_pcs(plain, o.zfn, 11);
  char **want_d = ptt_resolve_all(plain, &d), **want_z = ptt_resolve_all(plain, &zs);

  ptp_symbolizer *s = sym_with(o.dir);
  assert_resolves_as(s, &d, want_d, "filling");
  assert_resolves_as(s, &zs, want_z, "filling");
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(s), 0);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_release_filled(s), 2);   /* caches read lazily from now */
  /* a snapshot that looks up one address of each */
  pcset one = {0};
  ptt_pcs_add_range(&one, (const void *)(uintptr_t)d.pc[0], 1);
  ptt_pcs_add_range(&one, (const void *)(uintptr_t)zs.pc[0], 1);
  char **got = ptt_resolve_all(s, &one);
  PT_ASSERT_STR_EQ(got[0], want_d[0]);
  PT_ASSERT_STR_EQ(got[1], want_z[0]);
  ptt_free_results(got, one.n);
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(s), 0);   /* no descriptor kept */
  size_t held = ptp_symbolizer_held(s);

  char *fd_ = cache_file_of(s, o.dir, d.pc[0]), *fz = cache_file_of(s, o.dir, zs.pc[0]);
  rewrite_as_other(fd_);
  rewrite_as_other(fz);
  int fds0 = ptt_count_fds();
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(s, &st);
  ptp_symbolizer_stats st2 = again_from_cache(s, &d, want_d, &zs, want_z, &st, "after the rewrite");
  PT_ASSERT_UINT_EQ(st2.cache_files_rejected, 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(s), 0);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);
  /* the old files' blocks read before are held too, until a trim */
  size_t after = ptp_symbolizer_held(s);
  PT_ASSERT(after > held);
  ptp_symbolizer_set_held_max(s, 0);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_trim(s), after);
  PT_ASSERT_UINT_EQ(ptp_symbolizer_held(s), 0);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);
  ptp_symbolizer_set_held_max(s, PTP_SYMBOLIZER_HELD_MAX);
  ptp_symbolizer_get_stats(s, &st);
  again_from_cache(s, &d, want_d, &zs, want_z, &st, "after the trim");
  ptp_symbolizer_del(s);

  free(fd_);
  free(fz);
  free(one.pc);
  free_two_sets(plain, &d, want_d, &zs, want_z);
  two_objs_close(&o);
}

/* The same for an object of many compile units: libptprof.so (71 CUs with
 * DWARF, -O2 inline chains), loaded inert (no PTPROF_DIR: its constructor
 * starts nothing). One miss fills it; a new process answers ~16k
 * addresses spread over its code from the cache, as resolving them does,
 * opening nothing. */
PT_TEST_T(prof_symcache_object_whole_many_cus, 120000) {
  char *root = pt_tmpdir("symwhole2");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/c/symbols", root);
  char *lib = pt_build_path("libptprof.so");
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  PT_ASSERT_MSG(h, "dlopen %s: %s", lib, dlerror());
  const void *fn = dlsym(h, "ptprof_start");
  PT_ASSERT(fn);
  ptp_symbolizer *plain = sym_with(NULL);
  const ptp_sym_mapping *lm = mapping_of(plain, (uint64_t)(uintptr_t)fn);
  /* ~16k addresses spread over its code (1.35 MB of it under ASan), an
   * odd stride so that every alignment is met */
  size_t stride = (size_t)((lm->limit - lm->start) / 16384) | 1;
  pcset all = object_pcs(plain, fn, stride < 5 ? 5 : stride);
  char **want = ptt_resolve_all(plain, &all);

  ptp_symbolizer *cold = sym_with(dir);
  pcset one = {0};
  ptt_pcs_add_range(&one, fn, 1);
  char **got = ptt_resolve_all(cold, &one);
  ptt_free_results(got, one.n);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(cold, &st);
  PT_ASSERT_UINT_EQ(st.objects_filled, 1);
  PT_ASSERT(st.fill_pieces > 1000);
  PT_ASSERT_INT_EQ(ptp_symbolizer_flush(cold), 0);
  ptp_symbolizer_del(cold);

  ptp_symbolizer *warm = sym_with(dir);
  assert_resolves_as(warm, &all, want, "whole object, many CUs");
  ptp_symbolizer_get_stats(warm, &st);
  PT_ASSERT_UINT_EQ(st.modules_opened, 0);
  PT_ASSERT_UINT_EQ(st.cache_hits, st.lookups);
  ptp_symbolizer_del(warm);
  ptt_free_results(want, all.n);
  ptp_symbolizer_del(plain);
  free(all.pc);
  free(one.pc);
  free(lib);
  dlclose(h);
  pt_rm_rf(root);
  free(root);
}

/* The cache file of the object holding fn, seeded with a NOT_WHOLE mark
 * decided under lim (and its DWARF/symbol flags); with big, one interval
 * far past the object whose frame's name makes the file half of
 * PTP_SYMCACHE_FILE_MAX, so that any whole fill of the object fails at
 * the file bound (-ENOSPC). Returns the build id (static). */
static const char *seed_not_whole(ptp_symbolizer *plain, const char *dir, const void *fn,
                                  ptp_symcache_limits lim, bool big) {
  static char bid[160];
  const ptp_sym_mapping *mp = mapping_of(plain, (uint64_t)(uintptr_t)fn);
  PT_ASSERT(mp && mp->build_id[0]);
  snprintf(bid, sizeof bid, "%s", mp->build_id);
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(plain, dir), 0);   /* makes the directory */
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(plain, NULL), 0);
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, bid), 0);
  ptp_symcache_set_flags(c, PTP_SYMCACHE_HAS_SYMS | PTP_SYMCACHE_HAS_DWARF);
  ptp_symcache_set_not_whole(c, &lim);
  if (big) {
    size_t n = PTP_SYMCACHE_FILE_MAX / 2;
    char *name = malloc(n + 1);
    PT_ASSERT(name);
    memset(name, 'x', n);
    name[n] = 0;
    ptp_sym_frame f = {name, name, "far.c", 1, 1, 0};
    uint64_t far = 1ull << 44;
    PT_ASSERT_INT_EQ(ptp_symcache_add(c, far, far + 16, &f, 1), 0);
    free(name);
  }
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  return bid;
}

/* A NOT_WHOLE mark decided under lower limits than this library's (an
 * older library, bounds raised since) has expired: the first miss fills
 * the object whole after all, clears the mark, marks the file complete,
 * and a later process answers every address from the cache, opening
 * nothing. libptt_nofp (a small library with DWARF), every address. */
PT_TEST_T(prof_symcache_not_whole_expired_refilled, 120000) {
  char *root = pt_tmpdir("symnw-exp");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/c/symbols", root);
  const void *dfn = (const void *)ptt_nofp_outer;
  ptp_symbolizer *plain = sym_with(NULL);
  pcset d = object_pcs(plain, dfn, 1);
  char **want = ptt_resolve_all(plain, &d);
  const char *bid = seed_not_whole(plain, dir, dfn, (ptp_symcache_limits){1u << 10, PTP_SYMCACHE_FILE_MAX},
                                   false);

  pcset one = {0};
  ptt_pcs_add_range(&one, dfn, 1);
  char **want1 = ptt_resolve_all(plain, &one);
  ptp_symbolizer_stats st = run_pcs(dir, &one, want1, "expired mark, cold");
  PT_ASSERT_UINT_EQ(st.objects_filled, 1);   /* filled whole despite the mark */
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, bid), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);
  PT_ASSERT(ptp_symcache_flags(c) & PTP_SYMCACHE_COMPLETE);
  PT_ASSERT(!(ptp_symcache_flags(c) & PTP_SYMCACHE_NOT_WHOLE));
  ptp_symcache_limits lim;
  PT_ASSERT_INT_EQ(ptp_symcache_not_whole_limits(c, &lim), -ENOENT);
  ptp_symcache_del(c);

  st = run_pcs(dir, &d, want, "expired mark, refilled, warm");
  PT_ASSERT_UINT_EQ(st.modules_opened, 0);
  PT_ASSERT_UINT_EQ(st.cache_hits, st.lookups);
  PT_ASSERT_UINT_EQ(st.objects_filled, 0);

  ptt_free_results(want, d.n);
  ptt_free_results(want1, one.n);
  ptp_symbolizer_del(plain);
  free(d.pc);
  free(one.pc);
  pt_rm_rf(root);
  free(root);
}

/* A mark decided under this library's limits (or higher ones) stands: no
 * whole fill is tried (fill_ns counts the time of every try, failed ones
 * included). The library's own: an expired mark on a file already at the
 * file bound, so the fill tried again fails and records the limits it
 * was tried under (this library's), which the next process then keeps. */
PT_TEST_T(prof_symcache_not_whole_current_kept, 120000) {
  char *root = pt_tmpdir("symnw-kept");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/c/symbols", root);
  const void *dfn = (const void *)ptt_nofp_outer;
  ptp_symbolizer *plain = sym_with(NULL);
  pcset a = {0}, b = {0};
  ptt_pcs_add_range(&a, dfn, 1);
  ptt_pcs_add_range(&b, (const char *)dfn + 3, 1);
  char **want_a = ptt_resolve_all(plain, &a), **want_b = ptt_resolve_all(plain, &b);

  const char *bid = seed_not_whole(plain, dir, dfn, (ptp_symcache_limits){1u << 10, PTP_SYMCACHE_FILE_MAX},
                                   true);
  ptp_symbolizer_stats st = run_pcs(dir, &a, want_a, "expired mark, file full");
  PT_ASSERT(st.fill_ns > 0);                 /* tried whole again */
  PT_ASSERT_UINT_EQ(st.objects_filled, 0);   /* and failed at the file bound */
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, bid), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);
  ptp_symcache_limits cur;
  PT_ASSERT_INT_EQ(ptp_symcache_not_whole_limits(c, &cur), 0);
  PT_ASSERT(cur.fill_points > 1u << 10);   /* the library's, not the seed's */
  PT_ASSERT_UINT_EQ(cur.file_max, PTP_SYMCACHE_FILE_MAX);
  ptp_symcache_del(c);

  /* decided under the current limits: kept, no whole fill tried */
  st = run_pcs(dir, &b, want_b, "current mark");
  PT_ASSERT_UINT_EQ(st.fill_ns, 0);
  PT_ASSERT_UINT_EQ(st.objects_filled, 0);
  PT_ASSERT_UINT_EQ(st.modules_opened, 1);   /* resolved from the object */
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, bid), 0);
  ptp_symcache_limits again;
  PT_ASSERT_INT_EQ(ptp_symcache_not_whole_limits(c, &again), 0);
  PT_ASSERT(again.fill_points == cur.fill_points && again.file_max == cur.file_max);
  ptp_symcache_del(c);

  /* decided under higher limits than the library's: kept too, though a
   * whole fill would succeed (a small object, a small file) */
  pt_rm_rf(dir);
  (void)seed_not_whole(plain, dir, dfn, (ptp_symcache_limits){UINT32_MAX, UINT32_MAX}, false);
  st = run_pcs(dir, &a, want_a, "higher mark");
  PT_ASSERT_UINT_EQ(st.fill_ns, 0);
  PT_ASSERT_UINT_EQ(st.objects_filled, 0);

  ptt_free_results(want_a, a.n);
  ptt_free_results(want_b, b.n);
  ptp_symbolizer_del(plain);
  free(a.pc);
  free(b.pc);
  pt_rm_rf(root);
  free(root);
}
