/*
 * pt_threadcpu_line.c - the threads' CPU comment read back and summed
 * (contract: pt_threadcpu_line.h).
 *
 * The grammar, as the sampler writes it (docs/pprof-format.md):
 *   line    = "threads' CPU " ... "apart (" MS " ms on these threads" ...
 *             "with their samples:" entry *("," entry) [more] ";" ...
 *   entry   = " " name " " MS " ms (" [INT " threads, "] INT " sample" ["s"]
 *             [", thread_name " name *(", " name) [", ..."]] ")"
 *   more    = "; " INT " more names: " MS " ms (" INT " threads, " INT
 *             " sample" ["s"] ")"
 *   name    = "(no name)" | "(other names)" | quoted | bare
 *   MS      = digits "." digit (tenths of a millisecond)
 * A cursor walks the bytes [p, end); every read checks the end first.
 */
#include "common/pt_threadcpu_line.h"

#include "common/pt_alloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cur {
  const char *p, *end;
} cur;

static int lit(cur *c, const char *s) {
  size_t n = strlen(s);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0) return 0;
  c->p += n;
  return 1;
}

/* Moves past the first occurrence of s; 0 if there is none. */
static int skip_past(cur *c, const char *s) {
  size_t n = strlen(s);
  for (const char *q = c->p; (size_t)(c->end - q) >= n; q++)
    if (memcmp(q, s, n) == 0) {
      c->p = q + n;
      return 1;
    }
  return 0;
}

/* An unsigned integer of at most `digits` digits (no more follow). */
static int uint_n(cur *c, uint64_t *v, int digits) {
  uint64_t x = 0;
  int n = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && n < digits) {
    x = x * 10 + (uint64_t)(*c->p++ - '0');
    n++;
  }
  if (!n || (c->p < c->end && *c->p >= '0' && *c->p <= '9')) return 0;
  *v = x;
  return 1;
}

/* Counts: up to 18 digits (sums of them wrap, unsigned). */
static int uint_(cur *c, uint64_t *v) { return uint_n(c, v, 18); }

/* MS: digits "." one digit, in tenths. At most 12 digits of whole
 * milliseconds (31 years of CPU), so sums over any number of lines a merge
 * can hold stay far from int64's limit. */
static int tenths(cur *c, int64_t *v) {
  uint64_t whole, frac;
  const char *f;
  if (!uint_n(c, &whole, 12) || !lit(c, ".")) return 0;
  f = c->p;
  if (!uint_(c, &frac) || c->p - f != 1) return 0;
  *v = (int64_t)(whole * 10 + frac);
  return 1;
}

static int delim(unsigned char ch) {
  return ch < 0x20 || ch == 0x7f || strchr(" ,;()\"\\", ch) != NULL;
}

/* name into out (16 bytes); *kind PT_TCL_*. */
static int name_(cur *c, char out[16], int *kind) {
  memset(out, 0, 16);
  *kind = PT_TCL_NAMED;
  if (lit(c, "(no name)")) { *kind = PT_TCL_NO_NAME; return 1; }
  if (lit(c, "(other names)")) { *kind = PT_TCL_OTHER_NAMES; return 1; }
  size_t n = 0;
  if (lit(c, "\"")) {
    for (;;) {
      if (c->p >= c->end) return 0;
      unsigned char ch = (unsigned char)*c->p++;
      if (ch == '"') break;
      if (ch == '\\') {
        if (c->p >= c->end) return 0;
        ch = (unsigned char)*c->p++;
        if (ch == 'x') {
          unsigned v = 0;
          for (int i = 0; i < 2; i++) {
            if (c->p >= c->end) return 0;
            char h = *c->p++;
            v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0'
                                    : h >= 'a' && h <= 'f' ? h - 'a' + 10 : 99);
            if (v > 255) return 0;
          }
          ch = (unsigned char)v;
        } else if (ch != '"' && ch != '\\') {
          return 0;
        }
      }
      if (ch == 0 || n == 15) return 0;
      out[n++] = (char)ch;
    }
    return n > 0;
  }
  while (c->p < c->end && !delim((unsigned char)*c->p)) {
    if (n == 15) return 0;
    out[n++] = *c->p++;
  }
  return n > 0;
}

