/*
 * test_symcache_segments.c - the symbol cache's file format 5 (segments,
 * checksum algorithm in the header, a checksum per block) and its saves, on ptp_symcache
 * directly:
 *   - a save of a file we read appends one segment (the bytes before it
 *     and the inode unchanged); a reopen finds the old and the new
 *     intervals; intervals the file already holds are not added again;
 *   - a file changed by another process since we read it (stale) is not
 *     appended to: the save rewrites it as one segment with both's
 *     intervals;
 *   - a torn last segment (an append cut short) is left out, the rest is
 *     used, and the next save rewrites the file whole (so does a file
 *     cut inside its last segment's padding, whose segment is read); a complete segment
 *     with a corrupt block rejects the file (at the lookup that reads the
 *     block); a version-1 file is refused;
 *   - segments of frameless intervals or of flags alone read back;
 *   - PTP_SYMCACHE_SEGS_MAX appends, then the next save compacts to one;
 *   - two processes appending at once: the file stays valid, every
 *     interval in it has its writer's frames, at least one writer's all;
 *   - format 5: the header holds version 5 and ptp_crc_algo(); a known
 *     segment's index (first lo, block checksums) and header checksum are
 *     pinned (the values of ptp_crc.h's definition, computed by an
 *     independent reader in Python from the bytes the documented layout
 *     gives); a file of another algorithm (valid under it) or of versions
 *     2 to 4 is refused, never read, and rewritten by the next save;
 *     segments whose intervals and strings span several blocks verify
 *     after a rewrite and after an append; blocks are read as lookups
 *     need them: a flipped byte in a later strings block leaves lookups
 *     that do not reach it answered, and the first that does rejects the
 *     whole file;
 *   - the descriptor: open until ptp_symcache_release; a lookup after it
 *     reopens the same file; a number the program closed and reused is
 *     never read or closed by the cache (its file reopened by path); a
 *     file replaced after a release is never read with the old index (its
 *     blocks not read yet miss);
 *   - eviction: the blocks read are counted and given back (their pages
 *     leave memory), read again by later lookups with the same answers;
 *     a file replaced since is never evicted (it could not be read again);
 *   - the directory bound after appends: with an old (sparse) file of
 *     another build id filling the directory to just under
 *     PTP_SYMCACHE_DIR_MAX, an append that stays below
 *     PTP_SYMCACHE_BOUND_STEP leaves it (no scan), the append that carries
 *     the file across the step removes it, and the appended file is kept
 *     whole.
 */
#include "pt_test.h"
#include "prof/cache/ptp_crc.h"
#include "prof/symbols/ptp_symcache.h"
#include "sym_results.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *BID = "0123456789abcdef0123456789abcdef01234567";

static char *sc_file(const char *dir) {
  char *p = malloc(strlen(dir) + 64);
  sprintf(p, "%s/%s.sym", dir, BID);
  return p;
}

/* Adds [lo, lo + 16) -> one frame named name, line = lo. */
static void add_named(ptp_symcache *c, uint64_t lo, const char *name) {
  ptp_sym_frame f = {name, name, "seg.c", 1, (int)lo, 0};
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, lo, lo + 16, &f, 1), 0);
}

/* Whether c answers rel with the frame named name. */
static bool has_named(ptp_symcache *c, uint64_t rel, const char *name) {
  const ptp_sym_frame *f;
  uint32_t n;
  return ptp_symcache_find(c, rel, &f, &n) == 1 && n == 1 && strcmp(f[0].name, name) == 0 &&
         strcmp(f[0].file, "seg.c") == 0;
}

static ptp_symcache *open_ok(const char *dir, ptp_symcache_state want) {
  ptp_symcache *c;
  PT_ASSERT_INT_EQ(ptp_symcache_open(&c, dir, BID), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), want);
  return c;
}

static off_t size_of(const char *path, ino_t *ino) {
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(path, &sb), 0);
  if (ino) *ino = sb.st_ino;
  return sb.st_size;
}

PT_TEST(prof_symcache_append_segment) {
  char *dir = pt_tmpdir("symcache-seg");
  char *path = sc_file(dir);
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  add_named(c, 0x100, "first");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 1);
  ptp_symcache_del(c);
  ino_t ino0, ino1;
  size_t n0;
  char *before = pt_read_file(path, &n0);
  PT_ASSERT(before && (off_t)n0 == size_of(path, &ino0));

  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_named(c, 0x105, "first"));
  /* held by the file: not added, nothing to write */
  ptp_sym_frame f = {"first", "first", "seg.c", 1, 0x100, 0};
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, 0x102, 0x110, &f, 1), 0);
  PT_ASSERT(!ptp_symcache_dirty(c));
  add_named(c, 0x200, "second");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 2);
  /* a second save of the same process appends to what it wrote */
  add_named(c, 0x300, "third");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 3);
  ptp_symcache_del(c);

  size_t n1;
  char *after = pt_read_file(path, &n1);
  PT_ASSERT(after && (off_t)n1 == size_of(path, &ino1));
  PT_ASSERT_MSG(ino0 == ino1, "the file was replaced, not appended to");
  PT_ASSERT(n1 > n0 && memcmp(before, after, n0) == 0);
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(path, &sb), 0);
  PT_ASSERT_UINT_EQ(sb.st_mode & 07777, 0600);

  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 3);
  PT_ASSERT(has_named(c, 0x100, "first") && has_named(c, 0x20f, "second") && has_named(c, 0x300, "third"));
  const ptp_sym_frame *g;
  uint32_t k;
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x210, &g, &k), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_size(c), 3);
  ptp_symcache_del(c);
  free(before);
  free(after);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

