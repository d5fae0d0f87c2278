/*
 * test_xranges.c - the executable ranges outside loaded objects
 * (unwind/ptp_xranges.c): the maps classifier on made-up text with exact
 * results, and the real thing: anonymous executable memory and a second
 * mapping of a loaded object's file appear in the published set, go when
 * unmapped, and re-reads follow the walker's flag at a bounded rate.
 */
#include "pt_test.h"
#include "../self_text.h"
#include "prof/unwind/ptp_xranges.h"
#include "prof/signal/ptp_xrange.h"
#include "prof/runtime/ptp_grace.h"

#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

PT_TEST(prof_xranges_classify) {
  /* Objects: /usr/bin/prog's text [0x401000, 0x500000) and libc's. */
  const char *maps =
    "00400000-00401000 r--p 00000000 fe:00 1234                       /usr/bin/prog\n"
    "00401000-00500000 r-xp 00001000 fe:00 1234                       /usr/bin/prog\n"
    "01000000-01021000 rw-p 00000000 00:00 0                          [heap]\n"
    /* anonymous code, two touching pages of one kind: merged */
    "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n"
    "7f0000001000-7f0000003000 rwxp 00000000 00:00 0\n"
    /* touching, but not readable: its own range */
    "7f0000003000-7f0000004000 --xp 00000000 00:00 0\n"
    /* named anonymous memory, a memfd, a deleted file */
    "7f0000010000-7f0000011000 r-xp 00000000 00:00 0                  [anon:jit code]\n"
    "7f0000020000-7f0000022000 r-xp 00000000 00:05 77                 /memfd:doublemapper (deleted)\n"
    "7f0000030000-7f0000031000 r-xp 00002000 fe:00 999                /tmp/jit-cache (deleted)\n"
    /* a second mapping of prog's file, inside its text: an alias */
    "7f0000040000-7f0000042000 r-xp 00050000 fe:00 1234               /usr/bin/prog\n"
    /* prog's file again, but bytes outside its executable mapping */
    "7f0000050000-7f0000051000 r-xp 00000000 fe:00 1234               /usr/bin/prog\n"
    /* another file's code (a library being loaded): left out */
    "7f0000060000-7f0000061000 r-xp 00001000 fe:00 4321               /usr/lib/libnew.so\n"
    /* not executable: left out */
    "7f0000070000-7f0000071000 rw-p 00000000 00:00 0\n"
    "7f1000000000-7f1000100000 r-xp 00026000 fe:00 55                 /usr/lib/libc.so.6\n"
    "7ffd00000000-7ffd00021000 rwxp 00000000 00:00 0                  [stack]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0          [vsyscall]\n"
    /* garbage, then a cut last line */
    "not a maps line\n"
    "7f00000a0000-7f00000a1000 r-xp 00000000 00:00 0\n"
    "zz-yy r-xp\n"
    "7f00000b0000-7f00000b1000 r-xp 00000000 00:00 0";
  ptp_xranges_obj objs[] = { { 0x7f1000000000, 0x7f1000100000 }, { 0x401000, 0x500000 } };
  ptp_xrange *r;
  size_t n;
  PT_ASSERT_INT_EQ(ptp_xranges_from_maps(maps, strlen(maps), objs, 2, &r, &n), 0);
  const ptp_xrange want[] = {
    { 0x7f0000000000, 0x7f0000003000, 0, 0, PTP_XR_READABLE },
    { 0x7f0000003000, 0x7f0000004000, 0, 0, 0 },
    { 0x7f0000010000, 0x7f0000011000, 0, 0, PTP_XR_READABLE },
    { 0x7f0000020000, 0x7f0000022000, 0, 0, PTP_XR_READABLE },
    { 0x7f0000030000, 0x7f0000031000, 0, 0, PTP_XR_READABLE },
    { 0x7f0000040000, 0x7f0000042000, 0x401000 + 0x4f000, 0x50000, PTP_XR_READABLE | PTP_XR_ALIAS },
    { 0x7f00000a0000, 0x7f00000a1000, 0, 0, PTP_XR_READABLE },
  };
  PT_ASSERT_UINT_EQ(n, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < n; i++) {
    PT_ASSERT_MSG(r[i].lo == want[i].lo && r[i].hi == want[i].hi && r[i].orig == want[i].orig &&
                  r[i].off == want[i].off && r[i].flags == want[i].flags,
                  "range %zu: %#lx-%#lx orig %#lx off %#llx flags %u", i, (unsigned long)r[i].lo,
                  (unsigned long)r[i].hi, (unsigned long)r[i].orig, (unsigned long long)r[i].off,
                  r[i].flags);
  }
  free(r);
  /* Without the objects, prog's text and libc are anonymous-looking? No:
   * they are files, not aliases of anything loaded: left out. */
  PT_ASSERT_INT_EQ(ptp_xranges_from_maps(maps, strlen(maps), NULL, 0, &r, &n), 0);
  for (size_t i = 0; i < n; i++) PT_ASSERT(!(r[i].flags & PTP_XR_ALIAS) && r[i].lo >= 0x7f0000000000);
  PT_ASSERT_UINT_EQ(n, 6);
  free(r);
  /* Nothing at all. */
  PT_ASSERT_INT_EQ(ptp_xranges_from_maps("", 0, NULL, 0, &r, &n), 0);
  PT_ASSERT_UINT_EQ(n, 0);
  PT_ASSERT(r == NULL);
}

