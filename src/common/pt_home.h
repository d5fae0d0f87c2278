/*
 * pt_home.h - the state root ($POLYTOKEN_HOME): the one place that finds
 * it and the one place that makes it private. Used by the daemon, the CLI
 * and the TUI alike, so they always agree on the directory.
 *
 * Threads: any (reads the environment, which the programs never change
 * after start). Errors: 0 or a negative errno, with a one-line reason in
 * `err` where one is taken.
 */
#ifndef PT_HOME_H
#define PT_HOME_H

#include <stddef.h>
#include <sys/types.h>

/* Longest state root accepted: PATH_MAX less room for the longest path the
 * programs build below it (sessions/<id>/profiling/<snapshot>, ...), so no
 * path under the root can be cut short. */
#define PT_HOME_MAX 3840

/* Resolves the state root: `explicit_home` if not NULL (e.g. --home), else
 * $POLYTOKEN_HOME, else $XDG_STATE_HOME/polytoken, else
 * $HOME/.local/state/polytoken (empty variables count as unset). Returns 0
 * and a malloc'd path in *out (caller frees); -ENOENT when none is set;
 * -ENAMETOOLONG when the path is longer than PT_HOME_MAX (never cut short);
 * -EINVAL for an empty explicit path; -ENOMEM. err (may be NULL) gets the
 * reason. Does not touch the file system. */
int pt_home_resolve(const char *explicit_home, char **out, char *err, size_t errlen);

/* What pt_home_prepare does beyond checking. */
#define PT_HOME_CREATE 0x1u  /* create what is missing (mkdir -p, each new
                                component exactly 0700) */
#define PT_HOME_TIGHTEN 0x2u /* chmod 0700 a root of ours that others may
                                read or enter (but not write) */

/* Checks that the state root `home` is ours alone, creating it when asked.
 *
 * The rules (the same for the daemon, the CLI and the TUI; docs/daemon.md
 * "State root"), in the spirit of ssh's StrictModes and gpg's home checks:
 *  - Every directory from / down to the root is checked, along the path as
 *    given and along the real path of every prefix of it, so a symlink on
 *    the way is judged by the directory it sits in and by the directories
 *    it leads to.
 *  - An ancestor must be owned by the caller or by root, and must not be
 *    writable by its group or by others unless it has the sticky bit (as
 *    /tmp: then nobody else can rename or remove what is ours in it).
 *  - The root itself must be a directory owned by the caller and writable
 *    by nobody else (sticky or not). One that others may only read or
 *    enter is tightened to 0700 with PT_HOME_TIGHTEN (and reported in
 *    *was_mode), else left as it is.
 *  - With PT_HOME_CREATE, missing components are created 0700 after the
 *    existing part passed, and the whole path is checked again.
 * Returns 0; -EPERM when a directory breaks a rule (err: "the state root
 * <home> is not safe: <dir> is owned by another user (uid N, name) and
 * writable by others (mode 0777); ..."); -ENOTDIR (a component is not a
 * directory); -ENOENT when the root does not exist and PT_HOME_CREATE was
 * not given (the existing ancestors passed: nothing unsafe was seen); or
 * another negative errno (stat, realpath, mkdir, chmod) with err filled.
 * *was_mode (may be NULL): the old permission bits when the root was
 * tightened, else (mode_t)-1. Blocking (stats, mkdir); any thread (no
 * shared state; getcwd for a relative root). */
int pt_home_prepare(const char *home, unsigned flags, mode_t *was_mode, char *err, size_t errlen);

#endif