/* An address known to resolve to nothing (no frames), alone in a file and
 * then alone in an appended segment, and a segment that only changes the
 * flags: all read back (a CRC over an empty part once broke them). */
PT_TEST(prof_symcache_frameless_and_flags_segments) {
  char *dir = pt_tmpdir("symcache-empty");
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, 0x40, 0x41, NULL, 0), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  const ptp_sym_frame *f = (const ptp_sym_frame *)1;
  uint32_t n = 7;
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x40, &f, &n), 1);
  PT_ASSERT_UINT_EQ(n, 0);
  PT_ASSERT_INT_EQ(ptp_symcache_add(c, 0x80, 0x81, NULL, 0), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 2);
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x80, &f, &n), 1);
  PT_ASSERT_UINT_EQ(n, 0);
  ptp_symcache_set_flags(c, PTP_SYMCACHE_HAS_SYMS);
  PT_ASSERT(ptp_symcache_dirty(c));
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 3);
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_UINT_EQ(ptp_symcache_flags(c), PTP_SYMCACHE_HAS_SYMS | PTP_SYMCACHE_FLAGS_SET);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x40, &f, &n), 1);
  ptp_symcache_del(c);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_symcache_stale_file_rewritten) {
  char *dir = pt_tmpdir("symcache-stale");
  char *path = sc_file(dir);
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  add_named(c, 0x100, "base");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  /* x and y read the same file; y appends first: x's view is stale */
  ptp_symcache *x = open_ok(dir, PTP_SYMCACHE_LOADED), *y = open_ok(dir, PTP_SYMCACHE_LOADED);
  add_named(y, 0x200, "from_y");
  PT_ASSERT_INT_EQ(ptp_symcache_save(y), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(y), 2);
  ino_t ino_y, ino_x;
  size_of(path, &ino_y);
  add_named(x, 0x300, "from_x");
  PT_ASSERT_INT_EQ(ptp_symcache_save(x), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(x), 1);   /* rewritten, merged */
  size_of(path, &ino_x);
  PT_ASSERT_MSG(ino_x != ino_y, "a stale view was appended to the file");
  /* y's next save sees the file changed too: rewrites, keeps x's */
  add_named(y, 0x400, "again_y");
  PT_ASSERT_INT_EQ(ptp_symcache_save(y), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(y), 1);
  ptp_symcache_del(x);
  ptp_symcache_del(y);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_named(c, 0x100, "base") && has_named(c, 0x200, "from_y") && has_named(c, 0x300, "from_x") &&
            has_named(c, 0x400, "again_y"));
  ptp_symcache_del(c);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_symcache_torn_and_bad_segments) {
  char *dir = pt_tmpdir("symcache-torn");
  char *path = sc_file(dir);
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  add_named(c, 0x100, "kept");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  off_t one = size_of(path, NULL);
  add_named(c, 0x200, "torn");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  off_t two = size_of(path, NULL);
  PT_ASSERT(two > one + 24);

  /* cut inside the second segment: the first is used, the file rewritten */
  PT_ASSERT_INT_EQ(truncate(path, one + (two - one) / 2), 0);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_named(c, 0x100, "kept"));
  const ptp_sym_frame *g;
  uint32_t k;
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x200, &g, &k), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 0);   /* never appended to */
  add_named(c, 0x200, "torn");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 1);
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_named(c, 0x100, "kept") && has_named(c, 0x200, "torn"));
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 1);
  add_named(c, 0x300, "late");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);

  /* a complete second segment with one flipped byte: the file is refused */
  two = size_of(path, NULL);
  one = two;
  size_t n;
  char *b = pt_read_file(path, &n);
  PT_ASSERT(b && (off_t)n == two);
  b[n - 12] ^= 0x40;   /* inside the last segment's strings/padding region */
  pt_write_file(path, b, n);
  free(b);
  /* blocks are read as lookups need them: the open reads the headers and
   * indexes (sound), the lookup of "late" reads its strings' block */
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x305, &g, &k), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_REJECTED);
  /* the whole file goes, the first segment's sound blocks too */
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x100, &g, &k), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_size(c), 0);
  add_named(c, 0x100, "kept");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_named(c, 0x100, "kept"));
  ptp_symcache_del(c);

  /* a file of format version 1 (same magic) is refused, then replaced */
  b = pt_read_file(path, &n);
  PT_ASSERT(b && n > 12);
  uint32_t v1 = 1;
  memcpy(b + 8, &v1, 4);
  pt_write_file(path, b, n);
  free(b);
  c = open_ok(dir, PTP_SYMCACHE_STALE);
  ptp_symcache_del(c);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

/* A file cut inside its last segment's padding (found by the fuzzer):
 * the segment's bytes are all there, so it is read, but the file is torn:
 * an append would start at the cut, not at the 8-byte boundary where the
 * reader looks for the next segment, and the appended segment would read
 * as garbage (the whole file rejected). So the next save rewrites it. */
