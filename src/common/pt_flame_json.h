/*
 * pt_flame_json.h - internal to pt_flame*.c (and their tests): the capped
 * output buffer of the page, text escaping for JSON inside <script> and
 * for HTML, and the page's data as JSON.
 *
 * Escaping (so the data can sit inside <script type="application/json">
 * and no profile string can end the element or the page): in JSON strings
 * '<', '>' and '&' are written \u003c, \u003e, \u0026 (so "</script" and
 * "<!--" never appear), U+2028 and U+2029 as \u2028 / \u2029, control
 * characters as \u00XX (\n, \t, ... short forms), and every byte that is
 * not part of valid UTF-8 (overlong forms, surrogates, beyond U+10FFFF,
 * truncated sequences) as \ufffd, one per byte. In HTML text, & < > " '
 * become entities and control characters other than tab and newline, and
 * invalid UTF-8, U+FFFD.
 *
 * The JSON document (what flame.js reads; "v" is its version):
 *   {"v":1, "title":S, "base_title":S,
 *    "profile":META, "base":META|null,
 *    "default_type":T, "base_type":[T|-1 per type]|null, "diff_normalize":B,
 *    "strings":[S...],                          string 0 is ""
 *    "frames":{"name":[s...],"file":[s...],"kind":[0|1|2...]},
 *    "nodes":{"depth":[...],"frame":[f|-1...],"line":[...]},  preorder
 *    "labelsets":[[key,value,key,value...]...], string indexes; [0] = []
 *    "rows":ROWS, "base_rows":ROWS|null,
 *    "totals":[...], "base_totals":[...]|null}
 *   META = {"time_nanos","duration_nanos","period":N, "period_type":[S,S],
 *           "sample_types":[[type,unit]...], "comments":[S...],
 *           "n_samples":N, "drop_frames":S, "keep_frames":S}
 *   ROWS = {"node":[...],"labelset":[...],"values":[[per row]... per type]}
 * (base rows' values are per type of the CURRENT profile, see
 * pt_flame_model.h).
 */
#ifndef PT_FLAME_JSON_H
#define PT_FLAME_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pt_flame_model.h"
#include "common/pt_pprof_read.h"

/* A growing buffer with a size cap. err is sticky: after the first
 * failure (-ENOMEM, or -EFBIG when n would pass max) every write does
 * nothing. s is NUL-terminated whenever it is non-NULL. */
typedef struct pt_flame_buf {
  char *s;
  size_t n, cap, max;
  int err;
} pt_flame_buf;

void pt_flame_buf_raw(pt_flame_buf *b, const char *s, size_t n);
void pt_flame_buf_cstr(pt_flame_buf *b, const char *s); /* raw, NUL-terminated */
void pt_flame_buf_i64(pt_flame_buf *b, int64_t v);
/* s[0..n) as a JSON string, quotes included (escaped as at the top). */
void pt_flame_buf_json_str(pt_flame_buf *b, const char *s, size_t n);
/* s[0..n) as HTML text (escaped as at the top). */
void pt_flame_buf_html(pt_flame_buf *b, const char *s, size_t n);

typedef struct pt_flame_json_in {
  const pt_flame_model *m;
  const pt_pprof *cur, *base; /* base NULL without */
  const char *title, *base_title;
  size_t default_type;
  bool diff_normalize;
} pt_flame_json_in;

/* Appends the JSON document above to b (check b->err). */
void pt_flame_json_write(const pt_flame_json_in *in, pt_flame_buf *b);

#endif
