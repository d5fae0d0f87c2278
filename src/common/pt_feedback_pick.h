/*
 * pt_feedback_pick.h - choosing a catalog entry the way the CLI's
 * KIND_OR_ID argument means it (docs/feedback.md): an artifact id, or a
 * kind meaning the newest artifact of that kind.
 *
 * Threads: reentrant; no allocation.
 */
#ifndef PT_FEEDBACK_PICK_H
#define PT_FEEDBACK_PICK_H

#include <jansson.h>

/* The entry of `entries` (the artifacts.list array, BORROWED) whose id is
 * kind_or_id, else the newest by created_unix whose kind is kind_or_id (the
 * first listed on a tie). Returns a borrowed entry, or NULL when none
 * matches or entries is not an array. */
json_t *pt_feedback_pick(json_t *entries, const char *kind_or_id);

#endif
