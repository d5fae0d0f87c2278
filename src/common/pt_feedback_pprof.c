/*
 * pt_feedback_pprof.c - gzip + DEFLATE decoder and pprof summary (see
 * pt_feedback_pprof.h). Written from RFC 1951/1952 and the pprof field list
 * (proto/profile.proto, docs/profiling.md).
 *
 * Why not zlib: normal and release builds of the TUI must review a profile
 * without linking zlib (tests/build/no_profiler_test.sh checks their direct
 * dependencies), and reading is small. The decoder accepts exactly what
 * zlib's inflate accepts for one gzip member: tests/common/fuzz_feedback_pprof.c
 * checks every fuzzed input against zlib.
 *
 * Invariants of the inflater: `in`/`pos` never read past `len` (a read past
 * the end is an error), `out` never grows past `max`, and back-references are
 * checked against the bytes produced so far. Huffman codes are accepted as
 * zlib accepts them: complete, or (literal/length and distance codes only)
 * a single code of one bit.
 */
#include "common/pt_feedback_pprof.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- DEFLATE ---------------- */

typedef struct inflater {
  const uint8_t *in;
  size_t len, pos;
  uint32_t bitbuf;
  int bitcnt;
  uint8_t *out;
  size_t n, cap, max;
  int err; /* sticky: first error seen */
} inflater;

#define MAXBITS 15
#define MAXLCODES 286
#define MAXDCODES 30

typedef struct huff {
  short count[MAXBITS + 1];
  short symbol[288];
} huff;

static int bits(inflater *s, int need) {
  uint32_t v = s->bitbuf;
  while (s->bitcnt < need) {
    if (s->pos >= s->len) { s->err = -EINVAL; return 0; }
    v |= (uint32_t)s->in[s->pos++] << s->bitcnt;
    s->bitcnt += 8;
  }
  s->bitbuf = v >> need;
  s->bitcnt -= need;
  return (int)(v & ((1u << need) - 1));
}

static int put(inflater *s, uint8_t b) {
  if (s->n == s->cap) {
    if (s->n >= s->max) { s->err = -EFBIG; return -1; }
    size_t cap = s->cap ? s->cap * 2 : 65536;
    if (cap > s->max) cap = s->max;
    uint8_t *o = realloc(s->out, cap);
    if (!o) { s->err = -ENOMEM; return -1; }
    s->out = o;
    s->cap = cap;
  }
  s->out[s->n++] = b;
  return 0;
}

/* Builds a canonical Huffman decoder from code lengths. Returns 0 when the
 * code is complete (or has no codes at all), -1 when over-subscribed, and
 * the number of unused codes (> 0) when it is incomplete. */
static int huff_build(huff *h, const short *length, int n) {
  memset(h->count, 0, sizeof h->count);
  for (int sym = 0; sym < n; sym++) h->count[length[sym]]++;
  if (h->count[0] == n) return 0;
  int left = 1;
  for (int l = 1; l <= MAXBITS; l++) {
    left <<= 1;
    left -= h->count[l];
    if (left < 0) return -1;
  }
  int unused = left;
  short offs[MAXBITS + 1];
  offs[1] = 0;
  for (int l = 1; l < MAXBITS; l++) offs[l + 1] = (short)(offs[l] + h->count[l]);
  for (int sym = 0; sym < n; sym++)
    if (length[sym] != 0) h->symbol[offs[length[sym]]++] = (short)sym;
  return unused;
}

/* zlib's rule for literal/length and distance codes: an incomplete code is
 * damage unless it is a single one-bit code (then its other bit pattern is
 * an error only if it appears). */
static int huff_usable(const huff *h, int n, int r) {
  if (r < 0) return 0;
  if (r == 0) return 1;
  return h->count[1] == 1 && h->count[0] == n - 1;
}

static int decode(inflater *s, const huff *h) {
  int code = 0, first = 0, index = 0;
  for (int l = 1; l <= MAXBITS; l++) {
    code |= bits(s, 1);
    if (s->err) return -1;
    int count = h->count[l];
    if (code - count < first) return h->symbol[index + (code - first)];
    index += count;
    first += count;
    first <<= 1;
    code <<= 1;
  }
  s->err = -EINVAL;
  return -1;
}

