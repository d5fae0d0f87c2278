/*
 * ptp_symbolize_syms.c - the ELF symbols of one loaded object of the
 * symbolizer (the first unit of ptp_symbolize_internal.h: calls none of
 * the others), and the stable key sort the units share.
 *
 * DESIGN:
 *  - ELF symbols: collected once per module from the table libdwfl picks
 *    (dwfl_module_getsymtab: .symtab of the file or its debug file, else
 *    .dynsym), read with libelf in place where libdwfl's per-entry
 *    dwfl_module_getsym_info reduces to arithmetic (syms_from_elf says
 *    when; else that call per entry: ~1.1 ms for libc's 10k entries,
 *    the whole direct read ~0.45 ms with the names), sorted by
 *    address with a radix sort (qsort was 1.5 ms of a libc miss); lookups
 *    are binary searches (dwfl_module_addrinfo rescans the table per call,
 *    ~80 us: too slow for 10k PCs). Version-stripped names are copied into
 *    the module's string arena (ptp_strarena.h).
 *  - aliases at one address: the preferred one (elfsym_rank) names it;
 *    the order is exactly qsort's with elfsym_cmp (the reference mode of
 *    ptp_symbolizer_set_dwfl_reference still uses qsort, and
 *    test_symreaders.c compares the tables entry by entry).
 * Calls only libdwfl/libelf and ptp_strarena. Threads: the symbolizer's.
 */
#include "prof/symbols/ptp_symbolize_internal.h"
#include "prof/ptp_alloc.h"

#include <elf.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

/* ---- sorting ---- */

/* See ptp_symbolize_internal.h. An LSD radix sort, 11 bits a pass over
 * only the bits in which the keys differ from the smallest (2 passes for
 * libc's 1.8 MB of text). glibc's qsort took ~1.5 ms for libc's 6.7k
 * symbols here (an indirect merge sort calling the comparator ~85k
 * times); this and the in-place permutation after it ~0.35 ms. */
void ptp_symbolize_key_sort(sym_key *v, sym_key *tmp, size_t n) {
  if (n < 2) return;
  uint64_t lo = v[0].key, hi = v[0].key;
  for (size_t i = 1; i < n; i++) {
    if (v[i].key < lo) lo = v[i].key;
    if (v[i].key > hi) hi = v[i].key;
  }
  uint64_t span = hi - lo;
  sym_key *a = v, *b = tmp;
  for (unsigned shift = 0; shift < 64 && (span >> shift) != 0; shift += 11) {
    uint32_t cnt[2048] = {0};
    for (size_t i = 0; i < n; i++) cnt[((a[i].key - lo) >> shift) & 2047]++;
    uint32_t sum = 0;
    for (size_t d = 0; d < 2048; d++) {
      uint32_t c = cnt[d];
      cnt[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) b[cnt[((a[i].key - lo) >> shift) & 2047]++] = a[i];
    sym_key *t = a;
    a = b;
    b = t;
  }
  if (a != v) memcpy(v, a, n * sizeof *v);
}

/* ---- ELF symbols ---- */

/* Which of several aliases at one address names it: a default-versioned or
 * unversioned symbol over a compat one ("cfree@GLIBC_2.2.5" is an old
 * alias of free), a name without leading '_' over an internal one
 * (__libc_malloc), GLOBAL over WEAK over LOCAL, a sized symbol over an
 * unsized one. Remaining ties: shorter name, then alphabetical. */
static int elfsym_rank(const char *raw, const char *at, const GElf_Sym *sym) {
  bool compat = at && at[1] != '@';
  int bind = GELF_ST_BIND(sym->st_info);
  return (compat ? 0 : 16) + (raw[0] != '_' ? 8 : 0) +
         (bind == STB_GLOBAL ? 4 : bind == STB_WEAK ? 2 : 0) + (sym->st_size ? 1 : 0);
}

static int elfsym_cmp(const void *a, const void *b) {
  const sym_elfsym *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  /* at one address: the preferred alias first */
  if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
  if (x->len != y->len) return x->len < y->len ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Sorts v[0..n) as qsort with elfsym_cmp would (glibc's qsort is a
 * stable merge sort here): stably by address (ptp_symbolize_key_sort, then the order
 * applied in place, cycle by cycle), then each run of one address
 * (aliases: a few entries) by insertion with elfsym_cmp, which is stable
 * too. Falls back to qsort without memory. */
static void elfsym_sort(sym_elfsym *v, size_t n) {
  sym_key *keys = ptp_malloc(2 * n * sizeof *keys);
  if (!keys) {
    qsort(v, n, sizeof *v, elfsym_cmp);
    return;
  }
  for (size_t i = 0; i < n; i++) keys[i] = (sym_key){v[i].addr, i};
  ptp_symbolize_key_sort(keys, keys + n, n);
  /* position i takes element keys[i].idx; a placed position gets idx = i */
  for (size_t i = 0; i < n; i++) {
    if (keys[i].idx == i) continue;
    sym_elfsym x = v[i];
    size_t j = i;
    while (keys[j].idx != i) {
      size_t from = (size_t)keys[j].idx;
      v[j] = v[from];
      keys[j].idx = j;
      j = from;
    }
    v[j] = x;
    keys[j].idx = j;
  }
  free(keys);
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && v[e].addr == v[g].addr) e++;
    for (size_t i = g + 1; i < e; i++) {
      sym_elfsym x = v[i];
      size_t j = i;
      for (; j > g && elfsym_cmp(&v[j - 1], &x) > 0; j--) v[j] = v[j - 1];
      v[j] = x;
    }
    g = e;
  }
}

