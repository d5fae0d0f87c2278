/*
 * pt_quarantine.h - where a start puts what a crash left behind and it
 * cannot repair: <home>/quarantine/<area>/<name>.
 *
 * Crash leftovers (a session directory a killed daemon never finished, a
 * feedback bundle a killed CLI never finished) are never deleted by the
 * programs: what cannot be completed is moved here, out of the way of the
 * session list and the outbox, for the user to look at and remove
 * (docs/daemon.md "Repair at start"). Areas in use: "sessions" (the
 * daemon's session store), "feedback-tmp" (feedback/tmp/).
 *
 * Threads: any (no shared state). Blocking (rename, fsync). Errors: 0 or
 * a negative errno.
 */
#ifndef PT_QUARANTINE_H
#define PT_QUARANTINE_H

#include <stddef.h>

/* Moves the entry `name` (one plain name) of the directory fd `from` to
 * <home>/quarantine/<area>/<as>, where `as` is `name` without its leading
 * dots (a hidden temporary becomes visible there), or "<as>.2", "<as>.3",
 * ... when that is taken. Never replaces anything (RENAME_NOREPLACE, or a
 * check where the file system lacks it: the state root is ours alone),
 * never follows a symlink on the way (quarantine/ and <area>/ are made
 * 0700 beneath homefd with pt_mkdir_beneath). The area directory and
 * `from` are fsync'd. Returns 0 and the name used in out (may be NULL), or
 * a negative errno (-EXDEV when `from` is on another file system, -ELOOP
 * or -ENOTDIR for something planted in the way, -ENOSPC ...) with the
 * entry left where it was. */
int pt_quarantine_move(int homefd, const char *area, int from, const char *name, char *out,
                       size_t outcap);

#endif
