/*
 * ptp_symcache.h - the persistent symbol cache: what the symbolizer found
 * for one object (keyed by its GNU build id), kept on disk across processes
 * so that a short program does not pay for opening debug info (libc6-dbg's
 * compressed DWARF sections are inflated whole by libdw 0.188) every
 * time it is profiled (zlib was ~20 % of the samples of a preloaded 0.1 s
 * sqlite3 run, perf).
 *
 * Content: address intervals [lo, hi) relative to the object's load bias
 * (sorted and non-overlapping within a segment of the file; segments may
 * overlap, the first answering wins), each mapping to the frames (callee first) that every
 * address in it symbolizes to. The symbolizer fills whole compile units at a
 * time (intervals split at every line-table row, function/inline range and
 * ELF symbol boundary), so a later run that samples other PCs of the same
 * code still hits.
 *
 * Files: <dir>/<build id>.sym, one per object, mode 0600, in a directory
 * created 0700 (whatever the umask) and used only if it is ours (owner =
 * euid, not group/world writable). Format (native endianness, version 5,
 * see docs/pprof-format.md "Symbol cache"): a fixed header (magic, version,
 * the checksum algorithm as a ptp_crc.h id, the build id), then one or
 * more segments, each a header (counts, flags, the limits a
 * PTP_SYMCACHE_NOT_WHOLE mark was decided under, the checksum of header
 * and index), an index (the first lo of each block of intervals, a
 * checksum per block) and its intervals, frames and strings, cut into
 * blocks (170 intervals, 170 frames, 4096 string bytes).
 *
 * Reading: open reads the file header and each segment's header and index
 * only, checked (build id, version, algorithm, checksum, sizes); the
 * blocks a lookup needs (one of intervals, those of its frames and of
 * their strings) are read with pread and checked (checksum, order, bounds,
 * string termination) the first time, into memory of the cache's own (an
 * anonymous mapping of the file's size: a file truncated later cannot
 * fault). A file is opened only under ptp_cachefile_check's rule
 * (regular, ours, one link, not writable by others, in a directory of
 * ours). A truncated, foreign, unfit, older version or other-algorithm
 * file is ignored at open (treated as empty), its state saying which
 * (ptp_symcache_state); a block found corrupt later makes the file
 * rejected at that lookup: its segments are forgotten, the complete
 * mark dropped, and the next save rewrites it. A last segment that does
 * not fit in the file (an append cut short or in progress) is left out
 * and makes the next save rewrite the file. The descriptor stays open
 * until ptp_symcache_release (see there).
 *
 * Writes: when the file is still the one this cache read or last wrote
 * (same device, inode, size and mtime), a save appends what was added as
 * one segment (one O_APPEND write, no fsync: a torn tail fails its checks
 * and is rewritten). Otherwise (no file, rejected, torn, changed by another
 * process since, or PTP_SYMCACHE_SEGS_MAX segments) it merges everything
 * held with what is on disk at that moment into one segment, written to a
 * unique temp file (O_EXCL, 0600), fsync, rename over the old name, fsync
 * of the directory. Concurrent writers never leave a file that is read
 * wrong; at worst one writer's new intervals are lost and recomputed
 * later. Bounds: a file holds at most PTP_SYMCACHE_FILE_MAX bytes (further
 * intervals are not added), the directory PTP_SYMCACHE_DIR_MAX bytes of
 * cache files (the oldest by mtime are removed after a rewrite, and after
 * an append that carries the file across a multiple of
 * PTP_SYMCACHE_BOUND_STEP); stale temp files (> 1 hour) are removed too.
 *
 * Threads: a ptp_symcache is not thread-safe (the symbolizer's user
 * serializes). Never call from a signal handler (allocates, does I/O).
 * Errors: 0 or negative errno values.
 */
#ifndef PTP_SYMCACHE_H
#define PTP_SYMCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prof/symbols/ptp_symbolize.h"

#define PTP_SYMCACHE_FILE_MAX (32u << 20)
#define PTP_SYMCACHE_DIR_MAX (256ull << 20)
#define PTP_SYMCACHE_SEGS_MAX 32   /* segments before a save rewrites the file as one */
/* An append that carries a file across a multiple of this applies the
 * directory bound (a rewrite always does). */
#define PTP_SYMCACHE_BOUND_STEP (1u << 20)

/* Object facts kept with the intervals (the pprof Mapping's has_* flags). */
#define PTP_SYMCACHE_HAS_SYMS 1u
#define PTP_SYMCACHE_HAS_DWARF 2u
#define PTP_SYMCACHE_FLAGS_SET 4u
/* Every address of the object's executable segments that resolves to
 * frames is held by an interval (the symbolizer filled the whole object):
 * an address no interval holds resolves to no frames, without opening the
 * object. Set only together with the intervals it speaks for (the same
 * segment, or an earlier one of the same file). */
