/* sym_results.c - see sym_results.h. */
#include "sym_results.h"
#include "pt_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

void ptt_pcs_add_range(pcset *s, const void *fn, size_t len) {
  s->pc = realloc(s->pc, (s->n + len) * sizeof *s->pc);
  PT_ASSERT(s->pc);
  for (size_t i = 0; i < len; i++) s->pc[s->n++] = (uint64_t)(uintptr_t)fn + i;
}

char **ptt_resolve_all(ptp_symbolizer *sy, const pcset *s) {
  char **out = calloc(s->n, sizeof *out);
  PT_ASSERT(out);
  for (size_t i = 0; i < s->n; i++) {
    ptp_sym_result r;
    PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(sy, s->pc[i], &r), 0);
    size_t cap = 256 + r.nframes * 1024, off = 0;
    char *b = malloc(cap);
    PT_ASSERT(b);
    off += (size_t)snprintf(b + off, cap - off, "map=%d n=%u", r.mapping, r.nframes);
    for (uint32_t k = 0; k < r.nframes && off < cap; k++) {
      const ptp_sym_frame *f = &r.frames[k];
      off += (size_t)snprintf(b + off, cap - off, " | %s / %s @ %s:%lld (start %lld) col %lld", f->name,
                              f->system_name, f->file, (long long)f->line, (long long)f->start_line,
                              (long long)f->column);
    }
    out[i] = b;
  }
  return out;
}

void ptt_free_results(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

int ptt_count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  PT_ASSERT(d);
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}
