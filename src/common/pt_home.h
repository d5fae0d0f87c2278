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

/* Makes the state root private: creates it (mkdir -p, created components
 * 0700 whatever the umask) and, when it exists, is a directory owned by the
 * calling user and grants any permission to group or others, chmods it to
 * 0700. *was_mode (may be NULL) receives the old permission bits when they
 * were changed, else (mode_t)-1, so the caller can log one line saying so.
 * A root owned by someone else is left alone (not ours to change; the
 * daemon then refuses nothing, it only cannot vouch for privacy).
 * Returns 0, -ENOTDIR, or another negative errno with err filled. */
int pt_home_prepare(const char *home, mode_t *was_mode, char *err, size_t errlen);

#endif
