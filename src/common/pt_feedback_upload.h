/*
 * pt_feedback_upload.h - uploading a feedback bundle of the outbox
 * (docs/feedback.md "Upload"), with libcurl.
 *
 * The bundle is POSTed to the URL as multipart/form-data: a part
 * "manifest" (manifest.json), a part "message" (message.txt) and one part
 * "attachment" per attachment with its file name, each streamed from an fd
 * opened without following a symlink (pt_feedback_outbox_open_file). Up to
 * `tries` attempts with exponential backoff (base_delay_ms, doubling) on
 * connection errors, timeouts, 408, 429 and 5xx; other statuses fail at
 * once. The outcome is recorded in the bundle (status.json) and a delivered
 * bundle moves to feedback/sent/ (pt_feedback_outbox.h).
 *
 * Built into its own static library (meson: feedback_upload_dep) so that
 * libcurl is linked only into what uploads: `polytoken`, not the daemon.
 *
 * Threads: pt_feedback_upload may run on a worker thread (it touches only
 * its own curl handle and the bundle); call pt_feedback_upload_global_init
 * once from the main thread first.
 * Errors: 0 or a negative errno, with one line in err (may be NULL/0).
 */
#ifndef PT_FEEDBACK_UPLOAD_H
#define PT_FEEDBACK_UPLOAD_H

#include <stdatomic.h>
#include <stddef.h>

/* Initialises libcurl once per process (main thread, before any thread
 * uploads). Returns 0 or -EIO. Safe to call more than once. */
int pt_feedback_upload_global_init(void);

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
 * POLYTOKEN_FEEDBACK_URL, POLYTOKEN_FEEDBACK_TIMEOUT_MS,
 * POLYTOKEN_FEEDBACK_TRIES, POLYTOKEN_FEEDBACK_BACKOFF_MS (strict, pt_env.h:
 * a bad value keeps the default). The url points into the environment. */
void pt_feedback_upload_opts_from_env(pt_feedback_upload_opts *o);

typedef struct pt_feedback_upload_result {
  int sent;            /* 1 after a 2xx */
  int attempts;
  long http_status;    /* last HTTP status, 0 if none */
  /* 0, or the negative errno with which recording the outcome failed:
   * status.json could not be written, or a delivered bundle could not be
   * moved to sent/ (err then says so, also when the call returns 0). */
  int record_error;
  char dir[4096];      /* where the bundle is now (sent/<id> or outbox/<id>) */
} pt_feedback_upload_result;

/* POSTs the bundle in `bundle_dir` (an outbox/<id> directory below `home`)
 * with retries, then records the outcome: on a 2xx, status.json "sent" and
 * the directory moves to <home>/feedback/sent/<id>; otherwise status.json
 * "failed" with the last error, left in the outbox. Returns
 *   0           delivered (res->record_error may still be set: see above)
 *   -EIO        not delivered: the server or the connection failed on
 *               every attempt (err: the last error)
 *   -ECANCELED  o->cancel was set (recorded as failed, "upload cancelled")
 *   -EINVAL     no url
 *   the errors of pt_feedback_outbox_open (-ENOENT no such bundle or no
 *   manifest, -ELOOP a symlink on the way, -EBADMSG a bad manifest, ...)
 *   and of pt_feedback_outbox_open_file for its files (-ENOENT, -ELOOP,
 *   -EINVAL not a regular file of its own): nothing is sent then
 *   -ENOMEM.
 * Blocking: run it on a worker thread in a program with an event loop. */
int pt_feedback_upload(const char *home, const char *bundle_dir, const pt_feedback_upload_opts *o,
                       pt_feedback_upload_result *res, char *err, size_t errlen);

#endif
