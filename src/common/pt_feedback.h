/*
 * pt_feedback.h - a feedback bundle in memory: the message and the
 * attachments, each a catalog entry (as the daemon's artifacts.list gives
 * it) with its bytes, checked against the entry's size and SHA-256.
 *
 * The feedback units (docs/feedback.md), each of one concept:
 *   pt_feedback.h         the bundle (this file)
 *   pt_feedback_fetch.h   an artifact's bytes from the daemon (IPC)
 *   pt_feedback_pick.h    a catalog entry by id or kind
 *   pt_feedback_outbox.h  the bundle on disk: outbox/, status.json, sent/
 *   pt_feedback_upload.h  the HTTP upload with retries (libcurl; linked
 *                         only into `polytoken`, never into the daemon)
 *   pt_base64.h, pt_fmt.h base64 and size/age text, used by them
 *
 * Errors: 0 or a negative errno; err/errlen (may be NULL/0) receive one
 * line saying why (pt_err.h).
 * Threads: a pt_feedback handle is used from one thread at a time.
 */
#ifndef PT_FEEDBACK_H
#define PT_FEEDBACK_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#define PT_FEEDBACK_MAX_ATTACHMENTS 32
#define PT_FEEDBACK_MAX_MESSAGE ((size_t)64 << 10)

typedef struct pt_feedback pt_feedback;

/* Starts a bundle with `message` (copied; UTF-8, at most
 * PT_FEEDBACK_MAX_MESSAGE bytes; NULL = empty). Returns 0 and *out, -EINVAL
 * (too long) or -ENOMEM. Free with pt_feedback_del. */
int pt_feedback_new(pt_feedback **out, const char *message);
void pt_feedback_del(pt_feedback *fb);

/* Adds an attachment: `entry` is a catalog entry object (BORROWED; copied
 * whole), `data` its bytes (copied), which must have the entry's size and
 * SHA-256. Returns 0, -EBADMSG (size or hash mismatch: err says which),
 * -EINVAL (entry lacks id, kind, size or sha256), -E2BIG (already
 * PT_FEEDBACK_MAX_ATTACHMENTS), -EEXIST (same id twice), -ENOMEM, or the
 * error of libcrypto's hash (-EIO). Nothing is added on error. */
int pt_feedback_add(pt_feedback *fb, json_t *entry, const uint8_t *data, size_t len,
                    char *err, size_t errlen);

/* The message (borrowed, NUL-terminated) and the attachments, in the order
 * added. pt_feedback_data: attachment i's bytes (borrowed; *len set) or NULL
 * past the end; pt_feedback_entry: its entry (borrowed) or NULL. */
const char *pt_feedback_message(const pt_feedback *fb);
size_t pt_feedback_count(const pt_feedback *fb);
const uint8_t *pt_feedback_data(const pt_feedback *fb, size_t i, size_t *len);
json_t *pt_feedback_entry(const pt_feedback *fb, size_t i);

/* The string member `key` of a catalog entry, or NULL when it is absent or
 * not a string (entry BORROWED; the result lives as long as it). */
static inline const char *pt_feedback_entry_str(json_t *entry, const char *key) {
  json_t *v = json_object_get(entry, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

#endif
