/*
 * ptp_perfmap.c - the perf map reader's core (see ptp_perfmap.h).
 *
 * DESIGN: lines are parsed as they are fed and queued (bounds, name into
 * the name buffer); a commit turns the queue into ranges in two linear
 * passes after one sort:
 *  1. the queue's own "skyline": the queued entries' endpoints sorted, a
 *     sweep with a max-heap on queue position gives, for every stretch of
 *     addresses, the latest entry covering it (perf's "later line wins");
 *  2. an overlay: the committed ranges minus what the queue covers, merged
 *     with the queue's ranges.
 * Names live in one growing buffer, referenced by offset (+1; 0 = none);
 * entries a later line covered leave dead bytes there, so a commit compacts
 * the buffer once it is twice what the last compaction left (or near its
 * cap). Everything is bounded by the caps in the header.
 */
#include "prof/symbols/ptp_perfmap.h"
#include "prof/symbols/ptp_sym_map.h"
#include "prof/ptp_alloc.h"
#include "prof/ptp_scan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PM_COMPACT_EVERY 1024u   /* entries between compactions at the name cap */

typedef struct pm_range {
  uint64_t lo, hi;
  uint32_t name;            /* offset + 1 into names; 0 = not kept */
  uint32_t owner;           /* queue position while committing */
} pm_range;

struct ptp_perfmap {
  pm_range *r;              /* committed ranges, sorted, disjoint */
  size_t nr, capr;
  pm_range *q;              /* queued entries, in file order */
  size_t nq, capq;
  char *names;
  size_t nnames, capnames;
  size_t compacted_at;      /* nnames after the last compaction */
  uint64_t compacted_entries;     /* st.entries at the last compaction */
  int skipping;             /* inside a line that was too long */
  size_t ranges_max, names_max;   /* the caps (tests lower them) */
  ptp_perfmap_stats st;
};

int ptp_perfmap_new(ptp_perfmap **out) {
  ptp_perfmap *pm = ptp_calloc(1, sizeof *pm);
  if (!pm) return -ENOMEM;
  pm->ranges_max = PTP_PERFMAP_RANGES_MAX;
  pm->names_max = PTP_PERFMAP_NAMES_MAX;
  *out = pm;
  return 0;
}

void ptp_perfmap_del(ptp_perfmap *pm) {
  if (!pm) return;
  free(pm->r);
  free(pm->q);
  free(pm->names);
  free(pm);
}

void ptp_perfmap_restart(ptp_perfmap *pm) { pm->skipping = 0; }

void ptp_perfmap_set_limits(ptp_perfmap *pm, size_t ranges_max, size_t names_max) {
  pm->ranges_max = ranges_max ? ranges_max : PTP_PERFMAP_RANGES_MAX;
  pm->names_max = names_max ? names_max : PTP_PERFMAP_NAMES_MAX;
}

