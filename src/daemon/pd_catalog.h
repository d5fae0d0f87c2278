/*
 * pd_catalog.h - the daemon's versioned artifact catalog: what a user can
 * attach to feedback (docs/feedback.md).
 *
 * Entries: the active session's CPU profile snapshots
 * (`<session>/profiling/daemon-profile-*.pb.gz`, kind "cpu-profile", and in a
 * profiling build only, `tui-profile-*.pb.gz`, kind "tui-cpu-profile"), the
 * daemon log (`<home>/logs/daemon.log`, kind "daemon-log") and telemetry
 * (the `.jsonl` files in `<home>/telemetry/`, kind "telemetry"). With no
 * active session, the snapshots of `<home>/profiling/` are listed instead
 * (the profiling daemon writes there until a session is attached). The
 * newest daemon snapshot is labelled exactly "CPU profile (pprof)", the
 * newest TUI snapshot "TUI CPU profile (pprof)"; older snapshots carry their
 * time in the label. Each profile entry carries its window (start, length)
 * and sample count. With two or more snapshots of a kind, the catalog also
 * offers them merged into one profile (kind "cpu-profile-merged" /
 * "tui-cpu-profile-merged", label "CPU profile (pprof), N kept snapshots
 * merged"): built by the refresh from exactly the listed bytes
 * (common/pt_pprof_merge.h), kept in memory, served like a file.
 *
 * Generation: a counter that increases whenever the catalog's content (the
 * ordered list of entries with their hashes) changes. It is persisted with a
 * fingerprint of the content in `<home>/catalog.json` (atomic write), so it
 * never goes backwards across daemon restarts.
 *
 * Paths: clients never name a path. An entry's path is relative to the
 * session directory (profiles) or the state root (log, telemetry). Every
 * path, the session directory ("sessions/<id>") included, is opened from
 * the state root's directory fd with no symlink allowed anywhere
 * (pt_open_beneath: openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, else
 * O_NOFOLLOW per component), so a session directory that is a symlink to
 * elsewhere lists and serves nothing. Only regular files owned by the
 * daemon's user with exactly one hard link are listed and served. A fetch
 * checks that the file is the one listed, and serves only bytes whose
 * digest it checked after reading them: the first fetch of an artifact
 * re-hashes the whole served range against the listed SHA-256 and learns
 * the digests of its PD_CATALOG_BLOCK blocks; every later chunk, at any
 * offset, is served from blocks that match them. Append-only files (log,
 * telemetry) are served as the prefix of `size` bytes hashed at listing.
 *
 * Threads: a pd_catalog is used from the daemon's loop thread only (no
 * locking), except for the *_work functions below, which run on any one
 * other thread (the daemon uses the libuv threadpool) and touch only their
 * job object: a refresh job (directory scans and hashing) and a read job
 * (the first fetch's whole-range re-hash, up to PD_CATALOG_FETCH_MAX bytes,
 * or the chunk's block checks, and the chunk read). The blocking-but-simple pd_catalog_refresh,
 * pd_catalog_read and pd_catalog_call run all phases on the calling thread
 * (unit tests, tools). While a refresh job is in flight (begin .. end) the
 * catalog still serves its previous list (find, entry_at, read_begin), and
 * set_session may be called; pd_catalog_del must not be (finish the job
 * first: end, or let it complete and then del).
 *
 * Errors: functions return 0 or a negative errno-style code;
 * pd_catalog_errcode() maps one to the IPC error code.
 */
#ifndef PD_CATALOG_H
#define PD_CATALOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

#define PD_CATALOG_SCHEMA 1
/* Largest artifact artifacts.fetch serves (whole artifact). */
#define PD_CATALOG_FETCH_MAX ((uint64_t)64 << 20)
/* Largest chunk one artifacts.fetch reply carries: 512 KiB of data is
 * ~700 KB of base64, which keeps the reply line under the protocol's 1 MiB. */
#define PD_CATALOG_CHUNK_MAX ((size_t)512 << 10)
/* Verification block of a fetch (see "Paths" above): a chunk reads at most
 * one extra block on each side. */
#define PD_CATALOG_BLOCK ((size_t)64 << 10)

typedef struct pd_catalog pd_catalog;

typedef enum pd_catalog_root {
  PD_CATALOG_ROOT_SESSION = 0, /* path relative to the session directory */
  PD_CATALOG_ROOT_STATE = 1,   /* path relative to the state root */
} pd_catalog_root;