#define PTP_SYMCACHE_COMPLETE 8u
/* The object is not filled whole (more boundaries than the symbolizer
 * fills in one go, past the file bound, or a result deeper than a file
 * holds): it is filled a compile unit at a time. The mark carries the
 * limits it was decided under (ptp_symcache_set_not_whole), and stands
 * only for a reader whose limits are none higher
 * (ptp_symcache_not_whole): a library that raises them tries the whole
 * fill again instead of inheriting an older one's verdict forever. */
#define PTP_SYMCACHE_NOT_WHOLE 16u
/* Frames per interval a file holds (the inline depth kept). Fixed by the
 * format (a reader refuses deeper intervals as corrupt), so a change is a
 * new format version, which makes every older file stale: it is not among
 * the limits a PTP_SYMCACHE_NOT_WHOLE mark records. */
#define PTP_SYMCACHE_FRAMES_MAX 64u

/* The limits under which a whole fill of an object was found impossible,
 * kept with PTP_SYMCACHE_NOT_WHOLE in the segment that sets the mark
 * (covered by its checksum). */
typedef struct ptp_symcache_limits {
  uint32_t fill_points;   /* boundaries the symbolizer cuts an object at in
                             one whole fill, at most (its
                             SYM_OBJ_FILL_MAX_POINTS) */
  uint32_t file_max;      /* bytes a cache file holds (PTP_SYMCACHE_FILE_MAX) */
} ptp_symcache_limits;

typedef struct ptp_symcache ptp_symcache;

/* How the file stood when opened (tests, the symbolizer's counters). */
typedef enum ptp_symcache_state {
  PTP_SYMCACHE_MISSING = 0,
  PTP_SYMCACHE_LOADED = 1,
  PTP_SYMCACHE_REJECTED = 2,   /* corrupt: read, and a check of its content
                                  failed (magic, checksum, bounds, order,
                                  strings, build id), or cut short */
  PTP_SYMCACHE_STALE = 3,      /* another format version or checksum
                                  algorithm (a newer or older library, a CPU
                                  without SSE4.2 on a shared home) */
  PTP_SYMCACHE_UNUSABLE = 4,   /* not read, for the reason its errno says
                                  (ptp_symcache_file_error): -EACCES,
                                  -EMFILE, -ELOOP (a symbolic link), -EPERM
                                  (refused by the cache-file rule: not ours,
                                  links, writable by others), -EFBIG (over
                                  the size bound), ... */
} ptp_symcache_state;

/* The cache directory to use: $PTPROF_SYMCACHE when set ("off" or "" turns
 * the cache off: -ENOENT), else $XDG_CACHE_HOME/ptprof/symbols, else
 * $HOME/.cache/ptprof/symbols. Writes a NUL-terminated path into buf.
 * Returns 0, -ENOENT (off, or no home), -ENAMETOOLONG. */
int ptp_symcache_default_dir(char *buf, size_t cap);

/* The cache directory's safety check and the atomic write are
 * ptp_cachefile.h's, shared with the other caches. */

/* Opens the cache of the object with this build id (lowercase hex, 2..128
 * chars) in dir (copied), reading the file if there is a valid one. A
 * missing or invalid file is not an error: the cache starts empty.
 * Returns 0 and *out, -EINVAL (bad build id), -ENOMEM. */
int ptp_symcache_open(ptp_symcache **out, const char *dir, const char *build_id);
/* Frees everything; frames returned by find die here. NULL is fine. */
void ptp_symcache_del(ptp_symcache *c);

/* Reads and checks every block of the file's segments (what lookups do
 * block by block as they need them). Returns 0 (every block is sound, or
 * no file was read: missing, stale, unusable), -EBADMSG (the file is
 * rejected: now, by a block that failed its checks, or earlier), or why it
 * could not be read (then its segments are forgotten; see
 * ptp_symcache_release). Tests and
 * the fuzz target use it; a rewrite does the same before merging. */
int ptp_symcache_verify(ptp_symcache *c);

/* Closes the file descriptor the cache reads its file through (open from
 * ptp_symcache_open until this call). A later find that needs a block not
 * read yet opens the file again by path and reads on if it is still the
 * same file (device, inode, not shorter, the cache-file rule). If another
 * file is there now (another process's rewrite renamed over it, or the
 * file cut short in place), that one is read as open reads it and the
 * lookups go on from it: the intervals added and not saved stay (a save
 * appends them to it), its complete mark is taken, and the old file's
 * memory is kept until evict or del (strings returned from it stay
 * valid). A file that cannot be read then has its segments dropped (as
 * for a corrupt block; the state says rejected only when it is corrupt).
 * The symbolizer calls this at the end of every profile encode, so no
 * descriptor stays open in the program between dumps. NULL is fine. */