PT_TEST(prof_symcache_cut_padding) {
  char *dir = pt_tmpdir("symcache-pad");
  char *path = sc_file(dir);
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  add_named(c, 0x100, "kept");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  /* strings: "", "kept" (name and system name), "seg.c": 12 bytes, so 4
   * of padding end the file */
  size_t n;
  char *b = pt_read_file(path, &n);
  PT_ASSERT(b && n % 8 == 0 && memcmp(b + n - 10, "seg.c\0\0\0\0\0", 10) == 0);
  free(b);
  PT_ASSERT_INT_EQ(truncate(path, (off_t)n - 4), 0);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_INT_EQ(ptp_symcache_verify(c), 0);
  PT_ASSERT(has_named(c, 0x100, "kept"));
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 0);   /* never appended to */
  add_named(c, 0x200, "after");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 1);   /* rewritten */
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_INT_EQ(ptp_symcache_verify(c), 0);
  PT_ASSERT(has_named(c, 0x100, "kept") && has_named(c, 0x200, "after"));
  ptp_symcache_del(c);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_symcache_segments_compacted) {
  char *dir = pt_tmpdir("symcache-many");
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  char name[32];
  for (unsigned i = 0; i < PTP_SYMCACHE_SEGS_MAX; i++) {
    snprintf(name, sizeof name, "f%u", i);
    add_named(c, 0x1000 + 0x100 * i, name);
    PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
    PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), i + 1);
  }
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), PTP_SYMCACHE_SEGS_MAX);
  add_named(c, 0x100, "last");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 1);
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 1);
  PT_ASSERT_UINT_EQ(ptp_symcache_size(c), PTP_SYMCACHE_SEGS_MAX + 1);
  for (unsigned i = 0; i < PTP_SYMCACHE_SEGS_MAX; i++) {
    snprintf(name, sizeof name, "f%u", i);
    PT_ASSERT(has_named(c, 0x1000 + 0x100 * i + 3, name));
  }
  PT_ASSERT(has_named(c, 0x100, "last"));
  ptp_symcache_del(c);
  pt_rm_rf(dir);
  free(dir);
}

#define SEG_ROUNDS 40

PT_TEST_T(prof_symcache_concurrent_appenders, 120000) {
  char *dir = pt_tmpdir("symcache-conc");
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  add_named(c, 0x10, "seed");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  pid_t kids[2];
  for (int w = 0; w < 2; w++) {
    kids[w] = fork();
    PT_ASSERT(kids[w] >= 0);
    if (kids[w] == 0) {
      /* a process-like cache per round: open, one new interval, save */
      for (int r = 0; r < SEG_ROUNDS; r++) {
        ptp_symcache *k;
        char nm[32];
        if (ptp_symcache_open(&k, dir, BID)) _exit(2);
        if (ptp_symcache_file_state(k) != PTP_SYMCACHE_LOADED) _exit(3);
        snprintf(nm, sizeof nm, "w%d_r%d", w, r);
        ptp_sym_frame f = {nm, nm, "seg.c", 1, r, w};
        if (ptp_symcache_add(k, 0x100000u * (w + 1) + 0x100u * r, 0x100000u * (w + 1) + 0x100u * r + 16, &f, 1))
          _exit(4);
        if (ptp_symcache_save(k)) _exit(5);
        ptp_symcache_del(k);
      }
      _exit(0);
    }
  }
  for (int w = 0; w < 2; w++) {
    int st;
    PT_ASSERT_INT_EQ(waitpid(kids[w], &st, 0), kids[w]);
    PT_ASSERT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed: status %#x", w, st);
  }
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_named(c, 0x10, "seed"));
  unsigned found[2] = {0, 0};
  for (int w = 0; w < 2; w++)
    for (int r = 0; r < SEG_ROUNDS; r++) {
      char nm[32];
      snprintf(nm, sizeof nm, "w%d_r%d", w, r);
      uint64_t lo = 0x100000u * (w + 1) + 0x100u * r;
      const ptp_sym_frame *f;
      uint32_t n;
      if (ptp_symcache_find(c, lo + 7, &f, &n) != 1) continue;
      PT_ASSERT_MSG(n == 1 && strcmp(f[0].name, nm) == 0 && f[0].line == r && f[0].column == w,
                    "interval of %s answers %s", nm, n ? f[0].name : "(nothing)");
      found[w]++;
    }
  /* a race may lose intervals (an append to a file renamed away at that
   * moment), but the file as it ends is the work of the last save of one
   * writer at least: its final interval is there */
  fprintf(stderr, "# found %u and %u of %d intervals per writer\n", found[0], found[1], SEG_ROUNDS);
  PT_ASSERT(has_named(c, 0x100000u + 0x100u * (SEG_ROUNDS - 1), "w0_r39") ||
            has_named(c, 0x200000u + 0x100u * (SEG_ROUNDS - 1), "w1_r39"));
  ptp_symcache_del(c);
  pt_rm_rf(dir);
  free(dir);
}

/* Format 5's layout, as docs/pprof-format.md "Symbol cache" gives it. */
#define F_HDR 152            /* magic 8, version 5, algo 4, build id 136 */
#define S_HDR 32             /* magic, flags, nivals, nframes, strbytes, the
                                NOT_WHOLE mark's two limits, crc */