/* ---- one line ---------------------------------------------------------- */

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* An optional 0x, then 1-16 hex digits. */
static int parse_hex(const char **p, const char *e, uint64_t *v) {
  if (e - *p >= 3 && (*p)[0] == '0' && ((*p)[1] == 'x' || (*p)[1] == 'X') &&
      ptp_scan_hexval((*p)[2]) >= 0)
    *p += 2;
  return ptp_scan_hex(p, e, v);
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t k;
  unsigned lo = 0x80, hi = 0xbf;     /* bounds of the second byte */
  if (c >= 0xc2 && c <= 0xdf) k = 2;
  else if (c >= 0xe0 && c <= 0xef) { k = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
  else if (c >= 0xf0 && c <= 0xf4) { k = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
  else return 0;
  if (n < k || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < k; i++)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return k;
}

static int compact(ptp_perfmap *pm);

/* Appends the name (sanitized, NUL-terminated); *ref = offset + 1, or 0
 * when the buffer is at its cap. */
static int add_name(ptp_perfmap *pm, const char *s, size_t n, uint32_t *ref) {
  *ref = 0;
  if (pm->nnames + n + 1 > pm->names_max) return 0;
  if (pm->nnames + n + 1 > pm->capnames) {
    size_t nc = pm->capnames ? pm->capnames : 4096;
    while (nc < pm->nnames + n + 1) nc *= 2;
    if (nc > pm->names_max) nc = pm->names_max;
    char *g = ptp_realloc(pm->names, nc);
    if (!g) return -ENOMEM;
    pm->names = g;
    pm->capnames = nc;
  }
  char *d = pm->names + pm->nnames;
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    if (u[i] < 0x80) {
      d[i] = (u[i] < 0x20 || u[i] == 0x7f) ? '?' : (char)u[i];
      i++;
      continue;
    }
    size_t k = utf8_len(u + i, n - i);
    if (!k) {
      d[i++] = '?';
      continue;
    }
    memcpy(d + i, u + i, k);
    i += k;
  }
  d[n] = 0;
  *ref = (uint32_t)(pm->nnames + 1);
  pm->nnames += n + 1;
  return 0;
}

static int parse_line(ptp_perfmap *pm, const char *s, size_t n) {
  const char *p = s, *e = s + n;
  if (e > p && e[-1] == '\r') e--;
  while (p < e && is_blank(*p)) p++;
  uint64_t start, size;
  if (parse_hex(&p, e, &start) || p == e || !is_blank(*p)) goto bad;
  while (p < e && is_blank(*p)) p++;
  if (parse_hex(&p, e, &size) || p == e || !is_blank(*p)) goto bad;
  while (p < e && is_blank(*p)) p++;
  if (p == e || size == 0 || size > PTP_PERFMAP_SIZE_MAX || start > UINT64_MAX - size) goto bad;
  if (pm->nr >= pm->ranges_max) {
    pm->st.dropped++;
    return 0;
  }
  if (pm->nq == pm->capq) {
    size_t nc = pm->capq ? pm->capq * 2 : 256;
    pm_range *g = ptp_realloc(pm->q, nc * sizeof *g);
    if (!g) return -ENOMEM;
    pm->q = g;
    pm->capq = nc;
  }
  /* At the name cap, a compaction may free what covered entries left: at
   * most once per PM_COMPACT_EVERY entries, so that a map whose live names
   * fill the cap costs O(ranges / PM_COMPACT_EVERY) per line, not O(ranges). */
  if (pm->nnames + (size_t)(e - p) + 1 > pm->names_max &&
      pm->st.entries - pm->compacted_entries >= PM_COMPACT_EVERY) {
    int rc = ptp_perfmap_commit(pm);
    if (rc == 0) rc = compact(pm);
    if (rc) return rc;
  }
  uint32_t ref;
  int rc = add_name(pm, p, (size_t)(e - p), &ref);
  if (rc) return rc;
  if (!ref) pm->st.unnamed++;
  pm->q[pm->nq++] = (pm_range){ start, start + size, ref, 0 };
  pm->st.entries++;
  return 0;
bad:
  pm->st.bad++;
  return 0;
}

int ptp_perfmap_feed(ptp_perfmap *pm, const char *buf, size_t len, size_t *used) {
  size_t off = 0;
  int rc = 0;
  while (off < len) {
    const char *nl = memchr(buf + off, '\n', len - off);
    if (pm->skipping) {
      if (!nl) {
        off = len;
        break;
      }
      off = (size_t)(nl - buf) + 1;
      pm->skipping = 0;
      continue;
    }
    if (!nl) {
      if (len - off > PTP_PERFMAP_LINE_MAX) {
        pm->st.lines++;
        pm->st.too_long++;
        pm->skipping = 1;
        off = len;
      }
      break;
    }
    size_t ll = (size_t)(nl - (buf + off));
    if (ll > PTP_PERFMAP_LINE_MAX) {
      pm->st.too_long++;
    } else if ((rc = parse_line(pm, buf + off, ll)) != 0) {
      break;
    }
    pm->st.lines++;
    off += ll + 1;
    if (pm->nq >= PTP_PERFMAP_QUEUE_MAX && (rc = ptp_perfmap_commit(pm)) != 0) break;
  }
  *used = off;
  return rc;
}

/* ---- commit -------------------------------------------------------------- */

typedef struct pm_event {
  uint64_t x;
  uint32_t idx;
  uint32_t start;          /* 1: the entry begins at x, 0: it ends there */
} pm_event;

static int cmp_event(const void *a, const void *b) {
  const pm_event *x = a, *y = b;
  return x->x < y->x ? -1 : x->x > y->x;
}

static void heap_push(uint32_t *h, size_t *n, uint32_t v) {
  size_t i = (*n)++;
  while (i > 0 && h[(i - 1) / 2] < v) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = v;
}

static void heap_pop(uint32_t *h, size_t *n) {
  uint32_t v = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] > h[c]) c++;
    if (h[c] <= v) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = v;
}

