/*
 * pt_pprof_read.h - a complete, sans-I/O reader of pprof profiles: the
 * whole Profile message (proto/profile.proto, /work/shared/specs/pprof.md)
 * from its protobuf bytes into one struct the caller owns and frees with
 * one call.
 *
 * Input: the encoded Profile, NOT gzip'd: a `.pb.gz` snapshot goes through
 * pt_gunzip (pt_gunzip.h, capped) first:
 *
 *   uint8_t *raw; size_t n;
 *   if (pt_is_gzip(d, len)) r = pt_gunzip(d, len, 0, &raw, &n); ...
 *   pt_pprof *p;
 *   r = pt_pprof_read(raw, n, NULL, &p, err, sizeof err);
 *   ... p->samples[i].locations[j] indexes p->locations ...
 *   pt_pprof_free(p);
 *
 * What is checked (a violation is -EINVAL with err saying where, never a
 * crash, never a partial result):
 *  - the wire format: every varint, length and field inside its message;
 *    a known field with the wrong wire type; groups (wire types 3, 4);
 *  - references: every string index (0 .. n_strings - 1), every
 *    Sample.location_id, Line.function_id and non-zero Location.mapping_id
 *    names an entity that exists; ids of mappings, locations and functions
 *    are non-zero and unique within their kind;
 *  - what `go tool pprof` rejects: string_table[0] not "" (or no string
 *    table), no sample_type, a sample whose value count differs from
 *    sample_type's, a Line without a function, a singular Profile field
 *    (time_nanos, period, ...) given twice (two profiles concatenated).
 * Not checked (kept as read, so a tool can report or merge them): label
 * contents (str and num both set, duplicate keys), mapping ranges, period
 * vs values, time or duration <= 0. Unknown fields are skipped.
 *
 * Caps: the encoded input is at most max_input bytes and the decoded struct
 * at most max_memory bytes (pt_pprof_limits; -EFBIG over either). Every
 * count (samples, locations per sample, lines, labels, strings, ...) is
 * bounded by the memory cap, which the reader checks before allocating
 * anything, and all counts fit in uint32_t.
 *
 * References are resolved: where the format has an id, the struct has the
 * index of the entity in its array (uint32_t), and each entity keeps its
 * original id. Order is the file's order everywhere (mappings: the main
 * binary first by convention; samples' locations: leaf first; a location's
 * lines: the inlined callee first, the physical function last).
 *
 * Memory: one block (the pt_pprof and everything it points to, strings
 * included); never modify it. Threads: reentrant, no shared state; a
 * pt_pprof may be read from any number of threads.
 * Allocation through pt_alloc.h.
 */
#ifndef PT_PPROF_READ_H
#define PT_PPROF_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_PPROF_MAX_INPUT ((size_t)256 << 20)   /* encoded Profile bytes */
#define PT_PPROF_MAX_MEMORY ((size_t)1 << 30)    /* the decoded struct */
#define PT_PPROF_NONE UINT32_MAX                 /* "no entity" index */

/* Caps; zero-fill (or pass NULL) for the defaults beside each field. */
typedef struct pt_pprof_limits {
  size_t max_input;  /* 0: PT_PPROF_MAX_INPUT */
  size_t max_memory; /* 0: PT_PPROF_MAX_MEMORY */
} pt_pprof_limits;

/* A string of the string table: s is NUL-terminated at s[len] (the bytes
 * may hold NULs of their own; len is the truth). Not checked for UTF-8. */
typedef struct pt_pprof_str {
  const char *s;
  size_t len;
} pt_pprof_str;

/* ValueType: string indexes, e.g. "cpu" / "nanoseconds". */
typedef struct pt_pprof_value_type {
  uint32_t type, unit;
} pt_pprof_value_type;

/* Label: key, str and num_unit are string indexes (0 = ""/unset); a
 * string label has str, a numeric one num (and maybe num_unit). */
typedef struct pt_pprof_label {
  uint32_t key, str, num_unit;
  int64_t num;
} pt_pprof_label;

typedef struct pt_pprof_sample {
  uint32_t *locations;      /* indexes into pt_pprof.locations, leaf first */
  uint32_t n_locations;
  uint32_t n_labels;
  int64_t *values;          /* pt_pprof.n_sample_types of them */
  pt_pprof_label *labels;
} pt_pprof_sample;

typedef struct pt_pprof_mapping {
  uint64_t id;              /* non-zero, unique */
  uint64_t memory_start, memory_limit, file_offset;
  uint32_t filename, build_id; /* string indexes */
  bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
} pt_pprof_mapping;

typedef struct pt_pprof_line {
  uint32_t function;        /* index into pt_pprof.functions */
  int64_t line, column;
} pt_pprof_line;

typedef struct pt_pprof_location {
  uint64_t id;              /* non-zero, unique */
  uint64_t address;
  uint32_t mapping;         /* index into pt_pprof.mappings, or PT_PPROF_NONE */
  uint32_t n_lines;
  pt_pprof_line *lines;     /* inlined callee first, physical function last */
  bool is_folded;
} pt_pprof_location;

typedef struct pt_pprof_function {
  uint64_t id;              /* non-zero, unique */
  uint32_t name, system_name, filename; /* string indexes */
  int64_t start_line;
} pt_pprof_function;

typedef struct pt_pprof {
  pt_pprof_value_type *sample_types; size_t n_sample_types; /* >= 1 */
  pt_pprof_sample *samples;          size_t n_samples;
  pt_pprof_mapping *mappings;        size_t n_mappings;
  pt_pprof_location *locations;      size_t n_locations;
  pt_pprof_function *functions;      size_t n_functions;
  pt_pprof_str *strings;             size_t n_strings;     /* >= 1; [0] is "" */
  uint32_t *comments;                size_t n_comments;    /* string indexes */
  uint32_t drop_frames, keep_frames; /* string indexes (regexps; 0 = none) */
  int64_t time_nanos;                /* start of the interval, ns since the epoch */
  int64_t duration_nanos;
  pt_pprof_value_type period_type;   /* {0, 0} when absent */
  int64_t period;
  uint32_t default_sample_type;      /* string index; 0 = unset */
  uint32_t doc_url;                  /* string index; 0 = unset */
} pt_pprof;

/* Decodes the Profile in data[0..len) (not gzip'd; see top). lim: NULL for
 * the defaults. Returns 0 with *out (free with pt_pprof_free), or
 *   -EINVAL  malformed (see top; err says what and where)
 *   -EFBIG   len over max_input, or the decoded profile over max_memory
 *   -ENOMEM
 * with *out NULL. err/errlen (may be NULL/0) receive one line on error. */
int pt_pprof_read(const uint8_t *data, size_t len, const pt_pprof_limits *lim, pt_pprof **out,
                  char *err, size_t errlen);

/* Frees everything of p (one block). NULL is allowed. */
void pt_pprof_free(pt_pprof *p);

/* String i of p (i < p->n_strings, as every index in p is). */
static inline const char *pt_pprof_string(const pt_pprof *p, uint32_t i) {
  return p->strings[i].s;
}

/* Bytes of the decoded profile (what max_memory caps). */
size_t pt_pprof_memory(const pt_pprof *p);

#endif