static const short lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27,
                                31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const short lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                               2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const short dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129,
                                193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
                                6145, 8193, 12289, 16385, 24577};
static const short dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                               6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static int codes(inflater *s, const huff *lencode, const huff *distcode) {
  for (;;) {
    int sym = decode(s, lencode);
    if (s->err) return s->err;
    if (sym < 256) {
      if (put(s, (uint8_t)sym) < 0) return s->err;
    } else if (sym == 256) {
      return 0;
    } else {
      sym -= 257;
      if (sym >= 29) return s->err = -EINVAL;
      int len = lbase[sym] + bits(s, lext[sym]);
      int dsym = decode(s, distcode);
      if (s->err) return s->err;
      if (dsym >= 30) return s->err = -EINVAL;
      size_t dist = (size_t)dbase[dsym] + (size_t)bits(s, dext[dsym]);
      if (s->err) return s->err;
      if (dist > s->n) return s->err = -EINVAL;
      while (len--) {
        if (put(s, s->out[s->n - dist]) < 0) return s->err;
      }
    }
  }
}

static int stored(inflater *s) {
  s->bitbuf = 0;
  s->bitcnt = 0; /* discard to the byte boundary */
  if (s->pos + 4 > s->len) return s->err = -EINVAL;
  unsigned len = s->in[s->pos] | (unsigned)s->in[s->pos + 1] << 8;
  unsigned nlen = s->in[s->pos + 2] | (unsigned)s->in[s->pos + 3] << 8;
  s->pos += 4;
  if (len != (~nlen & 0xffff)) return s->err = -EINVAL;
  if (s->pos + len > s->len) return s->err = -EINVAL;
  for (unsigned i = 0; i < len; i++)
    if (put(s, s->in[s->pos + i]) < 0) return s->err;
  s->pos += len;
  return 0;
}

static huff fixed_lencode, fixed_distcode;
static pthread_once_t fixed_once = PTHREAD_ONCE_INIT;

static void fixed_build(void) {
  {
    short lengths[288];
    int sym = 0;
    for (; sym < 144; sym++) lengths[sym] = 8;
    for (; sym < 256; sym++) lengths[sym] = 9;
    for (; sym < 280; sym++) lengths[sym] = 7;
    for (; sym < 288; sym++) lengths[sym] = 8;
    (void)huff_build(&fixed_lencode, lengths, 288);
    /* 30 of 32 five-bit codes: incomplete by design (RFC 1951 3.2.6);
     * codes 30 and 31 are rejected by codes() if they appear. */
    for (sym = 0; sym < 30; sym++) lengths[sym] = 5;
    (void)huff_build(&fixed_distcode, lengths, 30);
  }
}

static int fixed(inflater *s) {
  pthread_once(&fixed_once, fixed_build);
  return codes(s, &fixed_lencode, &fixed_distcode);
}