#define S_CRC 28             /* offset of crc: what the header checksum covers */
/* The header checksum of prof_symcache_format5_header_and_pin's segment
 * (flags 0, no limits) under algorithm 3, computed by symcache_format.py's
 * CRC-32C over the 28 header bytes and the index the layout gives (the
 * same computation gives format 4's 0xf9377ef8 over its 20 bytes). */
#define HDR_CRC_PIN 0xcccaedbcu
/* the index of a segment of one block per part: one first lo, three block
 * checksums, padded to 8 */
#define S_IDX1 24

static uint32_t u32_at(const char *b, size_t off) {
  uint32_t v;
  memcpy(&v, b + off, 4);
  return v;
}

PT_TEST(prof_symcache_format5_header_and_pin) {
  char *dir = pt_tmpdir("symcache-f5");
  char *path = sc_file(dir);
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  add_named(c, 0x100, "first");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  size_t n;
  char *b = pt_read_file(path, &n);
  PT_ASSERT_UINT_EQ(n, F_HDR + S_HDR + S_IDX1 + 24 + 24 + 16);
  PT_ASSERT_UINT_EQ(u32_at(b, 8), 5);
  PT_ASSERT_UINT_EQ(u32_at(b, 12), ptp_crc_algo());
  /* one interval, one frame, strings "\0first\0seg.c\0" */
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR), 0x35474553u);   /* "SEG5" */
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 8), 1);
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 12), 1);
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 16), 13);
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 20), 0);   /* no NOT_WHOLE mark: no limits */
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 24), 0);
  uint64_t blo;
  memcpy(&blo, b + F_HDR + S_HDR, 8);
  PT_ASSERT_UINT_EQ(blo, 0x100);   /* the first lo of the one block of intervals */
  /* pinned: the values of ptp_crc.h's definition over the layout of
   * docs/pprof-format.md, computed by an independent reader in Python
   * (software CRC-32C, the three lanes folded) from the bytes the format
   * says this file holds */
  if (ptp_crc_algo() == PTP_CRC_C3) {
    PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + S_HDR + 8), 0x903564bau);    /* the intervals' block */
    PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + S_HDR + 12), 0xa729956eu);   /* the frames' */
    PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + S_HDR + 16), 0x934235ecu);   /* the strings' */
    PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + S_CRC), HDR_CRC_PIN);        /* header and index */
  }

  /* the same file under zlib's crc32 (valid for algorithm 2) is refused
   * here, since this process computes algorithm 3: never read */
  if (ptp_crc_algo() == PTP_CRC_C3) {
    uint32_t two = PTP_CRC_ZLIB;
    memcpy(b + 12, &two, 4);
    const char *body = b + F_HDR + S_HDR + S_IDX1;
    uint32_t z[3] = {ptp_crc_block(PTP_CRC_ZLIB, 0, body, 24),
                     ptp_crc_block(PTP_CRC_ZLIB, 0, body + 24, 24),
                     ptp_crc_block(PTP_CRC_ZLIB, 0, body + 48, 13)};
    memcpy(b + F_HDR + S_HDR + 8, z, sizeof z);
    uint32_t h = ptp_crc_blocks(PTP_CRC_ZLIB, 0, b + F_HDR, S_CRC, 0);
    h = ptp_crc_blocks(PTP_CRC_ZLIB, h, b + F_HDR + S_HDR, 8 + sizeof z, 0);
    memcpy(b + F_HDR + S_CRC, &h, 4);
    pt_write_file(path, b, n);
    c = open_ok(dir, PTP_SYMCACHE_STALE);
    PT_ASSERT(!has_named(c, 0x105, "first"));
    add_named(c, 0x200, "second");
    PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
    ptp_symcache_del(c);
    c = open_ok(dir, PTP_SYMCACHE_LOADED);
    PT_ASSERT(has_named(c, 0x205, "second"));
    ptp_symcache_del(c);
    free(b);
    b = pt_read_file(path, &n);
    PT_ASSERT(b && n > F_HDR);
    PT_ASSERT_UINT_EQ(u32_at(b, 12), PTP_CRC_C3);
  }
  /* version 4 (the same blocks, a 24-byte segment header: a NOT_WHOLE
   * mark without the limits it was decided under) is refused */
  uint32_t v4 = 4;
  memcpy(b + 8, &v4, 4);
  pt_write_file(path, b, n);
  c = open_ok(dir, PTP_SYMCACHE_STALE);
  PT_ASSERT_INT_EQ(ptp_symcache_file_error(c), -ESTALE);
  ptp_symcache_del(c);
  /* version 3 (one checksum per segment, read whole) is refused */
  uint32_t v3 = 3;
  memcpy(b + 8, &v3, 4);
  pt_write_file(path, b, n);
  c = open_ok(dir, PTP_SYMCACHE_STALE);
  ptp_symcache_del(c);
  /* version 2 (the zlib-only format before) is refused */
  uint32_t v2 = 2;
  memcpy(b + 8, &v2, 4);
  pt_write_file(path, b, n);
  c = open_ok(dir, PTP_SYMCACHE_STALE);
  ptp_symcache_del(c);
  free(b);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

