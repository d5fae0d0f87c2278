/*
 * ptp_cfi.c - the walker's unwind-table sets: which object gets what, the
 * tables built (by ptp_cfi_parse.c) or read from the persistent cache
 * (ptp_cficache.c) outside the signal handler, publication of a new set and
 * retirement of the old one (see ptp_cfi.h; the module's units are listed
 * in ptp_cfi_internal.h).
 *
 * Table lifetime: a set owns its tables (ptp_cfi_lib.owns_tab) whatever
 * their origin, built here (malloc'ed) or read from the cache (a private
 * copy of the cache file, ptp_cficache.c); ptp_cfi_tab_free releases either,
 * and is called only from free_libs, i.e. for a retired set after the
 * handler grace (reclaim_locked) or for a set never published. A table
 * moved to a newer set by carry_over_locked is freed with that set.
 *
 * Locking: cfi.mu guards the published pointer, the retired list, the
 * dlpi_adds/subs snapshot, the lazy-table accounting and every store into a
 * slot's tab. The handler only reads the set and CASes a slot's state from
 * NONE to WANTED. Not for signal handlers.
 */
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "prof/unwind/ptp_cfi.h"
#include "prof/unwind/ptp_cfi_internal.h"
#include "prof/unwind/ptp_cficache.h"
#include "prof/unwind/ptp_fpdetect.h"
#include "prof/runtime/ptp_grace.h"
#include "prof/ptp_alloc.h"
#include "prof/signal/ptp_clock.h"

/* ---- table lifetime ---------------------------------------------------- */

/* The owner of table lifetime frees both origins here, so the cache unit
 * (which only makes mapped tables) is called by this one and never calls
 * back. */
void ptp_cfi_tab_free(const ptp_cfi_tab *t) {
  if (!t) return;
  if (t->map) munmap(t->map, t->maplen);
  free((void *)t);
}

/* ---- objects ----------------------------------------------------------- */

int ptp_cfi_is_system_name(const char *path) {
  static const char *const names[] = {
    "libc.so", "libm.so", "libmvec.so", "libpthread.so", "libdl.so", "librt.so",
    "libutil.so", "libresolv.so", "libanl.so", "libnsl.so", "libBrokenLocale.so",
    "libc_malloc_debug.so", "ld-linux", "ld64.so", "libgcc_s.so", "linux-vdso",
    "linux-gate",
  };
  if (!path || !*path) return 0;                     /* the main program */
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strncmp(base, names[i], strlen(names[i])) == 0) return 1;
  return 0;
}

/* Identity of an object for carrying its table into a rebuilt set: name,
 * load address, executable segments and the whole .eh_frame_hdr (every
 * function's start address and FDE offset). An object replaced by another
 * at the same address (dlclose + dlopen) differs in at least one of them
 * unless it is the same code with the same unwind index. */
static uint64_t obj_id(const struct dl_phdr_info *info, const ptp_cfi_objinfo *o) {
  uint64_t h = 0xcbf29ce484222325ull;
  if (info->dlpi_name) h = ptp_cfi_hash(h, info->dlpi_name, strlen(info->dlpi_name));
  h = ptp_cfi_hash(h, &info->dlpi_addr, sizeof info->dlpi_addr);
  h = ptp_cfi_hash(h, o->text, (size_t)o->ntext * sizeof o->text[0]);
  if (o->hdr) h = ptp_cfi_hash(h, (const void *)o->hdr, o->hdrsz);
  return h;
}

#define SYSTEM_MAX_ROWS ((size_t)1 << 22)   /* sanity bound, not a policy */

typedef struct build_ctx {
  ptp_cfi_obj *objs;
  size_t nobjs, capobjs;
  ptp_cfi_lib *libs;
  size_t nlibs, caplibs;
  int have_gen;
  unsigned long long adds, subs;
  int eager_system;        /* build system tables here (ptp_cfi_build only) */
  int oom;
} build_ctx;

