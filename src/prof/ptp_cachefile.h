/*
 * ptp_cachefile.h - file helpers for the library's persistent caches (the
 * unwind-table cache uses them; written so that the symbol cache, whose own
 * copies predate this file, can use them too): an atomic whole-file write
 * and a size bound on a cache directory.
 *
 * Threads: no state but a temp-name counter (atomic); any thread. Never from
 * a signal handler (I/O). Errors: 0 or negative errno values.
 */
#ifndef PTP_CACHEFILE_H
#define PTP_CACHEFILE_H

#include <stddef.h>
#include <stdint.h>

/* Writes buf as dir/name atomically: a unique temp file ".name.PID.N.tmp"
 * (O_EXCL, O_NOFOLLOW, 0600 whatever the umask), fsync, rename over name,
 * fsync of the directory. Readers see the old file or the new one whole;
 * of concurrent writers the last rename wins. dir must exist (the caller
 * checked it is safe to use). Returns 0 or the errno of the failing step
 * (the temp file is removed; an older file stays). */
int ptp_cachefile_write(const char *dir, const char *name, const void *buf, size_t len);

/* Best effort: removes temp files (".*.tmp") older than tmp_age_s seconds,
 * then the oldest regular files ending in suffix (by mtime, never keep)
 * while those total more than max_bytes. Symlinks and other files are left
 * alone. */
void ptp_cachefile_bound(const char *dir, const char *suffix, uint64_t max_bytes,
                         const char *keep, int tmp_age_s);

#endif
