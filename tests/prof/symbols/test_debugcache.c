/*
 * test_debugcache.c - the uncompressed debug-file copies (ptp_debugcache and
 * their use by the symbolizer), on libc6-dbg's real compressed debug files
 * (skipped when libc's debug file is not installed or not compressed):
 *   - a miss opens the compressed file and asks for a copy; after
 *     ptp_symbolizer_make_debug_copies a later symbolizer (symbol cache
 *     emptied) opens the copy (stats), and every result, field by field, for
 *     ~2400 libc PCs equals the result without any cache;
 *   - the copy has no compressed section, is 0600 in a 0700 directory;
 *   - a truncated copy, a garbage file and a symlink in its place are never
 *     used (results unchanged), removed, and replaced at the next make;
 *   - a copy carrying another build id is refused; making a copy for an id
 *     the source does not carry fails;
 *   - the size bound removes the least recently used copy, never the new one;
 *   - two processes making the same copy at once both succeed and leave one
 *     valid file and no temp file;
 *   - a debug directory others may write into is refused.
 */
#include "pt_test.h"
#include "prof/symbols/ptp_symcache.h"
#include "prof/symbols/ptp_debugcache.h"
#include "prof/symbols/ptp_symbolize.h"
#include "sym_results.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct dbgfile {
  char path[1024];
  unsigned char id[64];
  int idlen;
} dbgfile;

/* The build id of the ELF file at path (0 on failure). */
static int file_build_id(const char *path, unsigned char *id, int cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  elf_version(EV_CURRENT);
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  int n = 0;
  if (e) {
    const void *bits;
    ssize_t k = dwelf_elf_gnu_build_id(e, &bits);
    if (k > 0 && k <= cap) {
      memcpy(id, bits, (size_t)k);
      n = (int)k;
    }
    elf_end(e);
  }
  close(fd);
  return n;
}

static bool file_compressed(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool c = ptp_debugcache_compressed(fd);
  close(fd);
  return c;
}

/* libc's separate debug file (by libc's build id), or skip. */
static dbgfile libc_debug(void) {
  dbgfile d = {0};
  Dl_info info;
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  PT_ASSERT(h);
  PT_ASSERT(dladdr(dlsym(h, "malloc"), &info) && info.dli_fname);
  d.idlen = file_build_id(info.dli_fname, d.id, sizeof d.id);
  PT_ASSERT(d.idlen > 1);
  int n = snprintf(d.path, sizeof d.path, "/usr/lib/debug/.build-id/%02x/", d.id[0]);
  for (int i = 1; i < d.idlen; i++) n += snprintf(d.path + n, sizeof d.path - (size_t)n, "%02x", d.id[i]);
  snprintf(d.path + n, sizeof d.path - (size_t)n, ".debug");
  if (access(d.path, R_OK) != 0) PT_SKIP("libc6-dbg not installed");
  if (!file_compressed(d.path)) PT_SKIP("libc's debug file has no compressed sections");
  return d;
}

/* A second compressed debug file with a build id other than not_id. */
static bool other_debug(dbgfile *out, const dbgfile *not_id) {
  const char *root = "/usr/lib/debug/.build-id";
  DIR *d = opendir(root);
  if (!d) return false;
  struct dirent *de;
  bool found = false;
  while (!found && (de = readdir(d)) != NULL) {
    if (strlen(de->d_name) != 2) continue;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/%s", root, de->d_name);
    DIR *s = opendir(sub);
    if (!s) continue;
    struct dirent *fe;
    while (!found && (fe = readdir(s)) != NULL) {
      size_t l = strlen(fe->d_name);
      if (l < 7 || strcmp(fe->d_name + l - 6, ".debug") != 0) continue;
      snprintf(out->path, sizeof out->path, "%s/%s", sub, fe->d_name);
      struct stat st;
      if (stat(out->path, &st) != 0 || st.st_size > (8 << 20) || !file_compressed(out->path)) continue;
      out->idlen = file_build_id(out->path, out->id, sizeof out->id);
      found = out->idlen > 1 && (out->idlen != not_id->idlen || memcmp(out->id, not_id->id, (size_t)out->idlen));
    }
    closedir(s);
  }
  closedir(d);
  return found;
}