/* Step 1: the queue as sorted disjoint ranges, each stretch owned by the
 * latest entry covering it. *out has room for 2 * nq ranges. */
static int queue_skyline(const ptp_perfmap *pm, pm_range *out, size_t *nout) {
  size_t nq = pm->nq, ne = 2 * nq;
  pm_event *ev = ptp_malloc(ne * sizeof *ev);
  uint32_t *heap = ptp_malloc(nq * sizeof *heap);
  unsigned char *ended = ptp_calloc(nq, 1);
  int rc = -ENOMEM;
  if (!ev || !heap || !ended) goto out;
  for (size_t i = 0; i < nq; i++) {
    ev[2 * i] = (pm_event){ pm->q[i].lo, (uint32_t)i, 1 };
    ev[2 * i + 1] = (pm_event){ pm->q[i].hi, (uint32_t)i, 0 };
  }
  qsort(ev, ne, sizeof *ev, cmp_event);
  size_t n = 0, hn = 0, k = 0;
  while (k < ne) {
    uint64_t x = ev[k].x;
    for (; k < ne && ev[k].x == x; k++) {
      if (ev[k].start) heap_push(heap, &hn, ev[k].idx);
      else ended[ev[k].idx] = 1;
    }
    while (hn && ended[heap[0]]) heap_pop(heap, &hn);
    if (!hn || k == ne) continue;
    uint32_t w = heap[0];
    uint64_t nx = ev[k].x;
    if (n && out[n - 1].hi == x && out[n - 1].owner == w) {
      out[n - 1].hi = nx;
    } else {
      out[n++] = (pm_range){ x, nx, pm->q[w].name, w };
    }
  }
  *nout = n;
  rc = 0;
out:
  free(ev);
  free(heap);
  free(ended);
  return rc;
}

/* Copies the names the ranges still use into a new buffer (the queue must
 * be empty: it refers to the old one). On -ENOMEM nothing changed. */
static int compact(ptp_perfmap *pm) {
  ptp_u64map seen = { 0 };
  uint32_t *ref = ptp_malloc((pm->nr ? pm->nr : 1) * sizeof *ref);
  size_t cap = 0, n = 0;
  char *nb = NULL;
  int rc = -ENOMEM;
  if (!ref) goto out;
  /* New offsets first (nothing is changed until every allocation is done). */
  for (size_t i = 0; i < pm->nr; i++) {
    uint32_t old = pm->r[i].name, v;
    ref[i] = 0;
    if (!old) continue;
    if (ptp_u64map_get(&seen, old, &v)) {
      ref[i] = v;
      continue;
    }
    if (ptp_u64map_put(&seen, old, (uint32_t)(cap + 1))) goto out;
    ref[i] = (uint32_t)(cap + 1);
    cap += strlen(pm->names + old - 1) + 1;
  }
  nb = ptp_malloc(cap ? cap : 1);
  if (!nb) goto out;
  for (size_t i = 0; i < pm->nr; i++) {
    if (!ref[i] || ref[i] - 1 < n) { pm->r[i].name = ref[i]; continue; }   /* copied already */
    const char *s = pm->names + pm->r[i].name - 1;
    size_t len = strlen(s) + 1;
    memcpy(nb + n, s, len);
    n += len;
    pm->r[i].name = ref[i];
  }
  free(pm->names);
  pm->names = nb;
  nb = NULL;
  pm->capnames = cap ? cap : 1;
  pm->nnames = n;
  pm->compacted_at = n;
  pm->compacted_entries = pm->st.entries;
  rc = 0;
out:
  ptp_u64map_free(&seen);
  free(ref);
  free(nb);
  return rc;
}

