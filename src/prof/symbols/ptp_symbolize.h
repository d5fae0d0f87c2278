/*
 * ptp_symbolize.h - in-process symbolization of sampled PCs at dump time,
 * with elfutils libdwfl/libdw (DWARF: names, files, lines, columns, start
 * lines, inline chains) and ELF symbol tables as fallback (.symtab/.dynsym,
 * e.g. a stripped libc without debug info still names `malloc`).
 *
 * Mappings come from dl_iterate_phdr (every object with an executable
 * PT_LOAD, plus the vDSO as "[vdso]"), GNU build ids are read from the loaded
 * PT_NOTE segments in memory. Debug info is looked up ONLY locally (the file
 * itself, /usr/lib/debug/.build-id/xx/yyyy.debug, .gnu_debuglink next to the
 * file, in .debug/ or below /usr/lib/debug): our own find_debuginfo callback
 * never calls debuginfod, whatever DEBUGINFOD_URLS says.
 *
 * Debug-file copies (ptp_debugcache.h): a compressed debug file that had to
 * be opened gets an uncompressed copy in <cache dir>/debug (bounded,
 * PTP_DEBUGCACHE_MAX), made by ptp_symbolizer_make_debug_copies; later
 * lookups open the copy, which libdw maps instead of inflating.
 *
 * Persistent cache (ptp_symcache.h): results are also kept on disk per build
 * id (default $XDG_CACHE_HOME/ptprof/symbols, see ptp_symcache_default_dir;
 * PTPROF_SYMCACHE=off disables it), a whole compile unit at a time, so a
 * later process symbolizes the same code without opening the object or its
 * debug info at all. Nothing is read or created before the first lookup;
 * new results are written by ptp_symbolizer_flush (the pprof encoder calls it
 * once per profile) and at del.
 *
 * Caches (per-module sorted symbol tables, per-compile-unit function/inline
 * range indexes, a PC -> frames cache) are kept across dumps and refreshed
 * when dl_iterate_phdr's dlpi_adds/dlpi_subs counters change.
 *
 * Threads: a ptp_symbolizer is not thread-safe; one user at a time (the
 * sampler's dump path). NEVER call any of this from a signal handler: it
 * takes the loader lock (dl_iterate_phdr), opens files, and allocates.
 * Errors: 0 or a negative errno.
 */
#ifndef PTP_SYMBOLIZE_H
#define PTP_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ptp_symbolizer ptp_symbolizer;

/* Creates a symbolizer and takes the first snapshot of the loaded objects.
 * Never touches the network; ignores DEBUGINFOD_URLS. Returns 0, -ENOMEM. */
int ptp_symbolizer_new(ptp_symbolizer **out);
/* Frees everything (NULL is fine). Pointers returned by lookups die here. */
void ptp_symbolizer_del(ptp_symbolizer *s);
/* Re-reads the list of loaded objects if anything was dlopen'ed/dlclose'd
 * since the last call (cheap otherwise: one dl_iterate_phdr callback). When
 * the set changed, the PC cache and the mapping list are rebuilt, modules
 * still loaded keep their symbol and DWARF caches. Invalidates pointers
 * returned by earlier lookups and ptp_symbolizer_mappings.
 * Returns 0 or -ENOMEM. */
int ptp_symbolizer_refresh(ptp_symbolizer *s);

