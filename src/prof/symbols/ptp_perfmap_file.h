/*
 * ptp_perfmap_file.h - reads a runtime's perf map file (/tmp/perf-PID.map)
 * into the reader's core (ptp_perfmap.h), incrementally, at dump time.
 *
 * The file is the runtime's, in a world-writable directory, so it is
 * opened with O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY (a
 * symlink is refused, a FIFO never blocks) and used only if fstat says it
 * is a regular file owned by the process's effective uid and at most
 * PTP_PERFMAP_FILE_MAX bytes; anything else is refused (the state says
 * why) and changes nothing but the names: ranges read before stay.
 *
 * Incremental: each update reads from where the last one stopped to the
 * end of what exists then (reads until EOF, so lines appended meanwhile
 * are taken; at most PTP_PERFMAP_READ_MAX bytes per update, the rest at
 * the next); a partial last line is left for the next update. The file is
 * read from its start again (ranges kept, later lines winning) when it was
 * replaced or rewritten: another inode, a size below what was read, or
 * the bytes just before the resume point no longer what they were.
 *
 * Threads: one owner at a time (the symbolizer, at dump time); allocates
 * and does file I/O: never in a signal handler.
 */
#ifndef PTP_PERFMAP_FILE_H
#define PTP_PERFMAP_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "prof/symbols/ptp_perfmap.h"

#define PTP_PERFMAP_FILE_MAX ((uint64_t)256 << 20)   /* a larger file is refused */
#define PTP_PERFMAP_READ_MAX ((uint64_t)32 << 20)    /* bytes read per update */

/* ptp_perfmap_file_info.state */
enum {
  PTP_PERFMAP_UNREAD = 0,   /* no update yet */
  PTP_PERFMAP_MISSING,      /* no such file (the runtime writes none) */
  PTP_PERFMAP_READ,         /* read (up to its end, or the per-update cap) */
  PTP_PERFMAP_REFUSED,      /* not a regular file, a symlink, another owner,
                               too large: not read */
  PTP_PERFMAP_FAILED,       /* open or read failed (err) */
};

typedef struct ptp_perfmap_file ptp_perfmap_file;

/* path: the file, or NULL for /tmp/perf-<getpid()>.map. Nothing is opened
 * before the first update. Returns 0 or -ENOMEM. */
int ptp_perfmap_file_new(ptp_perfmap_file **out, const char *path);
void ptp_perfmap_file_del(ptp_perfmap_file *f);

/* Reads what is new (see above) and commits it. Returns 0, or the
 * negative errno of the open, read or check (-ENOENT missing, -ELOOP
 * symlink, -EPERM another owner, -EINVAL not a regular file, -EFBIG too
 * large, -ENOMEM); the ranges read before stay in every case. */
int ptp_perfmap_file_update(ptp_perfmap_file *f);

/* The runtime's name for addr as of the last update, or NULL; *lo, *hi
 * (may be NULL) the range. Valid until the next update or del. */
const char *ptp_perfmap_file_lookup(const ptp_perfmap_file *f, uint64_t addr, uint64_t *lo,
                                    uint64_t *hi);

typedef struct ptp_perfmap_file_info {
  const char *path;         /* valid while f lives */
  int state;                /* PTP_PERFMAP_* of the last update */
  int err;                  /* its negative errno, 0 if none */
  uint64_t updates;
  uint64_t bytes;           /* bytes consumed so far (all reads) */
  uint64_t restarts;        /* times the file was read from its start again */
  uint64_t capped;          /* updates that stopped at PTP_PERFMAP_READ_MAX */
  ptp_perfmap_stats map;
} ptp_perfmap_file_info;
void ptp_perfmap_file_get_info(const ptp_perfmap_file *f, ptp_perfmap_file_info *out);

/* A short text for a state and error ("not found", "refused: owned by
 * another user", ...). */
const char *ptp_perfmap_file_state_name(int state, int err);

#endif
