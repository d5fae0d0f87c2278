/*
 * pt_flame_model.h - the data of the flame graph page (pt_flame.h): one or
 * two profiles (the current one and an optional base) turned into a call
 * tree whose leaves carry rows of (labels, values). Sans-I/O; used by
 * pt_flame.c (which writes it as JSON into the page) and by the tests.
 *
 * DESIGN. The page filters by label and switches sample types without
 * going back to C, so the model keeps what the filters need and nothing
 * else:
 *
 *  - frames: one per distinct (function name, file, kind). A Location's
 *    lines become one frame each, the physical function first on the way
 *    from the root and its inlined callees below it (the file lists them
 *    callee first; kind PT_FLAME_INLINE for all but the last line). A
 *    location without lines is one PT_FLAME_NOSYM frame named after its
 *    mapping ("[libfoo.so.1]", so unsymbolized code of one object merges as
 *    in pprof's function view) or, without a mapping file, its address.
 *    Pseudo-frames of the sampler ("[lost: kernel mode]", "[truncated]")
 *    are functions like any other.
 *  - nodes: a trie of call paths from the root, one node per distinct
 *    (parent, frame, line): the line is where in that function the time
 *    was (the leaf's own line; a caller's call site), so the page can show
 *    "file:line" per frame while merging siblings of one frame into one
 *    box. Node 0 is the root (frame PT_FLAME_NO_FRAME). Nodes are in
 *    preorder (a parent before its children, a subtree contiguous), so
 *    depth alone encodes the tree and totals accumulate in one backwards
 *    pass.
 *  - label sets: the distinct sets of (key, value) string labels of the
 *    samples, sorted pairs of string indexes; numeric labels become their
 *    decimal value (with " unit" when they have one). Set 0 is the empty
 *    set.
 *  - rows, per profile (0 = current, 1 = base): one per distinct
 *    (leaf node, label set) with the values of every sample type of the
 *    CURRENT profile summed over the samples. Base values are those of the
 *    base's sample type with the same type and unit (base_type[t]); a type
 *    the base lacks stays 0 there. Samples whose values are all 0 are left
 *    out, as go tool pprof does.
 *
 * Strings are interned once for both profiles (frame names, files, label
 * keys and values), so equal names compare by index. The model BORROWS
 * the profiles' strings: free it before them.
 *
 * Caps: at most max_nodes trie nodes (-EFBIG beyond); every sum is checked
 * for int64 overflow (-EINVAL).
 * Threads: reentrant. Allocation through pt_alloc.h.
 */
#ifndef PT_FLAME_MODEL_H
#define PT_FLAME_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/pt_pprof_read.h"

#define PT_FLAME_NO_FRAME UINT32_MAX       /* the root's frame */
#define PT_FLAME_MAX_NODES ((size_t)8 << 20) /* default trie cap */

typedef enum pt_flame_kind {
  PT_FLAME_FUNC = 0,   /* a function (the physical one of its location) */
  PT_FLAME_INLINE = 1, /* a function inlined into the frame above it */
  PT_FLAME_NOSYM = 2,  /* a location without function information */
} pt_flame_kind;

typedef struct pt_flame_frame {
  uint32_t name, file; /* model string indexes (file 0 = unknown) */
  uint8_t kind;        /* pt_flame_kind */
} pt_flame_frame;

typedef struct pt_flame_node {
  uint32_t parent;     /* node index; the root's is itself (0) */
  uint32_t frame;      /* frame index; PT_FLAME_NO_FRAME for the root */
  uint32_t depth;      /* root 0 */
  int64_t line;        /* Line.line of this frame; 0 unknown */
} pt_flame_node;

typedef struct pt_flame_rows {
  size_t n;
  uint32_t *node;      /* n leaf nodes (any node: a stack ends anywhere) */
  uint32_t *labelset;  /* n label set indexes */
  int64_t *values;     /* n * model.n_types, row-major */
} pt_flame_rows;

typedef struct pt_flame_model {
  size_t n_types;              /* the current profile's sample types */
  int32_t *base_type;          /* n_types: base type index, -1 none (NULL without base) */
  int has_base;
  pt_pprof_str *strings;       /* [0] is "" */
  size_t n_strings;
  pt_flame_frame *frames;
  size_t n_frames;
  pt_flame_node *nodes;        /* preorder, [0] root */
  size_t n_nodes;
  uint32_t *lset_pairs;        /* key, value, key, value... (string indexes) */
  uint32_t *lset_off;          /* n_lsets + 1 offsets into lset_pairs, in pairs */
  size_t n_lsets;              /* [0] the empty set */
  pt_flame_rows rows[2];       /* [0] current, [1] base (n 0 without) */
  int64_t *totals[2];          /* n_types sums of the rows' values */
  size_t n_samples[2];         /* samples kept (some value non-zero) */
  void *priv;                  /* hash tables, owned strings */
} pt_flame_model;

/* Builds the model of cur (and base, NULL for none; both BORROWED and
 * kept alive until pt_flame_model_free). max_nodes 0: PT_FLAME_MAX_NODES.
 * Returns 0 with *out, or -ENOMEM, -EFBIG (over max_nodes) or -EINVAL
 * (a sum overflows int64), with *out NULL and one line in err. */
int pt_flame_model_build(const pt_pprof *cur, const pt_pprof *base, size_t max_nodes,
                         pt_flame_model **out, char *err, size_t errlen);

/* Frees m (NULL allowed). */
void pt_flame_model_free(pt_flame_model *m);

/* String i of m, NUL-terminated. */
static inline const char *pt_flame_str(const pt_flame_model *m, uint32_t i) {
  return m->strings[i].s;
}

#endif
