/* Unit tests for the JSONL framer (src/common/pt_jsonl.c). */
#include "pt_test.h"
#include "common/pt_jsonl.h"

#include <errno.h>

static int next_str(pt_jsonl *f, char *out, size_t cap) {
  const char *l;
  size_t n;
  int r = pt_jsonl_next(f, &l, &n);
  if (r == 1) {
    PT_ASSERT(n < cap);
    PT_ASSERT_INT_EQ(l[n], 0);
    memcpy(out, l, n);
    out[n] = 0;
  }
  return r;
}

PT_TEST(common_jsonl_split_lines_any_chunking) {
  const char *input = "{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":\"x y\"}\npartial";
  size_t total = strlen(input);
  /* every chunk size from 1 byte to the whole input gives the same lines */
  for (size_t chunk = 1; chunk <= total; chunk++) {
    pt_jsonl *f = pt_jsonl_new(0);
    PT_ASSERT(f);
    char got[4][64];
    int n = 0;
    for (size_t off = 0; off < total; off += chunk) {
      size_t c = total - off < chunk ? total - off : chunk;
      PT_ASSERT_INT_EQ(pt_jsonl_feed(f, input + off, c), 0);
      int r;
      while ((r = next_str(f, got[n < 4 ? n : 3], sizeof got[0])) == 1) n++;
      PT_ASSERT_INT_EQ(r, 0);
    }
    PT_ASSERT_INT_EQ(n, 3);
    PT_ASSERT_STR_EQ(got[0], "{\"a\":1}");
    PT_ASSERT_STR_EQ(got[1], "{\"b\":2}\r");
    PT_ASSERT_STR_EQ(got[2], "{\"c\":\"x y\"}");
    PT_ASSERT_UINT_EQ(pt_jsonl_pending(f), strlen("partial"));
    pt_jsonl_del(f);
  }
}

PT_TEST(common_jsonl_exact_cap_ok_one_more_oversize) {
  /* cap 16 bytes incl. newline: 15 payload bytes fit, 16 do not */
  pt_jsonl *f = pt_jsonl_new(16);
  char line[64];
  memset(line, 'x', sizeof line);
  line[15] = '\n';
  PT_ASSERT_INT_EQ(pt_jsonl_feed(f, line, 16), 0);
  char out[64];
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), 1);
  PT_ASSERT_UINT_EQ(strlen(out), 15);
  /* 16 payload bytes + '\n' in one feed: complete but too long */
  memset(line, 'y', sizeof line);
  line[16] = '\n';
  PT_ASSERT_INT_EQ(pt_jsonl_feed(f, line, 17), 0);
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), PT_JSONL_EOVERSIZE);
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), 0);
  /* framer is usable afterwards */
  PT_ASSERT_INT_EQ(pt_jsonl_feed(f, "ok\n", 3), 0);
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), 1);
  PT_ASSERT_STR_EQ(out, "ok");
  pt_jsonl_del(f);
}

PT_TEST(common_jsonl_endless_line_is_bounded_and_ordered) {
  pt_jsonl *f = pt_jsonl_new(1024);
  char out[64];
  PT_ASSERT_INT_EQ(pt_jsonl_feed(f, "first\nsecond\n", 13), 0);
  char junk[100];
  memset(junk, 'z', sizeof junk);
  /* 1 MB without a newline: must not be buffered */
  for (int i = 0; i < 10000; i++) PT_ASSERT_INT_EQ(pt_jsonl_feed(f, junk, sizeof junk), 0);
  PT_ASSERT(pt_jsonl_pending(f) > 0);
  PT_ASSERT(pt_jsonl_pending(f) < 1024);
  /* end of the oversize line, then a good line, in one feed */
  PT_ASSERT_INT_EQ(pt_jsonl_feed(f, "zzz\nthird\n", 10), 0);
  /* lines before the oversize one come first, then the error, then the rest */
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), 1);
  PT_ASSERT_STR_EQ(out, "first");
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), 1);
  PT_ASSERT_STR_EQ(out, "second");
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), PT_JSONL_EOVERSIZE);
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), 1);
  PT_ASSERT_STR_EQ(out, "third");
  PT_ASSERT_INT_EQ(next_str(f, out, sizeof out), 0);
  PT_ASSERT_UINT_EQ(pt_jsonl_pending(f), 0);
  pt_jsonl_del(f);
}

PT_TEST(common_jsonl_parse_and_dump) {
  json_t *j = NULL;
  char err[128];
  PT_ASSERT_INT_EQ(pt_jsonl_parse("{\"id\":1}", 8, &j, err, sizeof err), 0);
  PT_ASSERT(json_is_object(j));
  json_object_set_new(j, "text", json_string("two\nlines"));
  char *buf;
  size_t n;
  PT_ASSERT_INT_EQ(pt_jsonl_dump(j, 0, &buf, &n), 0);
  PT_ASSERT(n > 0 && buf[n - 1] == '\n');
  PT_ASSERT(memchr(buf, '\n', n - 1) == NULL); /* exactly one line */
  free(buf);
  PT_ASSERT_INT_EQ(pt_jsonl_dump(j, 8, &buf, &n), PT_JSONL_EOVERSIZE);
  json_decref(j);
  PT_ASSERT_INT_EQ(pt_jsonl_parse("{bad", 4, &j, err, sizeof err), -EINVAL);
  PT_ASSERT(j == NULL);
  PT_ASSERT(strstr(err, "invalid JSON") != NULL);
  PT_ASSERT_INT_EQ(pt_jsonl_parse("[1]", 3, &j, err, sizeof err), -EINVAL);
}
