/*
 * ptp_xranges.c - the executable ranges outside loaded objects: read from
 * /proc/self/maps, classified against dl_iterate_phdr's objects, published
 * to the walker and retired after the handler grace (see ptp_xranges.h).
 *
 * Locking: xr.mu guards the retired list, the rate state and the counters,
 * and every store into ptp_g_xranges. The handler only reads the set and
 * sets ptp_g_xranges_wanted. Not for signal handlers.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/unwind/ptp_xranges.h"
#include "prof/runtime/ptp_grace.h"
#include "prof/ptp_alloc.h"
#include "prof/ptp_scan.h"
#include "prof/signal/ptp_clock.h"

/* ---- the pure core: maps text -> ranges --------------------------------- */

typedef struct mline {
  uintptr_t lo, hi;
  char perms[4];
  uint64_t off;
  uint64_t dev;             /* major << 32 | minor */
  uint64_t ino;
  const char *path;         /* not NUL-terminated */
  size_t pathlen;
  int in_obj;               /* a loaded object's segment */
} mline;

static int parse_dec(const char **p, const char *e, uint64_t *v) {
  uint64_t x = 0;
  int k = 0;
  while (*p < e && **p >= '0' && **p <= '9') {
    if (++k > 20 || x > (UINT64_MAX - 9) / 10) return -1;
    x = x * 10 + (uint64_t)(**p - '0');
    (*p)++;
  }
  *v = x;
  return k ? 0 : -1;
}

static int expect(const char **p, const char *e, char c) {
  if (*p >= e || **p != c) return -1;
  (*p)++;
  return 0;
}

static void skip_spaces(const char **p, const char *e) {
  while (*p < e && (**p == ' ' || **p == '\t')) (*p)++;
}

/* "lo-hi perms off maj:min inode [path]" (s..e, no newline). */
static int parse_line(const char *s, const char *e, mline *m) {
  const char *p = s;
  uint64_t lo, hi, off, maj, min, ino;
  if (ptp_scan_hex(&p, e, &lo) || expect(&p, e, '-') || ptp_scan_hex(&p, e, &hi) || expect(&p, e, ' '))
    return -1;
  if (e - p < 5 || p[4] != ' ') return -1;
  memcpy(m->perms, p, 4);
  p += 5;
  if (ptp_scan_hex(&p, e, &off) || expect(&p, e, ' ') || ptp_scan_hex(&p, e, &maj) ||
      expect(&p, e, ':') || ptp_scan_hex(&p, e, &min) || expect(&p, e, ' ') || parse_dec(&p, e, &ino))
    return -1;
  if (p < e && *p != ' ' && *p != '\t') return -1;
  if (lo >= hi || maj > UINT32_MAX || min > UINT32_MAX) return -1;
  skip_spaces(&p, e);
  m->lo = (uintptr_t)lo;
  m->hi = (uintptr_t)hi;
  m->off = off;
  m->dev = maj << 32 | min;
  m->ino = ino;
  m->path = p;
  m->pathlen = (size_t)(e - p);
  m->in_obj = 0;
  return 0;
}

static int path_is(const mline *m, const char *s) {
  size_t n = strlen(s);
  return m->pathlen == n && memcmp(m->path, s, n) == 0;
}

static int path_starts(const mline *m, const char *s) {
  size_t n = strlen(s);
  return m->pathlen >= n && memcmp(m->path, s, n) == 0;
}

static int path_ends(const mline *m, const char *s) {
  size_t n = strlen(s);
  return m->pathlen >= n && memcmp(m->path + m->pathlen - n, s, n) == 0;
}