PT_TEST(prof_xranges_refresh_real) {
  size_t pg = 4096;
  /* Anonymous executable memory (a JIT's code space). */
  uint8_t *code = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE | PROT_EXEC,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PT_ASSERT(code != MAP_FAILED);
  /* The test binary's text mapped a second time (as V8 remaps its builtins). */
  pt_self_text t;
  PT_ASSERT_INT_EQ(pt_self_text_find(&t), 0);
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  PT_ASSERT(fd >= 0);
  uintptr_t page_lo = t.lo & ~(uintptr_t)(pg - 1);
  uint64_t off = (t.fileoff & ~(uint64_t)(pg - 1)) + pg;   /* one page into the text */
  uint8_t *alias = mmap(NULL, pg, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)off);
  PT_ASSERT(alias != MAP_FAILED);
  close(fd);
  PT_ASSERT(ptp_xranges_refresh() >= 0);
  const ptp_xrange_set *s = atomic_load(&ptp_g_xranges);
  PT_ASSERT(s);
  const ptp_xrange *x = ptp_xrange_find(s, (uintptr_t)code + pg);
  PT_ASSERT_MSG(x && x->lo <= (uintptr_t)code && x->hi >= (uintptr_t)code + 3 * pg &&
                !(x->flags & PTP_XR_ALIAS) && (x->flags & PTP_XR_READABLE), "anonymous code not found");
  x = ptp_xrange_find(s, (uintptr_t)alias + 10);
  PT_ASSERT_MSG(x && (x->flags & PTP_XR_ALIAS), "alias not found");
  PT_ASSERT_UINT_EQ(x->off, off);
  PT_ASSERT_UINT_EQ(x->orig, page_lo + (uintptr_t)(off - (t.fileoff & ~(uint64_t)(pg - 1))));
  /* The bytes are the same as at orig. */
  PT_ASSERT_MEM_EQ(alias, (const void *)x->orig, 64);
  /* The test's own text is an object, never a range. */
  PT_ASSERT(ptp_xrange_find(s, (uintptr_t)pt_self_text_code) == NULL);
  /* A copy for the symbolizer holds the same. */
  ptp_xrange *c;
  size_t nc;
  PT_ASSERT_INT_EQ(ptp_xranges_copy(&c, &nc), 0);
  PT_ASSERT_UINT_EQ(nc, s->n);
  PT_ASSERT_MEM_EQ(c, s->r, nc * sizeof *c);
  free(c);
  /* Unchanged: nothing published. */
  PT_ASSERT_INT_EQ(ptp_xranges_refresh(), 0);
  PT_ASSERT(atomic_load(&ptp_g_xranges) == s);
  /* Unmapped: gone at the next re-read; the old set is freed after the
   * grace (ASan would see a use after free otherwise). */
  munmap(code, 3 * pg);
  munmap(alias, pg);
  PT_ASSERT_INT_EQ(ptp_xranges_refresh(), 1);
  s = atomic_load(&ptp_g_xranges);
  PT_ASSERT(ptp_xrange_find(s, (uintptr_t)code + pg) == NULL);
  PT_ASSERT(ptp_xrange_find(s, (uintptr_t)alias) == NULL);
  ptp_xranges_info in;
  ptp_xranges_get_info(&in);
  PT_ASSERT(in.refreshes >= 3 && in.published >= 2);
  PT_ASSERT_INT_EQ(in.last_error, 0);
}

