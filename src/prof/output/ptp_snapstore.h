/*
 * ptp_snapstore.h - the snapshot store: atomic, named, rotated .pb.gz files.
 *
 * File names: <dir>/<prefix><UTC yyyymmddThhmmssZ>-<seq>.pb.gz, seq a
 * zero-padded (6 digits) counter that is monotonic per store and starts
 * after the highest seq of this prefix already in the directory, so names
 * sort by time and never collide with an earlier process's files.
 *
 * Writes are atomic: the bytes go to a temp file ".<prefix>...pb.gz.tmp" in
 * the same directory, fsync, rename (never replacing an existing file),
 * fsync of the directory. A reader listing the directory sees either no new
 * file or the complete one.
 *
 * Retention: after each successful write only the newest `keep` files whose
 * names match exactly this prefix's pattern remain; nothing else in the
 * directory is ever touched (another prefix sharing the directory, e.g.
 * daemon-profile- vs tui-profile-, or unrelated files).
 *
 * Family retention (preload mode, ptp_snapstore_set_family): a base prefix B and
 * the per-process children "B pid<N>-" form one family; after each write the
 * whole family keeps at most keep_total snapshots in the directory, oldest
 * (by mtime) removed first, under an exclusive flock of the directory so
 * several processes of the family can prune at once. Files of any other
 * prefix, even one that merely starts with B ("B x-..."), and temp files are
 * never touched. Ambiguity, documented: a prefix of the form "B pid<N>-" is
 * B's child name and so belongs to B's family.
 *
 * Permissions: snapshots are created 0600 and directories the store creates
 * 0700, whatever the umask (fchmod/chmod after creation); an existing
 * directory is left as it is (see ptp_snapstore_dir_mode).
 *
 * Threads: a ptp_snapstore is not thread-safe; the caller serializes (the
 * sampler's dump lock). Never call from a signal handler. Errors: negative
 * errno values.
 */
#ifndef PTP_SNAPSTORE_H
#define PTP_SNAPSTORE_H

#include <stddef.h>
#include <stdint.h>

#define PTP_SNAPSTORE_PREFIX_MAX 64   /* bytes, without NUL */

typedef struct ptp_snapstore ptp_snapstore;

/* dir is created if missing (mkdir -p, mode 0700). Leftover temp files of
 * this prefix are removed. prefix: 1..PTP_SNAPSTORE_PREFIX_MAX bytes, no '/',
 * not starting with '.'; keep >= 1. Copies dir and prefix.
 * Returns 0 and *out, -EINVAL (bad arguments), -ENOMEM, or the errno of
 * mkdir/opendir (-EACCES, -ENOTDIR, -EROFS, ...). */
int ptp_snapstore_new(ptp_snapstore **out, const char *dir, const char *prefix, int keep);

/* Later writes go to dir (created if missing; leftover temp files of this
 * prefix removed there). On error the store keeps its old directory.
 * Returns 0, -EINVAL, -ENOMEM or the errno of mkdir. */
int ptp_snapstore_set_dir(ptp_snapstore *st, const char *dir);

/* Atomically writes data as a new snapshot, then applies retention. The
 * file's full path goes to path_out (may be NULL), truncated to path_cap
 * bytes and always NUL-terminated when path_cap > 0.
 * On error nothing partial is visible (the temp file is removed), older
 * snapshots stay, and the error is returned: -ENOSPC (full disk), -ENOENT
 * (directory removed), -ENOTDIR (a file in place of the directory),
 * -EROFS, -EACCES, -EIO, -EDQUOT, ... Retention errors after a successful
 * write are ignored (the snapshot is there; the next write retries). */
int ptp_snapstore_write(ptp_snapstore *st, const uint8_t *data, size_t len, char *path_out, size_t path_cap);

/* The directory and prefix in use (owned by st). */
const char *ptp_snapstore_dir(const ptp_snapstore *st);
const char *ptp_snapstore_prefix(const ptp_snapstore *st);

/* Frees the handle; files stay. NULL is fine. */
void ptp_snapstore_del(ptp_snapstore *st);

/* Whether name (a directory entry, no '/') is a snapshot of prefix, i.e.
 * exactly <prefix>YYYYMMDDTHHMMSSZ-<digits>.pb.gz. 1 or 0. */
int ptp_snapstore_name_matches(const char *name, const char *prefix);

/* Whether name is a snapshot of base's family: a snapshot of base itself or
 * of "<base>pid<digits>-". 1 or 0. */
int ptp_snapstore_family_matches(const char *name, const char *base);

/* Turns on family retention (see the top): base must be a prefix of the
 * store's own prefix; keep_total >= 1. Returns 0 or -EINVAL. */
int ptp_snapstore_set_family(ptp_snapstore *st, const char *base, int keep_total);

/* The permission bits (07777) of the store's directory now, for callers that
 * warn about a group/world-accessible one. Returns 0 or -errno of stat. */
int ptp_snapstore_dir_mode(const ptp_snapstore *st, unsigned *mode_out);

/* mkdir -p `path`: components this creates are 0700 whatever the umask
 * (chmod after mkdir: a umask may clear even owner bits); existing ones are
 * left as they are. 0, or -errno (-ENOTDIR when `path` is not a directory
 * at the end). Any thread, not in a signal handler. */
int ptp_mkdir_p(const char *path);

#endif