static int build_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  build_ctx *b = arg;
  if (!b->have_gen && size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    b->adds = info->dlpi_adds;
    b->subs = info->dlpi_subs;
    b->have_gen = 1;
  }
  /* The rule: a table for every object that has an .eh_frame_hdr, the main
   * program and the object holding libptprof included: whether an object
   * keeps frame pointers is never assumed (a distro's python3.11 or cc1,
   * or our own binaries built by someone else, do not), and CFI is exact
   * where frame pointers are right too. Objects without .eh_frame_hdr have
   * nothing to build from: they get a slot walked with frame pointers if
   * their code keeps them (ptp_fpdetect), else a slot that stops the walk
   * (truncated). Every object with code is in the set, so the walker knows
   * a PC in none of them is unknown. glibc's objects are never walked with
   * frame pointers, even without .eh_frame_hdr (then truncated). */
  int system = ptp_cfi_is_system_name(info->dlpi_name);
  ptp_cfi_objinfo o;
  ptp_cfi_obj_scan(info, &o);
  if (!o.ntext) return 0;
  /* Without .eh_frame_hdr: a refresh first looks for .debug_frame (in
   * lazy_cb, with the other tables); ptp_cfi_build decides at once. */
  uint8_t nocfi_state = PTP_LIB_NONE;
  if (!o.hdr && !system && b->eager_system)
    nocfi_state = ptp_fpdetect(info, NULL, NULL) ? PTP_LIB_FP : PTP_LIB_NOCFI;
  if (b->nlibs == b->caplibs) {
    size_t ncap = b->caplibs ? b->caplibs * 2 : 32;
    ptp_cfi_lib *nl = ptp_realloc(b->libs, ncap * sizeof *nl);
    if (!nl) { b->oom = 1; return 1; }
    b->libs = nl;
    b->caplibs = ncap;
  }
  if (b->nobjs + (size_t)o.ntext > b->capobjs) {
    size_t ncap = b->capobjs ? b->capobjs * 2 : 64;
    while (ncap < b->nobjs + (size_t)o.ntext) ncap *= 2;
    ptp_cfi_obj *no = ptp_realloc(b->objs, ncap * sizeof *no);
    if (!no) { b->oom = 1; return 1; }
    b->objs = no;
    b->capobjs = ncap;
  }
  ptp_cfi_lib *lib = &b->libs[b->nlibs];
  memset(lib, 0, sizeof *lib);
  lib->system = (uint8_t)system;
  lib->base = info->dlpi_addr;
  lib->text_lo = o.text_lo;
  lib->id = obj_id(info, &o);
  lib->owns_tab = 1;
  lib->code_readable = 1;   /* every executable segment mapped readable (PF_R) */
  for (int i = 0; i < o.ntext; i++)
    if (!ptp_cfi_mem_ok(&o.m, o.text[i].lo, o.text[i].hi - o.text[i].lo)) lib->code_readable = 0;
  atomic_init(&lib->tab, NULL);
  atomic_init(&lib->state, PTP_LIB_NONE);
  if (nocfi_state != PTP_LIB_NONE) {
    atomic_init(&lib->state, nocfi_state);
  } else if (system && b->eager_system) {
    ptp_cfi_tab *t = NULL;
    int rc = ptp_cfi_parse_eh(&o, SYSTEM_MAX_ROWS, &t);
    if (rc == -ENOMEM) { b->oom = 1; return 1; }
    atomic_init(&lib->tab, t);
    atomic_init(&lib->state, t ? PTP_LIB_READY : PTP_LIB_FAILED);
  }
  for (int i = 0; i < o.ntext; i++)
    b->objs[b->nobjs++] = (ptp_cfi_obj){ o.text[i].lo, o.text[i].hi, (uint32_t)b->nlibs };
  b->nlibs++;
  return 0;
}

