/*
 * ptp_cachefile.h - file helpers shared by the library's persistent caches
 * (the symbol cache ptp_symcache.c, the unwind-table cache ptp_cficache.c,
 * the debug-file copies ptp_debugcache.c): the safety check of a cache
 * directory and of every directory below it, the check and the reading of
 * a cache file, an atomic whole-file write, and a size bound on a
 * directory.
 * One copy of each, so the three caches cannot drift apart on what "safe"
 * and "atomic" mean.
 *
 * Threads: no state but a temp-name counter (atomic); any thread. Never from
 * a signal handler (I/O). Errors: 0 or negative errno values.
 */
#ifndef PTP_CACHEFILE_H
#define PTP_CACHEFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* Creates the directory (mkdir -p, new components 0700 whatever the umask)
 * and checks it is safe to use (ptp_cachefile_check_dir(dir, 1)). For a
 * cache root (the symbol cache's directory). Returns 0, -ENOTDIR, -EPERM
 * (not ours / writable by others, here or above) or the errno of mkdir. */
int ptp_cachefile_prepare_dir(const char *dir);

/* The same for a cache directory one level below a cache root (the
 * unwind tables' <root>/unwind, the debug copies' <root>/debug): the
 * rule is checked on dir and on its parent (ptp_cachefile_check_dir(dir,
 * 2)), so no cache is used below a root the symbol cache refuses. */
int ptp_cachefile_prepare_subdir(const char *dir);

/* The directory rule, without creating anything: dir and its levels - 1
 * nearest parents (the cache's own directories) must each be a real
 * directory (lstat: no symlink), owned by the effective uid, not group-
 * or world-writable (a directory others may write into could hold planted
 * files: names in profiles would lie, tables would mislead the walker);
 * every directory above them (stat: symlinks followed, e.g. /home ->
 * /data/home) must be owned by the effective uid or root and not group- or
 * world-writable unless sticky (/tmp: others cannot rename our entries
 * there), so nobody else can swap a cache directory for theirs. Returns
 * 0, -ENOTDIR, -EPERM, or lstat's/stat's -errno. */
int ptp_cachefile_check_dir(const char *dir, int levels);

/* Whether s is a cache file's name stem: 2 to max_len lowercase hex
 * digits (a build id), so it can name no other path. */
int ptp_cachefile_hex_name_ok(const char *s, size_t max_len);

/* Whether a cache file with this fstat may be used: a regular file, owned
 * by the effective uid, at most one link (0: a writer renamed a new file
 * over it since it was opened; 2 or more: a name elsewhere could be used
 * to rewrite it), not group- or world-writable, and min_size <= size <=
 * max_size. Returns 0, -EPERM (the rule refuses it: not a regular file of
 * ours with one link and no write bit for others), -EBADMSG (empty or
 * shorter than min_size: cut short, not a whole cache file) or -EFBIG
 * (over max_size). */
int ptp_cachefile_check(const struct stat *st, uint64_t min_size, uint64_t max_size);
/* ptp_cachefile_check(...) == 0, as 1 or 0. */
int ptp_cachefile_mappable(const struct stat *st, uint64_t min_size, uint64_t max_size);

/* Reads the open cache file fd whole into a private read-only anonymous
 * mapping (exactly its size) if ptp_cachefile_check accepts its fstat and
 * its directory dir still passes ptp_cachefile_check_dir(dir, levels)
 * (levels: 1 for a cache root, 2 for a directory below one; checked again
 * because it may have changed since it was prepared). A copy, never a mapping of
 * the file: a file mapped in place and truncated under the mapping (by any
 * process of our uid; our writers never do it, but `: > file` does) makes
 * every read of a lost page a SIGBUS, and the unwind tables are read in
 * the signal handler; the copy cannot shrink. The cost is one copy from
 * the page cache (docs/performance.md, "Start cost"). fd stays the
 * caller's. Returns 0 with *map (munmap it, st->st_size bytes) and *st;
 * or, with nothing made, the error that says why, never another:
 * ptp_cachefile_check's (-EPERM, -EBADMSG, -EFBIG), -EBADMSG too for a
 * file cut short while read, the directory's (-EPERM, -ENOTDIR, -errno of
 * lstat), or the errno of fstat, mmap or read (-ENOMEM, -EIO, ...). Only
 * -EBADMSG says anything about the file's content. */
int ptp_cachefile_read_fd(int fd, const char *dir, int levels, uint64_t min_size,
                          uint64_t max_size, void **map, struct stat *st);

/* Writes all n bytes at p to fd (retrying short writes and EINTR); for
 * fill functions. Returns 0, the write's -errno, or -EIO for a write of 0. */
int ptp_cachefile_write_all(int fd, const void *p, size_t n);

/* Fills the temp file fd (open O_RDWR, empty, 0600) with the file's bytes;
 * returns 0 or a negative errno value. */
typedef int (*ptp_cachefile_fill_fn)(int fd, void *arg);

/* Writes dir/name atomically: a unique temp file ".name.PID.N.tmp" in dir
 * (O_EXCL, O_NOFOLLOW, 0600 whatever the umask) filled by fill, then
 * renamed over name. Readers see the old file or the new one whole (one
 * that has the old file open or mapped keeps the old inode, unchanged: a
 * file is never truncated or rewritten in place); of concurrent writers
 * the last rename wins, and both leave a complete file. Not durable, on
 * purpose: no fsync of the file or the directory, because every caller
 * writes a cache (derived data whose readers check size, magic and
 * checksum and rebuild what a crash lost or cut short); durable user data
 * goes through ptp_snapstore.c instead. dir must exist (ptp_cachefile_prepare_dir). name
 * must not contain '/'. Returns 0, -EINVAL (bad name), fill's error or the
 * errno of the failing step (the temp file is removed; an older file
 * stays). */
int ptp_cachefile_write_with(const char *dir, const char *name, ptp_cachefile_fill_fn fill,
                             void *arg);

/* ptp_cachefile_write_with for bytes in memory: the n pieces of iov, in
 * order (ptp_cachefile_write: one buffer). */
int ptp_cachefile_writev(const char *dir, const char *name, const struct iovec *iov, int n);
int ptp_cachefile_write(const char *dir, const char *name, const void *buf, size_t len);

/* Best effort: removes temp files (".*.tmp") older than tmp_age_s seconds,
 * then the oldest (mtime) regular files named *suffix while those total
 * more than max_bytes, never keep (NULL: none). Symlinks and other files are
 * left alone; nothing is followed. Returns how many *suffix files it
 * removed. */
size_t ptp_cachefile_bound(const char *dir, const char *suffix, uint64_t max_bytes,
                           const char *keep, int tmp_age_s);

#endif
