/*
 * pt_feedback.h - feedback bundles: assemble a message plus attachments
 * served by the daemon's artifact catalog, write them to the outbox, and
 * upload them (docs/feedback.md).
 *
 * On disk, below the state root:
 *   feedback/tmp/<id>.XXXXXX/   a bundle being written (removed on failure)
 *   feedback/outbox/<id>/       written, not (yet) delivered:
 *       message.txt             the message, as typed
 *       NN-<name>               each attachment, byte for byte as the catalog
 *                               served it (SHA-256 verified on receipt)
 *       manifest.json           ids, kinds, labels, sizes, SHA-256 of all
 *       status.json             after an upload attempt: {"state":"failed",
 *                               "error",...} (absent before any attempt)
 *   feedback/sent/<id>/         delivered (HTTP 2xx): the same files, with
 *                               status.json {"state":"sent", ...}
 * A bundle is built in tmp/ and renamed into outbox/ in one step, so outbox
 * never shows a partial bundle. It moves to sent/ only after a 2xx.
 *
 * Upload: if POLYTOKEN_FEEDBACK_URL is set, the bundle is POSTed there as
 * multipart/form-data (parts "manifest", "message", and one "attachment" part
 * per attachment with its file name), with libcurl, up to `tries` attempts
 * with exponential backoff (base_delay_ms, doubling) on connection errors,
 * timeouts, 408, 429 and 5xx. Other statuses fail at once.
 *
 * Threads: a pt_feedback handle is used from one thread. pt_feedback_upload
 * may run on a worker thread (it touches only its own curl handle and the
 * bundle directory); call pt_feedback_global_init() once from the main
 * thread first.
 *
 * Errors: 0 or a negative errno-style code, plus a one-line message where an
 * `err` buffer is taken.
 */
#ifndef PT_FEEDBACK_H
#define PT_FEEDBACK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/pt_client.h"

#define PT_FEEDBACK_MAX_ATTACHMENTS 32
#define PT_FEEDBACK_MAX_MESSAGE ((size_t)64 << 10)

typedef struct pt_feedback pt_feedback;

/* Initialises libcurl once per process (main thread, before any thread
 * uploads). Returns 0 or -EIO. Safe to call more than once. */
int pt_feedback_global_init(void);

/* Starts a bundle with `message` (copied; UTF-8, at most
 * PT_FEEDBACK_MAX_MESSAGE bytes; may be empty). Returns 0, -EINVAL (too long)
 * or -ENOMEM. Free with pt_feedback_del. */
int pt_feedback_new(pt_feedback **out, const char *message);
void pt_feedback_del(pt_feedback *fb);

/* Adds an attachment: `entry` is a catalog entry object as artifacts.list
 * returns it (BORROWED; id, kind, label, source, size, sha256, created, path
 * are copied), `data` its bytes (copied). The bytes must have the entry's size
 * and SHA-256. Returns 0, -EBADMSG (size or hash mismatch: err says which),
 * -EINVAL (entry malformed), -E2BIG (too many attachments), -EEXIST (same id
 * twice) or -ENOMEM. */
int pt_feedback_add(pt_feedback *fb, json_t *entry, const uint8_t *data, size_t len,
                    char *err, size_t errlen);

/* Fetches entry's bytes from the daemon with artifacts.fetch (chunked) over a
 * connected blocking-style client, then pt_feedback_add()s them. Returns 0 or
 * a negative code with err filled (daemon errors keep their code, e.g.
 * "not_found" when the artifact changed since listing). */
int pt_feedback_fetch_add(pt_feedback *fb, pt_client *c, json_t *entry, pt_client_error *err);

/* Fetches an artifact's bytes (malloc'd *data, caller frees) and checks them
 * against the entry's size and SHA-256. Same errors as above. */
int pt_feedback_fetch(pt_client *c, json_t *entry, uint8_t **data, size_t *len,
                      pt_client_error *err);

size_t pt_feedback_count(const pt_feedback *fb);
/* Attachment i's bytes (borrowed) and entry (borrowed JSON), or NULL. */
const uint8_t *pt_feedback_data(const pt_feedback *fb, size_t i, size_t *len);
json_t *pt_feedback_entry(const pt_feedback *fb, size_t i);

/* Writes the bundle to <home>/feedback/outbox/<id>/ (see top). dir_out
 * receives the bundle directory. Returns 0 or a negative errno (nothing is
 * left in outbox/ then) with err filled. */
int pt_feedback_write(pt_feedback *fb, const char *home, char *dir_out, size_t dir_cap,
                      char *err, size_t errlen);

typedef struct pt_feedback_upload_opts {
  const char *url;     /* NULL/empty: no upload */
  int tries;           /* attempts in all (>= 1) */
  int base_delay_ms;   /* first backoff; doubles per retry */
  long timeout_ms;     /* per attempt (whole transfer) */
  /* NULL, or a flag another thread may set to non-zero at any time: the
   * transfer in progress is aborted (within about a second, libcurl's
   * progress interval), no further attempt or backoff wait starts, and the
   * upload ends with -ECANCELED. Read atomically; not owned. */
  atomic_int *cancel;
} pt_feedback_upload_opts;

/* Defaults (4 tries, 200 ms, 30000 ms, no cancel flag) overridden by
 * POLYTOKEN_FEEDBACK_URL,
 * POLYTOKEN_FEEDBACK_TIMEOUT_MS, POLYTOKEN_FEEDBACK_TRIES,
 * POLYTOKEN_FEEDBACK_BACKOFF_MS. The url points into the environment. */
void pt_feedback_upload_opts_from_env(pt_feedback_upload_opts *o);

typedef struct pt_feedback_upload_result {
  int sent;            /* 1 after a 2xx */
  int attempts;
  long http_status;    /* last HTTP status, 0 if none */
  char error[512];     /* last error, "" when sent */
  char dir[4096];      /* where the bundle is now (sent/<id> or outbox/<id>) */
} pt_feedback_upload_result;

/* POSTs the bundle in `bundle_dir` (an outbox/<id> directory below `home`)
 * with retries, then records the outcome: on a 2xx, status.json "sent" and the
 * directory moves to <home>/feedback/sent/<id>; otherwise status.json "failed"
 * with the error, left in the outbox. Returns 0 when sent, -EIO (not sent;
 * res->error says why), -ECANCELED (o->cancel was set; recorded as failed
 * with error "upload cancelled", left in the outbox), -EINVAL (no url, or
 * not a bundle), -ENOMEM. Blocking: run it on a worker thread in a program
 * with an event loop. */
int pt_feedback_upload(const char *home, const char *bundle_dir,
                       const pt_feedback_upload_opts *o, pt_feedback_upload_result *res);

/* Picks a catalog entry by id, or by kind (the newest entry of that kind, by
 * created_unix, first listed on a tie). entries: the artifacts.list array
 * (BORROWED). Returns a borrowed entry or NULL. */
json_t *pt_feedback_pick(json_t *entries, const char *kind_or_id);

/* Decodes base64 (RFC 4648, padding required). Returns 0 and a malloc'd
 * buffer, or -EINVAL / -ENOMEM. */
int pt_feedback_b64decode(const char *s, size_t slen, uint8_t **out, size_t *outlen);

/* "12.3 KiB" style size, and "5 min ago" style age of an RFC 3339 time or
 * unix seconds relative to now (for pickers and the CLI). */
void pt_feedback_fmt_size(uint64_t n, char *out, size_t cap);
void pt_feedback_fmt_age(int64_t unix_s, int64_t now_s, char *out, size_t cap);

#endif
