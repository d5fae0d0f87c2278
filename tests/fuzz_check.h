/* tests/fuzz_check.h - the libFuzzer harnesses' invariant check (tests/
 * fuzz_lib.sh builds them): CHECK(c) aborts with the condition and its line
 * when c is false, so libFuzzer keeps the input as a reproducer. Harness
 * code only; never in the library. */
#ifndef PT_TESTS_FUZZ_CHECK_H
#define PT_TESTS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                              \
  do {                                                                        \
    if (!(c)) {                                                               \
      fprintf(stderr, "invariant broken: %s (%s:%d)\n", #c, __FILE__, __LINE__); \
      abort();                                                                \
    }                                                                         \
  } while (0)

#endif
