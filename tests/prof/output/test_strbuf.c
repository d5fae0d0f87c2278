/*
 * test_strbuf.c - the size-capped string builder (src/prof/output/
 * ptp_strbuf.c) behind a snapshot's comment lines: text is appended whole
 * (the dump's fixed 640- and 384-byte buffers used to cut lines short in
 * silence); the first failure latches and ptp_strbuf_take reports it.
 */
#include "pt_test.h"
#include "prof/output/ptp_strbuf.h"

#include <errno.h>

PT_TEST(prof_strbuf_whole_lines) {
  ptp_strbuf b = {0};
  int err = 1;
  char *s = ptp_strbuf_take(&b, &err);            /* empty: "" */
  PT_ASSERT(s && err == 0 && s[0] == 0);
  free(s);
  for (int i = 0; i < 200; i++) ptp_strbuf_printf(&b, "part %03d; ", i);
  s = ptp_strbuf_take(&b, &err);
  PT_ASSERT_INT_EQ(err, 0);
  PT_ASSERT_UINT_EQ(strlen(s), 200 * 10);
  PT_ASSERT(strncmp(s, "part 000; part 001; ", 20) == 0);
  PT_ASSERT(strcmp(s + 199 * 10, "part 199; ") == 0);
  free(s);
  /* the buffer is empty and usable after take */
  ptp_strbuf_printf(&b, "%s=%d", "x", 7);
  s = ptp_strbuf_take(&b, &err);
  PT_ASSERT_STR_EQ(s, "x=7");
  free(s);
}

PT_TEST(prof_strbuf_cap_latches) {
  ptp_strbuf b = { .max = 16 };
  ptp_strbuf_printf(&b, "0123456789");
  ptp_strbuf_printf(&b, "0123456789");            /* 20 > 16: refused, latched */
  ptp_strbuf_printf(&b, "x");                     /* ignored after the error */
  PT_ASSERT_INT_EQ(b.err, -E2BIG);
  int err = 0;
  PT_ASSERT(ptp_strbuf_take(&b, &err) == NULL);
  PT_ASSERT_INT_EQ(err, -E2BIG);
  PT_ASSERT(b.s == NULL && b.len == 0 && b.err == 0);   /* freed, usable again */
  b.max = 16;
  ptp_strbuf_printf(&b, "0123456789abcdef");      /* exactly the cap */
  char *s = ptp_strbuf_take(&b, &err);
  PT_ASSERT(s && err == 0);
  PT_ASSERT_UINT_EQ(strlen(s), 16);
  free(s);
}
