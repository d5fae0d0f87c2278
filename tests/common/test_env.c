/* tests/common/test_env.c - the strict integer settings parser (pt_env.h). */
#include "pt_test.h"
#include "common/pt_env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

PT_TEST(common_env_parse_int_strict) {
  long long v = 7;
  PT_ASSERT_INT_EQ(pt_parse_int("10", 0, 100, &v), 0);
  PT_ASSERT(v == 10);
  PT_ASSERT_INT_EQ(pt_parse_int("-5", -10, 10, &v), 0);
  PT_ASSERT(v == -5);
  PT_ASSERT_INT_EQ(pt_parse_int("+3", 0, 10, &v), 0);
  PT_ASSERT(v == 3);
  v = 42;
  /* Everything strtol would half-accept is rejected, and *out is kept. */
  static const char *bad[] = {"10abc", "", " 10", "10 ", "0x10", "1e3", "-", "+", "abc", "1.5", "--1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    PT_ASSERT_MSG(pt_parse_int(bad[i], -100, 100, &v) == -EINVAL, "accepted \"%s\"", bad[i]);
  PT_ASSERT_INT_EQ(pt_parse_int(NULL, 0, 1, &v), -EINVAL);
  PT_ASSERT_INT_EQ(pt_parse_int("101", 0, 100, &v), -ERANGE);
  PT_ASSERT_INT_EQ(pt_parse_int("-1", 0, 100, &v), -ERANGE);
  PT_ASSERT_INT_EQ(pt_parse_int("99999999999999999999", 0, LLONG_MAX, &v), -ERANGE);
  PT_ASSERT(v == 42);
  PT_ASSERT_INT_EQ(pt_parse_int("9223372036854775807", 0, LLONG_MAX, &v), 0);
  PT_ASSERT(v == LLONG_MAX);
}

PT_TEST(common_env_int_default_and_message) {
  char err[160];
  unsetenv("PT_TEST_ENV_INT");
  PT_ASSERT(pt_env_int("PT_TEST_ENV_INT", 30, 1, 60, err, sizeof err) == 30);
  PT_ASSERT_STR_EQ(err, "");
  setenv("PT_TEST_ENV_INT", "", 1);
  PT_ASSERT(pt_env_int("PT_TEST_ENV_INT", 30, 1, 60, err, sizeof err) == 30);
  PT_ASSERT_STR_EQ(err, "");
  setenv("PT_TEST_ENV_INT", "45", 1);
  PT_ASSERT(pt_env_int("PT_TEST_ENV_INT", 30, 1, 60, err, sizeof err) == 45);
  PT_ASSERT_STR_EQ(err, "");
  setenv("PT_TEST_ENV_INT", "10abc", 1);
  PT_ASSERT(pt_env_int("PT_TEST_ENV_INT", 30, 1, 60, err, sizeof err) == 30);
  PT_ASSERT_STR_EQ(err, "ignoring PT_TEST_ENV_INT=10abc (expected an integer from 1 to 60)");
  setenv("PT_TEST_ENV_INT", "61", 1);
  PT_ASSERT(pt_env_int("PT_TEST_ENV_INT", 30, 1, 60, NULL, 0) == 30); /* no buffer: silent */
  unsetenv("PT_TEST_ENV_INT");
}