/* One entry. Owned by the catalog; valid until the next refresh or del. */
typedef struct pd_catalog_entry {
  char id[17];            /* 16 lowercase hex chars, stable for the same file */
  const char *kind;       /* "cpu-profile", "tui-cpu-profile", "cpu-profile-merged",
                             "tui-cpu-profile-merged", "daemon-log", "telemetry" */
  const char *source;     /* "daemon" or "tui" */
  char *label;
  char *path;             /* relative to root; never absolute, never ".." */
  pd_catalog_root root;
  uint64_t size;          /* bytes served (the hashed prefix for append-only files) */
  char created[32];       /* RFC 3339 UTC: snapshot time, or last write for logs */
  int64_t created_unix;   /* the same in seconds since the epoch */
  char sha256[65];
  int append_only;        /* log/telemetry: grows; served as its first `size` bytes */
  dev_t dev;
  ino_t ino;
  int64_t mtime_ns;
  int64_t ctime_ns;       /* hash-cache key with mtime: an edit that resets mtime is re-hashed */
  int has_profile;        /* a decoded profile: the three below are set */
  int64_t samples;        /* pt_pprof_sample_total */
  int64_t time_ns, duration_ns; /* its window */
  struct pd_cat_blob *blob; /* a built artifact (the merged profiles): its bytes;
                               path is then a name, not a file */
} pd_catalog_entry;

/* Counters for tests and the log. */
typedef struct pd_catalog_stats {
  uint64_t refreshes;
  uint64_t files_hashed;   /* hash computations (cache misses) */
  uint64_t cache_hits;
  uint64_t bytes_hashed;   /* bytes read for hashing by refreshes (append-only
                              files: only what was appended since the last) */
  int persist_error;       /* last error writing catalog.json (0 = none) */
} pd_catalog_stats;

/* Creates a catalog for the state root `home` (copied) and loads
 * `<home>/catalog.json` (missing: generation starts at 0; damaged: the
 * generation restarts from the current time in ms, which is above any
 * generation a counter could have reached, so it still never goes back).
 * Does not scan yet. Returns 0, -EINVAL (home NULL/empty) or -ENOMEM. */
int pd_catalog_new(pd_catalog **out, const char *home);

/* Frees the catalog. NULL ok. */
void pd_catalog_del(pd_catalog *c);

/* Sets the active session's directory (copied; NULL: none). Normally called
 * from the daemon's active-session hook. Without it, refresh reads
 * `<home>/active_session` to find the session. Returns 0 or -ENOMEM. */
int pd_catalog_set_session(pd_catalog *c, const char *session_dir);

/* Rescans the artifacts, hashing only files whose (dev, ino, size, mtime)
 * changed since the last refresh, rebuilds the entry list and bumps the
 * generation (persisting it) if the content changed. A missing profiling
 * directory, log or telemetry directory just means no such entries.
 * Returns 0 or -ENOMEM (the previous list is kept then). A failure to
 * persist catalog.json does not fail the refresh (see stats.persist_error). */
int pd_catalog_refresh(pd_catalog *c);

/* The same in three phases, for running the file work off the loop thread:
 *  - pd_catalog_refresh_begin (loop thread): snapshots the session dir and
 *    freezes the hash cache; *out is the job. -EBUSY if a job is already in
 *    flight (one refresh at a time; callers coalesce), -ENOMEM.
 *  - pd_catalog_refresh_work (any thread, once): scans and hashes.
 *  - pd_catalog_refresh_end (loop thread): swaps the new list in, bumps and
 *    persists the generation as pd_catalog_refresh does; frees the job;
 *    returns the refresh's result (0 or -ENOMEM). */
typedef struct pd_catalog_job pd_catalog_job;
int pd_catalog_refresh_begin(pd_catalog *c, pd_catalog_job **out);
void pd_catalog_refresh_work(pd_catalog_job *j);
int pd_catalog_refresh_end(pd_catalog *c, pd_catalog_job *j);

uint64_t pd_catalog_generation(const pd_catalog *c);
size_t pd_catalog_count(const pd_catalog *c);
/* Entry i (0-based) or NULL; borrowed, valid until the next refresh. */
const pd_catalog_entry *pd_catalog_entry_at(const pd_catalog *c, size_t i);
/* Entry by id or NULL (ids that are not 16 hex chars never match). */
const pd_catalog_entry *pd_catalog_find(const pd_catalog *c, const char *id);
void pd_catalog_get_stats(const pd_catalog *c, pd_catalog_stats *out);