static int cmp_obj(const void *a, const void *b) {
  const ptp_xranges_obj *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int cmp_range(const void *a, const void *b) {
  const ptp_xrange *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Whether [lo, hi) overlaps a segment of objs (sorted by lo, disjoint). */
static int overlaps_obj(const ptp_xranges_obj *objs, size_t n, uintptr_t lo, uintptr_t hi) {
  size_t a = 0, b = n;
  while (a < b) {                       /* first segment with lo >= hi */
    size_t mid = a + (b - a) / 2;
    if (objs[mid].lo < hi) a = mid + 1;
    else b = mid;
  }
  return a > 0 && objs[a - 1].hi > lo;
}

/* An anonymous kind of code mapping (see ptp_xranges.h). */
static int anon_kind(const mline *m) {
  if (m->ino == 0)
    return m->pathlen == 0 || path_starts(m, "[anon:") || path_is(m, "[heap]");
  return path_starts(m, "/memfd:") || path_ends(m, " (deleted)");
}

int ptp_xranges_from_maps(const char *maps, size_t len, const ptp_xranges_obj *objs_in,
                          size_t nobjs, ptp_xrange **out, size_t *n) {
  *out = NULL;
  *n = 0;
  int rc = -ENOMEM;
  ptp_xranges_obj *objs = NULL;
  mline *ex = NULL;
  ptp_xrange *r = NULL;
  size_t nex = 0, capex = 0, nr = 0;
  if (nobjs) {
    objs = ptp_malloc(nobjs * sizeof *objs);
    if (!objs) goto out;
    memcpy(objs, objs_in, nobjs * sizeof *objs);
    qsort(objs, nobjs, sizeof *objs, cmp_obj);
  }
  /* Pass 1: the executable lines, each marked whether an object holds it. */
  const char *p = maps, *end = maps + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) break;                           /* a cut last line: ignored */
    mline m;
    if (parse_line(p, nl, &m) == 0 && m.perms[2] == 'x') {
      m.in_obj = overlaps_obj(objs, nobjs, m.lo, m.hi);
      if (nex == capex) {
        size_t nc = capex ? capex * 2 : 64;
        mline *g = ptp_realloc(ex, nc * sizeof *g);
        if (!g) goto out;
        ex = g;
        capex = nc;
      }
      ex[nex++] = m;
    }
    p = nl + 1;
  }
  /* Pass 2: what the walker may step through. */
  for (size_t i = 0; i < nex && nr < PTP_XRANGES_MAX; i++) {
    const mline *m = &ex[i];
    if (m->in_obj) continue;
    ptp_xrange x = { m->lo, m->hi, 0, 0, m->perms[0] == 'r' ? PTP_XR_READABLE : 0u };
    int keep = 0;
    if (m->ino != 0) {
      /* Another mapping of a loaded object's file, inside the bytes that
       * object maps executable: an alias (named through the object). */
      for (size_t k = 0; k < nex && !keep; k++) {
        const mline *o = &ex[k];
        if (!o->in_obj || o->dev != m->dev || o->ino != m->ino) continue;
        uint64_t olen = (uint64_t)(o->hi - o->lo), mlen = (uint64_t)(m->hi - m->lo);
        if (m->off < o->off || m->off - o->off > olen || mlen > olen - (m->off - o->off)) continue;
        x.orig = o->lo + (uintptr_t)(m->off - o->off);
        x.off = m->off;
        x.flags |= PTP_XR_ALIAS;
        keep = 1;
      }
    }
    if (!keep) keep = anon_kind(m);
    if (!keep) continue;
    if (!r && !(r = ptp_malloc((nex - i) * sizeof *r))) goto out;
    r[nr++] = x;
  }
  if (nr) qsort(r, nr, sizeof *r, cmp_range);   /* the kernel's order already; be sure */
  /* Merge touching ranges of one kind (a JIT's code space grows page by
   * page); drop any overlap (lines read across a concurrent mmap). */
  size_t w = 0;
  for (size_t i = 0; i < nr; i++) {
    if (w) {
      ptp_xrange *q = &r[w - 1];
      if (r[i].lo < q->hi) continue;
      int alias = (q->flags & PTP_XR_ALIAS) != 0;
      if (r[i].lo == q->hi && r[i].flags == q->flags &&
          (!alias || (r[i].orig == q->orig + (q->hi - q->lo) && r[i].off == q->off + (q->hi - q->lo)))) {
        q->hi = r[i].hi;
        continue;
      }
    }
    r[w++] = r[i];
  }
  if (w == 0) {
    free(r);
    r = NULL;
  }
  *out = r;
  *n = w;
  r = NULL;
  rc = 0;
out:
  free(r);
  free(ex);
  free(objs);
  return rc;
}

/* ---- reading, publication, retirement ------------------------------------ */