static int dynamic(inflater *s) {
  static const short order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
  short lengths[MAXLCODES + MAXDCODES];
  huff lencode, distcode;
  int nlen = bits(s, 5) + 257;
  int ndist = bits(s, 5) + 1;
  int ncode = bits(s, 4) + 4;
  if (s->err) return s->err;
  if (nlen > MAXLCODES || ndist > MAXDCODES) return s->err = -EINVAL;
  int index;
  for (index = 0; index < ncode; index++) lengths[order[index]] = (short)bits(s, 3);
  for (; index < 19; index++) lengths[order[index]] = 0;
  if (s->err) return s->err;
  if (huff_build(&lencode, lengths, 19) != 0) return s->err = -EINVAL;
  index = 0;
  while (index < nlen + ndist) {
    int sym = decode(s, &lencode);
    if (s->err) return s->err;
    if (sym < 16) {
      lengths[index++] = (short)sym;
    } else {
      short len = 0;
      int rep;
      if (sym == 16) {
        if (index == 0) return s->err = -EINVAL;
        len = lengths[index - 1];
        rep = 3 + bits(s, 2);
      } else if (sym == 17) {
        rep = 3 + bits(s, 3);
      } else {
        rep = 11 + bits(s, 7);
      }
      if (s->err) return s->err;
      if (index + rep > nlen + ndist) return s->err = -EINVAL;
      while (rep--) lengths[index++] = len;
    }
  }
  if (lengths[256] == 0) return s->err = -EINVAL; /* no end-of-block code */
  if (!huff_usable(&lencode, nlen, huff_build(&lencode, lengths, nlen))) return s->err = -EINVAL;
  if (!huff_usable(&distcode, ndist, huff_build(&distcode, lengths + nlen, ndist)))
    return s->err = -EINVAL;
  return codes(s, &lencode, &distcode);
}

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_build(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
  pthread_once(&crc_once, crc_build);
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

int pt_gunzip(const uint8_t *in, size_t len, size_t max_out, uint8_t **out, size_t *outlen) {
  *out = NULL;
  *outlen = 0;
  if (!max_out) max_out = PT_PPROF_MAX_OUT;
  if (len < 18 || in[0] != 0x1f || in[1] != 0x8b || in[2] != 8) return -EINVAL;
  uint8_t flg = in[3];
  size_t pos = 10;
  if (flg & 0xe0) return -EINVAL; /* reserved bits */
  if (flg & 4) { /* FEXTRA */
    if (pos + 2 > len) return -EINVAL;
    size_t xlen = in[pos] | (size_t)in[pos + 1] << 8;
    pos += 2 + xlen;
  }
  if (flg & 8) { while (pos < len && in[pos]) pos++; pos++; } /* FNAME */
  if (flg & 16) { while (pos < len && in[pos]) pos++; pos++; } /* FCOMMENT */
  if (flg & 2) { /* FHCRC: the low 16 bits of the CRC-32 of the header so far */
    if (pos + 2 > len) return -EINVAL;
    uint32_t hcrc = in[pos] | (uint32_t)in[pos + 1] << 8;
    if (hcrc != (crc32_update(0, in, pos) & 0xffff)) return -EINVAL;
    pos += 2;
  }
  if (pos >= len) return -EINVAL;
  inflater s;
  memset(&s, 0, sizeof s);
  s.in = in;
  s.len = len;
  s.pos = pos;
  s.max = max_out;
  int last;
  do {
    last = bits(&s, 1);
    int type = bits(&s, 2);
    if (s.err) break;
    if (type == 0) stored(&s);
    else if (type == 1) fixed(&s);
    else if (type == 2) dynamic(&s);
    else s.err = -EINVAL;
  } while (!last && !s.err);
  if (!s.err) {
    /* Trailer: CRC-32 and ISIZE, byte aligned after the last block. */
    if (s.pos + 8 > s.len) s.err = -EINVAL;
    else {
      const uint8_t *t = s.in + s.pos;
      uint32_t crc = t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
      uint32_t isize = t[4] | (uint32_t)t[5] << 8 | (uint32_t)t[6] << 16 | (uint32_t)t[7] << 24;
      if (crc != crc32_update(0, s.out, s.n) || isize != (uint32_t)s.n) s.err = -EINVAL;
    }
  }
  if (s.err) {
    free(s.out);
    return s.err;
  }
  if (!s.out) s.out = malloc(1);
  if (!s.out) return -ENOMEM;
  *out = s.out;
  *outlen = s.n;
  return 0;
}

/* ---------------- protobuf wire reading ---------------- */

typedef struct pbr {
  const uint8_t *p, *end;
  int err;
} pbr;

static uint64_t pb_varint(pbr *r) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) { r->err = 1; return 0; }
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  r->err = 1;
  return 0;
}

/* Reads the next field. Returns 1 with *field and *wt and, for wire type 2, the
 * sub-buffer in *sub; for varints *v. Fixed32 and fixed64 values are skipped (*v = 0).
 * Returns 0 at the end, -1 on error. */
