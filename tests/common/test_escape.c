/* Unit tests for the escaper of outside text (src/common/pt_escape.c) and
 * its use by the log files (pt_logfile.c): exact escapes of control bytes,
 * C1 controls and invalid UTF-8; valid UTF-8 kept; never half an escape
 * when the buffer is short; on random bytes the output holds no control
 * byte and unescapes back to the input (so it is unambiguous); a log line
 * with an ESC sequence and newlines stays one escaped line. */
#include "pt_test.h"
#include "common/pt_escape.h"
#include "common/pt_logfile.h"

#include <stdint.h>
#include <unistd.h>

static const char *esc(const char *in, size_t len, unsigned flags) {
  static char out[4096];
  pt_escape(out, sizeof out, in, len, flags, NULL);
  return out;
}

PT_TEST(common_escape_exact) {
  const char t1[] = "a\x1b[31mb\nc\td\\e\r\x7f\x01";
  PT_ASSERT_STR_EQ(esc(t1, sizeof t1 - 1, PT_ESC_BACKSLASH),
                   "a\\x1b[31mb\\nc\\td\\\\e\\r\\x7f\\x01");
  /* without the flag a backslash stays as it is (terminal messages) */
  PT_ASSERT_STR_EQ(esc(t1, sizeof t1 - 1, 0), "a\\x1b[31mb\\nc\\td\\e\\r\\x7f\\x01");
  /* NUL inside a counted buffer */
  PT_ASSERT_STR_EQ(esc("x\0y", 3, 0), "x\\x00y");
  /* valid UTF-8 is kept: e acute, euro sign, an emoji */
  const char u[] = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
  PT_ASSERT_STR_EQ(esc(u, sizeof u - 1, PT_ESC_BACKSLASH), u);
  /* C1 controls (CSI = U+009B, NEL = U+0085) are escaped byte by byte */
  PT_ASSERT_STR_EQ(esc("<\xc2\x9b" "2J>", 6, 0), "<\\xc2\\x9b2J>");
  PT_ASSERT_STR_EQ(esc("\xc2\x85", 2, 0), "\\xc2\\x85");
  PT_ASSERT_STR_EQ(esc("\xc2\xa0", 2, 0), "\xc2\xa0"); /* U+00A0 is not a control */
  /* invalid UTF-8: a lone byte, a cut sequence, overlong, surrogate,
   * above U+10FFFF, a raw 8-bit CSI */
  PT_ASSERT_STR_EQ(esc("\xff", 1, 0), "\\xff");
  PT_ASSERT_STR_EQ(esc("\xe2\x82", 2, 0), "\\xe2\\x82");
  PT_ASSERT_STR_EQ(esc("\xc0\xaf", 2, 0), "\\xc0\\xaf");
  PT_ASSERT_STR_EQ(esc("\xed\xa0\x80", 3, 0), "\\xed\\xa0\\x80");
  PT_ASSERT_STR_EQ(esc("\xf4\x90\x80\x80", 4, 0), "\\xf4\\x90\\x80\\x80");
  PT_ASSERT_STR_EQ(esc("\x9b", 1, 0), "\\x9b");
}

PT_TEST(common_escape_never_cuts_an_escape) {
  char out[8];
  size_t used = 99;
  /* "abcd" fits; "\x1b" (4 bytes) would not fit after it in 7 + NUL */
  size_t n = pt_escape(out, sizeof out, "abcd\x1b" "e", 6, 0, &used);
  PT_ASSERT_STR_EQ(out, "abcd");
  PT_ASSERT_UINT_EQ(n, 4);
  PT_ASSERT_UINT_EQ(used, 4);
  /* a 4-byte character is not split either */
  n = pt_escape(out, 6, "ab\xf0\x9f\x98\x80", 6, 0, &used);
  PT_ASSERT_STR_EQ(out, "ab");
  PT_ASSERT_UINT_EQ(used, 2);
  n = pt_escape(out, 1, "abc", 3, 0, &used);
  PT_ASSERT_UINT_EQ(n, 0);
  PT_ASSERT_STR_EQ(out, "");
}

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The inverse of pt_escape with PT_ESC_BACKSLASH; -1 on a malformed escape. */
static long unescape(const char *s, unsigned char *out) {
  long n = 0;
  for (; *s; s++) {
    if (*s != '\\') { out[n++] = (unsigned char)*s; continue; }
    s++;
    if (*s == 'n') out[n++] = '\n';
    else if (*s == 'r') out[n++] = '\r';
    else if (*s == 't') out[n++] = '\t';
    else if (*s == '\\') out[n++] = '\\';
    else if (*s == 'x' && hexval(s[1]) >= 0 && hexval(s[2]) >= 0) {
      out[n++] = (unsigned char)(hexval(s[1]) * 16 + hexval(s[2]));
      s += 2;
    } else return -1;
  }
  return n;
}