typedef struct retired {
  ptp_xrange_set *set;
  struct retired *next;
} retired;

/* The module's process-wide state (runtime/ptp_process.h); the published
 * set itself is signal/'s ptp_g_xranges. Guarded by xr.mu (fork handlers
 * registered at its first use). */
static struct {
  pthread_mutex_t mu;
  pthread_once_t once;
  retired *retired_list;
  _Atomic int have_retired;       /* retired_list != NULL, read without mu */
  int64_t next_ok;                /* no re-read before (CLOCK_MONOTONIC ns) */
  int64_t interval;               /* current spacing of re-reads */
  unsigned long long refreshes, published, capped, cpu_ns;
  int last_error;
} xr = {
  .mu = PTHREAD_MUTEX_INITIALIZER,
  .once = PTHREAD_ONCE_INIT,
  .interval = PTP_XRANGES_MIN_NS,
};

static void fork_prepare(void) { pthread_mutex_lock(&xr.mu); }
static void fork_release(void) { pthread_mutex_unlock(&xr.mu); }
static void init_once(void) { (void)pthread_atfork(fork_prepare, fork_release, fork_release); }

static void xr_lock(void) {
  pthread_once(&xr.once, init_once);
  pthread_mutex_lock(&xr.mu);
}

static void xr_unlock(void) { pthread_mutex_unlock(&xr.mu); }

static int64_t thread_cpu_ns(void) {
  return ptp_clock_ns(CLOCK_THREAD_CPUTIME_ID, 0);
}

/* /proc/self/maps, whole lines, at most PTP_XRANGES_MAPS_MAX bytes
 * (*capped = 1 when cut there). */
static int read_maps(char **out, size_t *len, int *capped) {
  *out = NULL;
  *len = 0;
  *capped = 0;
  int fd = open("/proc/self/maps", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t cap = 64 << 10, n = 0;
  char *buf = ptp_malloc(cap);
  int rc = 0;
  if (!buf) { rc = -ENOMEM; goto out; }
  for (;;) {
    if (n == cap) {
      if (cap >= PTP_XRANGES_MAPS_MAX) { *capped = 1; break; }
      size_t nc = cap * 2 > PTP_XRANGES_MAPS_MAX ? PTP_XRANGES_MAPS_MAX : cap * 2;
      char *g = ptp_realloc(buf, nc);
      if (!g) { rc = -ENOMEM; goto out; }
      buf = g;
      cap = nc;
    }
    ssize_t k = read(fd, buf + n, cap - n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) { rc = -errno; goto out; }
    if (k == 0) break;
    n += (size_t)k;
  }
out:
  close(fd);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  *len = n;
  return 0;
}

typedef struct objs_ctx {
  ptp_xranges_obj *v;
  size_t n, cap;
  int oom;
} objs_ctx;

static int objs_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  objs_ctx *c = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    if (c->n == c->cap) {
      size_t nc = c->cap ? c->cap * 2 : 64;
      ptp_xranges_obj *g = ptp_realloc(c->v, nc * sizeof *g);
      if (!g) { c->oom = 1; return 1; }
      c->v = g;
      c->cap = nc;
    }
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    c->v[c->n++] = (ptp_xranges_obj){ a & ~(uintptr_t)4095,
                                      (a + ph->p_memsz + 4095) & ~(uintptr_t)4095 };
  }
  return 0;
}

static int same_set(const ptp_xrange_set *s, const ptp_xrange *r, size_t n) {
  return s && s->n == n && (n == 0 || memcmp(s->r, r, n * sizeof *r) == 0);
}

static void reclaim_locked(void) {
  if (!xr.retired_list || !ptp_grace_quiet()) return;
  while (xr.retired_list) {
    retired *q = xr.retired_list;
    xr.retired_list = q->next;
    free(q->set);
    free(q);
  }
  atomic_store(&xr.have_retired, 0);
}