/* Adds count intervals from lo, each with a frame named by a long,
 * distinct string, so both the intervals and the strings of the segment
 * span several 16 KiB checksum blocks. */
static void add_many(ptp_symcache *c, uint64_t lo, unsigned count, const char *tag) {
  char name[96];
  for (unsigned i = 0; i < count; i++) {
    snprintf(name, sizeof name, "%s_function_with_a_rather_long_symbol_name_%05u", tag, i);
    add_named(c, lo + 16 * i, name);
  }
}

static bool has_many(ptp_symcache *c, uint64_t lo, unsigned count, const char *tag) {
  char name[96];
  for (unsigned i = 0; i < count; i++) {
    snprintf(name, sizeof name, "%s_function_with_a_rather_long_symbol_name_%05u", tag, i);
    if (!has_named(c, lo + 16 * i + 7, name)) return false;
  }
  return true;
}

/* A new cache file in dir (none there yet): 1500 intervals from 0x10000,
 * named by tag (add_many). */
static void write_many(const char *dir, const char *tag) {
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  add_many(c, 0x10000, 1500, tag);
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
}

/* Another process's rewrite of path, the file of dir: a save of its own
 * (in dir/other) renamed over it, the same 1500 addresses named by tag,
 * with flags (0: none set). Again and again if need be: each time a new
 * file. */
static void replace_by_other_as(const char *dir, const char *path, const char *tag,
                                unsigned flags) {
  char other[600];
  snprintf(other, sizeof other, "%s/other", dir);
  PT_ASSERT(mkdir(other, 0700) == 0 || errno == EEXIST);
  ptp_symcache *o = open_ok(other, PTP_SYMCACHE_MISSING);
  add_many(o, 0x10000, 1500, tag);
  if (flags) ptp_symcache_set_flags(o, flags);
  PT_ASSERT_INT_EQ(ptp_symcache_save(o), 0);
  ptp_symcache_del(o);
  char *opath = sc_file(other);
  PT_ASSERT_INT_EQ(rename(opath, path), 0);
  free(opath);
}

/* The same, named "z_...", no flags. */
static void replace_by_other(const char *dir, const char *path) {
  replace_by_other_as(dir, path, "z", 0);
}

/* Whether c's NOT_WHOLE mark records exactly (points, bytes). */
static bool nw_is(const ptp_symcache *c, uint32_t points, uint32_t bytes) {
  ptp_symcache_limits l;
  return ptp_symcache_not_whole_limits(c, &l) == 0 && l.fill_points == points && l.file_max == bytes;
}

/* A NOT_WHOLE mark keeps the limits it was decided under, in the file
 * (written, appended, read back from the last segment, covered by the
 * header checksum), and stands only for limits none of which is higher. */
