/*
 * ptp_perfmap.h - the perf map reader's core, without I/O: bytes of a
 * runtime's perf map file (/tmp/perf-PID.map, written by `node
 * --perf-basic-prof`, Python 3.12's `-X perf`, the JVM's perf-map-agent)
 * in, sorted non-overlapping named ranges out. The file I/O around it is
 * ptp_perfmap_file.h.
 *
 * Format (perf's): one `START SIZE name` per line, START and SIZE in hex
 * (an optional 0x; at most 16 digits), separated by blanks, the name the
 * rest of the line (a trailing CR dropped). A line that does not parse, has
 * SIZE 0, a range past 2^64, SIZE above PTP_PERFMAP_SIZE_MAX, an empty name
 * or more than PTP_PERFMAP_LINE_MAX bytes is skipped and counted. Names are
 * kept as the runtime wrote them (V8's "JS:*fib /app/x.js:1:13"), except
 * that a control character or a byte that is not valid UTF-8 becomes '?'
 * (a profile's strings must be UTF-8).
 *
 * Overlaps: a later line wins where it overlaps earlier ones (perf's rule:
 * a runtime that moves or frees code writes the new owner of the range
 * later), so the ranges are the map's state as of the last commit. Ranges
 * seen earlier stay unless a later line covers them.
 *
 * Streaming: ptp_perfmap_feed takes whatever bytes are at hand and uses
 * the complete lines; the caller feeds the rest again with what follows.
 * Queued lines take effect at ptp_perfmap_commit (and by themselves every
 * PTP_PERFMAP_QUEUE_MAX lines).
 *
 * Caps (memory stays bounded whatever the input): PTP_PERFMAP_RANGES_MAX
 * ranges (then further lines are dropped and counted); PTP_PERFMAP_NAMES_MAX
 * bytes of names (then further lines still clear the ranges they cover, as
 * unnamed, so a reused address never keeps a stale name).
 *
 * Handle: one owner at a time, no locking; allocates (never in a signal
 * handler). Errors: 0 or -ENOMEM (the state stays consistent: what was
 * committed stays).
 */
#ifndef PTP_PERFMAP_H
#define PTP_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

#define PTP_PERFMAP_LINE_MAX 4096u                  /* bytes of one line (no newline) */
#define PTP_PERFMAP_SIZE_MAX ((uint64_t)64 << 20)   /* one entry's SIZE */
#define PTP_PERFMAP_RANGES_MAX (1u << 20)           /* ranges kept */
#define PTP_PERFMAP_NAMES_MAX ((size_t)64 << 20)    /* bytes of names kept */
#define PTP_PERFMAP_QUEUE_MAX 65536u                /* lines queued before a commit */

typedef struct ptp_perfmap ptp_perfmap;

typedef struct ptp_perfmap_stats {
  uint64_t lines;        /* complete lines seen */
  uint64_t entries;      /* of them, entries taken */
  uint64_t bad;          /* skipped: did not parse, size 0 or too big, wraps, empty name */
  uint64_t too_long;     /* skipped: longer than PTP_PERFMAP_LINE_MAX */
  uint64_t dropped;      /* entries not taken: PTP_PERFMAP_RANGES_MAX reached */
  uint64_t unnamed;      /* entries taken without their name: PTP_PERFMAP_NAMES_MAX */
  size_t ranges;         /* ranges now */
  size_t name_bytes;     /* bytes of names held */
} ptp_perfmap_stats;

/* A new, empty map. Returns 0 or -ENOMEM. */
int ptp_perfmap_new(ptp_perfmap **out);
/* Frees it (NULL is fine); names handed out die. */
void ptp_perfmap_del(ptp_perfmap *pm);

/* Lowers the caps (tests): 0 = the default. Applies to what is fed next. */
void ptp_perfmap_set_limits(ptp_perfmap *pm, size_t ranges_max, size_t names_max);

/* Parses the complete lines of buf[0..len) and queues their entries.
 * *used: bytes consumed, i.e. through the last newline; the bytes after it
 * (a partial line) are not, and are to be fed again followed by more. A
 * partial line of more than PTP_PERFMAP_LINE_MAX bytes is consumed (counted
 * too long), and the rest of it, up to its newline, is skipped in later
 * feeds. Returns 0 or -ENOMEM; *used is what was consumed either way
 * (entries a failed automatic commit lost are counted in dropped). */
int ptp_perfmap_feed(ptp_perfmap *pm, const char *buf, size_t len, size_t *used);

/* Forgets the partial-line state (the file was replaced: the next bytes
 * start a line). Ranges and queued entries stay. */
void ptp_perfmap_restart(ptp_perfmap *pm);

/* Applies the queued entries to the ranges: later entries over earlier
 * ones, all of them over the ranges before. Returns 0 or -ENOMEM (then the
 * queue is dropped, counted in dropped, and the ranges are unchanged). */
int ptp_perfmap_commit(ptp_perfmap *pm);

/* The name of the range holding addr as of the last commit, or NULL (no
 * range, or a range whose name was not kept). *lo, *hi (may be NULL): the
 * range. The name lives until the next commit or del. */
const char *ptp_perfmap_lookup(const ptp_perfmap *pm, uint64_t addr, uint64_t *lo, uint64_t *hi);

/* The i-th range (sorted by lo), i < stats.ranges: its bounds and name
 * (NULL if not kept). For tests and fuzzing. */
const char *ptp_perfmap_range(const ptp_perfmap *pm, size_t i, uint64_t *lo, uint64_t *hi);

void ptp_perfmap_get_stats(const ptp_perfmap *pm, ptp_perfmap_stats *out);

#endif
