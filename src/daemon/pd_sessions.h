/*
 * pd_sessions.h - the daemon's session store: sessions on disk and in memory
 * (not the sampler's snapshot store or the symbol cache of src/prof).
 *
 * Layout under the state root (docs/daemon.md):
 *   sessions/<id>/session.json     {"name","created","last_activity"}, replaced
 *                                  atomically (temp + fsync + rename + fsync dir)
 *   sessions/<id>/transcript.jsonl the session's transcript (pd_transcript.h)
 *   sessions/<id>/profiling/       created with the session, filled by the
 *                                  profiling build
 *   active_session                 id of the most recently attached session
 *
 *   sessions/.create-<id>/         a session being built: it is renamed to
 *                                  sessions/<id> once complete (crash
 *                                  consistency: never half a session)
 *   sessions/.deleted-<id>/        a session being deleted
 *   quarantine/sessions/<name>     what a crash left and the start could
 *                                  not finish (pt_quarantine.h)
 *
 * The store is loaded once at start (pd_sessions_open), after repairing
 * what a crash left (see the repair section of pd_sessions.c); from then
 * on memory is authoritative and every change is written through before it
 * is reported. A session whose session.json or transcript.jsonl cannot be
 * read or parsed is "skipped": listed with its error, never touched (not
 * deleted, not rewritten, no new files created in it).
 *
 * Names: pd_sessions_* act on the store, pd_session_* on one session.
 * Threads: loop thread only. Errors: negative errno (-ENOENT, -ENOSPC,
 * -EIO, ...).
 */
#ifndef PD_SESSIONS_H
#define PD_SESSIONS_H

#include <jansson.h>
#include <stddef.h>

#include "daemon/pd_transcript.h"

#define PD_SESSION_ID_LEN 12
#define PD_SESSION_NAME_MAX 200  /* bytes of UTF-8 */

struct pd_turn;

typedef struct pd_session {
  char id[PD_SESSION_ID_LEN + 1];
  char *name;                /* owned */
  char created[32];          /* RFC 3339 UTC */
  char last_activity[32];    /* RFC 3339 UTC */
  char *dir;                 /* owned: <home>/sessions/<id> */
  pd_transcript *transcript; /* owned: <dir>/transcript.jsonl (turn count,
                                appends, in-memory history) */
  struct pd_turn *running;   /* the running turn (pd_turn.c), NULL when idle */
  struct pd_writer *writer;  /* borrowed from the store: where touch queues
                                its session.json (NULL: written at once) */
  struct pd_session *next;
} pd_session;

typedef struct pd_sessions pd_sessions;

/* Loads (creating the directories if needed) the store under `home`.
 * First repairs what a crash left in sessions/: an unfinished creation
 * that is complete is finished, one that is not is moved to
 * quarantine/sessions/ (as is a session directory an older daemon left
 * with no session.json and no saved turn), an unfinished deletion is
 * finished; the counts are in pd_sessions_repaired (logged by the caller,
 * once). Damaged sessions are logged and kept in the skipped list; a
 * quarantined one is never listed. Returns 0 and a new store in *out (free
 * with pd_sessions_del), or -errno if the sessions directory cannot be
 * created or read. */
int pd_sessions_open(const char *home, pd_sessions **out);

/* What pd_sessions_open repaired. failed: leftovers that could not be
 * moved or removed (each logged as a warning; left where they were). */
typedef struct pd_sessions_repair {
  unsigned completed;          /* unfinished creations finished */
  unsigned quarantined;        /* incomplete ones moved to quarantine/sessions */
  unsigned deletions_finished; /* unfinished deletions finished */
  unsigned failed;
} pd_sessions_repair;
const pd_sessions_repair *pd_sessions_repaired(const pd_sessions *st);
/* Frees the store, its sessions and their transcripts (closing their
 * files). Calls no active-session callback. NULL is allowed. */
void pd_sessions_del(pd_sessions *st);

const char *pd_sessions_home(const pd_sessions *st);
size_t pd_sessions_count(const pd_sessions *st);  /* valid sessions */
pd_session *pd_sessions_find(pd_sessions *st, const char *id);  /* NULL if unknown */
pd_session *pd_sessions_first(pd_sessions *st);   /* iteration: s->next */

/* Creates a session (name NULL = "Session N"), atomically: built in
 * sessions/.create-<id>/, fsync'd, renamed to sessions/<id>, sessions/
 * fsync'd. Returns 0 and the session (owned by the store) in *out, -EINVAL
 * for a bad name, or -errno (nothing is left on disk then). */
int pd_sessions_create(pd_sessions *st, const char *name, pd_session **out);
/* Removes the session directory (after renaming it out of the way, so a
 * crash never leaves half a session under its id) and frees s. The caller
 * checks that no turn is running. If it was active, the active session
 * becomes none. */
int pd_sessions_delete(pd_sessions *st, pd_session *s);

/* Renames s (rewrites its session.json); -EINVAL for a bad name; -errno if
 * session.json cannot be written (the old name is kept then). A session
 * record is complete in itself (its directory is in s->dir), so this needs
 * no store. */
int pd_session_rename(pd_session *s, const char *name);
/* Sets last_activity to now and rewrites session.json: queued on the
 * store's writer thread, written a second later (pd_writer.h: the loop
 * never waits for the disk, a turn's two touches make one write; a failed
 * write is logged there and leaves the old file), or written at once when
 * the record has no writer. 0, or -errno (-ENOMEM: not queued;
 * the new time stays in memory either way: it is what the user saw). */
int pd_session_touch(pd_session *s);
/* Waits until every session.json rewrite queued so far is on disk (or
 * failed and logged). For tests and before reading the files back. */
void pd_sessions_flush(pd_sessions *st);

/* {id,name,created,last_activity,turns} (new reference; NULL on out of
 * memory). */
json_t *pd_session_json(const pd_session *s);
/* {"sessions":[...newest first...],"skipped":[{"id","error"}]} (new
 * reference; NULL on out of memory). */
json_t *pd_sessions_list_json(pd_sessions *st);

/* Active session: the one most recently attached, persisted in
 * <home>/active_session (atomically). NULL clears it. Calls the store's
 * active-session callbacks when it changes. */
int pd_sessions_set_active(pd_sessions *st, pd_session *s);
pd_session *pd_sessions_active(pd_sessions *st);

/* Active-session callback (the profiling build's seam 4, the artifact
 * catalog): cb(session_dir, ctx) is called right away if a session is
 * active, then whenever the active session of THIS store changes;
 * session_dir is NULL when no session is active any more (deleted). The
 * string is only valid during the call. Registered by whoever owns the
 * callback, on the store handle (no process-wide registry); up to
 * PD_SESSIONS_MAX_LISTENERS per store, kept until pd_sessions_del. Returns 0,
 * -EINVAL (cb NULL) or -ENOSPC (full). */
#define PD_SESSIONS_MAX_LISTENERS 8
typedef void (*pd_active_session_fn)(const char *session_dir, void *ctx);
int pd_sessions_on_active(pd_sessions *st, pd_active_session_fn cb, void *ctx);

/* Validates a session name: 1..PD_SESSION_NAME_MAX bytes, no control
 * characters. Returns 0 or -EINVAL. */
int pd_session_name_ok(const char *name);

#endif
