/*
 * fuzz_threadcpu_line.c - libFuzzer target for the reading of snapshots'
 * threads' CPU comments by `polytoken profile merge`
 * (src/common/pt_threadcpu_line.c): the comments come from files, so any
 * bytes.
 *
 * For every input: added as it is, and after the line's head (so the
 * mutations reach the entries' grammar), each add either sums or leaves
 * the sum exactly as it was; the summed line, when there is one, is
 * NUL-terminated. Then the quoting: the input's first bytes as a thread
 * name (up to 15, up to a NUL) are quoted, parsed back and must come out
 * the same. Built and run by tests/common/threadcpu_line_fuzz_test.sh.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/pt_threadcpu_line.h"
#include "tests/fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char head[] =
    "threads' CPU since the previous snapshot's cut, by each thread's CPU clock, the profiler's "
    "own work apart (1.5 ms on these threads, and its own thread), with their samples:";

static void add_checked(pt_tcl_sum *s, const char *line, size_t len) {
  size_t n0 = s->n, lines0 = s->lines;
  int64_t own0 = s->own_tenths;
  int64_t cpu0 = n0 ? s->e[0].cpu_tenths : 0;
  int r = pt_tcl_add(s, line, len);
  CHECK(r == 0 || r == 1 || r == -EINVAL || r == -ENOMEM);
  if (r != 0) {
    CHECK(s->n == n0 && s->lines == lines0 && s->own_tenths == own0);
    CHECK(!n0 || s->e[0].cpu_tenths == cpu0);
  } else {
    CHECK(s->lines == lines0 + 1 && s->n >= n0);
  }
  for (size_t i = 0; i < s->n; i++) {
    CHECK(memchr(s->e[i].name, 0, sizeof s->e[i].name));
    CHECK(s->e[i].kind == PT_TCL_NAMED ? s->e[i].name[0] != 0 : s->e[i].name[0] == 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pt_tcl_sum s;
  memset(&s, 0, sizeof s);
  add_checked(&s, (const char *)data, size);
  char *line = malloc(sizeof head + size);
  if (!line) return 0;
  memcpy(line, head, sizeof head - 1);
  memcpy(line + sizeof head - 1, data, size);
  add_checked(&s, line, sizeof head - 1 + size);
  add_checked(&s, line, sizeof head - 1 + size);   /* the same again: sums */
  free(line);
  char *out = pt_tcl_format(&s, 3);
  if (out) {
    CHECK(strlen(out) > 0);
    free(out);
  }
  pt_tcl_sum_free(&s);

  /* quoting reads back */
  char name[16] = {0};
  size_t n = 0;
  while (n < size && n < 15 && data[n]) { name[n] = (char)data[n]; n++; }
  if (n) {
    char q[80], entry[160];
    pt_tcl_quote(name, q, sizeof q);
    size_t hl = sizeof head - 1;
    char *l2 = malloc(hl + sizeof entry);
    if (!l2) return 0;
    memcpy(l2, head, hl);
    int k = snprintf(entry, sizeof entry, " %s 2.5 ms (3 samples);", q);
    memcpy(l2 + hl, entry, (size_t)k);
    pt_tcl_sum t;
    memset(&t, 0, sizeof t);
    int r = pt_tcl_add(&t, l2, hl + (size_t)k);
    free(l2);
    if (r == -ENOMEM) return 0;
    /* a name spelled like one of the line's own words reads back as it */
    if (strcmp(name, "(no name)") && strcmp(name, "(other names)")) {
      CHECK(r == 0 && t.n == 1 && t.e[0].kind == PT_TCL_NAMED && strcmp(t.e[0].name, name) == 0);
      CHECK(t.e[0].cpu_tenths == 25 && t.e[0].samples == 3);
    }
    pt_tcl_sum_free(&t);
  }
  return 0;
}
