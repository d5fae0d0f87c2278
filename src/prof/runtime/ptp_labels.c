/*
 * ptp_labels.c - labels on samples: the per-thread label block (TLS), the
 * public ptprof_labels_push/_pop, the interned strings, the ended tasks'
 * names, and their resolution at dump time. See ptp_labels.h for the
 * lifetime rules, ptp_label_set.h for what the signal handler reads.
 *
 * Locking: lab.mu guards everything below except the TLS block (its own
 * thread only) and lab.resolver (atomic). Never held across a call out of
 * this file except the console's resolver, which does not block and does
 * not call back here.
 *
 * Strings: a fixed table of PTPROF_LABEL_STRINGS_MAX entries (allocated at
 * the first push), id = index + 1, with an open-addressing index of twice
 * that size rebuilt whenever entries are freed (only at release: rare).
 * refs counts the pushes (over all threads) that hold the string now, plus
 * the threads' label caches below.
 *
 * The per-thread label cache (t_cache): a program pushes the same label
 * over and over (the daemon: "session"=<id> in the turn's callbacks, ~400
 * times in a 20-turn session), each time on a thread that just slept,
 * where the mutex, the hash index and the string table are cold: a
 * push+pop pair measured 5.0-5.5 us after a 20 ms sleep vs ~0.25 us back
 * to back (docs/performance.md, "Labels"). So each thread
 * remembers the last key=value it interned, holding one reference to each
 * string; a push of the same strings (compared by content, never by
 * pointer) reuses those ids without the mutex and marks its stack entry
 * "borrowed" (bit i of t_cache.borrowed: entry i holds no reference of
 * its own), and popping a borrowed entry takes no lock either. The cache
 * is refilled only by a push that takes the mutex anyway (a miss) and only
 * while no borrowed entry is on the stack, so a borrowed entry's ids stay
 * held until it is popped. A thread holds at most these two references
 * beyond its pushes, given back at its exit (pop_all_at_exit).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptprof.h"
#include "prof/runtime/ptp_labels.h"
#include "prof/runtime/ptp_own_text.h"
#include "prof/signal/ptp_producer.h"
#include "prof/symbols/ptp_sym_map.h"
#include "prof/ptp_alloc.h"

_Static_assert(PTPROF_LABELS_MAX == PTP_LABELS_MAX, "one bound");

#define NSTR PTPROF_LABEL_STRINGS_MAX
#define NINDEX (2u * NSTR)

typedef struct lstr {
  char s[PTPROF_LABEL_LEN_MAX + 1];
  uint32_t refs;
  uint8_t used;
  uint64_t unused_since;   /* epoch when refs fell to 0 */
} lstr;

typedef struct ended {
  uint64_t id, epoch;
  ptp_task_info info;
} ended;

/* The module's process-wide state (runtime/ptp_process.h), guarded by
 * lab.mu except resolver (atomic). Created at the first push or task end,
 * never freed; fork handlers registered then keep lab.mu consistent. */
