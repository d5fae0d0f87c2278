/*
 * test_symbols_alloc.c - allocation failures in the symbol side's readers
 * of untrusted bytes (fault_fixture.h): the build-id note reader (which
 * allocates nothing: the loop proves it), the .debug_aranges reader on a
 * section of 900 entries, and the symbol-cache file reader and writer.
 * For each allocation in turn: a clear error (-ENOMEM) or, where the
 * contract says so, a graceful miss; no leak (asan); the cache file on
 * disk whole (the old one, or the new one after a save that succeeded), no
 * temp file left.
 */
#include "pt_test.h"
#include "../fault_fixture.h"
#include "prof/symbols/ptp_aranges.h"
#include "prof/symbols/ptp_elfnote.h"
#include "prof/symbols/ptp_symcache.h"

#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void enomem_check(void *arg, int rc, uint64_t n, int failed) {
  (void)arg;
  if (failed) PT_ASSERT_MSG(rc == -ENOMEM, "allocation %llu failed: %d, not -ENOMEM",
                            (unsigned long long)n, rc);
}

/* ---- build-id notes ------------------------------------------------------ */

static int note_op(void *arg) {
  (void)arg;
  /* one GNU build-id note, 4-aligned: namesz 4, descsz 20, type 3, "GNU\0" */
  uint8_t note[12 + 4 + 20];
  const uint32_t hdr[3] = { 4, 20, 3 };
  memcpy(note, hdr, 12);
  memcpy(note + 12, "GNU", 4);
  for (int i = 0; i < 20; i++) note[16 + i] = (uint8_t)(0xa0 + i);
  const uint8_t *id;
  size_t n;
  int rc = ptp_elfnote_build_id(note, sizeof note, 4, &id, &n);
  if (rc == 0 && n != 20) rc = -EINVAL;
  return rc;
}

static int bid_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  char hex[PTP_ELFNOTE_HEX_MAX];
  if (info->dlpi_name && strstr(info->dlpi_name, "libc.so")) {
    *(int *)arg = ptp_elfnote_build_id_hex(info, hex);
    return 1;
  }
  return 0;
}

static int note_hex_op(void *arg) {
  (void)arg;
  int rc = -ENOENT;
  dl_iterate_phdr(bid_cb, &rc);
  return rc;
}

PT_TEST(prof_alloc_elfnote) {
  ptt_fault_require();
  /* The reader allocates nothing: the first run never reaches a failing
   * allocation, and succeeds. */
  PT_ASSERT_UINT_EQ(ptt_fault_loop(note_op, enomem_check, NULL, 10), 1);
  PT_ASSERT_UINT_EQ(ptt_fault_loop(note_hex_op, enomem_check, NULL, 10), 1);
}

/* ---- .debug_aranges --------------------------------------------------------- */

typedef struct ar_ctx { uint8_t *sec; size_t len; size_t entries; } ar_ctx;

static void put(uint8_t *p, size_t *off, uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; i++) p[(*off)++] = (uint8_t)(v >> (8 * i));
}

/* sets sets of per entries each, DWARF 32-bit, 8-byte addresses. */
static void make_aranges(ar_ctx *x, unsigned sets, unsigned per) {
  size_t set_len = 16 + ((size_t)per + 1) * 16;
  x->len = sets * set_len;
  x->sec = calloc(1, x->len);
  PT_ASSERT(x->sec);
  size_t off = 0;
  for (unsigned s = 0; s < sets; s++) {
    put(x->sec, &off, set_len - 4, 4);     /* unit_length */
    put(x->sec, &off, 2, 2);               /* version */
    put(x->sec, &off, 0x40 * s, 4);        /* debug_info_offset */
    put(x->sec, &off, 8, 1);               /* address_size */
    put(x->sec, &off, 0, 1);               /* segment_selector_size */
    put(x->sec, &off, 0, 4);               /* padding to 16 */
    for (unsigned i = 0; i < per; i++) {
      put(x->sec, &off, 0x100000 + ((uint64_t)s * per + i) * 0x40, 8);
      put(x->sec, &off, 0x30, 8);
    }
    put(x->sec, &off, 0, 8);
    put(x->sec, &off, 0, 8);
  }
  PT_ASSERT_UINT_EQ(off, x->len);
}

static int ar_op(void *arg) {
  ar_ctx *x = arg;
  ptp_arange *a = (ptp_arange *)1;         /* must stay untouched on error */
  size_t n = 0;
  int rc = ptp_aranges_parse(x->sec, x->len, 0x10000, &a, &n);
  if (rc == 0) {
    x->entries = n;
    free(a);
  } else {
    PT_ASSERT(a == (ptp_arange *)1);
  }
  return rc;
}

