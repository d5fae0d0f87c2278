/*
 * pt_flame_json.c - the page's capped buffer, its escaping and its data as
 * JSON (format and escaping rules: pt_flame_json.h).
 */
#include "common/pt_flame_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/pt_alloc.h"

/* ---- the buffer ---- */

static bool buf_reserve(pt_flame_buf *b, size_t more) {
  if (b->err) return false;
  if (more > b->max || b->n > b->max - more) {
    b->err = -EFBIG;
    return false;
  }
  if (b->n + more + 1 <= b->cap) return true;
  size_t nc = b->cap ? b->cap : 4096;
  while (nc < b->n + more + 1) nc = nc > SIZE_MAX / 2 ? SIZE_MAX : nc * 2;
  if (nc > b->max + 1) nc = b->max + 1;
  char *q = pt_realloc(b->s, nc);
  if (!q) {
    b->err = -ENOMEM;
    return false;
  }
  b->s = q;
  b->cap = nc;
  return true;
}

void pt_flame_buf_raw(pt_flame_buf *b, const char *s, size_t n) {
  if (!buf_reserve(b, n)) return;
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

void pt_flame_buf_cstr(pt_flame_buf *b, const char *s) { pt_flame_buf_raw(b, s, strlen(s)); }

void pt_flame_buf_i64(pt_flame_buf *b, int64_t v) {
  char t[24];
  int n = snprintf(t, sizeof t, "%" PRId64, v);
  pt_flame_buf_raw(b, t, (size_t)n);
}

/* ---- UTF-8 ---- */

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 when s[0]
 * does not start one (RFC 3629: no overlong forms, no surrogates, nothing
 * beyond U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t k;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) k = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    k = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    k = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < k) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < k; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return k;
}

void pt_flame_buf_json_str(pt_flame_buf *b, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  pt_flame_buf_raw(b, "\"", 1);
  size_t run = 0; /* bytes copied as they are, pending */
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    const char *esc = NULL;
    char u[8];
    size_t k = 1;
    if (c < 0x80) {
      switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      case '<': case '>': case '&':
        snprintf(u, sizeof u, "\\u%04x", c);
        esc = u;
        break;
      default:
        if (c < 0x20) {
          snprintf(u, sizeof u, "\\u%04x", c);
          esc = u;
        }
      }
    } else {
      k = utf8_len(s + i, n - i);
      if (!k) {
        esc = "\\ufffd";
        k = 1;
      } else if (k == 3 && c == 0xE2 && s[i + 1] == 0x80 && (s[i + 2] == 0xA8 || s[i + 2] == 0xA9)) {
        esc = s[i + 2] == 0xA8 ? "\\u2028" : "\\u2029";
      }
    }
    if (esc) {
      pt_flame_buf_raw(b, (const char *)s + i - run, run);
      run = 0;
      pt_flame_buf_cstr(b, esc);
    } else {
      run += k;
    }
    i += k;
  }
  pt_flame_buf_raw(b, (const char *)s + n - run, run);
  pt_flame_buf_raw(b, "\"", 1);
}

void pt_flame_buf_html(pt_flame_buf *b, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t k = 1;
    const char *esc = NULL;
    if (c < 0x80) {
      switch (c) {
      case '&': esc = "&amp;"; break;
      case '<': esc = "&lt;"; break;
      case '>': esc = "&gt;"; break;
      case '"': esc = "&quot;"; break;
      case '\'': esc = "&#39;"; break;
      default:
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) esc = "\xEF\xBF\xBD";
      }
    } else if (!(k = utf8_len(s + i, n - i))) {
      esc = "\xEF\xBF\xBD";
      k = 1;
    }
    if (esc) pt_flame_buf_cstr(b, esc);
    else pt_flame_buf_raw(b, (const char *)s + i, k);
    i += k;
  }
}

/* ---- the document ---- */

static void j_key(pt_flame_buf *b, const char *k) {
  pt_flame_buf_raw(b, "\"", 1);
  pt_flame_buf_cstr(b, k);
  pt_flame_buf_raw(b, "\":", 2);
}

/* "k":v, */
static void j_kv_i64(pt_flame_buf *b, const char *k, int64_t v) {
  j_key(b, k);
  pt_flame_buf_i64(b, v);
  pt_flame_buf_raw(b, ",", 1);
}