PT_TEST(common_escape_random_bytes_round_trip) {
  uint32_t x = 2463534242u;
  for (int iter = 0; iter < 20000; iter++) {
    unsigned char in[64];
    size_t len = (size_t)(iter % 64);
    for (size_t i = 0; i < len; i++) {
      x ^= x << 13; x ^= x >> 17; x ^= x << 5;
      /* mostly high bytes and controls: where the cases are */
      unsigned v = x & 0xff;
      in[i] = (unsigned char)(i % 3 == 0 ? (v | 0x80) : v);
    }
    char out[64 * 4 + 1];
    size_t used = 0;
    size_t n = pt_escape(out, sizeof out, (const char *)in, len, PT_ESC_BACKSLASH, &used);
    PT_ASSERT_UINT_EQ(used, len);
    PT_ASSERT_UINT_EQ(strlen(out), n);
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)out[i];
      PT_ASSERT_MSG(c >= 0x20 && c != 0x7f, "control byte 0x%02x in output (iteration %d)", c, iter);
      PT_ASSERT_MSG(!(c == 0xc2 && i + 1 < n && (unsigned char)out[i + 1] <= 0x9f),
                    "C1 control in output (iteration %d)", iter);
    }
    unsigned char back[64];
    long m = unescape(out, back);
    PT_ASSERT_INT_EQ(m, (long)len);
    PT_ASSERT_MEM_EQ(back, in, len);
  }
}

PT_TEST(common_logfile_escapes_outside_text) {
  char *dir = pt_tmpdir("logesc");
  char path[4096];
  snprintf(path, sizeof path, "%s/x.log", dir);
  pt_logfile *l;
  PT_ASSERT_INT_EQ(pt_logfile_open(&l, path), 0);
  PT_ASSERT_INT_EQ(pt_logfile_write(l, "INFO hello from evil\x1b[2J\n2026-01-01T00:00:00.000Z WARN forged"), 0);
  PT_ASSERT_INT_EQ(pt_logfile_write(l, "INFO path C:\\dir \xc3\xa9"), 0);
  pt_logfile_del(l);
  size_t len = 0;
  char *text = pt_read_file(path, &len);
  PT_ASSERT(text);
  /* two lines, each "<24-char time> <escaped text>" */
  const char *l1 = text, *nl = strchr(l1, '\n');
  PT_ASSERT(nl && strlen(l1) > 25);
  PT_ASSERT_INT_EQ((int)(nl - l1), 25 + (int)strlen("INFO hello from evil\\x1b[2J\\n2026-01-01T00:00:00.000Z WARN forged"));
  PT_ASSERT(strncmp(l1 + 25, "INFO hello from evil\\x1b[2J\\n2026-01-01T00:00:00.000Z WARN forged\n", (size_t)(nl - l1) - 25 + 1) == 0);
  const char *l2 = nl + 1;
  PT_ASSERT_STR_EQ(l2 + 25, "INFO path C:\\\\dir \xc3\xa9\n");
  PT_ASSERT(strchr(l2, '\n') == text + len - 1); /* nothing after */
  free(text);
  pt_rm_rf(dir);
  free(dir);
}