static int pb_next(pbr *r, uint32_t *field, int *wt, uint64_t *v, pbr *sub) {
  if (r->p >= r->end) return 0;
  uint64_t key = pb_varint(r);
  if (r->err) return -1;
  *field = (uint32_t)(key >> 3);
  *wt = (int)(key & 7);
  switch (*wt) {
  case 0: *v = pb_varint(r); break;
  case 1: if (r->end - r->p < 8) return -1; *v = 0; r->p += 8; break;
  case 5: if (r->end - r->p < 4) return -1; *v = 0; r->p += 4; break;
  case 2: {
    uint64_t n = pb_varint(r);
    if (r->err || n > (uint64_t)(r->end - r->p)) return -1;
    sub->p = r->p;
    sub->end = r->p + n;
    sub->err = 0;
    r->p += n;
    break;
  }
  default: return -1;
  }
  return r->err ? -1 : 1;
}

/* A repeated uint64 field that may be packed (wt 2) or not (wt 0). Calls
 * fn for each value. Returns 0 or -1. */
typedef int (*u64_fn)(void *ctx, uint64_t v);
static int pb_repeated(int wt, uint64_t v, pbr *sub, u64_fn fn, void *ctx) {
  if (wt == 0) return fn(ctx, v);
  if (wt != 2) return -1;
  while (sub->p < sub->end) {
    uint64_t x = pb_varint(sub);
    if (sub->err) return -1;
    if (fn(ctx, x) < 0) return -1;
  }
  return 0;
}

/* ---------------- pprof ---------------- */

typedef struct loc { uint64_t id, func; } loc;
typedef struct fn { uint64_t id; int64_t name; int64_t flat, cum; uint64_t seen; } fn;

typedef struct pstr { const uint8_t *p; size_t n; } pstr;

typedef struct prof {
  pstr *strs; /* point into the decompressed profile */
  size_t nstr, capstr;
  loc *locs;
  size_t nloc, caploc;
  fn *fns;
  size_t nfn, capfn;
  int64_t st_type[8]; /* sample_type type string indices */
  size_t nst;
} prof;

#define GROW(arr, n, cap)                                              \
  do {                                                                 \
    if ((n) == (cap)) {                                                \
      size_t nc_ = (cap) ? (cap) * 2 : 64;                             \
      void *p_ = realloc((arr), nc_ * sizeof *(arr));                  \
      if (!p_) return -ENOMEM;                                         \
      (arr) = p_;                                                      \
      (cap) = nc_;                                                     \
    }                                                                  \
  } while (0)

static int cmp_loc(const void *a, const void *b) {
  const loc *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}
static int cmp_fn(const void *a, const void *b) {
  const fn *x = a, *y = b;
  return x->id < y->id ? -1 : x->id > y->id;
}

static loc *find_loc(prof *p, uint64_t id) {
  loc key = {id, 0};
  if (!p->nloc) return NULL;
  return bsearch(&key, p->locs, p->nloc, sizeof *p->locs, cmp_loc);
}
static fn *find_fn(prof *p, uint64_t id) {
  fn key = {.id = id};
  if (!p->nfn) return NULL;
  return bsearch(&key, p->fns, p->nfn, sizeof *p->fns, cmp_fn);
}