static void copy_path(char *buf, size_t cap, const char *dir, const dbgfile *d) {
  int n = snprintf(buf, cap, "%s/", dir);
  for (int i = 0; i < d->idlen; i++) n += snprintf(buf + n, cap - (size_t)n, "%02x", d->id[i]);
  snprintf(buf + n, cap - (size_t)n, ".debug");
}

static pcset libc_pcs(void) {
  static const char *names[] = {"malloc", "free", "qsort", "snprintf", "strtol", "fopen", NULL};
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  PT_ASSERT(h);
  pcset s = {0};
  for (const char **n = names; *n; n++) {
    void *p = dlsym(h, *n);
    PT_ASSERT_MSG(p, "no %s in libc", *n);
    ptt_pcs_add_range(&s, p, 400);
  }
  return s;
}

/* The results without any cache: what every run must reproduce. */
static char **reference(const pcset *s) {
  ptp_symbolizer *ref;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&ref), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(ref, NULL), 0);
  char **want = ptt_resolve_all(ref, s);
  ptp_symbolizer_del(ref);
  return want;
}

/* Removes the symbol cache's files (not the debug/ subdirectory): the next
 * symbolizer misses and must open libc's debug info again. */
static void drop_sym_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d && errno == ENOENT) return;   /* first run: made by the symbolizer */
  PT_ASSERT(d);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t l = strlen(de->d_name);
    if (l > 4 && !strcmp(de->d_name + l - 4, ".sym")) {
      char p[1200];
      snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
      PT_ASSERT_INT_EQ(unlink(p), 0);
    }
  }
  closedir(d);
}

/* A fresh symbolizer on dir (symbol cache emptied) resolving s: its
 * results must be want's; returns its stats after make_debug_copies. */
/* A symbol-cache file for libc that says "fill a compile unit at a time"
 * (PTP_SYMCACHE_NOT_WHOLE, decided under limits higher than any: the mark
 * stands for this library) and holds nothing: these tests are about the
 * debug copy a miss opens, and every run_once misses; filling all of libc
 * at each of them (the first miss of a process in an object is filled
 * whole) would resolve ~155k pieces a run, 13 times in
 * prof_debugcache_bad_copy_replaced (~8 s more under ASan). */
static void seed_libc_not_whole(const char *dir) {
  dbgfile lc = libc_debug();
  char hex[2 * sizeof lc.id + 1];
  for (int i = 0; i < lc.idlen; i++) snprintf(hex + 2 * i, 3, "%02x", lc.id[i]);
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, hex), 0);
  ptp_symcache_set_flags(c, PTP_SYMCACHE_HAS_SYMS | PTP_SYMCACHE_HAS_DWARF);
  ptp_symcache_set_not_whole(c, &(ptp_symcache_limits){UINT32_MAX, UINT32_MAX});
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
}

static ptp_symbolizer_stats run_once(const char *dir, const pcset *s, char **want, const char *what) {
  drop_sym_files(dir);
  seed_libc_not_whole(dir);
  ptp_symbolizer *sy;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&sy), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(sy, dir), 0);
  char **got = ptt_resolve_all(sy, s);
  for (size_t i = 0; i < s->n; i++)
    PT_ASSERT_MSG(!strcmp(want[i], got[i]), "%s: pc %#llx differs:\n  without cache: %s\n  now:           %s",
                  what, (unsigned long long)s->pc[i], want[i], got[i]);
  ptt_free_results(got, s->n);
  (void)ptp_symbolizer_make_debug_copies(sy);
  ptp_symbolizer_stats st;
  ptp_symbolizer_get_stats(sy, &st);
  ptp_symbolizer_del(sy);
  return st;
}

static size_t count_tmp(const char *dir) {
  DIR *d = opendir(dir);
  PT_ASSERT(d);
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t l = strlen(de->d_name);
    if (l > 4 && !strcmp(de->d_name + l - 4, ".tmp")) n++;
  }
  closedir(d);
  return n;
}

/* A debug-copy directory where the library has one: below a symbol
 * cache directory (<tmp>/debug; the directory rule checks both, and
 * $TMPDIR, pt_tmpdir's parent, may be shared). dc_rm removes the tree. */
static char *dc_dir(const char *tag) {
  char *top = pt_tmpdir(tag);
  size_t n = strlen(top) + sizeof "/debug";
  char *d = malloc(n);
  PT_ASSERT(d);
  snprintf(d, n, "%s/debug", top);
  PT_ASSERT_INT_EQ(mkdir(d, 0700), 0);
  free(top);
  return d;
}

