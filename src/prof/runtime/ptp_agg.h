/*
 * ptp_agg.h - aggregation of samples into distinct (thread, flags, labels,
 * stack) entries with counts, for one window. Runs on the consumer side (the
 * sampler's consumer thread or a dumping thread, serialized by the
 * sampler's agg_mu), never in the signal handler: it allocates.
 */
#ifndef PTP_AGG_H
#define PTP_AGG_H

#include <stddef.h>
#include <stdint.h>

#include "prof/output/ptp_window.h"

typedef struct ptp_agg ptp_agg;

/* Returns 0 or -ENOMEM. */
int ptp_agg_new(ptp_agg **out);
void ptp_agg_del(ptp_agg *a);
/* Empties a (keeps its memory for the next window). */
void ptp_agg_reset(ptp_agg *a);
/* Adds count to the entry of (tid, flags, labels, frames[0..n)), creating
 * it. labels may be NULL (none: task 0, no user label). n >= 1. Returns 0
 * or -ENOMEM (then nothing changed). */
int ptp_agg_add(ptp_agg *a, uint32_t tid, uint16_t flags, const ptp_label_ids *labels,
                const uintptr_t *frames, uint16_t n, uint64_t count);
/* The same, with the thread's name when the samples were taken (16 bytes,
 * NUL-terminated within them; NULL or "" = not known): part of the key, so
 * a thread renamed between samples gives one entry per name. The agg keeps
 * up to PTP_AGG_NAMES distinct names per window; a sample with a name
 * beyond them is added as if its name were not known. */
#define PTP_AGG_NAMES 256
int ptp_agg_add_named(ptp_agg *a, uint32_t tid, const char *name, uint16_t flags,
                      const ptp_label_ids *labels, const uintptr_t *frames, uint16_t n,
                      uint64_t count);
/* Distinct entries, and the sum of their counts. */
size_t ptp_agg_size(const ptp_agg *a);
uint64_t ptp_agg_total(const ptp_agg *a);
/* A malloc'd array (caller frees) of one ptp_sample per entry (with .ids
 * and .thread_name, labels not resolved); the frames and thread_name
 * pointers point into a and stay valid until the next add, reset or del.
 * *out is NULL when there is no entry. Returns 0 or -ENOMEM. */
int ptp_agg_samples(const ptp_agg *a, ptp_sample **out, size_t *n);
/* A malloc'd, sorted array of the distinct tids. Returns 0 or -ENOMEM. */
int ptp_agg_tids(const ptp_agg *a, uint32_t **out, size_t *n);

#endif
