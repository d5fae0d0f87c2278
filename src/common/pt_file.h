/*
 * pt_file.h - small, careful file helpers shared by daemon and CLI:
 * directory creation, atomic replacement, durable appends of whole lines,
 * and reading files with a size cap.
 *
 * All functions are synchronous and may block on disk I/O (fsync); call them
 * where that is acceptable (the daemon calls them on its loop thread: state
 * files are small and fsync of a few KB is the price of not losing a turn).
 * Thread-safe as far as the underlying syscalls are (no shared state).
 * Every function returns 0 or a negative errno.
 */
#ifndef PT_FILE_H
#define PT_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* mkdir -p: the one implementation every program uses. Each component it
 * creates gets exactly `mode` whatever the umask (mkdir, then chmod of the
 * new directory); existing directories are left as they are (callers that
 * own a directory tighten it themselves, see pt_home_prepare). An existing
 * non-directory gives -ENOTDIR; a path of PATH_MAX bytes or more
 * -ENAMETOOLONG. */
int pt_mkdir_p(const char *path, mode_t mode);

/* Opens `relpath` beneath the directory fd `dirfd` with `flags` (O_RDONLY,
 * O_DIRECTORY, O_PATH, ...; O_NOFOLLOW and O_CLOEXEC are always added),
 * refusing absolute paths, empty, "." and ".." components and a symlink in
 * any component: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) through syscall(), and where the kernel lacks it
 * (ENOSYS, or EPERM from a seccomp filter) a walk that opens each
 * component with O_NOFOLLOW. Returns an fd (caller closes), -EINVAL for a
 * path that is not plain names, -ELOOP for a symlink on the path, or
 * another negative errno. Any thread. */
int pt_open_beneath(int dirfd, const char *relpath, int flags);

/* mkdir -p of `relpath` beneath `dirfd` (same path rules as
 * pt_open_beneath: no symlink is ever followed, nothing outside dirfd is
 * touched). Created components get exactly `mode`. Returns an O_DIRECTORY
 * fd of the last component (caller closes), -ENOTDIR / -ELOOP when a
 * component is a non-directory or a symlink, or another negative errno. */
int pt_mkdir_beneath(int dirfd, const char *relpath, mode_t mode);

/* renameat that never replaces what exists at the target (a directory
 * rename would replace an empty directory): renameat2(RENAME_NOREPLACE),
 * and where the file system lacks it (EINVAL, ENOSYS) a look first and a
 * plain renameat (racy only against writers the caller trusts: below the
 * state root, nobody else writes). Returns 0, -EEXIST, or another
 * negative errno. */
int pt_rename_noreplace(int fromdir, const char *from, int todir, const char *to);

/* fsyncs a directory (after creating, renaming or removing entries in it). */
int pt_fsync_dir(const char *dir);

/* Atomically replaces `path` with `len` bytes of `data`: writes
 * ".<name>.tmp.<pid>" in the same directory, fsyncs it, renames it over path,
 * fsyncs the directory. On failure the old file is untouched and the
 * temporary is removed. mode: permissions of the new file, exactly (set with
 * fchmod, so the umask does not widen or narrow them). */
int pt_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* The same for `name` (one plain name) in the directory fd `dirfd`; the
 * temporary is ".<name>.tmp.<pid>", created O_EXCL|O_NOFOLLOW, so nothing
 * planted under that name is ever written through. */
int pt_write_atomic_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode);

/* Reads a whole regular file into a malloc'd, NUL-terminated buffer (*out,
 * caller frees; *len without the NUL). Files larger than max bytes give
 * -EFBIG; missing files -ENOENT. */
int pt_read_all(const char *path, size_t max, char **out, size_t *len);

/* Test hook used by pt_append_durable (see below). Returns 0 for a normal
 * write, or a positive errno to simulate after writing a part of the data.
 * NULL (default) = no fault injection. The daemon installs one that reads
 * POLYTOKEN_FAULT_TRANSCRIPT_WRITE, only in test builds
 * (-Dfault_injection=true); nothing else should. */
typedef int (*pt_append_fault_fn)(const char *path);
void pt_append_set_fault(pt_append_fault_fn fn);

/* Appends `len` bytes (normally one '\n'-terminated line) to the file open
 * as `fd` (opened O_WRONLY|O_APPEND by the caller; `path` only names it in
 * the fault hook), then fdatasyncs. All or nothing: if any write or the
 * sync fails, the file is truncated back to its previous length (and synced)
 * so no partial line is ever left behind, and the write error is returned
 * (e.g. -ENOSPC, -EIO). If even the truncate fails, returns that error
 * too (the file may then end in a partial line; readers must check). */
int pt_append_durable(int fd, const char *path, const void *data, size_t len);

#endif
