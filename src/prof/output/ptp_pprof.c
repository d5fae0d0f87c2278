/*
 * ptp_pprof.c - see ptp_pprof.h.
 *
 * Three passes over the window:
 *  1. every frame address (leaf as is, callers return address - 1) gets a
 *     location id through a hash map; the ids of each sample are kept in
 *     one flat array;
 *  2. each distinct address is symbolized once (the symbolizer caches across
 *     dumps too); its frames become Lines whose functions are deduplicated
 *     by (name, system_name, file, start_line), strings by content;
 *  3. the Profile message is written with ptp_pb_wire, string table last (field
 *     order is free in protobuf), then gzip'ed in one member.
 * Invariants: string index 0 is ""; every id written is >= 1 and unique;
 * every location id a sample names exists; every Line has a function.
 */
#include "prof/output/ptp_pprof.h"
#include "prof/output/ptp_strbuf.h"
#include "prof/output/ptp_pb_wire.h"
#include "prof/output/ptp_gzip.h"
#include "prof/symbols/ptp_sym_map.h"
#include "prof/ptp_alloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* profile.proto field numbers (docs/pprof-format.md) */
enum {
  P_SAMPLE_TYPE = 1, P_SAMPLE = 2, P_MAPPING = 3, P_LOCATION = 4, P_FUNCTION = 5,
  P_STRING_TABLE = 6, P_TIME_NANOS = 9, P_DURATION_NANOS = 10, P_PERIOD_TYPE = 11,
  P_PERIOD = 12, P_COMMENT = 13,
  VT_TYPE = 1, VT_UNIT = 2,
  S_LOCATION_ID = 1, S_VALUE = 2, S_LABEL = 3,
  L_KEY = 1, L_STR = 2, L_NUM = 3,
  M_ID = 1, M_START = 2, M_LIMIT = 3, M_OFFSET = 4, M_FILENAME = 5, M_BUILD_ID = 6,
  M_HAS_FUNCTIONS = 7, M_HAS_FILENAMES = 8, M_HAS_LINE_NUMBERS = 9, M_HAS_INLINE_FRAMES = 10,
  LOC_ID = 1, LOC_MAPPING_ID = 2, LOC_ADDRESS = 3, LOC_LINE = 4,
  LINE_FUNCTION_ID = 1, LINE_LINE = 2, LINE_COLUMN = 3,
  F_ID = 1, F_NAME = 2, F_SYSTEM_NAME = 3, F_FILENAME = 4, F_START_LINE = 5,
};

const char *ptp_pprof_drop_name(int cause) {
  const char *n = ptp_drop_name(cause);
  return n ? n : "?";
}

typedef struct enc_line {
  uint32_t func;       /* function index (id = func + 1) */
  int64_t line, column;
} enc_line;

typedef struct enc_loc {
  uint64_t addr;
  int32_t mapping;     /* -1: none */
  uint32_t first_line, nlines;
} enc_loc;

typedef struct enc_func {
  uint32_t name, system_name, file;
  int64_t start_line;
} enc_func;

typedef struct enc {
  const char **strs;
  size_t nstrs, capstrs;
  ptp_u64map strmap;
  char **owned;        /* strings we formatted (comments) */
  size_t nowned, capowned;
  enc_func *funcs;
  size_t nfuncs, capfuncs;
  ptp_u64map funcmap;
  enc_loc *locs;
  size_t nlocs, caplocs;
  ptp_u64map locmap;   /* addr + 1 -> loc index */
  enc_line *lines;
  size_t nlines, caplines;
} enc;

#define GROW(arr, n, cap, init)                                             \
  ((n) < (cap) ? 0 : enc_grow((void **)&(arr), &(cap), sizeof *(arr), (init)))

static int enc_grow(void **arr, size_t *cap, size_t elem, size_t init) {
  size_t nc = *cap ? *cap * 2 : init;
  void *p = ptp_realloc(*arr, nc * elem);
  if (!p) return -ENOMEM;
  *arr = p;
  *cap = nc;
  return 0;
}

static void enc_free(enc *e) {
  free(e->strs);
  ptp_u64map_free(&e->strmap);
  for (size_t i = 0; i < e->nowned; i++) free(e->owned[i]);
  free(e->owned);
  free(e->funcs);
  ptp_u64map_free(&e->funcmap);
  free(e->locs);
  ptp_u64map_free(&e->locmap);
  free(e->lines);
}

