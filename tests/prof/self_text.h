/*
 * self_text.h - test helper: where the unit-test binary's own code is
 * loaded (its executable PT_LOAD segment), for tests that map that code
 * again elsewhere (as V8 remaps its builtins) and look the copy up.
 */
#ifndef PT_TESTS_SELF_TEXT_H
#define PT_TESTS_SELF_TEXT_H

#include <stdint.h>

/* The segment's load range [lo, hi) and its offset in the file. */
typedef struct pt_self_text {
  uintptr_t lo, hi, fileoff;
} pt_self_text;

/* Fills *t with the segment holding pt_self_text_code. Returns 0, or
 * -ENOENT when no loaded object's executable segment holds it. */
int pt_self_text_find(pt_self_text *t);

/* A function of that segment whose name a symbolizer must find (tests
 * compare it with "pt_self_text_code"); returns its argument. */
int pt_self_text_code(int x);

#endif