/* Pass 1: strings, functions, locations, sample types, scalars. */
static int pass1(prof *p, const uint8_t *d, size_t len, pt_pprof_summary *out) {
  pbr r = {d, d + len, 0};
  uint32_t field;
  int wt, k;
  uint64_t v;
  pbr sub;
  while ((k = pb_next(&r, &field, &wt, &v, &sub)) == 1) {
    if (field == 6 && wt == 2) {
      GROW(p->strs, p->nstr, p->capstr);
      p->strs[p->nstr].p = sub.p;
      p->strs[p->nstr].n = (size_t)(sub.end - sub.p);
      p->nstr++;
    } else if (field == 5 && wt == 2) {
      GROW(p->fns, p->nfn, p->capfn);
      fn f = {0, 0, 0, 0, 0};
      uint32_t ff;
      int fwt;
      uint64_t fv;
      pbr s2;
      int kk;
      while ((kk = pb_next(&sub, &ff, &fwt, &fv, &s2)) == 1) {
        if (ff == 1 && fwt == 0) f.id = fv;
        if (ff == 2 && fwt == 0) f.name = (int64_t)fv;
      }
      if (kk < 0) return -EINVAL;
      p->fns[p->nfn++] = f;
    } else if (field == 4 && wt == 2) {
      GROW(p->locs, p->nloc, p->caploc);
      loc l = {0, 0};
      uint32_t ff;
      int fwt;
      uint64_t fv;
      pbr s2;
      int kk, first_line = 1;
      while ((kk = pb_next(&sub, &ff, &fwt, &fv, &s2)) == 1) {
        if (ff == 1 && fwt == 0) l.id = fv;
        /* Line: inlined callee first, physical function last; the leaf
         * function of a location is its first Line. */
        if (ff == 4 && fwt == 2 && first_line) {
          uint32_t lf;
          int lwt;
          uint64_t lv;
          pbr s3;
          int k3;
          while ((k3 = pb_next(&s2, &lf, &lwt, &lv, &s3)) == 1)
            if (lf == 1 && lwt == 0) l.func = lv;
          if (k3 < 0) return -EINVAL;
          first_line = 0;
        }
      }
      if (kk < 0) return -EINVAL;
      p->locs[p->nloc++] = l;
    } else if (field == 1 && wt == 2) {
      uint32_t ff;
      int fwt;
      uint64_t fv;
      pbr s2;
      int64_t type = 0;
      int kk;
      while ((kk = pb_next(&sub, &ff, &fwt, &fv, &s2)) == 1)
        if (ff == 1 && fwt == 0) type = (int64_t)fv;
      if (kk < 0) return -EINVAL;
      if (p->nst < 8) p->st_type[p->nst] = type;
      p->nst++;
    } else if (field == 9 && wt == 0) {
      out->time_ns = (int64_t)v;
    } else if (field == 10 && wt == 0) {
      out->duration_ns = (int64_t)v;
    } else if (field == 12 && wt == 0) {
      out->period = (int64_t)v;
    }
  }
  if (k < 0) return -EINVAL;
  if (p->nstr == 0 || p->strs[0].n != 0) return -EINVAL; /* string 0 must be "" */
  if (p->nst == 0) return -EINVAL;
  /* qsort/bsearch take no NULL base, not even for zero elements. */
  if (p->nloc) qsort(p->locs, p->nloc, sizeof *p->locs, cmp_loc);
  if (p->nfn) qsort(p->fns, p->nfn, sizeof *p->fns, cmp_fn);
  return 0;
}

typedef struct sample_acc {
  uint64_t ids[256];
  size_t nids;
  int64_t vals[8];
  size_t nvals;
} sample_acc;

static int acc_id(void *ctx, uint64_t v) {
  sample_acc *a = ctx;
  if (a->nids < 256) a->ids[a->nids] = v;
  a->nids++;
  return 0;
}
static int acc_val(void *ctx, uint64_t v) {
  sample_acc *a = ctx;
  if (a->nvals < 8) a->vals[a->nvals] = (int64_t)v;
  a->nvals++;
  return 0;
}

static int pass2(prof *p, const uint8_t *d, size_t len, size_t count_idx, pt_pprof_summary *out) {
  pbr r = {d, d + len, 0};
  uint32_t field;
  int wt, k;
  uint64_t v;
  pbr sub;
  uint64_t stamp = 0;
  while ((k = pb_next(&r, &field, &wt, &v, &sub)) == 1) {
    if (field != 2 || wt != 2) continue;
    sample_acc a;
    a.nids = a.nvals = 0;
    uint32_t ff;
    int fwt;
    uint64_t fv;
    pbr s2;
    int kk;
    while ((kk = pb_next(&sub, &ff, &fwt, &fv, &s2)) == 1) {
      if (ff == 1 && pb_repeated(fwt, fv, &s2, acc_id, &a) < 0) return -EINVAL;
      if (ff == 2 && pb_repeated(fwt, fv, &s2, acc_val, &a) < 0) return -EINVAL;
    }
    if (kk < 0) return -EINVAL;
    if (a.nvals != p->nst) return -EINVAL; /* one value per sample type */
    int64_t n = count_idx < 8 ? a.vals[count_idx] : 0;
    /* Counts come from the file: one that overflows a sum is damage. */
    if (__builtin_add_overflow(out->samples, n, &out->samples)) return -EINVAL;
    out->n_stacks++;
    stamp++;
    size_t depth = a.nids < 256 ? a.nids : 256;
    for (size_t i = 0; i < depth; i++) {
      loc *l = find_loc(p, a.ids[i]);
      if (!l) return -EINVAL; /* sample points at a missing location */
      fn *f = find_fn(p, l->func);
      if (!f) continue;
      if (i == 0 && __builtin_add_overflow(f->flat, n, &f->flat)) return -EINVAL;
      if (f->seen != stamp) { /* recursion counts once */
        if (__builtin_add_overflow(f->cum, n, &f->cum)) return -EINVAL;
        f->seen = stamp;
      }
    }
  }
  return k < 0 ? -EINVAL : 0;
}