static void dc_rm(char *dir) {
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST_T(prof_debugcache_copy_used_same_results, 180000) {
  dbgfile lc = libc_debug();
  pcset s = libc_pcs();
  char **want = reference(&s);

  char *root = pt_tmpdir("debugcache-hit");
  char dir[600], ddir[700], cp[900];
  snprintf(dir, sizeof dir, "%s/sym", root);
  snprintf(ddir, sizeof ddir, "%s/debug", dir);
  copy_path(cp, sizeof cp, ddir, &lc);
  mode_t old = umask(0);

  /* cold: the compressed file is opened, a copy is asked for and made */
  ptp_symbolizer_stats st = run_once(dir, &s, want, "cold");
  PT_ASSERT_UINT_EQ(st.debug_copies_used, 0);
  PT_ASSERT_UINT_EQ(st.debug_copies_made, 1);
  PT_ASSERT_UINT_EQ(st.debug_copy_errors, 0);
  struct stat fs, ds;
  PT_ASSERT_INT_EQ(stat(cp, &fs), 0);
  PT_ASSERT_INT_EQ(fs.st_mode & 0777, 0600);
  PT_ASSERT_INT_EQ(stat(ddir, &ds), 0);
  PT_ASSERT_INT_EQ(ds.st_mode & 0777, 0700);
  PT_ASSERT_MSG(!file_compressed(cp), "the copy still has compressed sections");
  PT_ASSERT_UINT_EQ(count_tmp(ddir), 0);

  /* warm debug copy, cold symbol cache: the copy is what libdw reads */
  st = run_once(dir, &s, want, "with the copy");
  PT_ASSERT(st.modules_opened >= 1);
  PT_ASSERT_UINT_EQ(st.debug_copies_used, 1);
  PT_ASSERT_UINT_EQ(st.debug_copies_made, 0);
  PT_ASSERT_UINT_EQ(st.debug_copies_rejected, 0);

  umask(old);
  ptt_free_results(want, s.n);
  free(s.pc);
  pt_rm_rf(root);
  free(root);
}

/* Breaks the copy with how(), then: results unchanged, the copy rejected
 * and removed, re-made, and used by the run after. */
static void broken_copy_case(const char *dir, const char *cp, const pcset *s, char **want,
                             void (*how)(const char *), const char *what) {
  how(cp);
  ptp_symbolizer_stats st = run_once(dir, s, want, what);
  PT_ASSERT_MSG(st.debug_copies_rejected == 1, "%s: rejected %llu", what,
                (unsigned long long)st.debug_copies_rejected);
  PT_ASSERT_UINT_EQ(st.debug_copies_used, 0);
  PT_ASSERT_UINT_EQ(st.debug_copies_made, 1);
  struct stat ls;
  PT_ASSERT_INT_EQ(lstat(cp, &ls), 0);
  PT_ASSERT_MSG(S_ISREG(ls.st_mode), "%s: not replaced by a regular file", what);
  st = run_once(dir, s, want, what);
  PT_ASSERT_UINT_EQ(st.debug_copies_used, 1);
  PT_ASSERT_UINT_EQ(st.debug_copies_rejected, 0);
}

static void truncate_half(const char *p) {
  struct stat st;
  PT_ASSERT_INT_EQ(stat(p, &st), 0);
  PT_ASSERT_INT_EQ(truncate(p, st.st_size / 2), 0);
}
static void garbage(const char *p) {
  PT_ASSERT_INT_EQ(unlink(p), 0);
  pt_write_file(p, "\177ELF not really", 15);
  PT_ASSERT_INT_EQ(chmod(p, 0600), 0);
}
static char g_elsewhere[900];
static void symlinked(const char *p) {
  /* a valid copy, but outside the directory: never followed */
  PT_ASSERT_INT_EQ(rename(p, g_elsewhere), 0);
  PT_ASSERT_INT_EQ(symlink(g_elsewhere, p), 0);
}

/* A copy grown into a sparse file: 20 times its size (under the bound of
 * all copies, nothing allocated), then past the bound (100 GB); and a
 * second name for it elsewhere. Every section is still inside the file,
 * so only the size, sparseness and link checks can refuse them. */
static void sparse_20x(const char *p) {
  struct stat st;
  PT_ASSERT_INT_EQ(stat(p, &st), 0);
  PT_ASSERT_INT_EQ(truncate(p, st.st_size * 20), 0);
}
static void sparse_100g(const char *p) {
  PT_ASSERT_INT_EQ(truncate(p, (off_t)100 << 30), 0);
}
static void second_link(const char *p) {
  char other[1000];
  snprintf(other, sizeof other, "%s.link", g_elsewhere);
  unlink(other);
  PT_ASSERT_INT_EQ(link(p, other), 0);
}

PT_TEST_T(prof_debugcache_bad_copy_replaced, 240000) {
  dbgfile lc = libc_debug();
  pcset s = libc_pcs();
  char **want = reference(&s);
  char *root = pt_tmpdir("debugcache-bad");
  char dir[600], ddir[700], cp[900];
  snprintf(dir, sizeof dir, "%s/sym", root);
  snprintf(ddir, sizeof ddir, "%s/debug", dir);
  snprintf(g_elsewhere, sizeof g_elsewhere, "%s/elsewhere.debug", root);
  copy_path(cp, sizeof cp, ddir, &lc);
  ptp_symbolizer_stats st = run_once(dir, &s, want, "cold");
  PT_ASSERT_UINT_EQ(st.debug_copies_made, 1);
  broken_copy_case(dir, cp, &s, want, truncate_half, "truncated copy");
  broken_copy_case(dir, cp, &s, want, garbage, "garbage copy");
  broken_copy_case(dir, cp, &s, want, symlinked, "symlinked copy");
  broken_copy_case(dir, cp, &s, want, sparse_20x, "sparse copy (20x its size)");
  broken_copy_case(dir, cp, &s, want, sparse_100g, "sparse copy (100 GB)");
  broken_copy_case(dir, cp, &s, want, second_link, "copy with a second link");
  ptt_free_results(want, s.n);
  free(s.pc);
  pt_rm_rf(root);
  free(root);
}

PT_TEST_T(prof_debugcache_other_build_id_refused, 120000) {
  dbgfile lc = libc_debug();
  char *root = dc_dir("debugcache-bid");
  ptp_debugcache *c;
  PT_ASSERT_INT_EQ(ptp_debugcache_new(&c, root, PTP_DEBUGCACHE_MAX), 0);
  dbgfile fake = lc;
  fake.id[0] ^= 0xff;
  /* the source does not carry that id: no copy under its name */
  PT_ASSERT_INT_EQ(ptp_debugcache_make(c, lc.path, fake.id, fake.idlen), -EINVAL);
  PT_ASSERT_INT_EQ(ptp_debugcache_make(c, lc.path, lc.id, lc.idlen), 0);
  char good[900], bad[900];
  copy_path(good, sizeof good, root, &lc);
  copy_path(bad, sizeof bad, root, &fake);
  PT_ASSERT_INT_EQ(rename(good, bad), 0);
  char *name = NULL;
  PT_ASSERT_INT_EQ(ptp_debugcache_open(c, fake.id, fake.idlen, &name), -ENOENT);
  PT_ASSERT(!name);
  PT_ASSERT_MSG(access(bad, F_OK) != 0, "the foreign copy was not removed");
  ptp_debugcache_stats st;
  ptp_debugcache_get_stats(c, &st);
  PT_ASSERT_UINT_EQ(st.rejected, 1);
  PT_ASSERT_UINT_EQ(st.used, 0);
  ptp_debugcache_del(c);
  dc_rm(root);
}

PT_TEST_T(prof_debugcache_bound_removes_oldest, 120000) {
  dbgfile lc = libc_debug(), ot;
  if (!other_debug(&ot, &lc)) PT_SKIP("no second compressed debug file");
  char *root = dc_dir("debugcache-cap");
  char pa[900], pb[900];
  copy_path(pa, sizeof pa, root, &lc);
  copy_path(pb, sizeof pb, root, &ot);
  ptp_debugcache *c;
  PT_ASSERT_INT_EQ(ptp_debugcache_new(&c, root, PTP_DEBUGCACHE_MAX), 0);
  PT_ASSERT_INT_EQ(ptp_debugcache_make(c, lc.path, lc.id, lc.idlen), 0);
  PT_ASSERT_INT_EQ(ptp_debugcache_make(c, ot.path, ot.id, ot.idlen), 0);
  struct stat sa, sb;
  PT_ASSERT_INT_EQ(stat(pa, &sa), 0);
  PT_ASSERT_INT_EQ(stat(pb, &sb), 0);
  ptp_debugcache_del(c);
  /* libc's copy used last: the other one is the least recently used */
  struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
  PT_ASSERT_INT_EQ(utimensat(AT_FDCWD, pb, t, 0), 0);
  char *name = NULL;
  PT_ASSERT_INT_EQ(ptp_debugcache_new(&c, root, PTP_DEBUGCACHE_MAX), 0);
  int fd = ptp_debugcache_open(c, lc.id, lc.idlen, &name);
  PT_ASSERT(fd >= 0);
  close(fd);
  free(name);
  ptp_debugcache_del(c);
  /* a bound that holds libc's copy but not both: re-making libc's copy
   * (the newest) removes the other */
  uint64_t cap = (uint64_t)sa.st_size + (uint64_t)sb.st_size - 1;
  PT_ASSERT_INT_EQ(ptp_debugcache_new(&c, root, cap), 0);
  PT_ASSERT_INT_EQ(ptp_debugcache_make(c, lc.path, lc.id, lc.idlen), 0);
  ptp_debugcache_stats st;
  ptp_debugcache_get_stats(c, &st);
  PT_ASSERT_UINT_EQ(st.removed, 1);
  PT_ASSERT_INT_EQ(access(pa, F_OK), 0);
  PT_ASSERT_MSG(access(pb, F_OK) != 0, "the least recently used copy is still there");
  ptp_debugcache_del(c);
  /* a bound smaller than one copy: nothing is written */
  PT_ASSERT_INT_EQ(ptp_debugcache_new(&c, root, 4096), 0);
  PT_ASSERT_INT_EQ(ptp_debugcache_make(c, ot.path, ot.id, ot.idlen), -EFBIG);
  PT_ASSERT(access(pb, F_OK) != 0);
  PT_ASSERT_UINT_EQ(count_tmp(root), 0);
  ptp_debugcache_del(c);
  dc_rm(root);
}

PT_TEST_T(prof_debugcache_two_writers, 180000) {
  dbgfile lc = libc_debug();
  char *root = dc_dir("debugcache-two");
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    PT_ASSERT(kids[k] >= 0);
    if (kids[k] == 0) {
      ptp_debugcache *c;
      int r = ptp_debugcache_new(&c, root, PTP_DEBUGCACHE_MAX);
      for (int i = 0; r == 0 && i < 3; i++) r = ptp_debugcache_make(c, lc.path, lc.id, lc.idlen);
      _exit(r == 0 ? 0 : 1);
    }
  }
  for (int k = 0; k < 2; k++) {
    int status;
    PT_ASSERT_INT_EQ(waitpid(kids[k], &status, 0), kids[k]);
    PT_ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", k);
  }
  PT_ASSERT_UINT_EQ(count_tmp(root), 0);
  ptp_debugcache *c;
  char *name = NULL;
  PT_ASSERT_INT_EQ(ptp_debugcache_new(&c, root, PTP_DEBUGCACHE_MAX), 0);
  int fd = ptp_debugcache_open(c, lc.id, lc.idlen, &name);
  PT_ASSERT_MSG(fd >= 0, "no valid copy after two writers: %d", fd);
  close(fd);
  free(name);
  ptp_debugcache_del(c);
  dc_rm(root);
}

PT_TEST(prof_debugcache_dir_safety) {
  dbgfile lc = libc_debug();
  char *root = pt_tmpdir("debugcache-dir");
  char d[700];
  snprintf(d, sizeof d, "%s/open", root);
  PT_ASSERT_INT_EQ(mkdir(d, 0700), 0);
  PT_ASSERT_INT_EQ(chmod(d, 0777), 0);
  ptp_debugcache *c;
  PT_ASSERT_INT_EQ(ptp_debugcache_new(&c, d, PTP_DEBUGCACHE_MAX), 0);
  PT_ASSERT_INT_EQ(ptp_debugcache_make(c, lc.path, lc.id, lc.idlen), -EPERM);
  char *name = NULL;
  PT_ASSERT_INT_EQ(ptp_debugcache_open(c, lc.id, lc.idlen, &name), -EPERM);
  ptp_debugcache_del(c);
  DIR *dd = opendir(d);
  PT_ASSERT(dd);
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(dd)) != NULL) n += de->d_name[0] != '.';
  closedir(dd);
  PT_ASSERT_UINT_EQ(n, 0);
  pt_rm_rf(root);
  free(root);
}
