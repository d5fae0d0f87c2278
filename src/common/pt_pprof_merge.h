/*
 * pt_pprof_merge.h - several pprof profiles (interval snapshots of one or
 * more processes) merged into one, sans-I/O: what `polytoken profile
 * merge` writes, what `profile view --session` shows, and the catalog's
 * merged artifact.
 *
 *   pt_pprof_merge *m;
 *   pt_pprof_merge_new(&m);
 *   for each snapshot: pt_pprof_merge_add(m, p, "daemon-profile-...pb.gz", err, sizeof err);
 *   const pt_pprof *out;
 *   pt_pprof_merge_result(m, &out, err, sizeof err);   // then pt_pprof_write(out, ...)
 *   pt_pprof_merge_del(m);
 *
 * The result:
 *  - samples with the same stack (the same locations, leaf first) and the
 *    same labels (as a set: the order of labels does not matter) are one
 *    sample whose values are the sums; labels are kept (written sorted by
 *    key, then value); a sum past INT64_MAX is refused (-EOVERFLOW);
 *  - mappings, locations, functions and strings are re-indexed and
 *    deduplicated: two functions are one when name, system name, file and
 *    start line are equal; two mappings when range, offset, file and build
 *    id are (the has_* flags are kept only when every input says so); two
 *    locations when mapping, address, folding and lines are; ids are 1..n
 *    in order of first appearance (mappings in the inputs' order, so the
 *    first input's main binary stays first); functions, locations and
 *    strings that no sample reaches are not carried over;
 *  - time_nanos is the earliest start among the inputs that have one, and
 *    duration_nanos reaches the latest end (start + duration): the span
 *    covering every window, gaps between windows included; with no start
 *    anywhere, the sum of the durations;
 *  - period is the largest input period (a comment says so when they
 *    differ); drop_frames, keep_frames, default_sample_type and doc_url
 *    come from the first input that sets them;
 *  - comments: one line for the merge, one per window in the order added
 *    ("merged window 2 of 5: <name>, start <UTC time>, length <s> s, <n>
 *    samples"), then every input comment once, in order of first
 *    appearance.
 * Inputs must agree on the sample types (type and unit, in the same order)
 * and on the period type: a profile that differs is refused (-EINVAL, err
 * names both) and the merge keeps what it had before that call.
 *
 * Caps: the merge's memory is bounded by PT_PPROF_MAX_MEMORY (-EFBIG past
 * it) and every count fits in uint32_t, as in the reader.
 * Errors: 0 or a negative errno; after -ENOMEM, -EFBIG or -EOVERFLOW from
 * add, the merge is unusable (every later call returns that error) and
 * must be deleted; after -EINVAL it is unchanged.
 * Memory through pt_alloc.h. Threads: one merge per thread at a time;
 * inputs are only read.
 */
#ifndef PT_PPROF_MERGE_H
#define PT_PPROF_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "common/pt_pprof_read.h"

typedef struct pt_pprof_merge pt_pprof_merge;

/* 0 with *out, or -ENOMEM. */
int pt_pprof_merge_new(pt_pprof_merge **out);

/* Frees m and any result it returned. NULL ok. */
void pt_pprof_merge_del(pt_pprof_merge *m);

/* Adds profile p (BORROWED: everything needed is copied; p may be freed
 * right after). name (copied; NULL: "profile <n>") names the window in the
 * comments. Returns 0, -EINVAL (sample or period types differ from the
 * first profile's; err says how), -ENOMEM, -EFBIG or -EOVERFLOW (see
 * top). err/errlen may be NULL/0. */
int pt_pprof_merge_add(pt_pprof_merge *m, const pt_pprof *p, const char *name, char *err,
                       size_t errlen);

/* The merged profile of everything added so far: *out is BORROWED, valid
 * until the next add, result or del (a later result rebuilds it). It is a
 * valid profile for pt_pprof_write. Returns 0, -EINVAL (nothing added),
 * -ENOMEM, or the error that made the merge unusable. */
int pt_pprof_merge_result(pt_pprof_merge *m, const pt_pprof **out, char *err, size_t errlen);

/* Windows added so far. */
size_t pt_pprof_merge_count(const pt_pprof_merge *m);

/* The total of a profile's samples: the values of the sample type named
 * "samples" (pprof's convention for counts), else of the first type.
 * Saturates at INT64_MAX. */
int64_t pt_pprof_sample_total(const pt_pprof *p);

#endif