static int str_is(prof *p, int64_t idx, const char *s) {
  if (idx < 0 || (size_t)idx >= p->nstr) return 0;
  size_t n = strlen(s);
  return p->strs[idx].n == n && memcmp(p->strs[idx].p, s, n) == 0;
}

static char *str_dup(prof *p, int64_t idx) {
  if (idx <= 0 || (size_t)idx >= p->nstr) return strdup("?");
  size_t n = p->strs[idx].n;
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, p->strs[idx].p, n);
  s[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20) s[i] = '?'; /* no control chars on screen */
  return s;
}

static int cmp_top(const void *a, const void *b) {
  const fn *x = a, *y = b;
  if (x->flat != y->flat) return x->flat > y->flat ? -1 : 1;
  if (x->cum != y->cum) return x->cum > y->cum ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

void pt_pprof_summary_clear(pt_pprof_summary *s) {
  for (size_t i = 0; i < s->n_top; i++) free(s->top[i].name);
  memset(s, 0, sizeof *s);
}

int pt_pprof_summarize(const uint8_t *data, size_t len, size_t top_n, pt_pprof_summary *out) {
  memset(out, 0, sizeof *out);
  if (top_n > PT_PPROF_TOP_MAX) top_n = PT_PPROF_TOP_MAX;
  uint8_t *raw = NULL;
  size_t rawlen = len;
  const uint8_t *d = data;
  if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    int r = pt_gunzip(data, len, 0, &raw, &rawlen);
    if (r < 0) return r;
    d = raw;
  }
  prof p;
  memset(&p, 0, sizeof p);
  int r = pass1(&p, d, rawlen, out);
  size_t count_idx = 0;
  if (r == 0) {
    for (size_t i = 0; i < p.nst && i < 8; i++)
      if (str_is(&p, p.st_type[i], "samples")) { count_idx = i; break; }
    for (size_t i = 0; i < p.nst && i < 8; i++) {
      /* Comma-separated sample type names, for the review screen. */
      size_t used = strlen(out->sample_types);
      char *t = str_dup(&p, p.st_type[i]);
      if (!t) { r = -ENOMEM; break; }
      snprintf(out->sample_types + used, sizeof out->sample_types - used, "%s%s", i ? "," : "", t);
      free(t);
    }
  }
  if (r == 0) r = pass2(&p, d, rawlen, count_idx, out);
  if (r == 0) {
    out->n_functions = p.nfn;
    out->n_locations = p.nloc;
    if (p.nfn) qsort(p.fns, p.nfn, sizeof *p.fns, cmp_top);
    for (size_t i = 0; i < p.nfn && out->n_top < top_n; i++) {
      if (p.fns[i].flat == 0 && p.fns[i].cum == 0) continue;
      pt_pprof_func *t = &out->top[out->n_top];
      t->name = str_dup(&p, p.fns[i].name);
      if (!t->name) { r = -ENOMEM; break; }
      t->flat = p.fns[i].flat;
      t->cum = p.fns[i].cum;
      out->n_top++;
    }
  }
  free(p.strs);
  free(p.locs);
  free(p.fns);
  free(raw);
  if (r < 0) pt_pprof_summary_clear(out);
  return r;
}
