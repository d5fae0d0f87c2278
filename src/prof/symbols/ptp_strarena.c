/* ptp_strarena.c - see ptp_strarena.h. */
#include "prof/symbols/ptp_strarena.h"
#include "prof/ptp_alloc.h"

#include <stdlib.h>
#include <string.h>

struct ptp_strarena_chunk {
  ptp_strarena_chunk *next;
  size_t used, cap;
  char data[];
};

void ptp_strarena_init(ptp_strarena *a, size_t chunk_size) {
  a->head = NULL;
  a->chunk_size = chunk_size;
}

char *ptp_strarena_dup_n(ptp_strarena *a, const char *s, size_t n) {
  ptp_strarena_chunk *c = a->head;
  if (!c || c->cap - c->used < n + 1) {
    /* The old head's tail stays unused: chunks never move, and strings are
     * small next to a chunk, so the waste is bounded by one string each. */
    size_t def = a->chunk_size ? a->chunk_size : 4096;
    size_t cap = n + 1 > def ? n + 1 : def;
    c = ptp_malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  char *p = c->data + c->used;
  memcpy(p, s, n);
  p[n] = 0;
  c->used += n + 1;
  return p;
}

void ptp_strarena_free(ptp_strarena *a) {
  while (a->head) {
    ptp_strarena_chunk *n = a->head->next;
    free(a->head);
    a->head = n;
  }
}
