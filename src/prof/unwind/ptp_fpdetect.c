/*
 * ptp_fpdetect.c - frame-pointer detection for loaded objects without CFI
 * (see ptp_fpdetect.h): prologues of the functions in the in-memory dynamic
 * symbol table.
 *
 * Why prologues: an object without .eh_frame_hdr says nothing else about how
 * it was compiled, and a frame-pointer walk through code that uses rbp as a
 * general register produces stacks the thread never had. GCC and Clang with
 * -fno-omit-frame-pointer copy rsp into rbp near the start of every function
 * that has a frame; with -fomit-frame-pointer almost none do. Leaf functions without a frame exist in both, hence a
 * share, not "all".
 */
#include "prof/unwind/ptp_fpdetect.h"

#include <elf.h>
#include <stdint.h>
#include <string.h>

typedef struct fpd_obj {
  uintptr_t base;
  struct { uintptr_t lo, hi; int x; } segs[16];
  int nsegs;
} fpd_obj;

/* 1 if [a, a + n) lies in one readable segment (exec: in an executable
 * one). */
static int fpd_ok(const fpd_obj *o, uintptr_t a, size_t n, int exec) {
  for (int i = 0; i < o->nsegs; i++)
    if (a >= o->segs[i].lo && a <= o->segs[i].hi && n <= o->segs[i].hi - a &&
        (!exec || o->segs[i].x))
      return 1;
  return 0;
}

/* A DT_* pointer: glibc relocates them in place for loaded objects, the
 * vDSO's are link-time values; accept whichever lies in the object. */
static uintptr_t fpd_ptr(const fpd_obj *o, uintptr_t v, size_t n) {
  if (fpd_ok(o, v, n, 0)) return v;
  if (fpd_ok(o, v + o->base, n, 0)) return v + o->base;
  return 0;
}

/* Number of dynamic symbols from DT_GNU_HASH: one past the highest index
 * reachable from any bucket. 0 when unreadable. */
static size_t fpd_gnu_count(const fpd_obj *o, uintptr_t h) {
  if (!h) return 0;
  const uint32_t *w = (const uint32_t *)h;
  uint32_t nbuckets = w[0], symoffset = w[1], bloom = w[2];
  if (nbuckets == 0 || nbuckets > (1u << 24) || bloom > (1u << 24)) return 0;
  uintptr_t buckets = h + 16 + (uintptr_t)bloom * sizeof(ElfW(Addr));
  if (!fpd_ok(o, buckets, (size_t)nbuckets * 4, 0)) return 0;
  const uint32_t *b = (const uint32_t *)buckets;
  uint32_t last = 0;
  for (uint32_t i = 0; i < nbuckets; i++)
    if (b[i] > last) last = b[i];
  if (last < symoffset) return symoffset;
  uintptr_t chains = buckets + (uintptr_t)nbuckets * 4;
  for (uint32_t i = last; i - symoffset < (1u << 24); i++) {
    uintptr_t a = chains + (uintptr_t)(i - symoffset) * 4;
    if (!fpd_ok(o, a, 4, 0)) return 0;
    if (*(const uint32_t *)a & 1u) return (size_t)i + 1;
  }
  return 0;
}

/* 1 if mov %rsp,%rbp (48 89 e5, or the other encoding 48 8b ec) occurs in
 * the first PTP_FPDETECT_WINDOW bytes of the function at a: GCC at -O2
 * interleaves other instructions with push %rbp and the copy. Code without
 * frame pointers may push rbp to save it, but copies rsp into it only in
 * functions with a variable-size frame (alloca, VLAs): few. */
#define PTP_FPDETECT_WINDOW 32
static int fpd_prologue(const fpd_obj *o, uintptr_t a, size_t size) {
  size_t n = size < PTP_FPDETECT_WINDOW ? size : PTP_FPDETECT_WINDOW;
  if (n < 3 || !fpd_ok(o, a, n, 1)) return 0;
  const uint8_t *c = (const uint8_t *)a;
  for (size_t i = 0; i + 3 <= n; i++)
    if (c[i] == 0x48 && ((c[i + 1] == 0x89 && c[i + 2] == 0xe5) || (c[i + 1] == 0x8b && c[i + 2] == 0xec)))
      return 1;
  return 0;
}

int ptp_fpdetect(const struct dl_phdr_info *info, unsigned *nfuncs, unsigned *nfp) {
  if (nfuncs) *nfuncs = 0;
  if (nfp) *nfp = 0;
  fpd_obj o;
  memset(&o, 0, sizeof o);
  o.base = info->dlpi_addr;
  uintptr_t dyn = 0;
  size_t dynsz = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && o.nsegs < 16) {
      o.segs[o.nsegs].lo = lo;
      o.segs[o.nsegs].hi = lo + ph->p_memsz;
      o.segs[o.nsegs].x = (ph->p_flags & PF_X) != 0;
      o.nsegs++;
    }
    if (ph->p_type == PT_DYNAMIC) { dyn = lo; dynsz = ph->p_memsz; }
  }
  if (!dyn || !fpd_ok(&o, dyn, dynsz, 0)) return 0;
  uintptr_t symtab = 0, hash = 0, gnuhash = 0;
  size_t syment = sizeof(ElfW(Sym));
  for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)dyn;
       (uintptr_t)(d + 1) <= dyn + dynsz && d->d_tag != DT_NULL; d++) {
    if (d->d_tag == DT_SYMTAB) symtab = d->d_un.d_ptr;
    else if (d->d_tag == DT_HASH) hash = d->d_un.d_ptr;
    else if (d->d_tag == DT_GNU_HASH) gnuhash = d->d_un.d_ptr;
    else if (d->d_tag == DT_SYMENT) syment = d->d_un.d_val;
  }
  if (!symtab || syment != sizeof(ElfW(Sym))) return 0;
  size_t count = 0;
  uintptr_t h;
  if (gnuhash && (h = fpd_ptr(&o, gnuhash, 16))) count = fpd_gnu_count(&o, h);
  if (!count && hash && (h = fpd_ptr(&o, hash, 8))) count = ((const uint32_t *)h)[1];
  if (count == 0 || count > (1u << 24)) return 0;
  uintptr_t syms = fpd_ptr(&o, symtab, count * sizeof(ElfW(Sym)));
  if (!syms) return 0;
  unsigned n = 0, with_fp = 0;
  for (size_t i = 0; i < count && n < PTP_FPDETECT_MAX; i++) {
    const ElfW(Sym) *s = (const ElfW(Sym) *)syms + i;
    if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF ||
        s->st_value == 0 || s->st_size < 16)
      continue;
    uintptr_t a = o.base + s->st_value;
    if (!fpd_ok(&o, a, 1, 1)) continue;
    n++;
    with_fp += (unsigned)fpd_prologue(&o, a, s->st_size);
  }
  if (nfuncs) *nfuncs = n;
  if (nfp) *nfp = with_fp;
  /* 70 %: frame-pointer builds have frameless tail-call wrappers (libptprof:
   * 19 of its 24 exported functions copy rsp), builds without show ~0 %. */
  return n >= PTP_FPDETECT_MIN && (uint64_t)with_fp * 10 >= (uint64_t)n * 7;
}