/* Keeps one symbol (raw name as in the table, its value and final address,
 * its section index as dwfl_module_getsym_info reports it) if it names a
 * defined function: v[*k] is filled and *k advanced. */
static void elfsym_keep(sym_module *m, sym_elfsym *v, size_t *k, const char *name,
                        const GElf_Sym *sym, GElf_Addr addr, GElf_Word shndx) {
  if (!name || !*name) return;
  int type = GELF_ST_TYPE(sym->st_info);
  if (type != STT_FUNC && type != STT_GNU_IFUNC) return;
  if (shndx == SHN_UNDEF || addr == 0) return;
  const char *at = strchr(name, '@');
  int rank = elfsym_rank(name, at, sym);
  size_t len = at ? (size_t)(at - name) : strlen(name);
  /* "memcpy@@GLIBC_2.14" -> "memcpy": the viewer shows the plain name. */
  if (at && !(name = ptp_strarena_dup_n(&m->strs, name, len))) return;
  v[*k] = (sym_elfsym){addr, sym->st_size, name, rank, len > UINT32_MAX ? UINT32_MAX : (uint32_t)len};
  (*k)++;
}

/* The symbol table as libdwfl reads it, one dwfl_module_getsym_info per
 * entry (~0.1 us each: a section header lookup, the ebl hooks, the bias
 * arithmetic). The reference for syms_from_elf, and its fallback. */
static size_t syms_from_dwfl(sym_module *m, int n, sym_elfsym *v) {
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    Elf *elf;
    Dwarf_Addr bias;
    const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx, &elf, &bias);
    if (name) elfsym_keep(m, v, &k, name, &sym, addr, shndx);
  }
  return k;
}

/* The same n entries read with libelf directly (libc's 10k: ~0.45 ms with
 * the names, where the calls alone took ~1.1 ms). Used only when what
 * dwfl_module_getsym_info does reduces to plain arithmetic, so every name,
 * address and section index is the one it would give (libdwfl 0.188,
 * __libdwfl_getsym): an x86-64 object that is not ET_REL (no function
 * descriptors, no ebl symbol resolution: the value is the symbol's value
 * plus the table's file bias when its section is SHF_ALLOC, else as is,
 * and as is for SHN_ABS/SHN_COMMON); one table, not libdwfl's merge of a
 * table with a .gnu_debugdata one, found as the only SYMTAB/DYNSYM
 * section of libdwfl's symbol file with n entries whose first and last
 * names are at the addresses libdwfl returns for them; no
 * SHT_SYMTAB_SHNDX and no SHN_XINDEX entry. Returns false (v untouched
 * beyond *k, which the caller discards) when any of that does not hold. */