static void j_cstr(pt_flame_buf *b, const char *s) { pt_flame_buf_json_str(b, s, strlen(s)); }

static void j_pstr(pt_flame_buf *b, const pt_pprof *p, uint32_t i) {
  pt_flame_buf_json_str(b, p->strings[i].s, p->strings[i].len);
}

static void j_meta(pt_flame_buf *b, const pt_pprof *p, size_t n_samples) {
  pt_flame_buf_cstr(b, "{");
  j_kv_i64(b, "time_nanos", p->time_nanos);
  j_kv_i64(b, "duration_nanos", p->duration_nanos);
  j_kv_i64(b, "period", p->period);
  j_key(b, "period_type");
  pt_flame_buf_cstr(b, "[");
  j_pstr(b, p, p->period_type.type);
  pt_flame_buf_cstr(b, ",");
  j_pstr(b, p, p->period_type.unit);
  pt_flame_buf_cstr(b, "],");
  j_key(b, "sample_types");
  pt_flame_buf_cstr(b, "[");
  for (size_t t = 0; t < p->n_sample_types; t++) {
    pt_flame_buf_cstr(b, t ? ",[" : "[");
    j_pstr(b, p, p->sample_types[t].type);
    pt_flame_buf_cstr(b, ",");
    j_pstr(b, p, p->sample_types[t].unit);
    pt_flame_buf_cstr(b, "]");
  }
  pt_flame_buf_cstr(b, "],");
  j_key(b, "comments");
  pt_flame_buf_cstr(b, "[");
  for (size_t i = 0; i < p->n_comments; i++) {
    if (i) pt_flame_buf_cstr(b, ",");
    j_pstr(b, p, p->comments[i]);
  }
  pt_flame_buf_cstr(b, "],");
  j_kv_i64(b, "n_samples", (int64_t)n_samples);
  j_key(b, "drop_frames");
  j_pstr(b, p, p->drop_frames);
  pt_flame_buf_cstr(b, ",");
  j_key(b, "keep_frames");
  j_pstr(b, p, p->keep_frames);
  pt_flame_buf_cstr(b, "}");
}

static void j_u32s(pt_flame_buf *b, const uint32_t *v, size_t n, size_t stride) {
  pt_flame_buf_cstr(b, "[");
  for (size_t i = 0; i < n && !b->err; i++) {
    if (i) pt_flame_buf_raw(b, ",", 1);
    pt_flame_buf_i64(b, v[i * stride]);
  }
  pt_flame_buf_cstr(b, "]");
}

static void j_rows(pt_flame_buf *b, const pt_flame_model *m, const pt_flame_rows *r) {
  pt_flame_buf_cstr(b, "{");
  j_key(b, "node");
  j_u32s(b, r->node, r->n, 1);
  pt_flame_buf_cstr(b, ",");
  j_key(b, "labelset");
  j_u32s(b, r->labelset, r->n, 1);
  pt_flame_buf_cstr(b, ",");
  j_key(b, "values");
  pt_flame_buf_cstr(b, "[");
  for (size_t t = 0; t < m->n_types; t++) {
    pt_flame_buf_cstr(b, t ? ",[" : "[");
    for (size_t i = 0; i < r->n && !b->err; i++) {
      if (i) pt_flame_buf_raw(b, ",", 1);
      pt_flame_buf_i64(b, r->values[i * m->n_types + t]);
    }
    pt_flame_buf_cstr(b, "]");
  }
  pt_flame_buf_cstr(b, "]}");
}

static void j_totals(pt_flame_buf *b, const int64_t *v, size_t n) {
  pt_flame_buf_cstr(b, "[");
  for (size_t i = 0; i < n; i++) {
    if (i) pt_flame_buf_raw(b, ",", 1);
    pt_flame_buf_i64(b, v[i]);
  }
  pt_flame_buf_cstr(b, "]");
}