int ptp_perfmap_commit(ptp_perfmap *pm) {
  if (pm->nq == 0) return 0;
  size_t nn = 0, nout = 0;
  pm_range *nw = ptp_malloc(2 * pm->nq * sizeof *nw);
  pm_range *out = NULL;
  int rc = nw ? queue_skyline(pm, nw, &nn) : -ENOMEM;
  if (rc) goto out;
  /* Step 2: the committed ranges minus what the queue covers (pieces in
   * order), merged with the queue's ranges. At most nr + nn pieces (each
   * queued range splits at most one committed range in two) plus nn. */
  out = ptp_malloc((pm->nr + 2 * nn + 1) * sizeof *out);
  if (!out) { rc = -ENOMEM; goto out; }
  size_t j = 0, t = 0;
  for (size_t i = 0; i < pm->nr; i++) {
    const pm_range *s = &pm->r[i];
    uint64_t a = s->lo;
    while (j < nn && nw[j].hi <= a) j++;
    for (size_t k = j; a < s->hi;) {
      if (k >= nn || nw[k].lo >= s->hi) {
        while (t < nn && nw[t].lo < a) out[nout++] = nw[t++];
        out[nout++] = (pm_range){ a, s->hi, s->name, 0 };
        break;
      }
      if (nw[k].lo > a) {
        while (t < nn && nw[t].lo < a) out[nout++] = nw[t++];
        out[nout++] = (pm_range){ a, nw[k].lo, s->name, 0 };
      }
      if (nw[k].hi > a) a = nw[k].hi;
      k++;
    }
  }
  while (t < nn) out[nout++] = nw[t++];
  free(pm->r);
  pm->r = out;
  pm->nr = nout;
  pm->capr = pm->nr + 2 * nn + 1;
  out = NULL;
out:
  if (rc) pm->st.dropped += pm->nq;
  pm->nq = 0;
  free(nw);
  free(out);
  if (rc == 0 && pm->nnames > ((size_t)1 << 20) && pm->nnames > 2 * pm->compacted_at)
    (void)compact(pm);   /* best effort: without memory the old buffer stays */
  return rc;
}

/* ---- lookups ------------------------------------------------------------- */

const char *ptp_perfmap_lookup(const ptp_perfmap *pm, uint64_t addr, uint64_t *lo, uint64_t *hi) {
  size_t a = 0, b = pm->nr;
  while (a < b) {                        /* last range with lo <= addr */
    size_t mid = a + (b - a) / 2;
    if (pm->r[mid].lo <= addr) a = mid + 1;
    else b = mid;
  }
  if (a == 0 || addr >= pm->r[a - 1].hi) return NULL;
  const pm_range *x = &pm->r[a - 1];
  if (lo) *lo = x->lo;
  if (hi) *hi = x->hi;
  return x->name ? pm->names + x->name - 1 : NULL;
}

const char *ptp_perfmap_range(const ptp_perfmap *pm, size_t i, uint64_t *lo, uint64_t *hi) {
  if (i >= pm->nr) return NULL;
  if (lo) *lo = pm->r[i].lo;
  if (hi) *hi = pm->r[i].hi;
  return pm->r[i].name ? pm->names + pm->r[i].name - 1 : NULL;
}

void ptp_perfmap_get_stats(const ptp_perfmap *pm, ptp_perfmap_stats *out) {
  *out = pm->st;
  out->ranges = pm->nr;
  out->name_bytes = pm->nnames;
}
