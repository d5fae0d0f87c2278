/*
 * test_unwind_alloc.c - allocation failures in the unwind-table module's
 * readers of untrusted bytes (fault_fixture.h): the CFI parser of an
 * object's .eh_frame (libc's and this program's) and of .debug_frame bytes
 * (a library built with only .debug_frame), the table-cache file reader
 * and writer. For each allocation in turn: a clear error (-ENOMEM), no
 * table handed out, no leak (asan), and the cache file on disk whole (the
 * old one, never a half-written one, no temp file left).
 */
#include "pt_test.h"
#include "../fault_fixture.h"
#include "cfi_tab_fixture.h"
#include "pt_config.h"
#include "prof/unwind/ptp_cfi.h"
#include "prof/unwind/ptp_cfi_internal.h"
#include "prof/unwind/ptp_cficache.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- .eh_frame ------------------------------------------------------------ */

typedef struct eh_ctx {
  ptp_cfi_objinfo o;
  size_t rows;                 /* of the successful run */
} eh_ctx;

static int eh_op(void *arg) {
  eh_ctx *x = arg;
  ptp_cfi_tab *t = NULL;
  int rc = ptp_cfi_parse_eh(&x->o, (size_t)1 << 22, &t);
  if (rc == 0) {
    x->rows = t->nrows;
    ptp_cfi_tab_free(t);
  } else {
    PT_ASSERT(t == NULL);
  }
  return rc;
}

static void enomem_check(void *arg, int rc, uint64_t n, int failed) {
  (void)arg;
  if (failed) PT_ASSERT_MSG(rc == -ENOMEM, "allocation %llu failed: %d, not -ENOMEM",
                            (unsigned long long)n, rc);
}

typedef struct eh_walk { const char *name; uint64_t runs; size_t rows; int found; } eh_walk;

/* Inside dl_iterate_phdr (the loader's lock keeps the object mapped). */
static int eh_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  eh_walk *w = arg;
  const char *nm = info->dlpi_name ? info->dlpi_name : "";
  if (w->name[0] ? !strstr(nm, w->name) : nm[0] != 0) return 0;
  eh_ctx x;
  memset(&x, 0, sizeof x);
  ptp_cfi_obj_scan(info, &x.o);
  if (!x.o.hdr) return 0;
  w->found = 1;
  w->runs = ptt_fault_loop(eh_op, enomem_check, &x, 10000);
  w->rows = x.rows;
  return 1;
}

PT_TEST(prof_alloc_cfi_eh_frame) {
  ptt_fault_require();
  const char *objs[] = { "libc.so", "" };     /* libc, and this program */
  for (size_t i = 0; i < 2; i++) {
    eh_walk w = { objs[i], 0, 0, 0 };
    dl_iterate_phdr(eh_cb, &w);
    PT_ASSERT_MSG(w.found, "no .eh_frame_hdr in %s", objs[i][0] ? objs[i] : "the program");
    printf("# %s: %zu rows, %llu allocations, each failed in turn\n",
           objs[i][0] ? objs[i] : "the program", w.rows, (unsigned long long)(w.runs - 1));
    PT_ASSERT(w.rows > 100 && w.runs > 2);
  }
  ptt_no_leaks();
}

/* ---- .debug_frame --------------------------------------------------------- */

/* The bytes of section name of the ELF file path (malloc'd), via libelf. */
static uint8_t *section_bytes(const char *path, const char *name, size_t *len) {
  PT_ASSERT(elf_version(EV_CURRENT) != EV_NONE);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  PT_ASSERT_MSG(fd >= 0, "open %s", path);
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  PT_ASSERT(e);
  size_t shstr;
  PT_ASSERT_INT_EQ(elf_getshdrstrndx(e, &shstr), 0);
  uint8_t *out = NULL;
  for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s)) && !out;) {
    GElf_Shdr sh;
    PT_ASSERT(gelf_getshdr(s, &sh));
    const char *n = elf_strptr(e, shstr, sh.sh_name);
    if (!n || strcmp(n, name) != 0) continue;
    Elf_Data *d = elf_getdata(s, NULL);
    PT_ASSERT(d && d->d_size > 0);
    out = malloc(d->d_size);
    PT_ASSERT(out);
    memcpy(out, d->d_buf, d->d_size);
    *len = d->d_size;
  }
  elf_end(e);
  close(fd);
  PT_ASSERT_MSG(out, "no %s in %s", name, path);
  return out;
}

typedef struct df_ctx { const uint8_t *sec; size_t len; size_t rows; } df_ctx;