PT_TEST(prof_symcache_not_whole_limits_recorded) {
  char *dir = pt_tmpdir("symcache-nw");
  char *path = sc_file(dir);
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  ptp_symcache_limits lim = {1000, 2000};
  ptp_symcache_set_not_whole(c, &lim);
  PT_ASSERT(ptp_symcache_flags(c) & PTP_SYMCACHE_NOT_WHOLE);
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);

  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(nw_is(c, 1000, 2000));
  /* stands under the same or lower limits, expires under any higher one */
  PT_ASSERT(ptp_symcache_not_whole(c, &lim));
  PT_ASSERT(ptp_symcache_not_whole(c, &(ptp_symcache_limits){999, 1}));
  PT_ASSERT(!ptp_symcache_not_whole(c, &(ptp_symcache_limits){1001, 2000}));
  PT_ASSERT(!ptp_symcache_not_whole(c, &(ptp_symcache_limits){1000, 2001}));
  /* other flags set around it keep the mark's limits (nothing to write) */
  ptp_symcache_set_flags(c, ptp_symcache_flags(c));
  PT_ASSERT(!ptp_symcache_dirty(c));
  ptp_symcache_set_flags(c, ptp_symcache_flags(c) | PTP_SYMCACHE_HAS_SYMS);
  PT_ASSERT(nw_is(c, 1000, 2000));
  /* a new decision under other limits replaces them, in an appended segment */
  ptp_symcache_set_not_whole(c, &(ptp_symcache_limits){3000, 4000});
  add_named(c, 0x100, "nw");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 2);
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(nw_is(c, 3000, 4000));   /* the last segment's */
  PT_ASSERT(ptp_symcache_flags(c) & PTP_SYMCACHE_HAS_SYMS);
  PT_ASSERT(ptp_symcache_not_whole(c, &(ptp_symcache_limits){3000, 4000}));
  ptp_symcache_del(c);

  /* the limits are under the segment's header checksum */
  size_t n;
  char *b = pt_read_file(path, &n);
  PT_ASSERT(b && n > F_HDR + S_HDR);
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 20), 1000);   /* the first segment's */
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 24), 2000);
  b[F_HDR + 21] ^= 0x01;
  pt_write_file(path, b, n);
  free(b);
  c = open_ok(dir, PTP_SYMCACHE_REJECTED);
  PT_ASSERT_INT_EQ(ptp_symcache_not_whole_limits(c, &lim), -ENOENT);
  ptp_symcache_del(c);
  unlink(path);

  /* a mark set through the flags alone records no limits: expired for
   * every reader; clearing the mark forgets its limits */
  c = open_ok(dir, PTP_SYMCACHE_MISSING);
  ptp_symcache_set_flags(c, PTP_SYMCACHE_NOT_WHOLE);
  PT_ASSERT(nw_is(c, 0, 0));
  PT_ASSERT(!ptp_symcache_not_whole(c, &(ptp_symcache_limits){1, 0}));
  ptp_symcache_set_not_whole(c, &(ptp_symcache_limits){5, 6});
  ptp_symcache_set_flags(c, PTP_SYMCACHE_HAS_SYMS);
  PT_ASSERT_INT_EQ(ptp_symcache_not_whole_limits(c, &lim), -ENOENT);
  PT_ASSERT(!ptp_symcache_not_whole(c, &(ptp_symcache_limits){0, 0}));
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  ptp_symcache_del(c);
  b = pt_read_file(path, &n);
  PT_ASSERT(b && n > F_HDR + S_HDR);
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 20), 0);
  PT_ASSERT_UINT_EQ(u32_at(b, F_HDR + 24), 0);
  free(b);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_symcache_format5_multiblock) {
  char *dir = pt_tmpdir("symcache-blocks");
  char *path = sc_file(dir);
  write_many(dir, "a");   /* 9 blocks of intervals, 9 of frames, 23 of strings */
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_many(c, 0x10000, 1500, "a"));
  add_many(c, 0x100000, 1500, "b");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 2);     /* appended */
  ptp_symcache_del(c);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 2);
  PT_ASSERT(has_many(c, 0x10000, 1500, "a") && has_many(c, 0x100000, 1500, "b"));
  ptp_symcache_del(c);
  /* a byte of the first segment's strings in their third block */
  size_t n;
  char *b = pt_read_file(path, &n);
  PT_ASSERT(b);
  uint32_t strbytes = u32_at(b, F_HDR + 16), nbs = (strbytes + 4095) / 4096;
  PT_ASSERT(nbs > 3);
  size_t idx = (9 * 8 + (9 + 9 + nbs) * 4 + 7) & ~(size_t)7;
  size_t strs = F_HDR + S_HDR + idx + 1500 * 24 + 1500 * 24;
  b[strs + 2 * 4096 + 100] ^= 0x20;
  pt_write_file(path, b, n);
  free(b);
  /* read as needed: the first function's name is in the first block, so
   * its lookup reads no corrupt byte and the file stays loaded */
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_many(c, 0x10000, 1, "a"));
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);
  /* the lookups that reach the third block reject the file */
  PT_ASSERT(!has_many(c, 0x10000, 1500, "a"));
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_REJECTED);
  PT_ASSERT(!has_named(c, 0x100007, "b_function_with_a_rather_long_symbol_name_00000"));
  ptp_symcache_del(c);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

/* The descriptor: open from ptp_symcache_open to ptp_symcache_release; a
 * lookup after the release opens the same file again and reads on; a file
 * replaced after the release (another process's rewrite) is never read
 * with the old index: the new one is read as at open and answers, and
 * what the old one returned stays readable; a file cut short in place
 * and unusable is dropped, nothing left open either way. */
PT_TEST(prof_symcache_release_and_reopen) {
  char *dir = pt_tmpdir("symcache-release");
  char *path = sc_file(dir);
  write_many(dir, "a");

  int fds0 = ptt_count_fds();
  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0 + 1);
  PT_ASSERT(has_many(c, 0x10000, 1, "a"));
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);
  PT_ASSERT(has_many(c, 0x10000, 1500, "a"));   /* reopened, every block read */
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);
  ptp_symcache_release(c);
  ptp_symcache_release(c);                      /* twice: fine */
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);
  ptp_symcache_del(c);

  /* the program closes our number and opens a file of its own there: the
   * number is never read or closed by the cache again */
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_many(c, 0x10000, 1, "a"));
  int ours = -1;
  DIR *fdd = opendir("/proc/self/fd");
  struct dirent *de;
  while ((de = readdir(fdd))) {
    char l[PATH_MAX + 1], p[600];
    snprintf(p, sizeof p, "/proc/self/fd/%s", de->d_name);
    ssize_t k = readlink(p, l, PATH_MAX);
    if (k > 0 && (l[k] = 0, strcmp(l, path) == 0)) ours = atoi(de->d_name);
  }
  closedir(fdd);
  PT_ASSERT(ours >= 0);
  PT_ASSERT_INT_EQ(close(ours), 0);
  int prog = open("/dev/null", O_RDONLY | O_CLOEXEC);
  PT_ASSERT_INT_EQ(prog, ours);
  PT_ASSERT(has_many(c, 0x10000, 1500, "a"));   /* reopened by path */
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(fcntl(prog, F_GETFD), FD_CLOEXEC);   /* still the program's */
  ptp_symcache_del(c);
  PT_ASSERT_INT_EQ(fcntl(prog, F_GETFD), FD_CLOEXEC);
  close(prog);

  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  const ptp_sym_frame *g;
  uint32_t k;
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x10000 + 7, &g, &k), 1);
  const char *first = g[0].name;   /* in the first file's memory */
  PT_ASSERT_STR_EQ(first, "a_function_with_a_rather_long_symbol_name_00000");
  ptp_symcache_release(c);
  /* another process rewrites the file: same addresses, other names (a
   * real rewrite holds the same answers; other names show which file
   * answered) */
  replace_by_other(dir, path);
  /* the last interval's block was never read: the file there now is read
   * and answers, as every other lookup from then on */
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x10000 + 16 * 1499 + 7, &g, &k), 1);
  PT_ASSERT_STR_EQ(g[0].name, "z_function_with_a_rather_long_symbol_name_01499");
  PT_ASSERT(has_many(c, 0x10000, 1500, "z"));
  PT_ASSERT_UINT_EQ(ptp_symcache_size(c), 1500);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);   /* replaced, not corrupt */
  /* a string returned from the first file is still there until del */
  PT_ASSERT_STR_EQ(first, "a_function_with_a_rather_long_symbol_name_00000");
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);
  ptp_symcache_del(c);

  /* cut short in place instead (same inode, shorter, no segment left):
   * what is there now is read as at open, found unusable, and the file
   * dropped: nothing answers from it, nothing stays open */
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_many(c, 0x10000, 1, "z"));
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(truncate(path, 200), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x10000 + 16 * 1499 + 7, &g, &k), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_size(c), 0);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x10000 + 7, &g, &k), 0);   /* its memory, not its answers */
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_REJECTED);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);
  ptp_symcache_del(c);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