/* Interns s (must stay valid until the encoding ends). Returns the index
 * (>= 0) or -ENOMEM. "" is always index 0. */
static int64_t intern(enc *e, const char *s) {
  if (!s || !*s) return 0;
  size_t n = strlen(s);
  uint64_t key = ptp_hash_bytes(s, n, 0) | 1;
  for (;;) {
    uint32_t idx;
    if (!ptp_u64map_get(&e->strmap, key, &idx)) break;
    if (strcmp(e->strs[idx], s) == 0) return idx;
    key = ptp_mix64(key) | 1;   /* 64-bit hash collision: probe another key */
  }
  if (GROW(e->strs, e->nstrs, e->capstrs, 256)) return -ENOMEM;
  if (ptp_u64map_put(&e->strmap, key, (uint32_t)e->nstrs)) return -ENOMEM;
  e->strs[e->nstrs] = s;
  return (int64_t)e->nstrs++;
}

static int64_t intern_owned(enc *e, char *s) {
  if (!s) return -ENOMEM;
  if (GROW(e->owned, e->nowned, e->capowned, 16)) {
    free(s);
    return -ENOMEM;
  }
  e->owned[e->nowned++] = s;
  return intern(e, s);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = NULL;
  if (ptp_vasprintf(&s, f, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

static int64_t intern_func(enc *e, const ptp_sym_frame *f) {
  int64_t n = intern(e, f->name), sn = intern(e, f->system_name), fl = intern(e, f->file);
  if (n < 0 || sn < 0 || fl < 0) return -ENOMEM;
  enc_func k = {(uint32_t)n, (uint32_t)sn, (uint32_t)fl, f->start_line};
  uint64_t tuple[4] = {k.name, k.system_name, k.file, (uint64_t)k.start_line};
  uint64_t key = ptp_hash_bytes(tuple, sizeof tuple, 7) | 1;
  for (;;) {
    uint32_t idx;
    if (!ptp_u64map_get(&e->funcmap, key, &idx)) break;
    const enc_func *o = &e->funcs[idx];
    if (o->name == k.name && o->system_name == k.system_name && o->file == k.file &&
        o->start_line == k.start_line)
      return idx;
    key = ptp_mix64(key) | 1;
  }
  if (GROW(e->funcs, e->nfuncs, e->capfuncs, 256)) return -ENOMEM;
  if (ptp_u64map_put(&e->funcmap, key, (uint32_t)e->nfuncs)) return -ENOMEM;
  e->funcs[e->nfuncs] = k;
  return (int64_t)e->nfuncs++;
}

/* Location index for addr, created (unsymbolized) if new. */
static int64_t loc_for(enc *e, uint64_t addr) {
  uint32_t idx;
  if (ptp_u64map_get(&e->locmap, addr + 1, &idx)) return idx;
  if (GROW(e->locs, e->nlocs, e->caplocs, 1024)) return -ENOMEM;
  if (ptp_u64map_put(&e->locmap, addr + 1, (uint32_t)e->nlocs)) return -ENOMEM;
  e->locs[e->nlocs] = (enc_loc){addr, -1, 0, 0};
  return (int64_t)e->nlocs++;
}

static int add_line(enc *e, enc_loc *l, uint32_t func, int64_t line, int64_t col) {
  if (GROW(e->lines, e->nlines, e->caplines, 1024)) return -ENOMEM;
  if (l->nlines == 0) l->first_line = (uint32_t)e->nlines;
  e->lines[e->nlines++] = (enc_line){func, line, col};
  l->nlines++;
  return 0;
}

static void fmt_time(char *buf, size_t cap, int64_t ns) {
  time_t sec = (time_t)(ns / 1000000000);
  long frac = (long)(ns % 1000000000);
  if (frac < 0) { frac += 1000000000; sec--; }
  struct tm tm;
  gmtime_r(&sec, &tm);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, cap, "%s.%09ldZ", date, frac);
}

static void write_value_type(ptp_pb_buf *b, uint32_t field, int64_t type, int64_t unit) {
  ptp_pb_mark m = ptp_pb_begin(b, field);
  ptp_pb_int64(b, VT_TYPE, type);
  ptp_pb_int64(b, VT_UNIT, unit);
  ptp_pb_end(b, m);
}

static int check_window(const ptp_window *w) {
  if (w->period_ns <= 0) return -EINVAL;
  if (w->nsamples && !w->samples) return -EINVAL;
  if (w->nthreads && !w->threads) return -EINVAL;
  if (w->ncomments && !w->comments) return -EINVAL;
  for (size_t i = 0; i < w->nsamples; i++) {
    const ptp_sample *sm = &w->samples[i];
    if (sm->count == 0 || sm->nframes == 0 || !sm->frames) return -EINVAL;
    if (sm->nlabels && !sm->labels) return -EINVAL;
    for (size_t j = 0; j < sm->nlabels; j++)
      if (!sm->labels[j].key || !sm->labels[j].key[0]) return -EINVAL;
  }
  return 0;
}

/* A thread name (at most 15 bytes of name16) in the threads' CPU line, so
 * that the line reads back unambiguously: as it is when it holds none of
 * the line's delimiters; else in double quotes, with '"', '\\' and
 * control bytes escaped ("\\x1f"); "(no name)" for an empty one, and
 * "(other names)" for the bucket of exits beyond the per-name slots
 * (others). UTF-8 passes as it is. */
static void put_thread_name(ptp_strbuf *b, const char *name16, int others) {
  char nm[16];
  memcpy(nm, name16, 15);
  nm[15] = 0;
  if (others) { ptp_strbuf_printf(b, "(other names)"); return; }
  if (!nm[0]) { ptp_strbuf_printf(b, "(no name)"); return; }
  int quote = 0;
  for (const unsigned char *c = (const unsigned char *)nm; *c; c++)
    if (*c < 0x20 || *c == 0x7f || strchr(" ,;()\"\\", *c)) quote = 1;
  if (!quote) { ptp_strbuf_printf(b, "%s", nm); return; }
  ptp_strbuf_printf(b, "\"");
  for (const unsigned char *c = (const unsigned char *)nm; *c; c++) {
    if (*c == '"' || *c == '\\') ptp_strbuf_printf(b, "\\%c", *c);
    else if (*c < 0x20 || *c == 0x7f) ptp_strbuf_printf(b, "\\x%02x", *c);
    else ptp_strbuf_printf(b, "%c", *c);
  }
  ptp_strbuf_printf(b, "\"");
}

static int encode(const ptp_window *w, ptp_symbolizer *s, ptp_pb_buf *b) {
  enc e = {0};
  uint64_t *ids = NULL;
  ptp_u64map tids = {0};
  int r = 0;

  if (GROW(e.strs, e.nstrs, e.capstrs, 256)) return -ENOMEM;
  e.strs[e.nstrs++] = "";   /* string_table[0] must be "" */

  /* pass 1: location ids per sample */
  size_t total = 0;
  for (size_t i = 0; i < w->nsamples; i++) total += (size_t)w->samples[i].nframes + 1;
  ids = ptp_malloc((total ? total : 1) * sizeof *ids);
  if (!ids) { r = -ENOMEM; goto out; }
  int64_t trunc_loc = -1;
  int64_t lost_loc[PTP_DROP__COUNT];   /* one pseudo-frame location per cause */
  for (int c = 0; c < PTP_DROP__COUNT; c++) lost_loc[c] = -1;
  size_t k = 0;
  for (size_t i = 0; i < w->nsamples; i++) {
    const ptp_sample *sm = &w->samples[i];
    if (sm->flags & PTP_SAMPLE_LOST) {
      /* CPU without a known stack: one "[lost: cause]" frame, no address */
      size_t c = sm->frames[0] < PTP_DROP__COUNT ? (size_t)sm->frames[0] : 0;
      if (lost_loc[c] < 0) {
        if (GROW(e.locs, e.nlocs, e.caplocs, 1024)) { r = -ENOMEM; goto out; }
        lost_loc[c] = (int64_t)e.nlocs;
        e.locs[e.nlocs++] = (enc_loc){0, -1, 0, 0};
      }
      ids[k++] = (uint64_t)lost_loc[c] + 1;
      continue;
    }
    for (uint16_t f = 0; f < sm->nframes; f++) {
      uint64_t a = sm->frames[f];
      if (f > 0 && a > 0) a -= 1;   /* caller: the call instruction, not the next one */
      int64_t li = loc_for(&e, a);
      if (li < 0) { r = (int)li; goto out; }
      ids[k++] = (uint64_t)li + 1;
    }
    if (sm->flags & PTP_SAMPLE_TRUNCATED) {
      if (trunc_loc < 0) {
        /* one synthetic root location, not keyed by address */
        if (GROW(e.locs, e.nlocs, e.caplocs, 1024)) { r = -ENOMEM; goto out; }
        trunc_loc = (int64_t)e.nlocs;
        e.locs[e.nlocs++] = (enc_loc){0, -1, 0, 0};
      }
      ids[k++] = (uint64_t)trunc_loc + 1;
    }
  }

  /* pass 2: symbolize each distinct address */
  ptp_symbolizer_stats st0 = {0}, st1 = {0};
  struct timespec sym_t0 = {0, 0}, sym_t1 = {0, 0};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &sym_t0);
  if (s) {
    r = ptp_symbolizer_refresh(s);
    if (r) goto out;
    ptp_symbolizer_get_stats(s, &st0);
  }
  for (size_t i = 0; i < e.nlocs; i++) {
    enc_loc *l = &e.locs[i];
    if ((int64_t)i == trunc_loc) {
      ptp_sym_frame tf = {"[truncated]", "[truncated]", "", 0, 0, 0};
      int64_t fi = intern_func(&e, &tf);
      if (fi < 0 || add_line(&e, l, (uint32_t)fi, 0, 0)) { r = -ENOMEM; goto out; }
      continue;
    }
    int lost = -1;
    for (int c = 0; c < PTP_DROP__COUNT; c++)
      if (lost_loc[c] == (int64_t)i) lost = c;
    if (lost >= 0) {
      const char *nm = ptp_lost_frame_name(lost);
      ptp_sym_frame lf = {nm, nm, "", 0, 0, 0};
      int64_t fi = intern_func(&e, &lf);
      if (fi < 0 || add_line(&e, l, (uint32_t)fi, 0, 0)) { r = -ENOMEM; goto out; }
      continue;
    }
    if (!s) continue;
    ptp_sym_result res;
    r = ptp_symbolizer_lookup(s, l->addr, &res);
    if (r) goto out;
    l->mapping = res.mapping;
    for (uint32_t j = 0; j < res.nframes; j++) {
      const ptp_sym_frame *f = &res.frames[j];
      int64_t fi = intern_func(&e, f);
      if (fi < 0 || add_line(&e, l, (uint32_t)fi, f->line, f->column)) { r = -ENOMEM; goto out; }
    }
  }

  if (s) {
    /* persist new results once per profile (best effort: a failed save only
     * means the next process resolves them again) */
    (void)ptp_symbolizer_flush(s);
    ptp_symbolizer_get_stats(s, &st1);
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &sym_t1);

  /* header strings */
  int64_t s_samples = intern(&e, "samples"), s_count = intern(&e, "count");
  int64_t s_cpu = intern(&e, "cpu"), s_ns = intern(&e, "nanoseconds");
  int64_t s_tname = intern(&e, "thread_name"), s_tid = intern(&e, "thread_id");
  if (s_samples < 0 || s_count < 0 || s_cpu < 0 || s_ns < 0 || s_tname < 0 || s_tid < 0) {
    r = -ENOMEM;
    goto out;
  }
  write_value_type(b, P_SAMPLE_TYPE, s_samples, s_count);
  write_value_type(b, P_SAMPLE_TYPE, s_cpu, s_ns);

  /* thread names by tid */
  for (size_t i = 0; i < w->nthreads; i++)
    if (ptp_u64map_put(&tids, (uint64_t)w->threads[i].tid + 1, (uint32_t)i)) { r = -ENOMEM; goto out; }

  /* samples */
  k = 0;
  for (size_t i = 0; i < w->nsamples; i++) {
    const ptp_sample *sm = &w->samples[i];
    size_t n = (sm->flags & PTP_SAMPLE_LOST) ? 1
               : (size_t)sm->nframes + ((sm->flags & PTP_SAMPLE_TRUNCATED) ? 1 : 0);
    ptp_pb_mark m = ptp_pb_begin(b, P_SAMPLE);
    ptp_pb_packed_uint64(b, S_LOCATION_ID, ids + k, n);
    k += n;
    uint64_t vals[2] = {sm->count, sm->count * (uint64_t)w->period_ns};
    ptp_pb_packed_uint64(b, S_VALUE, vals, 2);
    uint32_t ti;
    /* The name the thread had when these samples were taken, else the one
     * the window read for its tid (at the dump, or at the thread's exit). */
    const char *nm = sm->thread_name && sm->thread_name[0] ? sm->thread_name
                     : ptp_u64map_get(&tids, (uint64_t)sm->tid + 1, &ti) && w->threads[ti].name[0]
                         ? w->threads[ti].name
                         : NULL;
    if (nm) {
      /* names are at most 15 chars + NUL by contract; intern a bounded view */
      int64_t si = memchr(nm, 0, 16) ? intern(&e, nm) : intern_owned(&e, ptp_strndup(nm, 15));
      if (si < 0) { r = -ENOMEM; goto out; }
      ptp_pb_mark lm = ptp_pb_begin(b, S_LABEL);
      ptp_pb_int64(b, L_KEY, s_tname);
      ptp_pb_int64(b, L_STR, si);
      ptp_pb_end(b, lm);
    }
    if (sm->tid != 0) {   /* a numeric 0 without unit would be dropped by viewers */
      ptp_pb_mark lm = ptp_pb_begin(b, S_LABEL);
      ptp_pb_int64(b, L_KEY, s_tid);
      ptp_pb_int64(b, L_NUM, sm->tid);
      ptp_pb_end(b, lm);
    }
    /* resolved task and user labels (ptp_labels.h): strings owned by the
     * caller until this encode returns */
    for (size_t j = 0; j < sm->nlabels; j++) {
      const ptp_label *lb = &sm->labels[j];
      int64_t ki = intern(&e, lb->key), vi = lb->str ? intern(&e, lb->str) : 0;
      if (ki <= 0 || vi < 0) { r = ki == 0 ? -EINVAL : -ENOMEM; goto out; }
      ptp_pb_mark lm = ptp_pb_begin(b, S_LABEL);
      ptp_pb_int64(b, L_KEY, ki);
      if (lb->str) ptp_pb_int64(b, L_STR, vi);
      else ptp_pb_int64(b, L_NUM, lb->num);
      ptp_pb_end(b, lm);
    }
    ptp_pb_end(b, m);
  }

  /* mappings (ids = index + 1, main executable first) */
  const ptp_sym_mapping *maps = NULL;
  size_t nmaps = s ? ptp_symbolizer_mappings(s, &maps) : 0;
  for (size_t i = 0; i < nmaps; i++) {
    const ptp_sym_mapping *mp = &maps[i];
    int64_t fi = intern(&e, mp->file), bi = intern(&e, mp->build_id);
    if (fi < 0 || bi < 0) { r = -ENOMEM; goto out; }
    ptp_pb_mark m = ptp_pb_begin(b, P_MAPPING);
    ptp_pb_uint64(b, M_ID, i + 1);
    ptp_pb_uint64(b, M_START, mp->start);
    ptp_pb_uint64(b, M_LIMIT, mp->limit);
    if (mp->offset) ptp_pb_uint64(b, M_OFFSET, mp->offset);
    if (fi) ptp_pb_int64(b, M_FILENAME, fi);
    if (bi) ptp_pb_int64(b, M_BUILD_ID, bi);
    if (mp->has_functions) ptp_pb_bool(b, M_HAS_FUNCTIONS, 1);
    if (mp->has_filenames) ptp_pb_bool(b, M_HAS_FILENAMES, 1);
    if (mp->has_line_numbers) ptp_pb_bool(b, M_HAS_LINE_NUMBERS, 1);
    if (mp->has_inline_frames) ptp_pb_bool(b, M_HAS_INLINE_FRAMES, 1);
    ptp_pb_end(b, m);
  }

  /* locations */
  for (size_t i = 0; i < e.nlocs; i++) {
    const enc_loc *l = &e.locs[i];
    ptp_pb_mark m = ptp_pb_begin(b, P_LOCATION);
    ptp_pb_uint64(b, LOC_ID, i + 1);
    if (l->mapping >= 0) ptp_pb_uint64(b, LOC_MAPPING_ID, (uint64_t)l->mapping + 1);
    if (l->addr) ptp_pb_uint64(b, LOC_ADDRESS, l->addr);
    for (uint32_t j = 0; j < l->nlines; j++) {
      const enc_line *ln = &e.lines[l->first_line + j];
      ptp_pb_mark lm = ptp_pb_begin(b, LOC_LINE);
      ptp_pb_uint64(b, LINE_FUNCTION_ID, (uint64_t)ln->func + 1);
      if (ln->line) ptp_pb_int64(b, LINE_LINE, ln->line);
      if (ln->column) ptp_pb_int64(b, LINE_COLUMN, ln->column);
      ptp_pb_end(b, lm);
    }
    ptp_pb_end(b, m);
  }

  /* functions */
  for (size_t i = 0; i < e.nfuncs; i++) {
    const enc_func *f = &e.funcs[i];
    ptp_pb_mark m = ptp_pb_begin(b, P_FUNCTION);
    ptp_pb_uint64(b, F_ID, i + 1);
    ptp_pb_int64(b, F_NAME, f->name);
    if (f->system_name) ptp_pb_int64(b, F_SYSTEM_NAME, f->system_name);
    if (f->file) ptp_pb_int64(b, F_FILENAME, f->file);
    if (f->start_line) ptp_pb_int64(b, F_START_LINE, f->start_line);
    ptp_pb_end(b, m);
  }

  /* comments, in the order a reader wants them (docs/profiling.md, "What
   * the comments say"): what the file covers, the rate, every drop cause
   * (also 0), the blind window before this one, the profiler's own work,
   * symbolization; then the sampler's own lines (w->comments: engine,
   * unwind tables). */
  int64_t cidx[12];
  size_t nc = 0;
  {
    char t0[64], t1[64];
    fmt_time(t0, sizeof t0, w->start_ns);
    fmt_time(t1, sizeof t1, w->start_ns + w->duration_ns);
    cidx[nc++] = intern_owned(&e, fmt("window: %s .. %s (%lld ns)", t0, t1,
                                      (long long)w->duration_ns));
    cidx[nc++] = intern_owned(&e, fmt("sampler: %d Hz, period %lld ns", w->hz,
                                      (long long)w->period_ns));
    ptp_strbuf drops = {0};
    ptp_strbuf_printf(&drops, "dropped samples:");
    for (int c = 0; c < PTP_DROP__COUNT; c++)
      ptp_strbuf_printf(&drops, " %s=%llu", ptp_pprof_drop_name(c), (unsigned long long)w->drops[c]);
    int derr;
    cidx[nc++] = intern_owned(&e, ptp_strbuf_take(&drops, &derr));
    /* The blind window and the profiler's own work are never samples
     * (ptp_drop_is_sampled): these two lines are where that CPU is told. */
    double period_ms = (double)w->period_ns / 1e6;
    uint64_t nb = w->drops[PTP_DROP_DUMPING], no = w->drops[PTP_DROP_OWN_WORK];
    int first = w->blind_ns == 0 && nb == 0;   /* no dump before this window */
    if (first)
      cidx[nc++] = intern_owned(&e, ptp_strdup("blind window before this one: none (no dump "
                                               "before this window)"));
    else
      cidx[nc++] = intern_owned(&e, fmt("blind window before this one: %.1f ms (%lld ns, the "
                                        "previous dump's encode and write): %llu sample%s (%.1f ms "
                                        "CPU) of application threads dropped, not in this profile",
                                        (double)w->blind_ns / 1e6, (long long)w->blind_ns,
                                        (unsigned long long)nb, nb == 1 ? "" : "s",
                                        (double)nb * period_ms));
    /* By the threads' CPU clocks: the own-work sections on application
     * threads (timed, ptp_threads_own_begin) and the sampler's own thread;
     * the samples dropped there are counted beside, not multiplied out (a
     * count of periods is the CPU to within a period per section). */
    double own_thr_ms = (double)w->own_thread_cpu_ns / 1e6;
    double own_app_ms = (double)w->thread_own_ns / 1e6;
    double own_ms = own_app_ms + own_thr_ms;
    cidx[nc++] = intern_owned(&e, fmt("profiler's own work in this window and the blind window "
                                      "before it: %.1f ms CPU by the threads' clocks (%.1f ms on "
                                      "application threads, %.1f ms on the sampler's own thread; "
                                      "%llu sample%s dropped on application threads); not in the "
                                      "samples above",
                                      own_ms, own_app_ms, own_thr_ms, (unsigned long long)no,
                                      no == 1 ? "" : "s"));
    /* Coverage: what the process's CPU clock says it used over the same
     * span, against what the lines above account for. The rest is each
     * thread's period under way at the cut (and, with the timer engine,
     * periods that ended but had not been signalled yet: the kernel checks
     * them at its tick); a reader sees how much of the CPU the samples
     * hold instead of assuming all of it. */
    if (w->process_cpu_ns > 0) {
      uint64_t held = 0;
      for (size_t i = 0; i < w->nsamples; i++) held += w->samples[i].count;
      double proc_ms = (double)w->process_cpu_ns / 1e6, held_ms = (double)held * period_ms;
      double other_ms = own_ms + (double)nb * period_ms;
      double prog_ms = proc_ms - other_ms, rest_ms = prog_ms - held_ms;
      cidx[nc++] = intern_owned(
          &e, fmt("process CPU %s: %.1f ms; the profiler's own work and the blind window %.1f ms; "
                  "the program's %.1f ms: %.1f ms in the samples above (pseudo-frames included, "
                  "%.0f %%), %.1f ms %s",
                  first ? "since sampling started" : "since the previous snapshot's cut (the "
                                                     "blind window and this window)",
                  proc_ms, other_ms, prog_ms, held_ms, prog_ms > 0 ? 100.0 * held_ms / prog_ms : 0,
                  rest_ms >= 0 ? rest_ms : -rest_ms,
                  rest_ms >= 0 ? "in none (each thread's sampling period under way at the cut; "
                                 "with the timer engine also periods that ended but were not "
                                 "signalled yet: the kernel checks them at its tick)"
                               : "more in the samples than the clock says (periods begun before "
                                 "the window)"));
    }
    /* Threads' CPU by name, with their samples: a thread whose CPU is
     * under a period may have none, and the reader filtering by
     * thread_name sees here what it used. */
    if (w->nthread_cpu) {
      enum { LISTED = 16 };
      ptp_strbuf tl = {0};
      ptp_strbuf_printf(&tl, "threads' CPU %s, by each thread's CPU clock, the profiler's own work "
                        "apart (%.1f ms on these threads, and its own thread), with their samples:",
                        first ? "since sampling started" : "since the previous snapshot's cut",
                        (double)w->thread_own_ns / 1e6);
      uint64_t more_thr = 0, more_smp = 0;
      int64_t more_ns = 0;
      for (size_t i = 0; i < w->nthread_cpu; i++) {
        const ptp_thread_cpu *t = &w->thread_cpu[i];
        if (i >= LISTED) {
          more_thr += t->nthreads;
          more_smp += t->samples;
          more_ns += t->cpu_ns;
          continue;
        }
        ptp_strbuf_printf(&tl, "%s ", i ? "," : "");
        put_thread_name(&tl, t->name, t->others);
        ptp_strbuf_printf(&tl, " %.1f ms (", (double)t->cpu_ns / 1e6);
        if (t->nthreads != 1) ptp_strbuf_printf(&tl, "%u threads, ", t->nthreads);
        ptp_strbuf_printf(&tl, "%llu sample%s", (unsigned long long)t->samples,
                          t->samples == 1 ? "" : "s");
        /* labelled with another name: the thread renamed itself */
        for (int j = 0; j < 2 && t->sampled_as[j][0]; j++) {
          ptp_strbuf_printf(&tl, "%s", j ? ", " : ", thread_name ");
          put_thread_name(&tl, t->sampled_as[j], 0);
        }
        ptp_strbuf_printf(&tl, "%s)", t->sampled_as_more ? ", ..." : "");
      }
      if (w->nthread_cpu > LISTED)
        ptp_strbuf_printf(&tl, "; %zu more names: %.1f ms (%llu threads, %llu sample%s)",
                          w->nthread_cpu - LISTED, (double)more_ns / 1e6,
                          (unsigned long long)more_thr, (unsigned long long)more_smp,
                          more_smp == 1 ? "" : "s");
      ptp_strbuf_printf(&tl, "; a name with less CPU than a period (%.1f ms) has a sample with "
                        "probability CPU / period", period_ms);
      int terr;
      cidx[nc++] = intern_owned(&e, ptp_strbuf_take(&tl, &terr));
    }
    if (s) {
      const char *cd = ptp_symbolizer_cache_dir(s);
      cidx[nc++] = intern_owned(&e, fmt("symbols: %llu new addresses, %llu from the symbol cache "
                                        "(%s), %llu resolved from the objects, %llu objects opened, "
                                        "%.1f ms CPU; %.1f MB kept for later snapshots (given "
                                        "back past %.1f MB: %llu time%s so far)",
                                        (unsigned long long)(st1.lookups - st0.lookups),
                                        (unsigned long long)(st1.cache_hits - st0.cache_hits),
                                        cd ? cd : "off",
                                        (unsigned long long)(st1.resolved - st0.resolved),
                                        (unsigned long long)(st1.modules_opened - st0.modules_opened),
                                        (double)(sym_t1.tv_sec - sym_t0.tv_sec) * 1e3 +
                                            (double)(sym_t1.tv_nsec - sym_t0.tv_nsec) / 1e6,
                                        (double)ptp_symbolizer_held(s) / 1048576.0,
                                        (double)ptp_symbolizer_held_max(s) / 1048576.0,
                                        (unsigned long long)st1.held_resets,
                                        st1.held_resets == 1 ? "" : "s"));
      /* JIT code: only when the window had addresses in no object. Says
       * where names came from and why some may be missing (no map, a map
       * refused, lines skipped). */
      if (st1.jit_lookups > st0.jit_lookups) {
        ptp_symbolizer_jit_info ji;
        ptp_symbolizer_get_jit_info(s, &ji);
        cidx[nc++] = intern_owned(&e, fmt("jit code: %llu addresses in no loaded object, %llu named "
                                          "by the runtime's perf map, %llu in remapped object code; "
                                          "perf map %s: %s (%llu lines, %llu entries, %llu skipped, "
                                          "%llu over the caps, %zu ranges); %zu executable ranges "
                                          "outside objects (%llu reads of /proc/self/maps, %.1f ms "
                                          "CPU)",
                                          (unsigned long long)(st1.jit_lookups - st0.jit_lookups),
                                          (unsigned long long)(st1.jit_named - st0.jit_named),
                                          (unsigned long long)(st1.jit_alias - st0.jit_alias),
                                          ji.perfmap_path ? ji.perfmap_path : "-",
                                          ji.perfmap_state ? ji.perfmap_state : "not read",
                                          (unsigned long long)ji.lines, (unsigned long long)ji.entries,
                                          (unsigned long long)ji.bad, (unsigned long long)ji.dropped,
                                          ji.ranges, ji.exec_ranges, ji.range_reads,
                                          (double)ji.range_read_ns / 1e6));
      }
    }
    for (size_t i = 0; i < nc; i++)
      if (cidx[i] < 0) { r = -ENOMEM; goto out; }
    for (size_t i = 0; i < nc; i++) ptp_pb_int64(b, P_COMMENT, cidx[i]);
    for (size_t i = 0; i < w->ncomments; i++) {
      int64_t ci = intern(&e, w->comments[i]);
      if (ci < 0) { r = -ENOMEM; goto out; }
      if (ci) ptp_pb_int64(b, P_COMMENT, ci);
    }
  }

  if (w->start_ns) ptp_pb_int64(b, P_TIME_NANOS, w->start_ns);
  if (w->duration_ns) ptp_pb_int64(b, P_DURATION_NANOS, w->duration_ns);
  write_value_type(b, P_PERIOD_TYPE, s_cpu, s_ns);
  ptp_pb_int64(b, P_PERIOD, w->period_ns);

  /* string table last: every index above is final now */
  for (size_t i = 0; i < e.nstrs; i++) ptp_pb_string(b, P_STRING_TABLE, e.strs[i]);
  r = b->err;

out:
  free(ids);
  ptp_u64map_free(&tids);
  enc_free(&e);
  return r;
}

int ptp_pprof_encode_raw(const ptp_window *w, ptp_symbolizer *s, uint8_t **out, size_t *outlen) {
  if (!w || !out || !outlen) return -EINVAL;
  int r = check_window(w);
  if (r) return r;
  ptp_pb_buf b;
  ptp_pb_buf_init(&b, PTP_PPROF_MAX_BYTES);
  r = encode(w, s, &b);
  if (r) {
    ptp_pb_buf_free(&b);
    return r;
  }
  size_t len;
  uint8_t *data = ptp_pb_buf_take(&b, &len);
  if (!data) {   /* an empty profile is impossible (sample types), but be safe */
    data = ptp_malloc(1);
    if (!data) return -ENOMEM;
  }
  *out = data;
  *outlen = len;
  return 0;
}

int ptp_pprof_encode(const ptp_window *w, ptp_symbolizer *s, uint8_t **out, size_t *outlen) {
  uint8_t *raw;
  size_t rawlen;
  int r = ptp_pprof_encode_raw(w, s, &raw, &rawlen);
  if (r) return r;
  /* level 1: what Go's own pprof writer uses; dumps stay cheap */
  r = ptp_gzip(raw, rawlen, 1, out, outlen);
  free(raw);
  return r;
}
