/*
 * pd_sessions.h - the daemon's session store: sessions on disk and in memory
 * (not the sampler's snapshot store or the symbol cache of src/prof).
 *
 * Layout under the state root (docs/daemon.md):
 *   sessions/<id>/session.json     {"name","created","last_activity"}, replaced
 *                                  atomically (temp + fsync + rename + fsync dir)
 *   sessions/<id>/transcript.jsonl one JSON object per line:
 *                                  {"turn_id","role","text","ts"[,"status"]},
 *                                  append-only, each line fdatasync'd
 *   sessions/<id>/profiling/       created with the session, filled by the
 *                                  profiling build
 *   active_session                 id of the most recently attached session
 *
 * The store is loaded once at start (pd_sessions_open); from then on memory is
 * authoritative and every change is written through before it is reported.
 * A session whose session.json or transcript.jsonl cannot be read or parsed
 * is "skipped": listed with its error, never touched (not deleted, not
 * rewritten, no new files created in it).
 *
 * Threads: loop thread only, except pd_transcript_read, which only reads
 * files and may run on any thread.
 * Errors: negative errno (-ENOENT, -ENOSPC, -EIO, ...).
 */
#ifndef PD_SESSIONS_H
#define PD_SESSIONS_H

#include <jansson.h>
#include <stddef.h>

#define PD_SESSION_ID_LEN 12
#define PD_SESSION_NAME_MAX 200  /* bytes of UTF-8 */
#define PD_TRANSCRIPT_MAX ((size_t)64 << 20) /* larger transcripts are "damaged" */

struct pd_turn;

typedef struct pd_session {
  char id[PD_SESSION_ID_LEN + 1];
  char *name;              /* owned */
  char created[32];        /* RFC 3339 UTC */
  char last_activity[32];  /* RFC 3339 UTC */
  int turns;               /* highest turn_id in the transcript */
  char *dir;               /* owned: <home>/sessions/<id> */
  int transcript_fd;       /* O_APPEND, opened lazily; -1 when closed */
  struct pd_turn *running; /* the running turn (pd_turn.c), NULL when idle */
  json_t *history;         /* owned: the transcript's entries, loaded once by
                              pd_session_history and extended by every
                              successful pd_transcript_append; NULL = not
                              loaded. Bounded like the file (PD_TRANSCRIPT_MAX). */
  struct pd_session *next;
} pd_session;

typedef struct pd_sessions pd_sessions;

/* Loads (creating the directories if needed) the store under `home`.
 * Damaged sessions are logged and kept in the skipped list. Returns 0 and a
 * new store in *out (free with pd_sessions_del), or -errno if the sessions
 * directory cannot be created or read. */
int pd_sessions_open(const char *home, pd_sessions **out);
void pd_sessions_del(pd_sessions *st);

const char *pd_sessions_home(const pd_sessions *st);
size_t pd_sessions_count(const pd_sessions *st);  /* valid sessions */
pd_session *pd_sessions_find(pd_sessions *st, const char *id);  /* NULL if unknown */
pd_session *pd_sessions_first(pd_sessions *st);   /* iteration: s->next */

/* Creates a session (name NULL = "Session N"). Returns 0 and the session
 * (owned by the store) in *out, -EINVAL for a bad name, or -errno. */
int pd_sessions_create(pd_sessions *st, const char *name, pd_session **out);
/* Renames; -EINVAL for a bad name; -errno if session.json cannot be written
 * (the old name is kept then). */
int pd_sessions_rename(pd_sessions *st, pd_session *s, const char *name);
/* Removes the session directory (after renaming it out of the way, so a
 * crash never leaves half a session under its id). The caller checks that
 * no turn is running. If it was active, the active session becomes none. */
int pd_sessions_delete(pd_sessions *st, pd_session *s);
/* Sets last_activity to now and rewrites session.json. */
int pd_sessions_touch(pd_sessions *st, pd_session *s);

/* {id,name,created,last_activity,turns} (new reference). */
json_t *pd_session_json(const pd_session *s);
/* {"sessions":[...newest first...],"skipped":[{"id","error"}]} */
json_t *pd_sessions_list_json(pd_sessions *st);

/* Active session: the one most recently attached, persisted in
 * <home>/active_session (atomically). NULL clears it. Calls the
 * pd_on_active_session hooks when it changes. */
int pd_sessions_set_active(pd_sessions *st, pd_session *s);
pd_session *pd_sessions_active(pd_sessions *st);

/* Hook for the profiling build (seam 4): cb(session_dir, ctx) is called now
 * if a session is active, and whenever the active session changes;
 * session_dir is NULL when no session is active any more (deleted). Up to 8
 * hooks. Loop thread only. Returns 0 or -ENOSPC when full. The string is
 * only valid during the call. May be called before the store is open (the
 * hook then first fires when the store loads an active session). */
int pd_on_active_session(void (*cb)(const char *session_dir, void *ctx), void *ctx);

/* Validates a session name: 1..PD_SESSION_NAME_MAX bytes, no control
 * characters. Returns 0 or -EINVAL. */
int pd_session_name_ok(const char *name);

/* ---- transcript ---- */

/* Reads and validates a transcript file; returns 0 and a new JSON array of
 * entries in *out (may be NULL if not wanted) and the highest turn_id in
 * *max_turn (may be NULL). -EBADMSG with a reason in err for a damaged file
 * (bad JSON, bad fields, missing final newline). Any thread. */
int pd_transcript_read(const char *path, json_t **out, int *max_turn, char *err, size_t errlen);

/* Appends one entry {turn_id, role, text, ts[, status]} as a line, durably
 * (pt_append_durable: all or nothing). status may be NULL. Returns 0, or
 * -errno (-ENOSPC...) with the transcript unchanged. -EFBIG when the line
 * would take the transcript past PD_TRANSCRIPT_MAX: the loader treats a
 * larger transcript as damaged, so accepting the append would make the
 * session unloadable at the next start. */
int pd_transcript_append(pd_session *s, int turn_id, const char *role, const char *text,
                         const char *status);

/* The session's transcript entries (as pd_transcript_read returns them),
 * BORROWED: valid until the next pd_transcript_append on s or the session
 * is freed; do not modify (json_copy it to edit). Read from the file on the
 * first call only, then kept in memory and extended by appends, so turns
 * and attaches do not re-read the whole transcript. A missing file is an
 * empty transcript. Loop thread. Returns 0 or the pd_transcript_read error
 * (err describes it; nothing is cached then). */
int pd_session_history(pd_session *s, json_t **out, char *err, size_t errlen);

/* Installs the fault-injection hook for transcript appends: honours
 * POLYTOKEN_FAULT_TRANSCRIPT_WRITE = "ENOSPC" | "EIO" | "<ERRNAME>:<N>" (fail
 * every append after the first N in this process). Tests only: compiled in
 * only with -Dfault_injection=true (the test variants); in other builds it
 * does nothing. No effect when the variable is unset. */
void pd_transcript_install_fault_hook(void);

#endif