static int cmp_obj(const void *a, const void *b) {
  const ptp_cfi_obj *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void free_libs(ptp_cfi_lib *libs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (libs[i].owns_tab) ptp_cfi_tab_free(atomic_load(&libs[i].tab));
  free(libs);
}

/* Builds a set; stores in *adds and *subs the loader generation it describes. */
static int build_set(ptp_cfi_set **out, unsigned long long *adds, unsigned long long *subs,
                     int eager_system) {
  build_ctx b;
  memset(&b, 0, sizeof b);
  b.eager_system = eager_system;
  dl_iterate_phdr(build_cb, &b);
  ptp_cfi_set *set = ptp_calloc(1, sizeof *set);
  if (b.oom || !set) {
    free_libs(b.libs, b.nlibs);
    free(b.objs);
    free(set);
    return -ENOMEM;
  }
  qsort(b.objs, b.nobjs, sizeof *b.objs, cmp_obj);
  /* Overlapping segments of two objects cannot exist in one address space;
   * drop any anyway so the binary search stays correct. */
  size_t w = 0;
  for (size_t i = 0; i < b.nobjs; i++) {
    if (w && b.objs[w - 1].hi > b.objs[i].lo) continue;
    b.objs[w++] = b.objs[i];
  }
  set->objs = b.objs;
  set->nobjs = w;
  set->libs = b.libs;
  set->nlibs = b.nlibs;
  *out = set;
  if (adds) *adds = b.adds;
  if (subs) *subs = b.subs;
  return 0;
}

int ptp_cfi_build(ptp_cfi_set **out) {
  return build_set(out, NULL, NULL, 1);
}

void ptp_cfi_free(ptp_cfi_set *set) {
  if (!set) return;
  free_libs(set->libs, set->nlibs);
  free((void *)set->objs);
  free(set);
}

/* ---- publication ------------------------------------------------------- */

typedef struct retired {
  ptp_cfi_set *set;
  struct retired *next;
} retired;

/* The persistent table cache (ptp_cficache.c) keeps the tables built
 * since the last ptp_cfi_save_pending, to be written there. A pending
 * entry points at a table owned by a set; an entry whose table is freed
 * (its set retired) is dropped first (drop_pending_locked). */
typedef struct pending {
  const ptp_cfi_tab *tab;
  uintptr_t bias;
  uint64_t key;
  char bid[PTP_CFICACHE_BID_MAX];
} pending;
#define PENDING_MAX 256                  /* objects per process between saves */

/* The module's process-wide state (runtime/ptp_process.h); the published
 * set itself is signal/'s ptp_g_cfi. All of it guarded by cfi.mu, whose
 * fork handlers are registered at its first use (cfi_lock). */
static struct {
  pthread_mutex_t mu;
  pthread_once_t once;
  unsigned long long seen_adds, seen_subs;  /* generation of the current set */
  int have_seen;
  retired *retired_list;
  unsigned builds;
  size_t lazy_cap;
  size_t lazy_bytes;                        /* lazy tables of the current set */
  unsigned long long lazy_built, lazy_refused;
  unsigned long long build_ns;              /* thread CPU time in build_wanted_in_locked */
  unsigned long long cache_hits, cache_saved;
  int cache_on;                  /* the cache directory: 0 = not looked up yet
                                    (at the first table build), 1 = usable, -1 = off */
  char cache_dir[PATH_MAX];
  pending pend[PENDING_MAX];
  size_t npend;
} cfi = {
  .mu = PTHREAD_MUTEX_INITIALIZER,
  .once = PTHREAD_ONCE_INIT,
  .lazy_cap = PTP_CFI_LAZY_CAP,
};

/* Fork: the mutex is taken before fork and released after in both
 * processes; the child keeps the current set (the same address space,
 * copied) and whatever is pending. */
static void fork_prepare(void) { pthread_mutex_lock(&cfi.mu); }
static void fork_release(void) { pthread_mutex_unlock(&cfi.mu); }
static void init_once(void) { (void)pthread_atfork(fork_prepare, fork_release, fork_release); }

static void cfi_lock(void) {
  pthread_once(&cfi.once, init_once);
  pthread_mutex_lock(&cfi.mu);
}

static void cfi_unlock(void) { pthread_mutex_unlock(&cfi.mu); }

typedef struct count_ctx { unsigned long long adds, subs; } count_ctx;

static int count_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  count_ctx *c = arg;
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    c->adds = info->dlpi_adds;
    c->subs = info->dlpi_subs;
  }
  return 1;                                           /* the first entry is enough */
}

/* Forgets pending saves of the tables set owns (it is about to be freed). */
static void drop_pending_locked(const ptp_cfi_set *set) {
  size_t w = 0;
  for (size_t i = 0; i < cfi.npend; i++) {
    int owned = 0;
    for (size_t k = 0; k < set->nlibs && !owned; k++)
      owned = set->libs[k].owns_tab && atomic_load(&set->libs[k].tab) == cfi.pend[i].tab;
    if (!owned) cfi.pend[w++] = cfi.pend[i];
  }
  cfi.npend = w;
}

static void reclaim_locked(void) {
  if (!cfi.retired_list) return;
  /* Every retired set was unpublished before it was put on the list; a
   * handler that could still read it keeps the grace from being quiet. */
  if (!ptp_grace_quiet()) return;
  while (cfi.retired_list) {
    retired *r = cfi.retired_list;
    cfi.retired_list = r->next;
    drop_pending_locked(r->set);
    ptp_cfi_free(r->set);
    free(r);
  }
}