static bool syms_from_elf(sym_module *m, int n, sym_elfsym *v, size_t *kout) {
  GElf_Addr mbias;
  Elf *main_elf = dwfl_module_getelf(m->mod, &mbias);
  GElf_Ehdr eh;
  if (n < 2 || !main_elf || !gelf_getehdr(main_elf, &eh) || eh.e_machine != EM_X86_64 ||
      eh.e_type == ET_REL)
    return false;
  /* what libdwfl says of the first real and the last entry */
  GElf_Sym s1, sl;
  GElf_Addr a1, al;
  GElf_Word x1, xl;
  Elf *e1, *el;
  Dwarf_Addr b1, bl;
  const char *n1 = dwfl_module_getsym_info(m->mod, 1, &s1, &a1, &x1, &e1, &b1);
  const char *nl = dwfl_module_getsym_info(m->mod, n - 1, &sl, &al, &xl, &el, &bl);
  if (!n1 || !nl || !e1 || e1 != el || b1 != bl) return false;
  Elf *elf = e1;
  size_t shnum;
  if (elf_getshdrnum(elf, &shnum) != 0 || shnum == 0) return false;
  Elf_Scn *tab = NULL, *scn = NULL;
  GElf_Shdr tsh;
  while ((scn = elf_nextscn(elf, scn)) != NULL) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) return false;
    if (sh.sh_type == SHT_SYMTAB_SHNDX) return false;
    if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_entsize == 0 ||
        sh.sh_size / sh.sh_entsize != (uint64_t)n)
      continue;
    if (tab) return false;   /* two candidates: cannot tell which */
    tab = scn;
    tsh = sh;
  }
  if (!tab) return false;
  Elf_Data *d = elf_getdata(tab, NULL);
  Elf_Scn *strscn = elf_getscn(elf, tsh.sh_link);
  Elf_Data *sd = strscn ? elf_getdata(strscn, NULL) : NULL;
  if (!d || !sd || !sd->d_buf) return false;
  unsigned char *alloc = ptp_malloc(shnum);
  if (!alloc) return false;
  for (size_t i = 0; i < shnum; i++) {
    GElf_Shdr sh;
    Elf_Scn *c = elf_getscn(elf, i);
    /* no header: libdwfl counts the section as allocated */
    alloc[i] = !c || !gelf_getshdr(c, &sh) || (sh.sh_flags & SHF_ALLOC);
  }
  /* A 64-bit table of our byte order is read in place (what gelf_getsym
   * copies out, less its per-entry checks and call) */
  const Elf64_Sym *raw = NULL;
  if (gelf_getclass(elf) == ELFCLASS64 && d->d_type == ELF_T_SYM && d->d_buf &&
      d->d_size / sizeof(Elf64_Sym) >= (size_t)n && ((uintptr_t)d->d_buf & 7) == 0)
    raw = d->d_buf;
  size_t k = 0;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    GElf_Sym sym;
    if (raw) sym = raw[i];
    else if (!gelf_getsym(d, i, &sym)) continue;   /* libdwfl: NULL, skipped */
    if (sym.st_shndx == SHN_XINDEX) { ok = false; break; }
    if (sym.st_name >= sd->d_size) continue;
    const char *name = (const char *)sd->d_buf + sym.st_name;
    if ((i == 1 && name != n1) || (i == n - 1 && name != nl)) { ok = false; break; }
    bool in_alloc = true;
    GElf_Word shndx = sym.st_shndx;
    if (shndx < SHN_LORESERVE && shndx != SHN_UNDEF) in_alloc = shndx >= shnum || alloc[shndx];
    GElf_Addr addr = sym.st_value;
    if (shndx != SHN_ABS && shndx != SHN_UNDEF && shndx != SHN_COMMON && in_alloc) addr += b1;
    if ((i == 1 && addr != a1) || (i == n - 1 && addr != al)) { ok = false; break; }
    elfsym_keep(m, v, &k, name, &sym, addr, in_alloc ? shndx : (GElf_Word)-1);
  }
  free(alloc);
  *kout = k;
  return ok;
}

void ptp_symbolize_syms_load(sym_module *m) {
  int n = dwfl_module_getsymtab(m->mod);
  if (n <= 0) return;
  sym_elfsym *v = ptp_malloc((size_t)n * sizeof *v);
  if (!v) return;
  size_t k = 0;
  m->syms_direct = !m->dwfl_reference && syms_from_elf(m, n, v, &k);
  if (!m->syms_direct) k = syms_from_dwfl(m, n, v);
  /* the reference mode keeps libdwfl's reading and qsort's order, which
   * elfsym_sort must reproduce */
  if (m->dwfl_reference) qsort(v, k, sizeof *v, elfsym_cmp);
  else elfsym_sort(v, k);
  /* One symbol per address (aliases like __libc_malloc/malloc share one):
   * the first after sorting is the preferred one; a sized alias lends its
   * size when the preferred one has none. */
  size_t w = 0;
  for (size_t i = 0; i < k; i++) {
    if (w && v[w - 1].addr == v[i].addr) {
      if (!v[w - 1].size) v[w - 1].size = v[i].size;
      continue;
    }
    v[w++] = v[i];
  }
  m->syms = v;
  m->nsyms = w;
  m->has_syms = w > 0;
}

const sym_elfsym *ptp_symbolize_syms_find(const sym_module *m, uint64_t addr) {
  size_t lo = 0, hi = m->nsyms;
  while (lo < hi) {   /* first symbol with addr > target */
    size_t mid = lo + (hi - lo) / 2;
    if (m->syms[mid].addr <= addr) lo = mid + 1; else hi = mid;
  }
  if (lo == 0) return NULL;
  const sym_elfsym *c = &m->syms[lo - 1];
  if (c->size && addr >= c->addr + c->size) return NULL;
  return c;
}
