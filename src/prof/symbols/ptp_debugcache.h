/*
 * ptp_debugcache.h - a bounded on-disk cache of uncompressed copies of
 * separate debug files, so that a symbol-cache miss does not pay for zlib.
 *
 * Why: Debian's debug files (libc6-dbg: /usr/lib/debug/.build-id/xx/y.debug)
 * have SHF_COMPRESSED .debug_* sections; libdw 0.188 inflates all of them at
 * dwarf_begin (libc: 4.2 MB on disk, 10.4 MB inflated, ~60 ms of CPU here) even to resolve one PC.
 * An uncompressed copy is mmapped by libdw, which then reads only the pages a
 * lookup touches.
 *
 * Files: <dir>/<build id hex>.debug, mode 0600, in a directory created 0700
 * and used only if it and the symbol cache's directory above it are ours
 * and not group/world writable (ptp_cachefile_prepare_subdir). A copy is an ELF file with the same sections in
 * the same order as its source, each SHF_COMPRESSED section stored
 * decompressed (what `eu-elfcompress -t none` makes), written with libelf to
 * a unique temp file in the same directory, fsync'ed (a copy has no
 * checksum: its data must be on disk before it is published), then renamed
 * into place (ptp_cachefile_write_with; the directory is not fsync'ed: a
 * copy a crash lost is made again): concurrent writers each rename a whole
 * file.
 * Before use a copy is opened without following symlinks and without
 * blocking, and checked: a regular file owned by us, not writable by
 * others, with one link, no larger than the bound of all copies, not
 * sparse (at least 1/16 of its size allocated), ELF, every section inside
 * the file, none compressed, the build id wanted. A copy failing a
 * check is removed (and re-made by the next ptp_debugcache_make_pending).
 * The directory holds at most max_bytes of copies: after each new copy the
 * least recently used ones (mtime, refreshed at each use) are removed.
 *
 * Threads: a ptp_debugcache is not thread-safe (the symbolizer's user
 * serializes). Never call from a signal handler (allocates, does I/O).
 * Errors: 0 or negative errno values.
 */
#ifndef PTP_DEBUGCACHE_H
#define PTP_DEBUGCACHE_H

#include <stdbool.h>
#include <stdint.h>

#define PTP_DEBUGCACHE_MAX (512ull << 20)   /* default total size of the copies */

typedef struct ptp_debugcache ptp_debugcache;

typedef struct ptp_debugcache_stats {
  uint64_t used;       /* copies handed out instead of a compressed file */
  uint64_t rejected;   /* copies that failed a check (removed) */
  uint64_t made;       /* copies written */
  uint64_t errors;     /* copies that could not be written (source kept) */
  uint64_t removed;    /* copies removed by the size bound */
} ptp_debugcache_stats;

/* A cache in dir (copied; nothing is touched before the first open/make)
 * holding at most max_bytes of copies. Returns 0 and *out, or -ENOMEM. */
int ptp_debugcache_new(ptp_debugcache **out, const char *dir, uint64_t max_bytes);
/* Frees c (pending requests are dropped). NULL is fine. */
void ptp_debugcache_del(ptp_debugcache *c);

/* Whether the ELF file open as fd has a SHF_COMPRESSED section (reads only
 * the section headers). */
bool ptp_debugcache_compressed(int fd);

/* A valid copy for this build id: returns its fd (O_RDONLY, the caller
 * owns it) and *name_out (malloc'ed path, the caller frees), or -ENOENT (no
 * valid copy; a bad one was removed), -EPERM (directory unusable). */
int ptp_debugcache_open(ptp_debugcache *c, const unsigned char *id, int idlen, char **name_out);

/* Remembers that src (a debug file with this build id and compressed
 * sections) should get a copy at the next ptp_debugcache_make_pending.
 * At most a few requests are kept (further ones are dropped: they come
 * back at a later miss). Returns 0, -ENOMEM, -ENOSPC (queue full). */
int ptp_debugcache_want(ptp_debugcache *c, const char *src, const unsigned char *id, int idlen);

/* Writes the copies requested since the last call, then applies the size
 * bound. The cost is about one inflate of the source (the same work libdw
 * did for the miss) plus the write. Returns 0 or the first error (the
 * others are still tried; a failed request is dropped). */
int ptp_debugcache_make_pending(ptp_debugcache *c);

/* Writes the copy of src (must carry build id id) now. 0, -EFBIG (larger
 * than the bound), -EINVAL (not ELF, other build id), or an errno. */
int ptp_debugcache_make(ptp_debugcache *c, const char *src, const unsigned char *id, int idlen);

void ptp_debugcache_get_stats(const ptp_debugcache *c, ptp_debugcache_stats *out);
/* The directory (never NULL). */
const char *ptp_debugcache_dir(const ptp_debugcache *c);

#endif