typedef struct lazy_ctx {
  ptp_cfi_set *set;
  unsigned long long adds, subs;   /* loader generation the set describes */
  int stale;                /* the loader's generation moved: set is outdated */
} lazy_ctx;

/* One object's table: from the persistent cache when it holds a valid one
 * for this object, else built from its .eh_frame (and queued for saving).
 * Under cfi.mu, inside dl_iterate_phdr for that object. Same returns as
 * ptp_cfi_parse_eh. */
static int get_tab_locked(const struct dl_phdr_info *info, const ptp_cfi_objinfo *o,
                          size_t max_rows, ptp_cfi_tab **out) {
  if (cfi.cache_on == 0) cfi.cache_on = ptp_cficache_dir(cfi.cache_dir, sizeof cfi.cache_dir) == 0 ? 1 : -1;
  char bid[PTP_CFICACHE_BID_MAX];
  uint64_t key = 0;
  int cacheable = cfi.cache_on > 0 && ptp_cficache_ident(info, o, bid, &key) == 0;
  if (cacheable) {
    uintptr_t hi = 0;
    for (int i = 0; i < o->ntext; i++) if (o->text[i].hi > hi) hi = o->text[i].hi;
    int rc = ptp_cficache_load(cfi.cache_dir, bid, key, info->dlpi_addr, o->text_lo, hi, max_rows, out);
    if (rc == 0) { cfi.cache_hits++; return 0; }
    if (rc == -E2BIG || rc == -ENOMEM) return rc;
  }
  int rc = o->hdr ? ptp_cfi_parse_eh(o, max_rows, out) : ptp_cfi_debugframe(info, o, max_rows, out);
  if (rc == 0 && cacheable && cfi.npend < PENDING_MAX) {
    pending *e = &cfi.pend[cfi.npend++];
    e->tab = *out;
    e->bias = info->dlpi_addr;
    e->key = key;
    memcpy(e->bid, bid, sizeof e->bid);
  }
  return rc;
}

/* Under cfi.mu, inside dl_iterate_phdr: builds the tables of c->set's
 * objects marked WANTED (the current set, or a rebuilt one before it is
 * published). The generation check makes sure the slot still describes the
 * object mapped there now (no dlclose + dlopen since the set was built): the
 * loader lock is held during the callback, so nothing can be loaded or
 * unloaded while we read the object. */
static int lazy_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  lazy_ctx *c = arg;
  if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs ||
      info->dlpi_adds != c->adds || info->dlpi_subs != c->subs) {
    c->stale = 1;
    return 1;
  }
  ptp_cfi_lib *lib = NULL;
  for (size_t i = 0; i < c->set->nlibs; i++)
    if (c->set->libs[i].base == info->dlpi_addr &&
        atomic_load_explicit(&c->set->libs[i].state, memory_order_relaxed) == PTP_LIB_WANTED) {
      lib = &c->set->libs[i];
      break;
    }
  if (!lib) return 0;
  ptp_cfi_objinfo o;
  ptp_cfi_obj_scan(info, &o);
  if (o.text_lo != lib->text_lo || obj_id(info, &o) != lib->id) return 0;
  size_t max_rows = SYSTEM_MAX_ROWS;
  if (!lib->system) {
    size_t room = cfi.lazy_cap > cfi.lazy_bytes ? cfi.lazy_cap - cfi.lazy_bytes : 0;
    max_rows = room > sizeof(ptp_cfi_tab) ? (room - sizeof(ptp_cfi_tab)) / sizeof(ptp_cfi_row) : 0;
  }
  ptp_cfi_tab *t = NULL;
  int rc = max_rows ? get_tab_locked(info, &o, max_rows, &t) : -E2BIG;
  if (rc == 0) {
    if (!lib->system) {
      cfi.lazy_bytes += t->bytes;
      cfi.lazy_built++;
    }
    atomic_store_explicit(&lib->tab, t, memory_order_release);
    atomic_store_explicit(&lib->state, PTP_LIB_READY, memory_order_release);
  } else if (rc == -ENOENT && !o.hdr && !lib->system) {
    /* No CFI at all: frame pointers if its code keeps them (ptp_fpdetect),
     * else its samples stop there (truncated). */
    atomic_store_explicit(&lib->state, ptp_fpdetect(info, NULL, NULL) ? PTP_LIB_FP : PTP_LIB_NOCFI,
                          memory_order_release);
  } else {
    /* Over the cap, unparsable or out of memory: this object's samples stay
     * truncated (and counted as such) until the set is rebuilt. */
    if (rc == -E2BIG) cfi.lazy_refused++;
    atomic_store_explicit(&lib->state, PTP_LIB_FAILED, memory_order_release);
  }
  return 0;
}