/* Reads bytes [offset, offset + min(max_len, PD_CATALOG_CHUNK_MAX)) of entry
 * `id` (clamped at its size) into a malloc'd buffer (*data, caller frees;
 * non-NULL even for 0 bytes) of *len bytes. The file is opened beneath its
 * root with no symlink anywhere on the path, must be a regular file with the
 * listed device/inode (and, unless append-only, the listed size and mtime),
 * owned by us with one link, and every byte returned was checked: against
 * the listed SHA-256 by a whole-range pass (the first read of the entry),
 * or against the block digests that pass learned.
 * Returns 0; -ENOENT (no such id, or the file is gone); -ESTALE (the file
 * changed or was replaced since listing); -ELOOP (a symlink on the path);
 * -EPERM (not ours, or more than one hard link);
 * -EFBIG (artifact over PD_CATALOG_FETCH_MAX); -EINVAL (offset past the end);
 * -ENOMEM; or another negative errno of open/read. */
int pd_catalog_read(pd_catalog *c, const char *id, uint64_t offset, size_t max_len,
                    uint8_t **data, size_t *len);

/* pd_catalog_read in three phases: begin (loop thread: looks up the entry,
 * copies what was listed and opens its root directory; errors as for
 * pd_catalog_read before any file of the entry is opened), work (any thread,
 * once: opens, checks, reads and verifies the chunk), keep (loop thread,
 * optional), end (any
 * thread: hands over *data and *len as pd_catalog_read does, frees the job,
 * returns the result). The job does not reference the catalog, which may
 * refresh or be freed while the job runs. */
typedef struct pd_catalog_read_job pd_catalog_read_job;
int pd_catalog_read_begin(pd_catalog *c, const char *id, uint64_t offset, size_t max_len,
                          pd_catalog_read_job **out);
void pd_catalog_read_work(pd_catalog_read_job *j);
/* Loop thread, after work and before end: keeps the block digests a
 * whole-range pass learned (at most 16 artifacts' worth, least recently
 * used dropped), so later chunks of the same artifact are checked block by
 * block. c must be the catalog the job began on; the job stays valid. */
void pd_catalog_read_keep(pd_catalog *c, pd_catalog_read_job *j);
int pd_catalog_read_end(pd_catalog_read_job *j, uint8_t **data, size_t *len);

/* The IPC methods. method: "artifacts.list" or "artifacts.fetch"; params
 * BORROWED (NULL ok). On success returns 0 and *result (NEW reference). On
 * failure returns a negative code, *result = NULL, and *code / msg describe
 * the IPC error (code is a static string; msg gets a one-line message).
 *   artifacts.list {since_generation?} ->
 *     {schema, generation, changed, home, session:{id, dir}|null,
 *      entries?:[{id, kind, label, source, size, created, created_unix,
 *      sha256, path, root:"session"|"state", file?, built?, samples?,
 *      time_ns?, duration_ns?}]}
 *     (file: the absolute path of a file entry; built: true for the merged
 *     profiles, which are no file; samples and the window: profiles)
 *     (refreshes first; entries omitted when since_generation == generation)
 *   artifacts.fetch {id, offset?, length?} ->
 *     {id, size, sha256, offset, length, eof, data_base64} */
int pd_catalog_call(pd_catalog *c, const char *method, json_t *params, json_t **result,
                    const char **code, char *msg, size_t msglen);

/* pd_catalog_call's pieces for an asynchronous daemon (loop thread, all):
 * pd_catalog_list_params validates artifacts.list params (*since = -1: none);
 * pd_catalog_list_result builds its result from the current list after a
 * refresh that returned refresh_err; pd_catalog_fetch_begin validates
 * artifacts.fetch params and starts a read job (*job, run
 * pd_catalog_read_work on it); pd_catalog_fetch_end (any thread) turns the
 * finished job into the result and frees it. Return 0 or a negative code
 * with code/msg set, as pd_catalog_call. */
int pd_catalog_list_params(json_t *params, int64_t *since, const char **code, char *msg,
                           size_t msglen);
int pd_catalog_list_result(pd_catalog *c, int64_t since, int refresh_err, json_t **result,
                           const char **code, char *msg, size_t msglen);
int pd_catalog_fetch_begin(pd_catalog *c, json_t *params, pd_catalog_read_job **job,
                           const char **code, char *msg, size_t msglen);
int pd_catalog_fetch_end(pd_catalog_read_job *j, json_t **result, const char **code, char *msg,
                         size_t msglen);

/* IPC error code for a negative code from this module. */
const char *pd_catalog_errcode(int err);

#endif