/* Whether the page holding p is resident (mincore; a page no longer
 * mapped is not). */
static bool page_resident(const void *p) {
  uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  unsigned char v = 0;
  if (mincore((void *)((uintptr_t)p & ~(pg - 1)), pg, &v) != 0) {
    PT_ASSERT_INT_EQ(errno, ENOMEM);
    return false;
  }
  return v & 1;
}

/* Eviction: the blocks lookups read are counted (resident), given back
 * (the page of a name read is no longer in memory) and read again by the
 * next lookups, with the same answers; after a release, evict opens the
 * same file again (and release closes it); a file replaced since is
 * followed: the old one's memory is given back whole and the new one
 * answers. */
PT_TEST(prof_symcache_evict_reads_again) {
  char *dir = pt_tmpdir("symcache-evict");
  char *path = sc_file(dir);
  write_many(dir, "a");

  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT_UINT_EQ(ptp_symcache_resident(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_evict(c), 0);            /* nothing read yet */
  PT_ASSERT(has_many(c, 0x10000, 1500, "a"));
  /* every block: 1500 intervals and frames of 24 bytes, the strings */
  size_t all = ptp_symcache_resident(c);
  PT_ASSERT(all >= 2 * 1500 * 24 + 1500 * 48);
  const ptp_sym_frame *f;
  uint32_t n;
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x10000 + 16 * 700 + 7, &f, &n), 1);
  const char *name = f[0].name;   /* in the file's memory, a strings block */
  PT_ASSERT(page_resident(name));
  int fds0 = ptt_count_fds();
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0 - 1);
  PT_ASSERT_UINT_EQ(ptp_symcache_evict(c), all);
  PT_ASSERT_UINT_EQ(ptp_symcache_resident(c), 0);
  PT_ASSERT(!page_resident(name));
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);   /* opened again to check it can */
  PT_ASSERT(has_many(c, 0x10000, 1500, "a"));
  PT_ASSERT_UINT_EQ(ptp_symcache_resident(c), all);
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0 - 1);

  /* replaced by another process's rewrite: the new file followed, the old
   * one's memory given back whole (unmapped), the new one read as needed */
  size_t old_size = (size_t)size_of(path, NULL);
  replace_by_other(dir, path);
  PT_ASSERT_UINT_EQ(ptp_symcache_evict(c), old_size);
  PT_ASSERT_UINT_EQ(ptp_symcache_resident(c), 0);
  PT_ASSERT(!page_resident(name));
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0);      /* the new file, open */
  PT_ASSERT(has_many(c, 0x10000, 1500, "z"));
  PT_ASSERT_UINT_EQ(ptp_symcache_resident(c), all);   /* same layout, other names */
  PT_ASSERT_INT_EQ(ptp_symcache_file_state(c), PTP_SYMCACHE_LOADED);
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0 - 1);

  /* replaced while a lookup had read part of it: what that lookup returned
   * stays readable until the next evict, the old file's memory counted
   * whole meanwhile */
  PT_ASSERT_UINT_EQ(ptp_symcache_evict(c), all);
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x10000 + 16 * 700 + 7, &f, &n), 1);
  name = f[0].name;
  size_t part = ptp_symcache_resident(c);
  PT_ASSERT(part > 0 && part < all);
  ptp_symcache_release(c);
  size_t z_size = (size_t)size_of(path, NULL);
  replace_by_other(dir, path);
  PT_ASSERT_INT_EQ(ptp_symcache_find(c, 0x10000 + 16 * 1499 + 7, &f, &n), 1);   /* followed */
  PT_ASSERT_STR_EQ(name, "z_function_with_a_rather_long_symbol_name_00700");
  size_t now_read = ptp_symcache_resident(c) - z_size;   /* the new file's blocks */
  PT_ASSERT(now_read > 0 && now_read < all);
  ptp_symcache_release(c);
  PT_ASSERT_UINT_EQ(ptp_symcache_evict(c), z_size + now_read);
  PT_ASSERT(!page_resident(name));
  PT_ASSERT_UINT_EQ(ptp_symcache_resident(c), 0);
  ptp_symcache_release(c);
  PT_ASSERT_INT_EQ(ptt_count_fds(), fds0 - 1);
  ptp_symcache_del(c);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