PT_TEST(prof_alloc_aranges) {
  ptt_fault_require();
  ar_ctx x = {0};
  make_aranges(&x, 3, 300);
  uint64_t runs = ptt_fault_loop(ar_op, enomem_check, &x, 100);
  printf("# .debug_aranges of %zu bytes: %zu entries, %llu allocations, each failed in turn\n",
         x.len, x.entries, (unsigned long long)(runs - 1));
  PT_ASSERT_UINT_EQ(x.entries, 900);
  PT_ASSERT(runs >= 2);
  free(x.sec);
  ptt_no_leaks();
}

/* ---- the symbol cache -------------------------------------------------------- */

#define BID "5566778899aabbccddeeff00112233445566778a"

typedef struct sc_ctx { char dir[PATH_MAX / 2]; } sc_ctx;

static void add_range(ptp_symcache *c, uint64_t lo, unsigned count, const char *tag, int must) {
  char name[64];
  for (unsigned i = 0; i < count; i++) {
    snprintf(name, sizeof name, "%s_fn_%u", tag, i);
    ptp_sym_frame f = { name, name, "alloc.c", (int)i + 1, 1, 0 };
    int rc = ptp_symcache_add(c, lo + 32 * i, lo + 32 * i + 32, &f, 1);
    if (must) PT_ASSERT_INT_EQ(rc, 0);
    else if (rc) return;
  }
}

static int has(ptp_symcache *c, uint64_t rel, const char *name) {
  const ptp_sym_frame *f;
  uint32_t n;
  return ptp_symcache_find(c, rel, &f, &n) == 1 && n == 1 && strcmp(f[0].name, name) == 0;
}

/* Read: open (the file of two segments), two look-ups, close. A look-up
 * without memory is a miss by contract (resolved the slow way). */
static int read_op(void *arg) {
  sc_ctx *x = arg;
  ptp_symcache *c = NULL;
  int rc = ptp_symcache_open(&c, x->dir, BID);
  if (rc) return rc;
  if (ptp_symcache_file_state(c) != PTP_SYMCACHE_LOADED) rc = -EINVAL;
  (void)has(c, 0x10000 + 32 * 7 + 3, "old_fn_7");
  (void)has(c, 0x80000 + 32 * 9 + 3, "more_fn_9");
  ptp_symcache_del(c);
  return rc;
}

/* Write: open, add 200 intervals, save (a rewrite or an append), close. */
static int write_op(void *arg) {
  sc_ctx *x = arg;
  ptp_symcache *c = NULL;
  int rc = ptp_symcache_open(&c, x->dir, BID);
  if (rc) return rc;
  add_range(c, 0x200000, 200, "new", 0);
  rc = ptp_symcache_save(c);
  ptp_symcache_del(c);
  return rc;
}

static void write_check(void *arg, int rc, uint64_t n, int failed) {
  sc_ctx *x = arg;
  if (failed) PT_ASSERT_MSG(rc == -ENOMEM || rc == 0, "allocation %llu failed: %d",
                            (unsigned long long)n, rc);
  /* the file is whole: it loads, with what it held before */
  ptp_symcache *c = NULL;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, x->dir, BID), 0);
  PT_ASSERT_MSG(ptp_symcache_file_state(c) == PTP_SYMCACHE_LOADED, "allocation %llu: state %d",
                (unsigned long long)n, (int)ptp_symcache_file_state(c));
  PT_ASSERT(has(c, 0x10000 + 32 * 7 + 3, "old_fn_7"));
  if (!failed) PT_ASSERT(has(c, 0x200000 + 32 * 199 + 3, "new_fn_199"));
  ptp_symcache_del(c);
  PT_ASSERT(!ptt_has_temp_file(x->dir));
}

static void read_check(void *arg, int rc, uint64_t n, int failed) {
  (void)arg;
  if (failed) PT_ASSERT_MSG(rc == -ENOMEM || rc == 0, "allocation %llu failed: %d",
                            (unsigned long long)n, rc);
}

PT_TEST(prof_alloc_symcache) {
  ptt_fault_require();
  char *root = pt_tmpdir("alloc-symcache");
  sc_ctx x;
  snprintf(x.dir, sizeof x.dir, "%s/symbols", root);
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, x.dir, BID), 0);
  add_range(c, 0x10000, 300, "old", 1);
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  add_range(c, 0x80000, 100, "more", 1);
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);            /* appended: two segments */
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 2);
  ptp_symcache_del(c);
  uint64_t rr = ptt_fault_loop(read_op, read_check, &x, 1000);
  uint64_t wr = ptt_fault_loop(write_op, write_check, &x, 5000);
  printf("# symbol cache: %llu allocations to read a file of two segments, %llu to add 200 "
         "intervals and save\n", (unsigned long long)(rr - 1), (unsigned long long)(wr - 1));
  PT_ASSERT(rr >= 3 && wr >= 3);
  pt_rm_rf(root);
  free(root);
  ptt_no_leaks();
}