static int64_t thread_cpu_ns(void) {
  return ptp_clock_ns(CLOCK_THREAD_CPUTIME_ID, 0);
}

/* Builds the tables of set's WANTED slots; set describes loader generation
 * (adds, subs). */
static void build_wanted_in_locked(ptp_cfi_set *set, unsigned long long adds,
                                   unsigned long long subs) {
  int any = 0;
  for (size_t i = 0; i < set->nlibs && !any; i++)
    any = atomic_load_explicit(&set->libs[i].state, memory_order_relaxed) == PTP_LIB_WANTED;
  if (!any) return;
  int64_t t0 = thread_cpu_ns();
  lazy_ctx c = { .set = set, .adds = adds, .subs = subs };
  dl_iterate_phdr(lazy_cb, &c);
  cfi.build_ns += (unsigned long long)(thread_cpu_ns() - t0);
}

static void build_wanted_locked(void) {
  ptp_cfi_set *set = (ptp_cfi_set *)atomic_load(&ptp_g_cfi);
  if (set) build_wanted_in_locked(set, cfi.seen_adds, cfi.seen_subs);
}

/* Eager tables: every object of a rebuilt set that got no table from the
 * current set (carry_over_locked) is marked WANTED, so its table is built
 * before the set is published and the first samples through it (the main
 * program's from the very first one) are complete. The memory cap still
 * applies: what does not fit stays PTP_LIB_FAILED (truncated). */
static void want_all_locked(ptp_cfi_set *set) {
  for (size_t i = 0; i < set->nlibs; i++)
    if (atomic_load_explicit(&set->libs[i].state, memory_order_relaxed) == PTP_LIB_NONE)
      atomic_store_explicit(&set->libs[i].state, PTP_LIB_WANTED, memory_order_relaxed);
}

/* Before publishing a rebuilt set: its lazy objects that are still loaded
 * and identical (same id: name, address, segments, .eh_frame_hdr) take over
 * the table built for the current set, so a dlopen elsewhere (libdw loading
 * a backend at dump time, say) does not send every library back through the
 * truncated warm-up. Ownership moves to the new set; the current set keeps
 * reading the table until it is retired, and the new set is freed only
 * after it. Recomputes lazy_bytes for the new set. */
static void carry_over_locked(ptp_cfi_set *set) {
  ptp_cfi_set *cur = (ptp_cfi_set *)atomic_load(&ptp_g_cfi);
  cfi.lazy_bytes = 0;
  if (!cur) return;
  for (size_t i = 0; i < set->nlibs; i++) {
    ptp_cfi_lib *nl = &set->libs[i];
    for (size_t k = 0; k < cur->nlibs; k++) {
      ptp_cfi_lib *ol = &cur->libs[k];
      if (ol->base != nl->base || ol->text_lo != nl->text_lo || ol->id != nl->id) continue;
      const ptp_cfi_tab *t = atomic_load(&ol->tab);
      if (t && ol->owns_tab && atomic_load(&ol->state) == PTP_LIB_READY) {
        atomic_store(&nl->tab, t);
        atomic_store(&nl->state, PTP_LIB_READY);
        ol->owns_tab = 0;
        if (!nl->system) cfi.lazy_bytes += t->bytes;
      } else if (atomic_load(&ol->state) == PTP_LIB_WANTED) {
        atomic_store(&nl->state, PTP_LIB_WANTED);   /* still asked for */
      } else if (atomic_load(&ol->state) == PTP_LIB_FP || atomic_load(&ol->state) == PTP_LIB_NOCFI) {
        atomic_store(&nl->state, atomic_load(&ol->state));   /* decided: no file opened again */
      }
      break;
    }
  }
}