void ptp_symcache_release(ptp_symcache *c);

ptp_symcache_state ptp_symcache_file_state(const ptp_symcache *c);
/* Why the file was not loaded: 0 (loaded), -ENOENT (missing), -EBADMSG
 * (rejected), -ESTALE (stale), or the errno of an unusable file. */
int ptp_symcache_file_error(const ptp_symcache *c);
/* Number of intervals held (in the file's segments plus added; an interval
 * in two segments counts twice). */
size_t ptp_symcache_size(const ptp_symcache *c);

unsigned ptp_symcache_flags(const ptp_symcache *c);
/* Sets the flags (PTP_SYMCACHE_FLAGS_SET added). A PTP_SYMCACHE_NOT_WHOLE
 * mark kept through it keeps the limits recorded with it; one set through
 * it where there was none records limits 0 (expired for every reader: use
 * ptp_symcache_set_not_whole); clearing it forgets them. */
void ptp_symcache_set_flags(ptp_symcache *c, unsigned flags);

/* Marks the object not filled whole (PTP_SYMCACHE_NOT_WHOLE, the other
 * flags kept), decided under lim, which the next save writes with the
 * mark. */
void ptp_symcache_set_not_whole(ptp_symcache *c, const ptp_symcache_limits *lim);
/* Whether the object carries a PTP_SYMCACHE_NOT_WHOLE mark that stands
 * under the limits now: one decided under limits none of which is lower
 * than now's. false without a mark, or when the mark has expired (some
 * limit of now's is higher than the one recorded: a whole fill may
 * succeed now). */
bool ptp_symcache_not_whole(const ptp_symcache *c, const ptp_symcache_limits *now);
/* The limits recorded with the PTP_SYMCACHE_NOT_WHOLE mark: 0 and *out,
 * or -ENOENT (no mark). */
int ptp_symcache_not_whole_limits(const ptp_symcache *c, ptp_symcache_limits *out);

/* The frames of the interval holding rel (address - load bias): 1 and
 * frames and n (n may be 0: known to resolve to nothing), or 0 when not
 * cached. Frame strings stay valid until del or evict; the frames array
 * until the next find or add. */
int ptp_symcache_find(ptp_symcache *c, uint64_t rel, const ptp_sym_frame **frames, uint32_t *n);

/* Adds [lo, hi) -> frames[0..n) (strings copied). An interval that one
 * interval read from the file already holds whole is not added (nothing to
 * write); where it overlaps one added earlier (or, at a rewrite, one of
 * the file's), the earlier wins: this one keeps only the addresses past
 * it, so no address held is ever lost.
 * Returns 0, -EINVAL (lo >= hi, n > 64), -ENOSPC (the file bound is
 * reached; nothing added), -ENOMEM. */
int ptp_symcache_add(ptp_symcache *c, uint64_t lo, uint64_t hi, const ptp_sym_frame *frames,
                     uint32_t n);

/* Bytes ptp_symcache_evict can give back: the current file's blocks read
 * into memory by lookups so far (0 once it was dropped or absorbed by a
 * rewrite: those bytes stay until del), plus the whole memory of each
 * file read before it was replaced (see ptp_symcache_release), counted
 * whole so that a bound on what is held gives it back at the next
 * opportunity. */
size_t ptp_symcache_resident(const ptp_symcache *c);

/* Gives back the memory of the file's blocks read so far (their pages are
 * discarded, MADV_DONTNEED), so a long-running process holds only what its
 * lookups use since: a block is read and checked again when a lookup next
 * needs it. Done only when every block can be read again now: the file
 * read is still open, or opens again as the same file (same device and
 * inode, not shorter; its descriptor then stays open until
 * ptp_symcache_release); a file replaced since is followed here (see
 * ptp_symcache_release) and the old one's memory freed whole, as is that
 * of files followed before. Strings and frames returned by earlier finds
 * die here. Returns the bytes given back (0: none read, or they cannot be
 * read again now and are kept). */
size_t ptp_symcache_evict(ptp_symcache *c);

/* Segments of the file on disk as this cache last read or wrote it (0:
 * none it could append to: missing, rejected, torn, or a write failed).
 * Tests see from it whether a save appended (one more) or rewrote (1). */
size_t ptp_symcache_file_segments(const ptp_symcache *c);

/* Whether something was added (or flags changed) since open/the last save. */
bool ptp_symcache_dirty(const ptp_symcache *c);

/* Writes what was added since open/the last save: appended as a segment,
 * or the whole file rewritten (see the top). No-op when not dirty. Returns
 * 0 or the errno of the failing step (a rewrite keeps the old file; a
 * failed append may leave a torn tail, which the next save rewrites). */
int ptp_symcache_save(ptp_symcache *c);

#endif