/* Counters since new (tests, the profile's comment). */
typedef struct ptp_symbolizer_stats {
  uint64_t lookups;             /* addresses not in the in-memory PC cache */
  uint64_t cache_hits;          /* of those, answered by the persistent cache */
  uint64_t resolved;            /* resolved from the object's file/debug info */
  uint64_t modules_opened;      /* objects whose file was opened (libdwfl) */
  uint64_t cache_complete_misses;/* of cache_hits, addresses no interval holds in
                                   an object cached whole: no frames */
  uint64_t objects_filled;      /* objects cached whole (at their first miss) */
  uint64_t fill_pieces;         /* pieces resolved for them */
  uint64_t fill_ns;             /* monotonic time spent filling objects whole */
  uint64_t cache_files_loaded;  /* valid cache files read */
  uint64_t cache_files_rejected;/* corrupt ones ignored (rebuilt at save) */
  uint64_t cache_files_stale;   /* of another format version (rebuilt at save) */
  uint64_t cache_files_unusable;/* not read: an errno (unreadable, not ours...) */
  uint64_t cache_saves, cache_save_errors;
  uint64_t cache_dir_refused;   /* 1: the directory was unusable (not ours...) */
  /* uncompressed debug-file copies (ptp_debugcache.h, <cache dir>/debug) */
  uint64_t debug_copies_used;   /* opened instead of a compressed debug file */
  uint64_t debug_copies_rejected; /* bad copies found (removed, re-made) */
  uint64_t debug_copies_made, debug_copy_errors;
  uint64_t debug_copies_removed;/* by the size bound */
  uint64_t files_copied;        /* files libdw read through a private sealed copy
                                   (not ours or root's, or writable by others:
                                   cache/ptp_fileopen.h) */
  uint64_t fds_lost;            /* modules dropped whose descriptor the program
                                   had closed (their Dwfl left unended) */
  uint64_t modules_released;    /* opened objects closed again once their cache
                                   was complete (ptp_symbolizer_release_filled) */
  uint64_t held_resets;         /* times ptp_symbolizer_trim started over */
  /* addresses in no loaded object (JIT code; ptp_symbolize_jit.c) */
  uint64_t jit_lookups;         /* looked up (never cached: the map changes) */
  uint64_t jit_named;           /* of those, named by the runtime's perf map */
  uint64_t jit_alias;           /* of those, remapped object code */
  uint64_t jit_map_reads;       /* updates of the perf map (one per dump at most) */
} ptp_symbolizer_stats;

void ptp_symbolizer_get_stats(const ptp_symbolizer *s, ptp_symbolizer_stats *out);

/* Uses dir (copied; created 0700, must be ours and not writable by others)
 * for the persistent cache, or none with NULL. Saves and drops the caches
 * opened so far. Returns 0, -ENOMEM, or the error of ptp_cachefile_prepare_dir
 * (the cache is then off). */
int ptp_symbolizer_set_cache_dir(ptp_symbolizer *s, const char *dir);
/* The directory in use, or NULL (off). */
const char *ptp_symbolizer_cache_dir(const ptp_symbolizer *s);

/* Writes the new results of every object to the persistent cache. Returns 0
 * or the first save error (the others are still tried; results stay in
 * memory and are retried at the next flush). */
int ptp_symbolizer_flush(ptp_symbolizer *s);

/* Closes the objects opened for lookups whose persistent cache now answers
 * every address (filled whole and saved): their Dwfl, debug info, symbol
 * tables and indexes are freed (tens of MB for libc with libc6-dbg; the
 * answers come from the cache from now on), and the PC cache is emptied
 * (its frames may point into them; the next lookups refill it from the
 * persistent cache). Meant to run after a snapshot is written, after
 * ptp_symbolizer_make_debug_copies: no frame of an earlier lookup may be
 * in use. Returns how many objects it closed. */
size_t ptp_symbolizer_release_filled(ptp_symbolizer *s);

/* What a symbolizer keeps from one snapshot to the next that it can give
 * back: its PC cache (every address looked up, with its frames) and the
 * blocks of the persistent cache's files read by lookups
 * (ptp_symcache_resident). Both grow with every address a long run ever
 * samples; ptp_symbolizer_trim bounds them. */
#define PTP_SYMBOLIZER_HELD_MAX (4u << 20)
/* Bytes held as above (the arrays' capacities, the blocks read). */
size_t ptp_symbolizer_held(const ptp_symbolizer *s);
/* The bound ptp_symbolizer_trim applies (default PTP_SYMBOLIZER_HELD_MAX;
 * tests set a small one). */
void ptp_symbolizer_set_held_max(ptp_symbolizer *s, size_t bytes);
size_t ptp_symbolizer_held_max(const ptp_symbolizer *s);
/* When more than the bound is held, starts over: the PC cache freed and
 * every symbol cache's blocks given back (ptp_symcache_evict; a file that
 * cannot be read again keeps its blocks), counted in held_resets. Later
 * lookups give the same answers, reading again what they need. Meant to
 * run after a snapshot is written: no frame of an earlier lookup may be in
 * use. Returns the bytes given back (0: under the bound, or s NULL). */
