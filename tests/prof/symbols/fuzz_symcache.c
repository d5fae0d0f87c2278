/*
 * fuzz_symcache.c - libFuzzer harness of the symbol cache's file reader
 * (src/prof/symbols/ptp_symcache.c, format 5: headers and indexes read at
 * open, blocks read and checked as lookups need them); built and run by
 * tests/prof/symcache_fuzz_test.sh.
 *
 * Input: one control byte, then a cache file. Control bit 0: the harness
 * first recomputes every checksum the format names (each block's, then
 * each segment's header and index) wherever the declared counts fit the
 * input, so mutations get past the checksums to the checks behind them
 * (order, bounds, string termination, torn tails). Bit 1: the lazy cache
 * releases its descriptor halfway through its lookups (the rest reopen the
 * file); with bit 2 as well, the file is then replaced by a new one of the
 * same bytes (another process's rewrite), which the rest follow. The file is written as <dir>/<build id>.sym, 0600, in a private
 * directory, and then:
 *  - lazy: ptp_symcache_open, then lookups of probe addresses (the lo, the
 *    hi - 1 and the hi of every interval the layout places in the input,
 *    and a few fixed ones); every answer has at most 64 frames and strings
 *    that are read to their NUL (ASan: inside the cache's memory);
 *  - whole: a second cache on the same file, ptp_symcache_verify;
 *  - agreement: when the whole check passes, the lazy cache was never
 *    rejected and both answer every probe alike (frames field by field)
 *    and read the same flags and NOT_WHOLE limits;
 *  - a write: one interval added to the verified cache and a NOT_WHOLE
 *    mark set with limits taken from the input, saved (an append, or a
 *    rewrite when the file is torn or full), the file reopened and
 *    verified again: sound, the new address answered, the mark's limits
 *    read back, and after an append every probe answered as before.
 * Any mismatch aborts; ASan/UBSan catch the rest.
 */
#include "prof/cache/ptp_crc.h"
#include "prof/symbols/ptp_symcache.h"
#include "tests/fuzz_check.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BID "00112233445566778899aabbccddeeff00112233"
#define F_HDR 152u
#define IV_BLK 170u
#define FR_BLK 170u
#define STR_BLK 4096u
#define S_HDR 32u   /* segment header: magic, flags, 3 counts, 2 limits, crc */
#define S_CRC 28u   /* its checksum's offset: the bytes before it are covered */
#define MAX_PROBES 4096

static char g_dir[64], g_path[128];

static void setup(void) {
  if (g_dir[0]) return;
  const char *t = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/fzsymXXXXXX", t && strlen(t) < 40 ? t : "/tmp");
  CHECK(mkdtemp(g_dir));
  CHECK(chmod(g_dir, 0700) == 0);
  snprintf(g_path, sizeof g_path, "%s/%s.sym", g_dir, BID);
}

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t div_up(uint64_t n, uint64_t d) { return (uint32_t)((n + d - 1) / d); }

/* Walks the segments as the layout places them; fix: recompute their
 * checksums; probes: collect interval bounds. Stops at the first segment
 * that does not fit. */