static int df_op(void *arg) {
  df_ctx *x = arg;
  ptp_cfi_tab *t = NULL;
  int rc = ptp_cfi_parse_debug_frame(x->sec, x->len, 0x7f0000000000, (size_t)1 << 20, &t);
  if (rc == 0) {
    x->rows = t->nrows;
    ptp_cfi_tab_free(t);
  } else {
    PT_ASSERT(t == NULL);
  }
  return rc;
}

PT_TEST(prof_alloc_cfi_debug_frame) {
  ptt_fault_require();
  df_ctx x = {0};
  uint8_t *sec = section_bytes(PT_BUILD_DIR "/tests/prof/libptt_nofp_dbgframe.so", ".debug_frame",
                               &x.len);
  x.sec = sec;
  uint64_t runs = ptt_fault_loop(df_op, enomem_check, &x, 1000);
  printf("# .debug_frame of %zu bytes: %zu rows, %llu allocations, each failed in turn\n", x.len,
         x.rows, (unsigned long long)(runs - 1));
  PT_ASSERT(x.rows > 0 && runs >= 2);
  free(sec);
  ptt_no_leaks();
}

/* ---- the table cache ------------------------------------------------------- */

#define BID "aa11bb22cc33dd44ee55ff6677889900aabbccdd"
#define KEY 9
static const uintptr_t bias = 0x40000000;

typedef struct tc_ctx {
  char dir[PATH_MAX / 2];
  ptp_cfi_tab *a, *b;          /* what the file holds; what a save writes */
} tc_ctx;

static int tc_load(tc_ctx *x, ptp_cfi_tab **got) {
  return ptp_cficache_load(x->dir, BID, KEY, bias, bias, bias + (1u << 24), 1u << 20, got);
}

static int load_op(void *arg) {
  ptp_cfi_tab *t = NULL;
  int rc = tc_load(arg, &t);
  if (rc == 0) ptp_cfi_tab_free(t);
  else PT_ASSERT(t == NULL);
  return rc;
}

static int save_op(void *arg) {
  tc_ctx *x = arg;
  void *img = NULL;
  size_t len = 0;
  int rc = ptp_cficache_image(BID, KEY, bias, x->b, &img, &len);
  if (rc == 0) rc = ptp_cficache_write(x->dir, BID, img, len);
  free(img);
  return rc;
}

/* Whether the file holds exactly t's rows. */
static int file_holds(tc_ctx *x, const ptp_cfi_tab *t) {
  ptp_cfi_tab *got = NULL;
  if (tc_load(x, &got) != 0) return 0;
  int same = got->nrows == t->nrows;
  for (size_t i = 0; same && i < t->nrows; i++)
    same = got->rows[i].start + got->bias == t->rows[i].start + t->bias &&
           got->rows[i].len == t->rows[i].len &&
           got->rules[got->rows[i].rule].cfa_off == t->rules[t->rows[i].rule].cfa_off;
  ptp_cfi_tab_free(got);
  return same;
}

static void save_check(void *arg, int rc, uint64_t n, int failed) {
  tc_ctx *x = arg;
  /* -ENOMEM, or 0 when what failed came after the file was in place (the
   * directory's size bound is best effort) */
  if (failed) PT_ASSERT_MSG(rc == -ENOMEM || rc == 0, "allocation %llu failed: %d",
                            (unsigned long long)n, rc);
  /* never half: the old table (a failed save) or the new one, whole */
  PT_ASSERT_MSG(file_holds(x, rc == 0 ? x->b : x->a), "allocation %llu: the file is neither whole",
                (unsigned long long)n);
  PT_ASSERT(!ptt_has_temp_file(x->dir));
}

PT_TEST(prof_alloc_cficache) {
  ptt_fault_require();
  char *root = pt_tmpdir("alloc-cficache");
  tc_ctx x;
  snprintf(x.dir, sizeof x.dir, "%s/unwind", root);
  x.a = ptt_cfi_tab_make(bias, 400, 0);
  x.b = ptt_cfi_tab_make(bias, 500, 1);
  void *img;
  size_t len;
  PT_ASSERT_INT_EQ(ptp_cficache_image(BID, KEY, bias, x.a, &img, &len), 0);
  PT_ASSERT_INT_EQ(ptp_cficache_write(x.dir, BID, img, len), 0);
  free(img);
  uint64_t lr = ptt_fault_loop(load_op, enomem_check, &x, 100);
  uint64_t sr = ptt_fault_loop(save_op, save_check, &x, 100);
  printf("# table cache: %llu allocations to read a file, %llu to write one\n",
         (unsigned long long)(lr - 1), (unsigned long long)(sr - 1));
  PT_ASSERT(lr >= 2 && sr >= 2);
  free(x.a);
  free(x.b);
  pt_rm_rf(root);
  free(root);
  ptt_no_leaks();
}
