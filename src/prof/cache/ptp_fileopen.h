/*
 * ptp_fileopen.h - how the library opens a file it reads (debug files,
 * build-id paths, objects for libdw, cache files): no file can hang or
 * kill the program.
 *
 * The threats, each seen (issue 21): a name we build from bytes others
 * control (a .gnu_debuglink name next to a binary, a build-id path, a
 * cache entry) may name a FIFO (a blocking open waits forever for a
 * writer), a device (opening some has effects: a tape rewinds, a watchdog
 * starts), a huge or sparse file, or a symbolic link out of where we look;
 * and a file we map may be truncated under the mapping (reading the lost
 * pages raises SIGBUS, which kills the program). So:
 *  - ptp_file_open_regular: stat(2) first, and only a regular file is
 *    opened at all; the open is O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY
 *    (O_NOFOLLOW on request), so the path swapped for a FIFO between the
 *    stat and the open cannot block either; then fstat(2) must show the
 *    same regular file (same device and inode) of at most max_size bytes;
 *  - ptp_file_trusted: whether a file may be mapped (read in place by
 *    libdw): owned by root or by our effective uid and writable by nobody
 *    else, so no other user can truncate it under the mapping;
 *  - ptp_file_private_copy: for any other file, a sealed memfd copy (the
 *    seals forbid shrinking, growing and writing), which nobody can
 *    truncate.
 *
 * Threads: no state; any thread. Never from a signal handler (I/O).
 * Errors: negative errno values.
 */
#ifndef PTP_FILEOPEN_H
#define PTP_FILEOPEN_H

#include <stdint.h>
#include <sys/stat.h>

/* Sane sizes: an ELF object or debug file (libdw maps it; chromium-sized
 * debug files are a few GiB), and a private copy of an untrusted one (the
 * copy costs its size in memory). */
#define PTP_FILE_ELF_MAX  ((uint64_t)16 << 30)
#define PTP_FILE_COPY_MAX ((uint64_t)512 << 20)

#define PTP_OPEN_NOFOLLOW 1   /* no symbolic link at the last component */

/* Opens path (relative to dfd when dfd != AT_FDCWD and path is relative)
 * for reading as described above. st_out (may be NULL) gets its fstat.
 * Returns the fd (the caller closes it), or -errno: open's and stat's
 * (-ENOENT, -EACCES, -ELOOP for a refused link, ...), -EINVAL (not a
 * regular file: a FIFO, device, socket or directory; never opened, or
 * closed at once), -ESTALE (replaced between the stat and the open),
 * -EFBIG (over max_size). */
int ptp_file_open_regular(int dfd, const char *path, int flags, uint64_t max_size,
                          struct stat *st_out);

/* Whether the file with this fstat may be mapped and read in place: owned
 * by root or by the effective uid, not group- or world-writable. */
int ptp_file_trusted(const struct stat *st);

/* A copy of the whole regular file fd (st: its fstat) in a sealed memfd
 * (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL), close-on-
 * exec. Returns the memfd, -EFBIG (over PTP_FILE_COPY_MAX), -EIO (the file
 * changed size while copied), or -errno. fd stays the caller's. */
int ptp_file_private_copy(int fd, const struct stat *st);

#endif
