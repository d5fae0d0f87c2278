/*
 * ptp_strarena.h - copies of strings in chunks that never move: a pointer
 * it hands out stays valid until ptp_strarena_free, however many copies
 * follow. The symbolizer keeps its version-stripped ELF names here, the
 * symbol cache its interned strings of added frames.
 *
 * A value type embedded in its owner (like ptp_u64map): all-zero is an
 * empty arena with the default chunk size, so a calloc'd owner needs no
 * init. Threads: one owner at a time, no locking. Allocates: never call it
 * from a signal handler.
 */
#ifndef PTP_STRARENA_H
#define PTP_STRARENA_H

#include <stddef.h>

typedef struct ptp_strarena_chunk ptp_strarena_chunk;

typedef struct ptp_strarena {
  ptp_strarena_chunk *head;  /* newest chunk, the only one still filled */
  size_t chunk_size;         /* bytes per chunk; 0 = 4096. A longer string
                                gets a chunk of its own size */
} ptp_strarena;

/* An empty arena with chunks of chunk_size bytes (0 = 4096). Cannot fail. */
void ptp_strarena_init(ptp_strarena *a, size_t chunk_size);
/* Copies s[0..n) and a NUL into the arena (s need not be NUL-terminated
 * there). Returns the copy, owned by the arena, or NULL when out of memory
 * (the arena is unchanged). */
char *ptp_strarena_dup_n(ptp_strarena *a, const char *s, size_t n);
/* Frees every chunk: every pointer handed out dies. The arena is empty
 * again (and may be reused). */
void ptp_strarena_free(ptp_strarena *a);

#endif