int ptp_cfi_refresh(void) {
  cfi_lock();
  count_ctx cc = { 0, 0 };
  dl_iterate_phdr(count_cb, &cc);
  int rc = 0;
  if (!cfi.have_seen || cc.adds != cfi.seen_adds || cc.subs != cfi.seen_subs) {
    ptp_cfi_set *set = NULL;
    unsigned long long adds = 0, subs = 0;
    rc = build_set(&set, &adds, &subs, 0);
    if (rc == 0) {
      retired *node = ptp_malloc(sizeof *node);
      if (!node) {
        ptp_cfi_free(set);
        rc = -ENOMEM;
      } else {
        carry_over_locked(set);
        want_all_locked(set);
        build_wanted_in_locked(set, adds, subs);
        const ptp_cfi_set *old = atomic_exchange(&ptp_g_cfi, set);
        node->set = (ptp_cfi_set *)old;
        node->next = cfi.retired_list;
        if (old) cfi.retired_list = node;
        else free(node);
        cfi.seen_adds = adds;
        cfi.seen_subs = subs;
        cfi.have_seen = 1;
        cfi.builds++;
      }
    }
  }
  if (rc == 0) build_wanted_locked();
  reclaim_locked();
  cfi_unlock();
  return rc;
}

void ptp_cfi_get_info(ptp_cfi_info *out) {
  memset(out, 0, sizeof *out);
  cfi_lock();
  const ptp_cfi_set *s = atomic_load(&ptp_g_cfi);
  if (s) {
    out->nobjs = s->nobjs;
    for (size_t i = 0; i < s->nlibs; i++) {
      const ptp_cfi_tab *t = atomic_load(&s->libs[i].tab);
      uint8_t st = atomic_load(&s->libs[i].state);
      if (st == PTP_LIB_FP || st == PTP_LIB_NOCFI) {
        out->nfp += st == PTP_LIB_FP;
        out->nnocfi += st == PTP_LIB_NOCFI;
        continue;
      }
      out->nlibs++;
      if (!s->libs[i].system) {
        out->lazy_ready += st == PTP_LIB_READY;
        out->lazy_wanted += st == PTP_LIB_WANTED;
        out->lazy_failed += st == PTP_LIB_FAILED;
      }
      if (!t) continue;
      out->nrows += t->nrows;
      out->norule_rows += t->norule;       /* counted when made: no pass over mapped rows */
    }
  }
  out->lazy_bytes = cfi.lazy_bytes;
  out->lazy_cap = cfi.lazy_cap;
  out->lazy_built = cfi.lazy_built;
  out->lazy_refused = cfi.lazy_refused;
  out->build_ns = cfi.build_ns;
  out->builds = cfi.builds;
  out->cache_hits = cfi.cache_hits;
  out->cache_saved = cfi.cache_saved;
  cfi_unlock();
}

int ptp_cfi_state_of(uintptr_t pc) {
  cfi_lock();
  const ptp_cfi_set *s = atomic_load(&ptp_g_cfi);
  const ptp_cfi_lib *lib = s ? ptp_cfi_find(s, pc) : NULL;
  int st = lib ? atomic_load(&lib->state) : -ENOENT;
  cfi_unlock();
  return st;
}

size_t ptp_cfi_set_lazy_cap(size_t bytes) {
  cfi_lock();
  size_t old = cfi.lazy_cap;
  cfi.lazy_cap = bytes;
  cfi_unlock();
  return old;
}

int ptp_cfi_save_pending(void) {
  /* The file images are made under the mutex (the tables stay alive), the
   * files written after it, so no dlopen waits for the disk. */
  pending todo[PENDING_MAX];
  void *img[PENDING_MAX];
  size_t len[PENDING_MAX], n = 0;
  cfi_lock();
  for (size_t i = 0; i < cfi.npend; i++) {
    if (ptp_cficache_image(cfi.pend[i].bid, cfi.pend[i].key, cfi.pend[i].bias, cfi.pend[i].tab, &img[n], &len[n]) == 0)
      todo[n++] = cfi.pend[i];
  }
  cfi.npend = 0;
  char dir[PATH_MAX];
  memcpy(dir, cfi.cache_dir, sizeof dir);
  cfi_unlock();
  int rc = 0, saved = 0;
  for (size_t i = 0; i < n; i++) {
    int r = ptp_cficache_write(dir, todo[i].bid, img[i], len[i]);
    if (r == 0) saved++;
    else if (rc == 0) rc = r;
    free(img[i]);
  }
  if (saved) {
    cfi_lock();
    cfi.cache_saved += (unsigned long long)saved;
    cfi_unlock();
  }
  return rc;
}


