/* test_gunzip.c - gzip decompression with zlib (src/common/pt_gunzip.c)
 * against what gzip(1) and Python's zlib write: dynamic and fixed Huffman
 * codes, stored blocks, the output cap. */
#include "common_test.h"
#include "common/pt_gunzip.h"

#include <errno.h>

PT_TEST(common_gunzip_matches_gzip) {
  char *dir = pt_tmpdir("fbgz");
  char *raw = ptt_path2(dir, "raw");
  /* Text-like data with repeats (dynamic Huffman, back-references) and a
   * random tail (stored blocks at -1 on incompressible data). */
  size_t n = 300000;
  uint8_t *buf = malloc(n);
  PT_ASSERT(buf);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    buf[i] = i < n / 2 ? (uint8_t)("the quick brown fox "[i % 20] + (i % 977 == 0))
                       : (uint8_t)(x >> 24);
  }
  pt_write_file(raw, buf, n);
  const char *levels[] = {"-1", "-6", "-9"};
  for (int l = 0; l < 3; l++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gzip %s -c '%s' > '%s.gz'", levels[l], raw, raw);
    char *argv[] = {"sh", "-c", cmd, NULL};
    ptt_run_ok(argv);
    char *gz = ptt_path2(dir, "raw.gz");
    size_t glen = 0;
    char *g = pt_read_file(gz, &glen);
    PT_ASSERT(g);
    uint8_t *out = NULL;
    size_t olen = 0;
    PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)g, glen, 0, &out, &olen), 0);
    PT_ASSERT_UINT_EQ(olen, n);
    PT_ASSERT_MEM_EQ(out, buf, n);
    free(out);
    /* Output cap. */
    PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)g, glen, 1000, &out, &olen), -EFBIG);
    PT_ASSERT(out == NULL);
    free(g);
    free(gz);
  }
  /* Fixed Huffman / stored blocks as Python's zlib writes them. */
  char *py = ptt_path2(dir, "small.gz");
  char *pargv[] = {"python3", "-c",
                   "import gzip,sys; open(sys.argv[1],'wb').write(gzip.compress(b'abcabcabc'*3, 0))",
                   py, NULL};
  ptt_run_ok(pargv);
  size_t glen = 0;
  char *g = pt_read_file(py, &glen);
  uint8_t *out = NULL;
  size_t olen = 0;
  PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)g, glen, 0, &out, &olen), 0);
  PT_ASSERT_UINT_EQ(olen, 27);
  PT_ASSERT_MEM_EQ(out, "abcabcabcabcabcabcabcabcabc", 27);
  free(out);
  free(g);
  /* Fixed Huffman codes (Z_FIXED) with long back-references. */
  char *fx = ptt_path2(dir, "fixed.gz");
  char *fargv[] = {"python3", "-c",
                   "import zlib,sys\n"
                   "d=(b'fixed huffman block '*500)+bytes(range(256))*4\n"
                   "c=zlib.compressobj(9,zlib.DEFLATED,31,9,zlib.Z_FIXED)\n"
                   "open(sys.argv[1],'wb').write(c.compress(d)+c.flush())",
                   fx, NULL};
  ptt_run_ok(fargv);
  g = pt_read_file(fx, &glen);
  PT_ASSERT(g);
  PT_ASSERT_INT_EQ(pt_gunzip((uint8_t *)g, glen, 0, &out, &olen), 0);
  PT_ASSERT_UINT_EQ(olen, 20 * 500 + 1024);
  PT_ASSERT_MEM_EQ(out, "fixed huffman block fixed", 25);
  PT_ASSERT_INT_EQ(out[20 * 500 + 1023], 255);
  free(out);
  free(g);
  free(fx);
  PT_ASSERT_INT_EQ(pt_gunzip((const uint8_t *)"not gzip at all, really", 23, 0, &out, &olen), -EINVAL);
  free(py);
  free(buf);
  free(raw);
  pt_rm_rf(dir);
  free(dir);
}

