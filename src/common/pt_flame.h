/*
 * pt_flame.h - a profile as one self-contained, interactive flame graph
 * page: one HTML file with its data (JSON), script and style inline, no
 * external resource and no network access (its Content-Security-Policy
 * forbids any), no Go needed. What `polytoken profile view` writes.
 *
 * The page (src/common/flame/: flame.html, flame.css, flame.js, embedded
 * at build time) draws an icicle graph (the root on top, callees below) of
 * DOM elements, each carrying its function's name as text and as an
 * aria-label with its values; click zooms into a frame (Back, Reset,
 * Escape), a search by substring or regular expression highlights matching
 * frames and shows their share of the total, a filter by label value
 * (thread_name, task_kind, session, task, any label of the profile; keep or
 * exclude) recomputes every total, the sample type can be switched, and
 * with a base profile frames are colored by how much they grew or shrank
 * (the differential mode, below). A details panel shows a frame's
 * function, kind (inlined, unsymbolized), file and lines, self and total
 * values and shares. The header shows the profile's start time, duration,
 * total, sample type and (collapsed) its comments. docs/profiling.md,
 * "Viewing a profile in a browser", is the user's description.
 *
 * What the data holds: pt_flame_model.h (the call tree with inlined frames,
 * label sets and rows; every sample type). The page's numbers are exactly
 * the profile's: a frame's total is the sum of the values of the samples
 * whose stack passes through it (once per sample), its self the sum of
 * those that end in it. JavaScript numbers are doubles: sums above 2^53
 * (104 days of CPU in nanoseconds) lose their last digits on the page.
 *
 * Differential mode (opt->base): frames of both profiles are in one tree.
 * The color is delta = current - base: red grew, blue shrank, white equal,
 * full color at the largest |delta| on screen (a legend says which value
 * that is); frames only in the current profile are marked "new", frames
 * only in the base "gone". Widths follow the current profile by default
 * (gone frames then have no width); a selector shows the base's widths or
 * both profiles' sum (where every frame of either is visible). By default
 * the base's values are used as they are, as `go tool pprof -diff_base`
 * does, so the numbers match its reports; "scale base to the current
 * total" (opt->diff_normalize sets its initial state) multiplies the base
 * by total(current) / total(base) (after the label filter), which compares
 * shares rather than amounts (two windows of different length). Sample
 * types are matched by type and unit; one the base lacks has no
 * differential (the page says so).
 *
 * Not applied: the profile's drop_frames / keep_frames regular
 * expressions (shown in the header when present).
 *
 * Threads: reentrant, no shared state. Allocation through pt_alloc.h.
 */
#ifndef PT_FLAME_H
#define PT_FLAME_H

#include <stddef.h>

#include "common/pt_pprof_read.h"

/* The HTML written at most (bytes, data included): a page much larger than
 * this does not load in a browser anyway (V8's string limit is ~512 MiB
 * and JSON.parse needs several times the text). */
#define PT_FLAME_MAX_OUTPUT ((size_t)256 << 20)

/* Options; pt_flame_opts_init zero-fills (or pass NULL): every 0/NULL
 * means the default written beside the field. Strings are BORROWED for the
 * call and may hold any bytes (escaped into the page; bytes that are not
 * UTF-8 become U+FFFD). */
typedef struct pt_flame_opts {
  /* The page's <title> and heading, e.g. the file's name or "session
   * 508255bb0d2c, 8 snapshots merged". NULL: "Profile". */
  const char *title;
  /* The sample type shown first: its type ("cpu") or "type/unit"
   * ("cpu/nanoseconds"); the page's selector switches among all of them.
   * NULL: the profile's default_sample_type if it names one of its types,
   * else its last type (as go tool pprof); cpu/nanoseconds for ours. A
   * name the profile lacks is -EINVAL (err lists the types). */
  const char *sample_type;
  /* The base of the differential mode (BORROWED for the call), e.g. an
   * earlier snapshot; NULL: no differential mode. It must share at least
   * one sample type (type and unit) with the profile (-EINVAL). */
  const pt_pprof *base;
  /* How the page names the base, e.g. its file name. NULL: "base". */
  const char *base_title;
  /* Non-zero: the page starts with the base scaled to the current total
   * (see the top). 0: the base's values as they are (go tool pprof
   * -diff_base). Without a base: ignored. */
  int diff_normalize;
  /* Call tree nodes (distinct call paths, both profiles) at most, -EFBIG
   * beyond. 0: PT_FLAME_MAX_NODES (pt_flame_model.h, 8 Mi). */
  size_t max_nodes;
  /* Bytes of HTML at most, -EFBIG beyond. 0: PT_FLAME_MAX_OUTPUT. */
  size_t max_output;
} pt_flame_opts;

/* Zero-fills o: every default. */
void pt_flame_opts_init(pt_flame_opts *o);

/* Writes the page of prof (BORROWED; read with pt_pprof_read, after
 * pt_gunzip for a .pb.gz) with the options opt (NULL: defaults). Returns 0
 * with *out (malloc'd, NUL-terminated, the caller frees) of *outlen bytes,
 * or
 *   -EINVAL  opt->sample_type names no type of prof; the base shares no
 *            sample type with prof; sample values whose sum overflows
 *            int64
 *   -EFBIG   over opt->max_nodes or opt->max_output
 *   -ENOMEM
 * with *out NULL, *outlen 0 and one line in err (err/errlen may be NULL/0).
 * Sans-I/O: writing the file is the caller's (atomically). */
int pt_flame_html(const pt_pprof *prof, const pt_flame_opts *opt, char **out, size_t *outlen,
                  char *err, size_t errlen);

#endif