size_t ptp_symbolizer_trim(ptp_symbolizer *s);

/* Writes the uncompressed copies of the compressed debug files that lookups
 * since the last call had to open (ptp_debugcache.h): a later process (or
 * a later miss in this one) then maps the copy instead of inflating ~10 MB.
 * Meant to run after a snapshot is written (it costs about what the miss
 * cost, once per build id). No-op without a cache directory or with s NULL.
 * Threads: as the other calls (one user at a time). Returns 0 or the first
 * error (the copies are best effort). */
int ptp_symbolizer_make_debug_copies(ptp_symbolizer *s);

/* ---- JIT code ----
 * An address in no loaded object is looked for in the walker's executable
 * ranges (unwind/ptp_xranges.h) and in the runtime's perf map
 * (/tmp/perf-<pid>.map, ptp_perfmap_file.h; re-read incrementally once per
 * dump, at the first such address after a refresh): remapped object code
 * is named through the object under a mapping of its file; JIT code gets
 * the runtime's name as written, one frame, under a "[jit]" mapping. */

/* Where the perf map is read from (tests); NULL: /tmp/perf-<pid>.map. */
void ptp_symbolizer_set_perfmap_path(ptp_symbolizer *s, const char *path);

typedef struct ptp_symbolizer_jit_info {
  const char *perfmap_path;     /* NULL: no address in no object yet */
  const char *perfmap_state;    /* "read", "not found", "refused: ..." */
  bool perfmap_read;
  uint64_t lines, entries, bad, dropped;   /* of the map so far */
  uint64_t restarts, capped;    /* re-read from its start; per-dump cap hit */
  size_t ranges;                /* named ranges now */
  size_t exec_ranges;           /* the walker's ranges at the last read */
  unsigned long long range_reads;     /* re-reads of /proc/self/maps so far */
  unsigned long long range_read_ns;   /* their CPU time (the consumer's) */
} ptp_symbolizer_jit_info;
void ptp_symbolizer_get_jit_info(const ptp_symbolizer *s, ptp_symbolizer_jit_info *out);

/* ---- the seam used by the pprof encoder (and tests) ---- */

/* One executable segment of a loaded object, as a pprof Mapping. */
typedef struct ptp_sym_mapping {
  uint64_t start, limit, offset;   /* [start, limit) page-rounded; file offset */
  const char *file;                /* path, "[vdso]", or "[jit]" (JIT code: after
                                      the objects' mappings); never NULL */
  const char *build_id;            /* lowercase hex, "" if none; never NULL */
  bool is_main;                    /* the main executable (index 0 if present) */
  /* Set once a lookup touched the object (what was found there): */
  bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
} ptp_sym_mapping;

/* One (possibly inlined) function at an address. */
typedef struct ptp_sym_frame {
  const char *name;          /* never NULL, never "" */
  const char *system_name;   /* linkage name, or name; never NULL */
  const char *file;          /* source file of the function; "" if unknown */
  int64_t start_line;        /* DW_AT_decl_line, 0 if unknown */
  int64_t line;              /* line of this frame at the address, 0 if unknown */
  int64_t column;            /* 0 if unknown */
} ptp_sym_frame;

typedef struct ptp_sym_result {
  int mapping;                 /* index into ptp_symbolizer_mappings(), -1: none */
  uint32_t nframes;            /* 0: nothing known; else callee first, the
                                  physical function last */
  const ptp_sym_frame *frames; /* owned by s; valid until the next
                                  lookup/refresh/del */
} ptp_sym_result;

/* Symbolizes addr as is (callers pass return address - 1 themselves).
 * Results are cached. Returns 0 (even when nothing is known: nframes 0,
 * mapping -1) or -ENOMEM. Note: frames may move on the next lookup (the
 * cache grows); copy what you need first. */
int ptp_symbolizer_lookup(ptp_symbolizer *s, uint64_t addr, ptp_sym_result *out);

/* The current mappings (main executable first). Valid until the next
 * refresh/del; the has_* flags change as lookups load objects. */
size_t ptp_symbolizer_mappings(ptp_symbolizer *s, const ptp_sym_mapping **out);

#endif
