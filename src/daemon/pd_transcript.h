/*
 * pd_transcript.h - one session's transcript: sessions/<id>/transcript.jsonl,
 * one JSON object per line {"turn_id","role","text","ts"[,"status"]},
 * append-only, each line fdatasync'd (docs/daemon.md). A pd_transcript is
 * the session store's handle on that file: its path, the append descriptor
 * (opened on the first append), the highest turn id, and the in-memory copy
 * of the entries that turns and attaches read instead of the file.
 *
 * The session store (pd_sessions.c) creates one per loaded or created
 * session; turns append to it, attaches read its history. It knows nothing
 * of sessions: the store calls it, never the other way round.
 *
 * Appends are durable (fdatasync), so they run on the session store's
 * writer thread (pd_transcript_append_async, pd_writer.h) and the loop
 * applies their outcome when told (pd_transcript_commit).
 *
 * Threads: loop thread only, except pd_transcript_read (a pure file reader,
 * any thread) and a queued append's disk work (the writer's thread, which
 * alone touches the append descriptor while an append is pending). Errors: negative errno (-ENOENT, -ENOSPC, -EIO, -EFBIG,
 * -EBADMSG, -ENOMEM).
 */
#ifndef PD_TRANSCRIPT_H
#define PD_TRANSCRIPT_H

#include "daemon/pd_writer.h"

#include <jansson.h>
#include <stddef.h>

/* Larger transcripts are "damaged": the loader refuses them, so appends
 * never grow a file past it. */
#define PD_TRANSCRIPT_MAX ((size_t)64 << 20)

typedef struct pd_transcript pd_transcript;

/* A handle on the transcript file `path` (copied), whose highest turn id
 * is `turns` (what pd_transcript_read found; 0 for a new session). Opens
 * nothing: the file is read on the first pd_transcript_history and opened
 * for appending on the first pd_transcript_append. Returns 0 and the handle
 * in *out (free with pd_transcript_del), or -ENOMEM. */
int pd_transcript_new(const char *path, int turns, pd_transcript **out);
/* Closes the append descriptor and frees the handle and its in-memory
 * copy. NULL is allowed. */
void pd_transcript_del(pd_transcript *t);

/* The highest turn_id in the transcript (0 when empty). */
int pd_transcript_turns(const pd_transcript *t);

/* Creates an empty transcript file at `path` (O_EXCL, mode 0600) and
 * fsyncs it, for a new session; the session store builds a new session in
 * a temporary directory, so this is not the handle's final path. Returns 0
 * or -errno (-EEXIST...). */
int pd_transcript_create(const char *path);

/* Reads and validates a transcript file; returns 0 and a new JSON array of
 * entries in *out (may be NULL if not wanted) and the highest turn_id in
 * *max_turn (may be NULL). -EBADMSG with a reason in err for a damaged file
 * (bad JSON, bad fields, missing final newline, over PD_TRANSCRIPT_MAX:
 * -EFBIG); -errno with strerror in err if it cannot be read. Any thread. */
int pd_transcript_read(const char *path, json_t **out, int *max_turn, char *err, size_t errlen);

/* Appends one entry {turn_id, role, text, ts[, status]} as a line, durably
 * (pt_append_durable: all or nothing). status may be NULL. Returns 0, or
 * -errno (-ENOSPC...) with the transcript unchanged; -EINVAL when text is
 * not valid UTF-8. -EFBIG when the line would take the transcript past
 * PD_TRANSCRIPT_MAX: the loader treats a larger transcript as damaged, so
 * accepting the append would make the session unloadable at the next
 * start. On success the highest turn id and the in-memory copy (if loaded)
 * follow; on failure the copy is dropped, so the next
 * pd_transcript_history reads the file again. Writes on this thread: the
 * daemon's turns use pd_transcript_append_async. */
int pd_transcript_append(pd_transcript *t, int turn_id, const char *role, const char *text,
                         const char *status);

/* One entry to append; status may be NULL. */
typedef struct pd_transcript_entry {
  int turn_id;
  const char *role, *text, *status;
} pd_transcript_entry;

#define PD_TRANSCRIPT_BATCH_MAX 2

/* Appends n entries (1..PD_TRANSCRIPT_BATCH_MAX) in order as
 * pd_transcript_append does, each all or nothing and each tried whatever
 * became of the one before (as n calls of it would), on w's thread (w
 * NULL: now, on this thread). done(ctx) runs on the thread that did the
 * writing (w's, or this one before this returns) once each is written or
 * has failed; after it, call pd_transcript_commit on the loop thread. One
 * append at a time per transcript.
 * Returns 0 (done will run), or an error with nothing queued and done
 * never run: -EINVAL (n out of range; or no entry can be written: text
 * not valid UTF-8), -EFBIG (no entry can be written: over the limit
 * alone), -EBUSY (an append is pending), -ENOMEM. An entry that cannot be
 * written beside one that can is reported by the commit.
 * The entries' strings are copied. */
int pd_transcript_append_async(pd_transcript *t, pd_writer *w, const pd_transcript_entry *e,
                               size_t n, void (*done)(void *ctx), void *ctx);

/* Applies the outcome of the pending append (after its done ran): the
 * highest turn id and the in-memory copy follow what was written. Returns
 * 0 if every entry was written, else the error of the first that was not
 * (the others are written or not each on its own). Loop thread.
 * -EINVAL if no append is pending. */
int pd_transcript_commit(pd_transcript *t);

/* The transcript's entries (as pd_transcript_read returns them), BORROWED:
 * valid until the next pd_transcript_append on t or pd_transcript_del; do
 * not modify (json_copy it to edit). Read from the file on the first call
 * only, then kept in memory and extended by appends, so turns and attaches
 * do not re-read the whole transcript. A missing file is an empty
 * transcript. Returns 0 or the pd_transcript_read error (err describes it;
 * nothing is cached then); -EBUSY if the copy is not loaded and an append
 * is being written (the file may hold half a line: try after the commit). Bounded like the file (PD_TRANSCRIPT_MAX). */
int pd_transcript_history(pd_transcript *t, json_t **out, char *err, size_t errlen);

/* Installs the fault-injection hook for transcript appends: honours
 * POLYTOKEN_FAULT_TRANSCRIPT_WRITE = "ENOSPC" | "EIO" | "EDQUOT" |
 * "<ERRNAME>:<N>" (fail every append after the first N in this process).
 * Tests only: compiled in only with -Dfault_injection=true (the test
 * variants); in other builds it does nothing. No effect when the variable
 * is unset. The hook is process-wide (pt_append_set_fault). */
void pd_transcript_install_fault_hook(void);

#endif