static void walk(uint8_t *b, size_t n, int fix, uint64_t *probes, size_t *np) {
  uint64_t off = F_HDR;
  unsigned algo = ptp_crc_algo();
  while (off + S_HDR <= n) {
    uint8_t *h = b + off;
    uint32_t niv = rd32(h + 8), nfr = rd32(h + 12), sb = rd32(h + 16);
    uint32_t nbiv = div_up(niv, IV_BLK), nbfr = div_up(nfr, FR_BLK), nbs = div_up(sb, STR_BLK);
    uint64_t nb = (uint64_t)nbiv + nbfr + nbs;
    uint64_t idx = ((uint64_t)nbiv * 8 + nb * 4 + 7) & ~(uint64_t)7;
    uint64_t body = (uint64_t)niv * 24 + (uint64_t)nfr * 24 + sb;
    if (off + S_HDR + idx + body > n) return;
    uint8_t *ix = h + S_HDR, *iv = ix + idx, *fr = iv + (uint64_t)niv * 24, *st = fr + (uint64_t)nfr * 24;
    for (uint32_t i = 0; i < niv && probes && *np + 3 <= MAX_PROBES; i++) {
      uint64_t lo = rd64(iv + (uint64_t)i * 24), hi = rd64(iv + (uint64_t)i * 24 + 8);
      probes[(*np)++] = lo;
      probes[(*np)++] = hi - 1;
      probes[(*np)++] = hi;
    }
    if (fix) {
      uint32_t *bc = (uint32_t *)(ix + (uint64_t)nbiv * 8);
      uint32_t k = 0;
      for (uint32_t i = 0; i < nbiv; i++, k++) {
        uint64_t c = niv - (uint64_t)i * IV_BLK < IV_BLK ? niv - (uint64_t)i * IV_BLK : IV_BLK;
        memcpy(ix + (uint64_t)i * 8, iv + (uint64_t)i * IV_BLK * 24, 8);   /* first lo */
        uint32_t v = ptp_crc_block(algo, 0, iv + (uint64_t)i * IV_BLK * 24, c * 24);
        memcpy(&bc[k], &v, 4);
      }
      for (uint32_t i = 0; i < nbfr; i++, k++) {
        uint64_t c = nfr - (uint64_t)i * FR_BLK < FR_BLK ? nfr - (uint64_t)i * FR_BLK : FR_BLK;
        uint32_t v = ptp_crc_block(algo, 0, fr + (uint64_t)i * FR_BLK * 24, c * 24);
        memcpy(&bc[k], &v, 4);
      }
      for (uint32_t i = 0; i < nbs; i++, k++) {
        uint64_t c = sb - (uint64_t)i * STR_BLK < STR_BLK ? sb - (uint64_t)i * STR_BLK : STR_BLK;
        uint32_t v = ptp_crc_block(algo, 0, st + (uint64_t)i * STR_BLK, c);
        memcpy(&bc[k], &v, 4);
      }
      uint32_t crc = ptp_crc_blocks(algo, 0, h, S_CRC, 16384);
      crc = ptp_crc_blocks(algo, crc, ix, (uint64_t)nbiv * 8, 16384);
      crc = ptp_crc_blocks(algo, crc, bc, nb * 4, 16384);
      memcpy(h + S_CRC, &crc, 4);
    }
    off += S_HDR + idx + ((body + 7) & ~(uint64_t)7);
  }
}

typedef struct answer { int hit; uint32_t n; char *text; } answer;

/* One lookup, its frames flattened into text (and every string read). */
static answer lookup(ptp_symcache *c, uint64_t rel) {
  const ptp_sym_frame *f;
  uint32_t n = 0;
  answer a = {ptp_symcache_find(c, rel, &f, &n), 0, NULL};
  if (!a.hit) return a;
  CHECK(n <= 64);
  a.n = n;
  size_t cap = 64, len = 0;
  a.text = malloc(cap);
  CHECK(a.text);
  a.text[0] = 0;
  for (uint32_t i = 0; i < n; i++) {
    CHECK(f[i].name && f[i].system_name && f[i].file);
    size_t need = strlen(f[i].name) + strlen(f[i].system_name) + strlen(f[i].file) + 64;
    if (len + need > cap) {
      while (len + need > cap) cap *= 2;
      a.text = realloc(a.text, cap);
      CHECK(a.text);
    }
    len += (size_t)snprintf(a.text + len, cap - len, "%s|%s|%s|%" PRId64 "|%" PRId64 "|%" PRId64 ";",
                            f[i].name, f[i].system_name, f[i].file, (int64_t)f[i].start_line,
                            (int64_t)f[i].line, (int64_t)f[i].column);
  }
  return a;
}

static int same(const answer *a, const answer *b) {
  return a->hit == b->hit && a->n == b->n && (!a->hit || strcmp(a->text, b->text) == 0);
}