PT_TEST(prof_xranges_poll_rate) {
  /* Nothing asked: nothing read. */
  atomic_store(&ptp_g_xranges_wanted, 0);
  ptp_xranges_info a, b;
  ptp_xranges_get_info(&a);
  int64_t now = 1000000000000LL;
  PT_ASSERT_INT_EQ(ptp_xranges_poll(now), 0);
  ptp_xranges_get_info(&b);
  PT_ASSERT_UINT_EQ(b.refreshes, a.refreshes);
  /* Asked: read (new code: published), flag cleared. */
  void *code = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PT_ASSERT(code != MAP_FAILED);
  atomic_store(&ptp_g_xranges_wanted, 1);
  PT_ASSERT_INT_EQ(ptp_xranges_poll(now), 1);
  PT_ASSERT_INT_EQ(atomic_load(&ptp_g_xranges_wanted), 0);
  PT_ASSERT(ptp_xrange_find(atomic_load(&ptp_g_xranges), (uintptr_t)code));
  /* Asked again at once: not before the minimum spacing. */
  atomic_store(&ptp_g_xranges_wanted, 1);
  ptp_xranges_get_info(&a);
  PT_ASSERT_INT_EQ(ptp_xranges_poll(now + PTP_XRANGES_MIN_NS / 2), 0);
  ptp_xranges_get_info(&b);
  PT_ASSERT_UINT_EQ(b.refreshes, a.refreshes);
  PT_ASSERT_INT_EQ(atomic_load(&ptp_g_xranges_wanted), 1);   /* still asked */
  /* After it: read, nothing new; then the spacing doubles while nothing
   * changes (a PC that stays unknown), up to PTP_XRANGES_MAX_NS. */
  int64_t t = now + PTP_XRANGES_MIN_NS;
  PT_ASSERT_INT_EQ(ptp_xranges_poll(t), 0);
  ptp_xranges_get_info(&a);
  PT_ASSERT_UINT_EQ(a.refreshes, b.refreshes + 1);
  int64_t gap = 2 * PTP_XRANGES_MIN_NS;
  for (int i = 0; i < 8; i++) {
    atomic_store(&ptp_g_xranges_wanted, 1);
    ptp_xranges_get_info(&a);
    ptp_xranges_poll(t + gap - 1);
    ptp_xranges_get_info(&b);
    PT_ASSERT_MSG(b.refreshes == a.refreshes, "re-read %lld ns after the last", (long long)(gap - 1));
    t += gap;
    ptp_xranges_poll(t);
    ptp_xranges_get_info(&b);
    PT_ASSERT_MSG(b.refreshes == a.refreshes + 1, "no re-read %lld ns after the last", (long long)gap);
    gap = gap * 2 > PTP_XRANGES_MAX_NS ? PTP_XRANGES_MAX_NS : gap * 2;
  }
  PT_ASSERT_INT_EQ(gap, PTP_XRANGES_MAX_NS);
  /* Something new resets the spacing to the minimum. */
  munmap(code, 4096);
  atomic_store(&ptp_g_xranges_wanted, 1);
  t += PTP_XRANGES_MAX_NS;
  PT_ASSERT_INT_EQ(ptp_xranges_poll(t), 1);
  atomic_store(&ptp_g_xranges_wanted, 1);
  ptp_xranges_get_info(&a);
  ptp_xranges_poll(t + PTP_XRANGES_MIN_NS);
  ptp_xranges_get_info(&b);
  PT_ASSERT_UINT_EQ(b.refreshes, a.refreshes + 1);
  atomic_store(&ptp_g_xranges_wanted, 0);
}

/* ---- publication under concurrent readers ------------------------------------ */

#include <pthread.h>
#include "prof/signal/ptp_producer.h"

static _Atomic int g_stop;

/* A handler's view: inside the grace counter, load the set, read it all. */
static void *reader(void *arg) {
  (void)arg;
  uint64_t sum = 0;
  while (!atomic_load(&g_stop)) {
    atomic_fetch_add(&ptp_g_inside, 1);
    const ptp_xrange_set *s = atomic_load(&ptp_g_xranges);
    if (s) {
      for (size_t i = 0; i < s->n; i++) sum += s->r[i].lo ^ s->r[i].hi;
      if (s->n) sum += ptp_xrange_find(s, s->r[0].lo) != NULL;
    }
    atomic_fetch_sub(&ptp_g_inside, 1);
  }
  return (void *)(uintptr_t)sum;
}

/* Named prof_sampler_* so that the ThreadSanitizer stage runs it: sets
 * replaced 200 times while two threads read them as the handler does; a
 * set freed before its readers left would be a use after free (ASan), a
 * publication without ordering a race (TSan). */
PT_TEST(prof_sampler_xranges_publish) {
  pthread_t t[2];
  atomic_store(&g_stop, 0);
  for (int i = 0; i < 2; i++) PT_ASSERT_INT_EQ(pthread_create(&t[i], NULL, reader, NULL), 0);
  int published = 0;
  for (int k = 0; k < 200; k++) {
    void *p = mmap(NULL, 4096 * (1 + k % 3), PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    PT_ASSERT(p != MAP_FAILED);
    int rc = ptp_xranges_refresh();
    PT_ASSERT(rc >= 0);
    published += rc;
    PT_ASSERT(ptp_xrange_find(atomic_load(&ptp_g_xranges), (uintptr_t)p));
    munmap(p, 4096 * (1 + k % 3));
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  PT_ASSERT(published >= 100);
  /* Everything retired can go now: a last re-read frees them. */
  ptp_xranges_refresh();
}