void pt_flame_json_write(const pt_flame_json_in *in, pt_flame_buf *b) {
  const pt_flame_model *m = in->m;
  pt_flame_buf_cstr(b, "{\"v\":1,");
  j_key(b, "title");
  j_cstr(b, in->title);
  pt_flame_buf_cstr(b, ",");
  j_key(b, "base_title");
  j_cstr(b, in->base_title);
  pt_flame_buf_cstr(b, ",");
  j_key(b, "profile");
  j_meta(b, in->cur, m->n_samples[0]);
  pt_flame_buf_cstr(b, ",");
  j_key(b, "base");
  if (in->base) j_meta(b, in->base, m->n_samples[1]);
  else pt_flame_buf_cstr(b, "null");
  pt_flame_buf_cstr(b, ",");
  j_kv_i64(b, "default_type", (int64_t)in->default_type);
  j_key(b, "base_type");
  if (m->has_base) {
    pt_flame_buf_cstr(b, "[");
    for (size_t t = 0; t < m->n_types; t++) {
      if (t) pt_flame_buf_cstr(b, ",");
      pt_flame_buf_i64(b, m->base_type[t]);
    }
    pt_flame_buf_cstr(b, "]");
  } else {
    pt_flame_buf_cstr(b, "null");
  }
  pt_flame_buf_cstr(b, ",");
  j_key(b, "diff_normalize");
  pt_flame_buf_cstr(b, in->diff_normalize ? "true," : "false,");

  j_key(b, "strings");
  pt_flame_buf_cstr(b, "[");
  for (size_t i = 0; i < m->n_strings && !b->err; i++) {
    if (i) pt_flame_buf_raw(b, ",", 1);
    pt_flame_buf_json_str(b, m->strings[i].s, m->strings[i].len);
  }
  pt_flame_buf_cstr(b, "],");

  j_key(b, "frames");
  pt_flame_buf_cstr(b, "{");
  for (int field = 0; field < 2; field++) {
    j_key(b, field ? "file" : "name");
    pt_flame_buf_cstr(b, "[");
    for (size_t i = 0; i < m->n_frames && !b->err; i++) {
      if (i) pt_flame_buf_raw(b, ",", 1);
      pt_flame_buf_i64(b, field ? m->frames[i].file : m->frames[i].name);
    }
    pt_flame_buf_cstr(b, "],");
  }
  j_key(b, "kind");
  pt_flame_buf_cstr(b, "[");
  for (size_t i = 0; i < m->n_frames && !b->err; i++) {
    char k[3] = {',', (char)('0' + m->frames[i].kind), 0};
    pt_flame_buf_cstr(b, i ? k : k + 1);
  }
  pt_flame_buf_cstr(b, "]},");

  j_key(b, "nodes");
  pt_flame_buf_cstr(b, "{");
  static const char *const node_fields[3] = {"depth", "frame", "line"};
  for (int field = 0; field < 3; field++) {
    j_key(b, node_fields[field]);
    pt_flame_buf_cstr(b, "[");
    for (size_t i = 0; i < m->n_nodes && !b->err; i++) {
      if (i) pt_flame_buf_raw(b, ",", 1);
      const pt_flame_node *n = &m->nodes[i];
      pt_flame_buf_i64(b, field == 0   ? (int64_t)n->depth
                          : field == 1 ? (n->frame == PT_FLAME_NO_FRAME ? -1 : (int64_t)n->frame)
                                       : n->line);
    }
    pt_flame_buf_cstr(b, field < 2 ? "]," : "]},");
  }

  j_key(b, "labelsets");
  pt_flame_buf_cstr(b, "[");
  for (size_t i = 0; i < m->n_lsets && !b->err; i++) {
    if (i) pt_flame_buf_raw(b, ",", 1);
    size_t a = m->lset_off[i], e = m->lset_off[i + 1];
    if (e == a) pt_flame_buf_cstr(b, "[]"); /* lset_pairs may be NULL */
    else j_u32s(b, m->lset_pairs + 2 * a, 2 * (e - a), 1);
  }
  pt_flame_buf_cstr(b, "],");

  j_key(b, "rows");
  j_rows(b, m, &m->rows[0]);
  pt_flame_buf_cstr(b, ",");
  j_key(b, "base_rows");
  if (m->has_base) j_rows(b, m, &m->rows[1]);
  else pt_flame_buf_cstr(b, "null");
  pt_flame_buf_cstr(b, ",");
  j_key(b, "totals");
  j_totals(b, m->totals[0], m->n_types);
  pt_flame_buf_cstr(b, ",");
  j_key(b, "base_totals");
  if (m->has_base) j_totals(b, m->totals[1], m->n_types);
  else pt_flame_buf_cstr(b, "null");
  pt_flame_buf_cstr(b, "}");
}