static struct {
  pthread_mutex_t mu;
  lstr *strs;             /* NSTR entries once allocated */
  uint32_t *index;        /* NINDEX: id or 0 */
  uint32_t free[NSTR];    /* stack of free indices below hwm */
  uint32_t nfree, hwm, nstrs;
  uint64_t epoch;         /* cuts so far */
  ended *ended;
  size_t nended, capended;
  uint64_t ended_not_kept;
  _Atomic(ptp_task_resolver_fn) resolver;
  pthread_key_t exit_key;
  pthread_once_t once;
} lab = { .mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

/* The calling thread's label cache (see the top of the file). Not read by
 * the signal handler, so the default TLS model. */
typedef struct label_cache {
  uint32_t k, v;            /* ids held by the cache (one reference each); 0 = empty */
  uint32_t borrowed;        /* bit i: the stack's entry i uses k, v without a reference */
  uint8_t exit_armed;       /* pthread_setspecific(lab.exit_key) done */
  char key[PTPROF_LABEL_LEN_MAX + 1], value[PTPROF_LABEL_LEN_MAX + 1];
} label_cache;
static __thread label_cache t_cache;

static int sampling(void) { return atomic_load(&ptp_g_shared) != NULL; }

/* ---- strings (lab.mu held) ---------------------------------------------- */

static uint32_t slot_of(const char *s, size_t n) {
  return (uint32_t)(ptp_hash_bytes(s, n, 11) & (NINDEX - 1));
}

static void index_rebuild(void) {
  memset(lab.index, 0, NINDEX * sizeof *lab.index);
  for (uint32_t i = 0; i < lab.hwm; i++) {
    if (!lab.strs[i].used) continue;
    uint32_t k = slot_of(lab.strs[i].s, strlen(lab.strs[i].s));
    while (lab.index[k]) k = (k + 1) & (NINDEX - 1);
    lab.index[k] = i + 1;
  }
}

/* The id of s (n bytes, validated) with one more reference, or 0 when the
 * table is full or cannot be allocated. */
static uint32_t str_ref(const char *s, size_t n) {
  if (!lab.strs) {
    lab.strs = ptp_calloc(NSTR, sizeof *lab.strs);
    lab.index = ptp_calloc(NINDEX, sizeof *lab.index);
    if (!lab.strs || !lab.index) {
      free(lab.strs);
      free(lab.index);
      lab.strs = NULL;
      lab.index = NULL;
      return 0;
    }
  }
  uint32_t k = slot_of(s, n);
  for (uint32_t v; (v = lab.index[k]); k = (k + 1) & (NINDEX - 1)) {
    lstr *e = &lab.strs[v - 1];
    if (strncmp(e->s, s, n) == 0 && e->s[n] == 0) {
      e->refs++;
      return v;
    }
  }
  uint32_t i;
  if (lab.nfree) i = lab.free[--lab.nfree];
  else if (lab.hwm < NSTR) i = lab.hwm++;
  else return 0;
  lstr *e = &lab.strs[i];
  memcpy(e->s, s, n);
  e->s[n] = 0;
  e->refs = 1;
  e->used = 1;
  lab.index[k] = i + 1;
  lab.nstrs++;
  return i + 1;
}

static void str_free(uint32_t i) {
  lab.strs[i].used = 0;
  lab.strs[i].s[0] = 0;
  lab.free[lab.nfree++] = i;
  lab.nstrs--;
}

static void str_unref(uint32_t id) {
  if (id == 0 || id > lab.hwm || !lab.strs[id - 1].used || lab.strs[id - 1].refs == 0) return;
  lstr *e = &lab.strs[id - 1];
  if (--e->refs) return;
  if (sampling()) {
    e->unused_since = lab.epoch;   /* kept until the cut after this one is written */
  } else {
    str_free(id - 1);
    index_rebuild();
  }
}

/* ---- the public API ---------------------------------------------------- */

static int valid_key(const char *k, size_t *len) {
  size_t n = 0;
  for (; k[n]; n++) {
    char c = k[n];
    if (n >= PTPROF_LABEL_LEN_MAX) return PTPROF_E_LABEL_TOO_LONG;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return -EINVAL;
  }
  static const char *const reserved[] = {"thread_name", "thread_id", "task", "task_kind", "task_loc"};
  if (n == 0) return -EINVAL;
  for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
    if (strcmp(k, reserved[i]) == 0) return -EINVAL;
  *len = n;
  return 0;
}

/* UTF-8 (shortest forms, no surrogates), no C0/DEL control characters:
 * the profile's string table must be valid UTF-8 or readers reject it. */
static int valid_value(const char *v, size_t *len) {
  const unsigned char *p = (const unsigned char *)v;
  size_t n = 0;
  while (p[n]) {
    if (n >= PTPROF_LABEL_LEN_MAX) return PTPROF_E_LABEL_TOO_LONG;
    unsigned c = p[n];
    size_t extra;
    uint32_t cp, min;
    if (c < 0x20 || c == 0x7f) return -EINVAL;
    if (c < 0x80) { n++; continue; }
    if ((c & 0xe0) == 0xc0) { extra = 1; cp = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { extra = 2; cp = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { extra = 3; cp = c & 0x07; min = 0x10000; }
    else return -EINVAL;
    for (size_t j = 1; j <= extra; j++) {
      if ((p[n + j] & 0xc0) != 0x80) return -EINVAL;   /* also stops at NUL */
      cp = cp << 6 | (p[n + j] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -EINVAL;
    n += extra + 1;
  }
  if (n > PTPROF_LABEL_LEN_MAX) return PTPROF_E_LABEL_TOO_LONG;
  if (n == 0) return -EINVAL;
  *len = n;
  return 0;
}

/* A thread that exits with labels pushed, or with a filled cache, gives
 * their references back. */
static void pop_all_at_exit(void *unused) {
  (void)unused;
  while (ptprof_labels_pop() == 0) {}
  (void)ptp_labels_cache_drop();
  t_cache.exit_armed = 0;
}

int ptp_labels_cache_drop(void) {
  label_cache *c = &t_cache;
  if (c->borrowed) return 0;
  if (c->k) {
    pthread_mutex_lock(&lab.mu);
    str_unref(c->k);
    str_unref(c->v);
    pthread_mutex_unlock(&lab.mu);
    c->k = c->v = 0;
  }
  return 1;
}

/* Publishes ids k, v as the calling thread's entry n (n < PTP_LABELS_MAX):
 * ids first, then the count, so a signal in between sees the old set. */
static void publish(ptp_label_set *s, uint32_t n, uint32_t k, uint32_t v) {
  atomic_store_explicit(&s->kv[2 * n], k, memory_order_relaxed);
  atomic_store_explicit(&s->kv[2 * n + 1], v, memory_order_relaxed);
  atomic_signal_fence(memory_order_release);
  atomic_store_explicit(&s->n, n + 1, memory_order_relaxed);
}

static void fork_prepare(void) { pthread_mutex_lock(&lab.mu); }
static void fork_release(void) { pthread_mutex_unlock(&lab.mu); }

static void once_init(void) {
  (void)pthread_key_create(&lab.exit_key, pop_all_at_exit);
  (void)pthread_atfork(fork_prepare, fork_release, fork_release);
}

PTP_OWN_TEXT int ptprof_labels_push(const char *key, const char *value) {
  if (!key || !value) return -EINVAL;
  ptp_label_set *s = &ptp_t_labels;
  label_cache *c = &t_cache;
  uint32_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
  /* The cache's strings were validated when it was filled: equal strings
   * are valid, and their ids are held by the cache. No lock. */
  if (c->k && strcmp(value, c->value) == 0 && strcmp(key, c->key) == 0) {
    if (n >= PTP_LABELS_MAX) return PTPROF_E_LABELS_FULL;
    c->borrowed |= 1u << n;
    publish(s, n, c->k, c->v);
    return 0;
  }
  size_t kn, vn;
  int rc = valid_key(key, &kn);
  if (rc == 0) rc = valid_value(value, &vn);
  if (rc) return rc;
  if (n >= PTP_LABELS_MAX) return PTPROF_E_LABELS_FULL;
  pthread_once(&lab.once, once_init);
  /* Refill the cache only while no entry borrows its ids (see the top). */
  int refill = c->borrowed == 0;
  uint32_t oldk = c->k, oldv = c->v;
  pthread_mutex_lock(&lab.mu);
  uint32_t k = str_ref(key, kn);
  uint32_t v = k ? str_ref(value, vn) : 0;
  if (!v) str_unref(k);
  if (v && refill) {
    lab.strs[k - 1].refs++;   /* the cache's own references */
    lab.strs[v - 1].refs++;
    str_unref(oldk);        /* 0 (empty cache) is ignored */
    str_unref(oldv);
  }
  pthread_mutex_unlock(&lab.mu);
  if (!v) return PTPROF_E_LABEL_TABLE;
  if (refill) {
    c->k = k;
    c->v = v;
    memcpy(c->key, key, kn + 1);
    memcpy(c->value, value, vn + 1);
  }
  if (!c->exit_armed) {
    (void)pthread_setspecific(lab.exit_key, (void *)1);
    c->exit_armed = 1;
  }
  c->borrowed &= ~(1u << n);   /* this entry holds its own references */
  publish(s, n, k, v);
  return 0;
}

PTP_OWN_TEXT int ptprof_labels_pop(void) {
  ptp_label_set *s = &ptp_t_labels;
  label_cache *c = &t_cache;
  uint32_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
  if (n == 0) return PTPROF_E_LABELS_EMPTY;
  uint32_t k = atomic_load_explicit(&s->kv[2 * n - 2], memory_order_relaxed);
  uint32_t v = atomic_load_explicit(&s->kv[2 * n - 1], memory_order_relaxed);
  atomic_store_explicit(&s->n, n - 1, memory_order_relaxed);
  atomic_signal_fence(memory_order_release);
  uint32_t bit = 1u << (n - 1);
  if (c->borrowed & bit) {   /* the cache's ids: no reference to give back */
    c->borrowed &= ~bit;
    return 0;
  }
  pthread_mutex_lock(&lab.mu);
  str_unref(k);
  str_unref(v);
  pthread_mutex_unlock(&lab.mu);
  return 0;
}

/* ---- tasks ------------------------------------------------------------- */

void ptp_labels_set_task_resolver(ptp_task_resolver_fn fn) { atomic_store(&lab.resolver, fn); }

void ptp_labels_task_ended(uint64_t id, uint64_t seq, const char *name, const char *file,
                           uint32_t line) {
  if (!sampling()) return;
  pthread_once(&lab.once, once_init);   /* the fork handlers guard lab.mu from here on */
  pthread_mutex_lock(&lab.mu);
  if (lab.nended == lab.capended && lab.capended < PTP_ENDED_TASKS_MAX) {
    size_t nc = lab.capended ? lab.capended * 2 : 64;
    if (nc > PTP_ENDED_TASKS_MAX) nc = PTP_ENDED_TASKS_MAX;
    ended *ne = ptp_realloc(lab.ended, nc * sizeof *ne);
    if (ne) {
      lab.ended = ne;
      lab.capended = nc;
    }
  }
  if (lab.nended < lab.capended) {
    ended *e = &lab.ended[lab.nended++];
    e->id = id;
    e->epoch = lab.epoch;
    e->info.seq = seq;
    e->info.file = file;
    e->info.line = line;
    snprintf(e->info.name, sizeof e->info.name, "%s", name ? name : "");
  } else {
    lab.ended_not_kept++;
  }
  pthread_mutex_unlock(&lab.mu);
}

/* ---- epochs ------------------------------------------------------------ */

uint64_t ptp_labels_cut(void) {
  pthread_mutex_lock(&lab.mu);
  uint64_t e = ++lab.epoch;
  pthread_mutex_unlock(&lab.mu);
  return e;
}

void ptp_labels_release(uint64_t epoch) {
  pthread_mutex_lock(&lab.mu);
  size_t w = 0;
  for (size_t i = 0; i < lab.nended; i++)
    if (lab.ended[i].epoch >= epoch) lab.ended[w++] = lab.ended[i];
  lab.nended = w;
  int freed = 0;
  for (uint32_t i = 0; lab.strs && i < lab.hwm; i++) {
    if (lab.strs[i].used && lab.strs[i].refs == 0 && lab.strs[i].unused_since < epoch) {
      str_free(i);
      freed = 1;
    }
  }
  if (freed) index_rebuild();
  pthread_mutex_unlock(&lab.mu);
}

void ptp_labels_get_stats(ptp_labels_stats *out) {
  pthread_mutex_lock(&lab.mu);
  out->strings = lab.nstrs;
  out->ended_waiting = lab.nended;
  out->ended_not_kept = lab.ended_not_kept;
  pthread_mutex_unlock(&lab.mu);
}

/* ---- resolution -------------------------------------------------------- */

/* Everything a resolved window points into. */
struct ptp_labels_res {
  ptp_label *labels;       /* all samples' labels, back to back */
  char **owned;            /* strings copied for this window */
  size_t nowned;
};

void ptp_labels_res_free(ptp_labels_res *r) {
  if (!r) return;
  for (size_t i = 0; i < r->nowned; i++) free(r->owned[i]);
  free(r->owned);
  free(r->labels);
  free(r);
}

/* "../../src/x.c" as the console shows it: "src/x.c". */
static const char *display_path(const char *f) {
  while ((f[0] == '.' && f[1] == '/') || (f[0] == '.' && f[1] == '.' && f[2] == '/'))
    f += f[1] == '/' ? 2 : 3;
  return f;
}

/* One distinct task of the window, resolved. */
typedef struct rtask {
  uint64_t id;
  int known;
  uint64_t seq;
  const char *kind, *loc;  /* owned by the result */
} rtask;

static char *own(ptp_labels_res *r, char *s) {
  if (!s) return NULL;
  r->owned[r->nowned++] = s;
  return s;
}

static int resolve_task(ptp_labels_res *r, rtask *t, const ptp_u64map *endmap) {
  ptp_task_info info;
  memset(&info, 0, sizeof info);
  ptp_task_resolver_fn fn = atomic_load(&lab.resolver);
  uint32_t ei;
  int found = 0;
  if (t->id == PTP_TASK_TOO_DEEP) {
    t->kind = "[task unknown: polls nested too deep]";
    return 0;
  }
  if (fn && fn(t->id, &info) == 0) found = 1;
  else if (ptp_u64map_get(endmap, t->id, &ei)) { info = lab.ended[ei].info; found = 1; }
  if (!found) {
    t->kind = "[task name not kept]";
    return 0;
  }
  info.name[sizeof info.name - 1] = 0;
  t->known = 1;
  t->seq = info.seq;
  if (!(t->kind = own(r, ptp_strdup(info.name[0] ? info.name : "[unnamed task]")))) return -ENOMEM;
  if (info.file) {
    char *loc = NULL;
    if (ptp_asprintf(&loc, "%s:%u", display_path(info.file), info.line) < 0) return -ENOMEM;
    if (!own(r, loc)) return -ENOMEM;
    t->loc = loc;
  }
  return 0;
}

int ptp_labels_resolve(ptp_sample *samples, size_t n, ptp_labels_res **out) {
  *out = NULL;
  ptp_labels_res *r = ptp_calloc(1, sizeof *r);
  if (!r) return -ENOMEM;
  ptp_u64map tmap = {0}, smap = {0}, endmap = {0};
  rtask *tasks = NULL;
  size_t ntasks = 0, nlab = 0, nids = 0;
  int rc = -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    nlab += (samples[i].ids.task ? 3 : 0) + samples[i].ids.n;
    nids += samples[i].ids.n * 2 + (samples[i].ids.task ? 2 : 0);
  }
  if (nlab == 0) { *out = r; return 0; }
  r->labels = ptp_calloc(nlab, sizeof *r->labels);
  r->owned = ptp_calloc(nids, sizeof *r->owned);
  tasks = ptp_calloc(n, sizeof *tasks);
  if (!r->labels || !r->owned || !tasks) goto out;

  pthread_mutex_lock(&lab.mu);
  for (size_t i = 0; i < lab.nended; i++)
    if (ptp_u64map_put(&endmap, lab.ended[i].id, (uint32_t)i)) goto out_locked;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    ptp_sample *sm = &samples[i];
    ptp_label *lb = r->labels + at;
    size_t k = 0;
    if (sm->ids.task) {
      uint32_t ti;
      if (!ptp_u64map_get(&tmap, sm->ids.task, &ti)) {
        ti = (uint32_t)ntasks;
        tasks[ntasks++].id = sm->ids.task;
        if (resolve_task(r, &tasks[ti], &endmap) || ptp_u64map_put(&tmap, sm->ids.task, ti))
          goto out_locked;
      }
      const rtask *t = &tasks[ti];
      if (t->known) lb[k++] = (ptp_label){"task", NULL, (int64_t)t->seq};
      lb[k++] = (ptp_label){"task_kind", t->kind, 0};
      if (t->loc) lb[k++] = (ptp_label){"task_loc", t->loc, 0};
    }
    /* user labels, innermost first; an inner key hides outer ones */
    size_t first_user = k;
    for (uint32_t j = sm->ids.n; j-- > 0;) {
      uint32_t ids[2] = {sm->ids.kv[2 * j], sm->ids.kv[2 * j + 1]};
      const char *str[2] = {NULL, NULL};
      for (int h = 0; h < 2; h++) {
        uint32_t si;
        if (ptp_u64map_get(&smap, ids[h], &si)) { str[h] = r->owned[si]; continue; }
        if (ids[h] == 0 || ids[h] > lab.hwm || !lab.strs[ids[h] - 1].used) break;
        if (!own(r, ptp_strdup(lab.strs[ids[h] - 1].s))) goto out_locked;
        if (ptp_u64map_put(&smap, ids[h], (uint32_t)(r->nowned - 1))) goto out_locked;
        str[h] = r->owned[r->nowned - 1];
      }
      if (!str[0] || !str[1]) continue;   /* cannot happen while the epochs hold */
      int hidden = 0;
      for (size_t q = first_user; q < k; q++) hidden |= strcmp(lb[q].key, str[0]) == 0;
      if (!hidden) lb[k++] = (ptp_label){str[0], str[1], 0};
    }
    sm->labels = k ? lb : NULL;
    sm->nlabels = k;
    at += k;
  }
  rc = 0;
out_locked:
  pthread_mutex_unlock(&lab.mu);
out:
  free(tasks);
  ptp_u64map_free(&tmap);
  ptp_u64map_free(&smap);
  ptp_u64map_free(&endmap);
  if (rc) {
    for (size_t i = 0; i < n; i++) { samples[i].labels = NULL; samples[i].nlabels = 0; }
    ptp_labels_res_free(r);
    return rc;
  }
  *out = r;
  return 0;
}