/* "(" [INT " threads, "] INT " sample" ["s"] ")" with the labels skipped;
 * want_threads: the threads count is required (the "more names" part).
 * The count of threads is checked but not kept: it does not add across
 * windows (a thread that ran in several is in each one's count). */
static int counts(cur *c, uint64_t *samples, int want_threads) {
  uint64_t a;
  if (!lit(c, "(") || !uint_(c, &a)) return 0;
  if (lit(c, " threads, ")) {
    if (!uint_(c, &a)) return 0;
  } else if (want_threads) {
    return 0;
  }
  if (!lit(c, " sample")) return 0;
  (void)lit(c, "s");
  *samples = a;
  if (lit(c, ", thread_name ")) {
    char skip[16];
    int k;
    do {
      if (lit(c, "...")) break;
      if (!name_(c, skip, &k)) return 0;
    } while (lit(c, ", "));
  }
  return lit(c, ")");
}

static int grow(pt_tcl_entry **e, size_t *cap, size_t want) {
  if (want <= *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 16;
  while (nc < want) nc *= 2;
  pt_tcl_entry *ne = pt_realloc(*e, nc * sizeof *ne);
  if (!ne) return -ENOMEM;
  *e = ne;
  *cap = nc;
  return 0;
}

int pt_tcl_add(pt_tcl_sum *s, const char *line, size_t len) {
  cur c = {line, line + len};
  if (!lit(&c, PT_TCL_PREFIX)) return 1;
  int64_t own;
  if (!skip_past(&c, "apart (") || !tenths(&c, &own) || !lit(&c, " ms on these threads") ||
      !skip_past(&c, "with their samples:"))
    return -EINVAL;
  /* parse the whole line first, into a list of its own, so a bad line
   * leaves s as it was */
  pt_tcl_entry *le = NULL;
  size_t ln = 0, lcap = 0;
  int r = -EINVAL;
  for (;;) {
    pt_tcl_entry x;
    memset(&x, 0, sizeof x);
    if (!lit(&c, " ") || !name_(&c, x.name, &x.kind) || !lit(&c, " ") ||
        !tenths(&c, &x.cpu_tenths) || !lit(&c, " ms ") ||
        !counts(&c, &x.samples, 0))
      goto out;
    if ((r = grow(&le, &lcap, ln + 1)) < 0) goto out;
    r = -EINVAL;
    le[ln++] = x;
    if (lit(&c, ",")) continue;
    if (lit(&c, ";")) break;
    goto out;
  }
  {
    /* "N more names: ..." */
    cur save = c;
    uint64_t nmore;
    pt_tcl_entry x;
    memset(&x, 0, sizeof x);
    x.kind = PT_TCL_UNLISTED;
    if (lit(&c, " ") && uint_(&c, &nmore) && lit(&c, " more names: ")) {
      if (!tenths(&c, &x.cpu_tenths) || !lit(&c, " ms ") ||
          !counts(&c, &x.samples, 1))
        goto out;
      if ((r = grow(&le, &lcap, ln + 1)) < 0) goto out;
      r = -EINVAL;
      le[ln++] = x;
    } else {
      c = save;
    }
  }
  /* into the sum, by (kind, name); room for all of the line's first, so
   * nothing fails half-way */
  if ((r = grow(&s->e, &s->cap, s->n + ln)) < 0) goto out;
  for (size_t i = 0; i < ln; i++) {
    size_t j = 0;
    while (j < s->n && !(s->e[j].kind == le[i].kind && strcmp(s->e[j].name, le[i].name) == 0)) j++;
    if (j == s->n) {
      s->e[s->n++] = le[i];
      continue;
    }
    s->e[j].cpu_tenths += le[i].cpu_tenths;
    s->e[j].samples += le[i].samples;
  }
  s->own_tenths += own;
  s->lines++;
  r = 0;
out:
  free(le);
  return r;
}

size_t pt_tcl_quote(const char *name, char *out, size_t cap) {
  size_t n = 0;
  if (!cap) return 0;
#define PUT(ch) do { if (n + 1 < cap) out[n++] = (char)(ch); } while (0)
  int quote = !name[0];
  for (const unsigned char *q = (const unsigned char *)name; *q; q++)
    if (delim(*q)) quote = 1;
  if (quote) PUT('"');
  for (const unsigned char *q = (const unsigned char *)name; *q; q++) {
    if (!quote) { PUT(*q); continue; }
    if (*q == '"' || *q == '\\') { PUT('\\'); PUT(*q); }
    else if (*q < 0x20 || *q == 0x7f) {
      static const char hx[] = "0123456789abcdef";
      PUT('\\'); PUT('x'); PUT(hx[*q >> 4]); PUT(hx[*q & 15]);
    } else {
      PUT(*q);
    }
  }
  if (quote) PUT('"');
#undef PUT
  out[n] = 0;
  return n;
}

static int by_cpu(const void *a, const void *b) {
  const pt_tcl_entry *x = a, *y = b;
  if (x->cpu_tenths != y->cpu_tenths) return x->cpu_tenths > y->cpu_tenths ? -1 : 1;
  if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Appends to a growing buffer; *err set on the first failure. */
static void app(char **buf, size_t *len, size_t *cap, int *err, const char *fmt, ...) {
  if (*err) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) { *err = -EINVAL; return; }
  if (*len + (size_t)n + 1 > *cap) {
    size_t nc = *cap ? *cap : 256;
    while (nc < *len + (size_t)n + 1) nc *= 2;
    char *nb = pt_realloc(*buf, nc);
    if (!nb) { *err = -ENOMEM; return; }
    *buf = nb;
    *cap = nc;
  }
  va_start(ap, fmt);
  vsnprintf(*buf + *len, *cap - *len, fmt, ap);
  va_end(ap);
  *len += (size_t)n;
}

char *pt_tcl_format(const pt_tcl_sum *s, size_t nwindows) {
  enum { LISTED = 16 };
  if (!s->n) return NULL;
  pt_tcl_entry *e = pt_malloc(s->n * sizeof *e);
  if (!e) return NULL;
  memcpy(e, s->e, s->n * sizeof *e);
  qsort(e, s->n, sizeof *e, by_cpu);
  char *b = NULL;
  size_t len = 0, cap = 0;
  int err = 0;
  app(&b, &len, &cap, &err, "threads' CPU over the %zu windows merged, summed from their lines "
      "(each thread's CPU clock, the profiler's own work apart: %lld.%lld ms on these threads), "
      "with their samples:", nwindows, (long long)(s->own_tenths / 10),
      (long long)(s->own_tenths % 10));
  uint64_t more_smp = 0;
  int64_t more = 0;
  size_t listed = 0, tail = 0, unlisted_names = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (e[i].kind == PT_TCL_UNLISTED || listed == LISTED) {
      more += e[i].cpu_tenths;
      more_smp += e[i].samples;
      tail++;
      unlisted_names += e[i].kind != PT_TCL_UNLISTED;
      continue;
    }
    char nm[80];
    if (e[i].kind == PT_TCL_NO_NAME) snprintf(nm, sizeof nm, "(no name)");
    else if (e[i].kind == PT_TCL_OTHER_NAMES) snprintf(nm, sizeof nm, "(other names)");
    else pt_tcl_quote(e[i].name, nm, sizeof nm);
    /* no thread count: a thread that ran in several windows is in each
     * window's count, so their sum is no count of threads */
    app(&b, &len, &cap, &err, "%s %s %lld.%lld ms (%llu sample%s)", listed ? "," : "", nm,
        (long long)(e[i].cpu_tenths / 10), (long long)(e[i].cpu_tenths % 10),
        (unsigned long long)e[i].samples, e[i].samples == 1 ? "" : "s");
    listed++;
  }
  if (tail)
    app(&b, &len, &cap, &err, "; %s: %lld.%lld ms (%llu sample%s)",
        unlisted_names ? "the other names" : "names their windows did not list",
        (long long)(more / 10), (long long)(more % 10), (unsigned long long)more_smp,
        more_smp == 1 ? "" : "s");
  free(e);
  if (err) {
    free(b);
    return NULL;
  }
  return b;
}

void pt_tcl_sum_free(pt_tcl_sum *s) {
  free(s->e);
  memset(s, 0, sizeof *s);
}