static void write_file(const uint8_t *d, size_t n) {
  unlink(g_path);
  int fd = open(g_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  CHECK(fd >= 0);
  CHECK(write(fd, d, n) == (ssize_t)n);
  close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  setup();
  uint8_t ctl = data[0];
  size_t n = size - 1;
  uint8_t *b = malloc(n ? n : 1);
  CHECK(b);
  memcpy(b, data + 1, n);
  static uint64_t probes[MAX_PROBES + 8];
  size_t np = 0;
  const uint64_t fixed[] = {0, 1, 0x1000, 0x100000, UINT64_MAX - 1, UINT64_MAX};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) probes[np++] = fixed[i];
  walk(b, n, ctl & 1, probes, &np);
  write_file(b, n);

  /* lazy */
  ptp_symcache *lz;
  CHECK(ptp_symcache_open(&lz, g_dir, BID) == 0);
  answer *got = calloc(np, sizeof *got);
  CHECK(got);
  for (size_t i = 0; i < np; i++) {
    if ((ctl & 2) && i == np / 2) {
      ptp_symcache_release(lz);
      if (ctl & 4) write_file(b, n);   /* unlinked and made anew: a new inode */
    }
    got[i] = lookup(lz, probes[i]);
  }
  /* whole */
  ptp_symcache *wh;
  CHECK(ptp_symcache_open(&wh, g_dir, BID) == 0);
  CHECK(ptp_symcache_file_state(wh) == ptp_symcache_file_state(lz) ||
        ptp_symcache_file_state(lz) == PTP_SYMCACHE_REJECTED);
  int v = ptp_symcache_verify(wh);
  if (v == 0) {
    CHECK(ptp_symcache_file_state(lz) != PTP_SYMCACHE_REJECTED);
    ptp_symcache_limits ll, wl;
    int lr = ptp_symcache_not_whole_limits(lz, &ll), wr = ptp_symcache_not_whole_limits(wh, &wl);
    CHECK(ptp_symcache_flags(lz) == ptp_symcache_flags(wh) && lr == wr);
    CHECK(lr || (ll.fill_points == wl.fill_points && ll.file_max == wl.file_max));
    for (size_t i = 0; i < np; i++) {
      answer w = lookup(wh, probes[i]);
      CHECK(same(&w, &got[i]));
      free(w.text);
    }
    /* a write, then the file read back */
    size_t segs = ptp_symcache_file_segments(wh);
    ptp_sym_frame f = {"fz_new", "fz_new", "fz.c", 1, 2, 3};
    uint64_t lo = 0x7ff0000000000000ull;
    int ar = ptp_symcache_add(wh, lo, lo + 16, &f, 1);
    CHECK(ar == 0 || ar == -ENOSPC);
    ptp_symcache_limits nw = {(uint32_t)n * 2654435761u, (uint32_t)ctl * 40503u + 1};
    ptp_symcache_set_not_whole(wh, &nw);
    int sr = ptp_symcache_save(wh);
    size_t segs2 = ptp_symcache_file_segments(wh);
    ptp_symcache_del(wh);
    wh = NULL;
    if (sr == 0) {
      ptp_symcache *rb;
      CHECK(ptp_symcache_open(&rb, g_dir, BID) == 0);
      CHECK(ptp_symcache_verify(rb) == 0);
      ptp_symcache_limits got_nw;
      CHECK(ptp_symcache_not_whole_limits(rb, &got_nw) == 0);
      CHECK(got_nw.fill_points == nw.fill_points && got_nw.file_max == nw.file_max);
      CHECK(ptp_symcache_not_whole(rb, &nw));
      if (ar == 0) {
        answer a = lookup(rb, lo + 5);
        CHECK(a.hit);
        free(a.text);
      }
      if (segs && segs2 == segs + 1)   /* appended: the old segments answer first */
        for (size_t i = 0; i < np; i++) {
          answer w = lookup(rb, probes[i]);
          CHECK(same(&w, &got[i]) || (probes[i] >= lo && probes[i] < lo + 16));
          free(w.text);
        }
      ptp_symcache_del(rb);
    }
  }
  ptp_symcache_del(wh);
  ptp_symcache_del(lz);
  for (size_t i = 0; i < np; i++) free(got[i].text);
  free(got);
  free(b);
  return 0;
}
