/*
 * ptp_cficache.h - the persistent unwind-table cache: the rows ptp_cfi_parse
 * built for one object, kept on disk across processes (keyed by the
 * object's GNU build id) so that a warm process reads its tables instead of
 * interpreting every FDE again (the table build was most of ptprof_start's
 * CPU: ~6 ms for a preloaded sqlite3, 28-44 ms for gcc's cc1).
 *
 * Files: <symbol cache dir>/unwind/<build id>.cfi (the symbol cache dir is
 * ptp_symcache_default_dir's: PTPROF_SYMCACHE=off turns this cache off
 * too), mode 0600, in a directory created 0700 and used only if it is ours
 * (ptp_cachefile_prepare_dir's rule). Format (native endianness, see
 * docs/sampler.md "Unwind-table cache"): a header (magic, version, row
 * size, row and rule counts, a checksum of the rules and rows and its
 * ptp_crc.h algorithm id, a content key, the build id), then the table's
 * rules and its rows (ptp_unwind.h), the rows' starts relative to the
 * object's load bias.
 *
 * Reading copies the file into memory of its own (ptp_cachefile_read_fd:
 * one read into a private anonymous mapping, then read-only) and uses its
 * rows there, in place (the rows are bias-relative, ptp_cfi_tab.bias
 * relocates them at lookup). Only a regular file of ours with one link,
 * not writable by others, in a directory of ours not writable by others
 * is read (the rule the symbol cache reads by too). Not a mapping of the
 * file: the walker reads the rows in the signal handler, and a file
 * truncated under a mapping (by any process of our uid: `: > file`) turns
 * every read of a lost page into a SIGBUS that kills the program; the copy
 * cannot shrink. The size is checked against the header before any row
 * is read. Reading checks everything
 * (owner, size bound, magic, version, build id, key, checksum, every
 * rule's kind, and every row: non-empty, sorted, disjoint, naming a rule
 * of the file, inside the object's executable range; the checksum and the
 * checks are one pass over the copy): a
 * missing, truncated, corrupt, foreign or outdated file is a miss, the
 * table is built and the file replaced. The
 * key (ptp_cfi_hash over the object's .eh_frame_hdr bytes and its executable
 * segments relative to the bias) catches an object rebuilt with the same
 * build id; PTP_CFICACHE_VERSION changes whenever the rows the parser makes
 * from the same input change.
 *
 * Writes: a unique temp file (O_EXCL, 0600), rename over the old name
 * (ptp_cachefile_write_with; no fsync: the files are derived data, a crash
 * may lose or truncate one and the reader's checks rebuild it): concurrent
 * writers never leave a torn file (the last rename wins, both are whole),
 * and a process that read the old file keeps its copy. Bounds: a file holds at most
 * PTP_CFICACHE_FILE_MAX bytes (bigger tables are not saved), the directory
 * PTP_CFICACHE_DIR_MAX bytes of .cfi files (the oldest by mtime are removed
 * after a save); temp files older than an hour are removed.
 *
 * Threads: no shared state; any thread. Never from a signal handler
 * (allocates, does I/O). Errors: 0 or negative errno values.
 */
#ifndef PTP_CFICACHE_H
#define PTP_CFICACHE_H

#include <stddef.h>
#include <stdint.h>

#include "prof/unwind/ptp_cfi_internal.h"

#define PTP_CFICACHE_VERSION 2u
#define PTP_CFICACHE_FILE_MAX ((size_t)64 << 20)
#define PTP_CFICACHE_DIR_MAX (256ull << 20)
#define PTP_CFICACHE_BID_MAX PTP_CFI_BID_MAX

/* The cache directory: ptp_symcache_default_dir() + "/unwind". Returns 0,
 * -ENOENT (cache off, or no home), -ENAMETOOLONG. */
int ptp_cficache_dir(char *buf, size_t cap);

/* The identity of a loaded object: its build id in lowercase hex (from its
 * PT_NOTE segments in memory, bounds-checked) and the content key. Call
 * inside a dl_iterate_phdr callback for that object. Returns 0, -ENOENT
 * (no build id, or one longer than 32 bytes: such objects are not cached). */
int ptp_cficache_ident(const struct dl_phdr_info *info, const ptp_cfi_objinfo *o,
                       char bid[PTP_CFICACHE_BID_MAX], uint64_t *key);

/* The checks of a cache file's bytes, without I/O (the fuzzed core of
 * ptp_cficache_load): img holds the whole file, len bytes, 8-aligned (the
 * rules and rows are read in place). On 0, *out describes the table in
 * img (rows and rules point into it; map NULL, maplen 0, bytes counting
 * img): valid as long as img is, never to be given to ptp_cfi_tab_free.
 * Returns 0, -ESTALE (another key, version or checksum algorithm),
 * -E2BIG (more than max_rows rows and rules), -EBADMSG (a check failed,
 * or len shorter than the header's counts or not exactly theirs),
 * -EINVAL (a bad build id, bias <= lo <= hi not met, img not 8-aligned).
 * Any thread; not for signal handlers (not needed there). */
int ptp_cficache_parse(const void *img, size_t len, const char *bid, uint64_t key, uintptr_t bias,
                       uintptr_t lo, uintptr_t hi, size_t max_rows, ptp_cfi_tab *out);

/* The table of (bid, key) in dir, for the object loaded at bias: a copy
 * of the file (tab->bias = bias, tab->map set); every row must lie in
 * [lo, hi) (runtime addresses, bias <= lo <= hi). At most max_rows rows
 * and rules together (8 bytes each).
 * Returns 0 and *out (the caller frees it with ptp_cfi_tab_free of
 * ptp_cfi.h, and only
 * after the last reader is gone: the copy goes with it), -ENOENT (no
 * file), -ESTALE (another key or version), -E2BIG (more than max_rows
 * rows and rules), -EBADMSG (corrupt: a check of its content failed, or cut short),
 * -EINVAL, -ENOMEM, or the error of opening or mapping it (-EACCES,
 * -EMFILE, -ELOOP for a symbolic link; ptp_cachefile_read_fd's -EPERM, not
 * ours, and -EFBIG, over the size bound). */
int ptp_cficache_load(const char *dir, const char *bid, uint64_t key, uintptr_t bias,
                      uintptr_t lo, uintptr_t hi, size_t max_rows, ptp_cfi_tab **out);

/* The file image of a table (header, rules and bias-relative rows) in one
 * malloc'd buffer (caller frees), so the caller can write it after
 * releasing its lock. t->bias must be bias (every table ptp_cfi_parse and
 * ptp_cficache_load make is relative to its object's bias). Returns 0,
 * -E2BIG (over PTP_CFICACHE_FILE_MAX), -EINVAL, -ENOMEM. */
int ptp_cficache_image(const char *bid, uint64_t key, uintptr_t bias, const ptp_cfi_tab *t,
                       void **img, size_t *len);

/* Writes an image atomically as dir/<bid>.cfi (creating dir 0700 if
 * needed), then applies the directory bound. Returns 0 or the errno of the
 * failing step (an older file then stays). */
int ptp_cficache_write(const char *dir, const char *bid, const void *img, size_t len);

#endif
