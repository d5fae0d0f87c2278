/*
 * pt_feedback_outbox.h - feedback bundles on disk (docs/feedback.md):
 * writing one into the outbox, opening one for upload, recording the
 * outcome of an upload and moving a delivered one to sent/.
 *
 * Below the state root `home`:
 *   feedback/tmp/<id>.XXXXXX/   a bundle being written (removed on failure;
 *                               flock'd by its writer; one a killed writer
 *                               left is repaired at a daemon start)
 *   feedback/outbox/<id>/       written, not (yet) delivered:
 *       message.txt             the message, as typed
 *       NN-<name>               each attachment, byte for byte as the catalog
 *                               served it (SHA-256 verified on receipt)
 *       manifest.json           ids, kinds, labels, sizes, SHA-256 of all
 *       status.json             after an upload attempt: {"state":"failed",
 *                               "error",...} (absent before any attempt)
 *   feedback/sent/<id>/         delivered (HTTP 2xx): the same files, with
 *                               status.json {"state":"sent", ...}
 * A bundle is built in tmp/ (each file fsync'd) and renamed into outbox/ in
 * one step, so outbox/ never shows a partial bundle. Everything is reached
 * from the state root's fd without following a symlink (pt_open_beneath,
 * pt_mkdir_beneath), directories are created 0700 and files 0600.
 *
 * Errors: 0 or a negative errno of the step that failed (e.g. -ENOENT,
 * -ELOOP for a symlink on the way, -ENOSPC, -EACCES), with one line in err
 * (may be NULL/0).
 * Threads: a pt_feedback_bundle is used from one thread at a time (the
 * upload's worker thread).
 */
#ifndef PT_FEEDBACK_OUTBOX_H
#define PT_FEEDBACK_OUTBOX_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/pt_feedback.h"

/* manifest.json is ours, but read back from a directory the user can
 * write: its size is capped. */
#define PT_FEEDBACK_MANIFEST_MAX ((size_t)1 << 20)

/* Writes fb to <home>/feedback/outbox/<id>/ (see top; <id> is
 * <UTC yyyymmddThhmmssZ>-<8 hex>). dir_out (may be NULL) receives the
 * bundle's path. Returns 0, or a negative errno (-ENAMETOOLONG, -ELOOP or
 * -ENOTDIR for a symlink or file in the way, -ENOSPC, ...) with nothing
 * left in outbox/ or tmp/. */
int pt_feedback_outbox_write(const pt_feedback *fb, const char *home, char *dir_out,
                             size_t dir_cap, char *err, size_t errlen);

/* A bundle of the outbox, open for upload. */
typedef struct pt_feedback_bundle pt_feedback_bundle;

/* Opens bundle_dir, which must be <home>/<subdirs>/<name> (normally
 * feedback/outbox/<id>), with no symlink anywhere below home, and reads its
 * manifest. Returns 0 and *out (close with pt_feedback_outbox_close), or
 * -EINVAL (bundle_dir is not a directory path below home), -ENOENT (no such
 * bundle, or no manifest.json in it), -ELOOP (a symlink on the way),
 * -EFBIG (manifest over PT_FEEDBACK_MANIFEST_MAX), -EBADMSG (manifest is
 * not a JSON object with an "attachments" array), -ENOMEM, or the errno of
 * the open or read that failed. */
int pt_feedback_outbox_open(const char *home, const char *bundle_dir, pt_feedback_bundle **out,
                            char *err, size_t errlen);
void pt_feedback_outbox_close(pt_feedback_bundle *b);

/* The manifest (BORROWED, lives as long as b) and the bundle's path (as
 * given to _open, or its sent/ path after _move_sent). */
json_t *pt_feedback_outbox_manifest(const pt_feedback_bundle *b);
const char *pt_feedback_outbox_path(const pt_feedback_bundle *b);

/* Opens the file `name` of the bundle (one plain name; never through a
 * symlink) for reading. Returns an fd (caller closes) and its size in
 * *size, or -EINVAL (name is not a plain name, or not a regular file with
 * exactly one link: a hard link planted into the bundle), -ELOOP (a
 * symlink), -ENOENT, or another negative errno. */
int pt_feedback_outbox_open_file(const pt_feedback_bundle *b, const char *name,
                                 uint64_t *size);

/* The outcome of an upload, as status.json records it. */
typedef struct pt_feedback_status {
  int sent;           /* 1: delivered (2xx) */
  int attempts;
  long http_status;   /* last HTTP status, 0 if none */
  const char *error;  /* last error, "" when sent */
  const char *url;
} pt_feedback_status;

/* Writes status.json atomically (pt_write_atomic_at) with st and the time.
 * Returns 0 or the negative errno of the write (e.g. -ENOSPC, -EISDIR
 * when a directory is in the way). */
int pt_feedback_outbox_record(pt_feedback_bundle *b, const pt_feedback_status *st, char *err,
                              size_t errlen);

/* Moves a delivered bundle to <home>/feedback/sent/<id> (<id> from the
 * manifest when it is a plain name, else the bundle's own name) and fsyncs
 * both directories. Returns 0 (pt_feedback_outbox_path is then the new
 * path) or a negative errno (the bundle stays where it was). */
int pt_feedback_outbox_move_sent(pt_feedback_bundle *b, char *err, size_t errlen);

/* What pt_feedback_outbox_repair did. */
typedef struct pt_feedback_repair {
  unsigned completed;   /* complete bundles moved on to outbox/ */
  unsigned quarantined; /* incomplete ones (or junk) moved to quarantine/feedback-tmp/ */
  unsigned busy;        /* left alone: their writer still holds them */
  unsigned failed;      /* could not be moved (the first reason in err) */
} pt_feedback_repair;

/* Repairs what killed writers left in <home>/feedback/tmp/ (the daemon
 * calls it at start): every entry no live writer holds (flock) is either
 * a complete bundle (manifest.json whose id is the entry's name up to its
 * last '.', and every file it names with its size and SHA-256), moved to
 * outbox/<id> (never over an existing one), or anything else, moved to
 * <home>/quarantine/feedback-tmp/ (pt_quarantine.h). Nothing is deleted.
 * Returns 0 with the counts in *out (all 0 when there is no feedback/tmp),
 * or a negative errno when tmp/ cannot be opened or locked (-EWOULDBLOCK:
 * a writer kept it for 2 s), reason in err. Blocking (reads and hashes
 * the bundles it judges); any thread. */
int pt_feedback_outbox_repair(const char *home, pt_feedback_repair *out, char *err, size_t errlen);

#endif