/* One re-read under xr.mu: 1 published, 0 unchanged, or -errno. */
static int refresh_locked(void) {
  int64_t t0 = thread_cpu_ns();
  /* Cleared before reading: a walk that meets an unknown PC after the read
   * raises it again. */
  atomic_store(&ptp_g_xranges_wanted, 0);
  xr.refreshes++;
  char *maps = NULL;
  size_t len = 0;
  int capped = 0;
  objs_ctx oc = { 0 };
  ptp_xrange *r = NULL;
  size_t n = 0;
  /* The maps first, then the objects: an object the maps show is loaded by
   * then (or was unloaded: its code is gone with it). */
  int rc = read_maps(&maps, &len, &capped);
  if (rc == 0) {
    dl_iterate_phdr(objs_cb, &oc);
    rc = oc.oom ? -ENOMEM : ptp_xranges_from_maps(maps, len, oc.v, oc.n, &r, &n);
  }
  if (rc == 0 && n == PTP_XRANGES_MAX) capped = 1;
  if (capped) xr.capped++;
  const ptp_xrange_set *cur = atomic_load(&ptp_g_xranges);
  if (rc == 0 && !same_set(cur, r, n)) {
    /* One allocation: the set and its ranges. */
    ptp_xrange_set *set = ptp_malloc(sizeof *set + n * sizeof *r);
    retired *node = ptp_malloc(sizeof *node);
    if (!set || !node) {
      free(set);
      free(node);
      rc = -ENOMEM;
    } else {
      ptp_xrange *dst = (ptp_xrange *)(set + 1);
      if (n) memcpy(dst, r, n * sizeof *r);
      set->r = dst;
      set->n = n;
      const ptp_xrange_set *old = atomic_exchange(&ptp_g_xranges, set);
      if (old) {
        node->set = (ptp_xrange_set *)old;
        node->next = xr.retired_list;
        xr.retired_list = node;
        atomic_store(&xr.have_retired, 1);
      } else {
        free(node);
      }
      xr.published++;
      rc = 1;
    }
  }
  free(r);
  free(oc.v);
  free(maps);
  xr.last_error = rc < 0 ? rc : 0;
  reclaim_locked();
  xr.cpu_ns += (unsigned long long)(thread_cpu_ns() - t0);
  return rc;
}

int ptp_xranges_refresh(void) {
  xr_lock();
  int rc = refresh_locked();
  xr_unlock();
  return rc;
}

int ptp_xranges_poll(int64_t now) {
  int want = atomic_load_explicit(&ptp_g_xranges_wanted, memory_order_relaxed);
  if (!want && !atomic_load_explicit(&xr.have_retired, memory_order_relaxed)) return 0;
  xr_lock();
  int rc = 0;
  if (want && now >= xr.next_ok) {
    rc = refresh_locked();
    /* Something new: keep following at the base rate. Nothing new (the
     * unknown PC is in memory we leave out): back off. */
    if (rc == 1) xr.interval = PTP_XRANGES_MIN_NS;
    else if (xr.interval < PTP_XRANGES_MAX_NS) xr.interval *= 2;
    if (xr.interval > PTP_XRANGES_MAX_NS) xr.interval = PTP_XRANGES_MAX_NS;
    xr.next_ok = now + xr.interval;
  } else {
    reclaim_locked();
  }
  xr_unlock();
  return rc;
}

int ptp_xranges_copy(ptp_xrange **out, size_t *n) {
  *out = NULL;
  *n = 0;
  xr_lock();
  const ptp_xrange_set *s = atomic_load(&ptp_g_xranges);
  int rc = 0;
  if (s && s->n) {
    ptp_xrange *c = ptp_malloc(s->n * sizeof *c);
    if (!c) {
      rc = -ENOMEM;
    } else {
      memcpy(c, s->r, s->n * sizeof *c);
      *out = c;
      *n = s->n;
    }
  }
  xr_unlock();
  return rc;
}

void ptp_xranges_get_info(ptp_xranges_info *out) {
  memset(out, 0, sizeof *out);
  xr_lock();
  const ptp_xrange_set *s = atomic_load(&ptp_g_xranges);
  if (s) {
    out->nranges = s->n;
    for (size_t i = 0; i < s->n; i++) out->naliases += (s->r[i].flags & PTP_XR_ALIAS) != 0;
  }
  out->refreshes = xr.refreshes;
  out->published = xr.published;
  out->capped = xr.capped;
  out->cpu_ns = xr.cpu_ns;
  out->last_error = xr.last_error;
  xr_unlock();
}