/* A file replaced while this cache holds intervals not saved yet: the new
 * file is followed and its complete mark taken, what was added stays and
 * answers, and the save appends it to the new file (a segment more, no
 * rewrite), where a later process finds both. Without pending additions
 * the new file's flags are taken as they are. */
PT_TEST(prof_symcache_follow_keeps_added) {
  char *dir = pt_tmpdir("symcache-follow");
  char *path = sc_file(dir);
  write_many(dir, "a");

  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_many(c, 0x10000, 1, "a"));
  PT_ASSERT(!(ptp_symcache_flags(c) & PTP_SYMCACHE_COMPLETE));
  add_named(c, 0x900000, "ours_added");
  PT_ASSERT(ptp_symcache_dirty(c));
  ptp_symcache_release(c);
  replace_by_other_as(dir, path, "z", PTP_SYMCACHE_COMPLETE);

  /* an unread block: followed */
  PT_ASSERT(has_named(c, 0x10000 + 16 * 1499 + 7, "z_function_with_a_rather_long_symbol_name_01499"));
  PT_ASSERT(ptp_symcache_flags(c) & PTP_SYMCACHE_COMPLETE);
  PT_ASSERT(has_named(c, 0x900000 + 3, "ours_added"));
  PT_ASSERT(ptp_symcache_dirty(c));
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 2);   /* appended to the new file */
  ptp_symcache_del(c);

  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_many(c, 0x10000, 1500, "z"));
  PT_ASSERT(has_named(c, 0x900000 + 3, "ours_added"));
  PT_ASSERT(ptp_symcache_flags(c) & PTP_SYMCACHE_COMPLETE);
  ptp_symcache_release(c);
  /* nothing pending: the flags of the file there now, as they are */
  replace_by_other_as(dir, path, "y", 0);
  ptp_symcache_evict(c);   /* followed here, at the evict */
  PT_ASSERT(!(ptp_symcache_flags(c) & PTP_SYMCACHE_COMPLETE));
  PT_ASSERT(has_many(c, 0x10000, 1500, "y"));
  PT_ASSERT(!has_named(c, 0x900000 + 3, "ours_added"));   /* that file never held it */
  PT_ASSERT(!ptp_symcache_dirty(c));
  ptp_symcache_del(c);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(prof_symcache_append_keeps_dir_bound) {
  char *dir = pt_tmpdir("symcache-bound");
  char *path = sc_file(dir);
  char filler[4096];
  snprintf(filler, sizeof filler, "%s/ff00ff00.sym", dir);
  /* sparse: its st_size counts against the bound, no disk is used */
  int fd = open(filler, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  PT_ASSERT(fd >= 0);
  PT_ASSERT_INT_EQ(ftruncate(fd, (off_t)(PTP_SYMCACHE_DIR_MAX - (256u << 10))), 0);
  close(fd);
  struct timespec old[2] = {{time(NULL) - 86400, 0}, {time(NULL) - 86400, 0}};
  PT_ASSERT_INT_EQ(utimensat(AT_FDCWD, filler, old, 0), 0);
  struct stat st;

  ptp_symcache *c = open_ok(dir, PTP_SYMCACHE_MISSING);
  add_named(c, 0x100, "first");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);          /* rewrite: within the bound */
  ptp_symcache_del(c);
  PT_ASSERT_INT_EQ(stat(filler, &st), 0);

  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  add_many(c, 0x10000, 5000, "c");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 2); /* appended */
  ptp_symcache_del(c);
  off_t sz = size_of(path, NULL);
  PT_ASSERT_MSG(sz > (off_t)(256u << 10) && sz < (off_t)PTP_SYMCACHE_BOUND_STEP,
                "first append left the file at %lld bytes", (long long)sz);
  /* over the bound now, but below the step: not scanned */
  PT_ASSERT_INT_EQ(stat(filler, &st), 0);

  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  add_many(c, 0x100000, 6000, "d");
  PT_ASSERT_INT_EQ(ptp_symcache_save(c), 0);
  PT_ASSERT_UINT_EQ(ptp_symcache_file_segments(c), 3); /* appended again */
  ptp_symcache_del(c);
  PT_ASSERT(size_of(path, NULL) > (off_t)PTP_SYMCACHE_BOUND_STEP);
  PT_ASSERT_INT_EQ(stat(filler, &st), -1);             /* the oldest file removed */
  PT_ASSERT_INT_EQ(errno, ENOENT);
  c = open_ok(dir, PTP_SYMCACHE_LOADED);
  PT_ASSERT(has_named(c, 0x105, "first"));
  PT_ASSERT(has_many(c, 0x10000, 5000, "c") && has_many(c, 0x100000, 6000, "d"));
  ptp_symcache_del(c);
  free(path);
  pt_rm_rf(dir);
  free(dir);
}
