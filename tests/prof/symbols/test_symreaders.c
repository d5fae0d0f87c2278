/*
 * test_symreaders.c - the symbolizer's own readers against the libdwfl
 * calls they replace (ptp_symbolize_module.c): the ELF symbol table read
 * with libelf (vs dwfl_module_getsym_info per entry), the CU found from
 * our index of .debug_aranges (vs dwfl_module_addrdie) and the line row
 * from dwarf_getsrc_die (vs dwfl_module_getsrc). Two symbolizers without
 * a persistent cache, one in the libdwfl reference mode, on this binary
 * (-O2 -g), libc (DWARF from libc6-dbg when installed) and the vDSO:
 *   - the fast paths are taken (else this proves nothing): the symbol
 *     table of each object is read directly, libc's and this binary's CUs
 *     come from our index;
 *   - the sorted, deduplicated symbol tables are equal entry by entry
 *     (address, size, name, rank);
 *   - for every function symbol's first, second, middle and last byte, and
 *     around every CU run's start and the last range's end (gaps, the
 *     inclusive end, past it): the same CU DIE (or none) and bias;
 *   - for all those PCs, and every PC of the vDSO's text, the full result
 *     (every field of every frame) is the same.
 */
#include "pt_test.h"
#include "prof/symbols/ptp_symbolize_internal.h"
#include "sym_results.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sym_module *module_named(ptp_symbolizer *s, const char *part, bool main_prog) {
  for (size_t i = 0; i < s->nmods; i++) {
    sym_module *m = s->mods[i];
    if (main_prog ? m->is_main : (part ? strstr(m->name, part) != NULL : m->is_vdso)) return m;
  }
  return NULL;
}

static void compare_cu(sym_module *mn, sym_module *mr, uint64_t pc) {
  Dwarf_Addr bn = 0, br = 0;
  Dwarf_Die *dn = ptp_symbolize_module_addrdie(mn, pc, &bn);
  Dwarf_Die *dr = dwfl_module_addrdie(mr->mod, pc, &br);
  PT_ASSERT_MSG(!dn == !dr, "%s pc %#llx: CU %s ours, %s libdwfl's", mn->name,
                (unsigned long long)pc, dn ? "found" : "none", dr ? "found" : "none");
  if (dn) {
    PT_ASSERT_MSG(dwarf_dieoffset(dn) == dwarf_dieoffset(dr), "%s pc %#llx: CU %#llx vs %#llx", mn->name,
                  (unsigned long long)pc, (unsigned long long)dwarf_dieoffset(dn),
                  (unsigned long long)dwarf_dieoffset(dr));
    PT_ASSERT(bn == br);
  }
}

/* Loads the module holding pc in both, compares their symbol tables, and
 * adds the PCs to check (every symbol's bytes 0, 1, mid, last; around the
 * CU runs) to *set. Returns the new-path module. */
static sym_module *check_module(ptp_symbolizer *sn, ptp_symbolizer *sr, uint64_t pc, pcset *set,
                                const char *part, bool main_prog, bool want_dwarf) {
  ptp_sym_result r;
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(sn, pc, &r), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_lookup(sr, pc, &r), 0);
  sym_module *mn = module_named(sn, part, main_prog), *mr = module_named(sr, part, main_prog);
  PT_ASSERT(mn && mr && mn->loaded && mr->loaded && mn->mod && mr->mod);
  PT_ASSERT_MSG(mn->syms_direct, "%s: symbol table not read directly", mn->name);
  PT_ASSERT(!mr->syms_direct);
  PT_ASSERT_UINT_EQ(mn->nsyms, mr->nsyms);
  PT_ASSERT(mn->nsyms > 0);
  for (size_t i = 0; i < mn->nsyms; i++) {
    const sym_elfsym *a = &mn->syms[i], *b = &mr->syms[i];
    PT_ASSERT_MSG(a->addr == b->addr && a->size == b->size && a->rank == b->rank &&
                  strcmp(a->name, b->name) == 0,
                  "%s symbol %zu: %s %#llx+%llu r%d vs %s %#llx+%llu r%d", mn->name, i, a->name,
                  (unsigned long long)a->addr, (unsigned long long)a->size, a->rank, b->name,
                  (unsigned long long)b->addr, (unsigned long long)b->size, b->rank);
    uint64_t len = a->size ? a->size : 1;
    uint64_t pts[4] = {a->addr, a->addr + 1, a->addr + len / 2, a->addr + len - 1};
    for (int k = 0; k < 4; k++) {
      if (k && pts[k] == pts[k - 1]) continue;
      set->pc = realloc(set->pc, (set->n + 1) * sizeof *set->pc);
      PT_ASSERT(set->pc);
      set->pc[set->n++] = pts[k];
    }
  }
  if (want_dwarf) {
    PT_ASSERT_MSG(mn->dw && mr->dw, "%s: no DWARF", mn->name);
    Dwarf_Addr b;
    (void)ptp_symbolize_module_addrdie(mn, pc, &b);   /* builds the index */
    PT_ASSERT_MSG(mn->runs_state == SYM_RUNS_BUILT && mn->nruns > 0, "%s: no CU index (state %d)", mn->name,
                  mn->runs_state);
    for (size_t i = 0; i < mn->nruns; i++) {
      uint64_t st = mn->runs[i].start + mn->dwbias;
      compare_cu(mn, mr, st);
      compare_cu(mn, mr, st - 1);
      compare_cu(mn, mr, st + 1);
    }
    uint64_t end = mn->runs_end + mn->dwbias;
    for (uint64_t a = end - 2; a != end + 3; a++) compare_cu(mn, mr, a);
    for (size_t i = 0; i < set->n; i++) compare_cu(mn, mr, set->pc[i]);
  }
  return mn;
}

__attribute__((noinline, noclone)) static int symr_here(int x) {
  __asm__ volatile("" ::: "memory");
  return x + 1;
}

PT_TEST_T(prof_symreaders_same_as_libdwfl, 300000) {
  ptp_symbolizer *sn, *sr;
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&sn), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_new(&sr), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(sn, NULL), 0);
  PT_ASSERT_INT_EQ(ptp_symbolizer_set_cache_dir(sr, NULL), 0);
  ptp_symbolizer_set_dwfl_reference(sr, true);
  pcset set = {0};
  PT_ASSERT(symr_here(1) == 2);
  check_module(sn, sr, (uint64_t)(uintptr_t)symr_here, &set, NULL, true, true);
  /* libc: with libc6-dbg (scripts/setup.sh installs it) from its debug file */
  sym_module *lc = check_module(sn, sr, (uint64_t)(uintptr_t)&strtod, &set, "/libc.so", false, false);
  if (lc->dw) {
    pcset none = {0};
    check_module(sn, sr, (uint64_t)(uintptr_t)&strtod, &none, "/libc.so", false, true);
    free(none.pc);
  } else {
    fprintf(stderr, "# libc has no DWARF here (libc6-dbg missing): its CU index is not checked\n");
  }
  /* the vDSO: its symbols, and every PC of its text */
  const ptp_sym_mapping *maps;
  size_t nm = ptp_symbolizer_mappings(sn, &maps);
  for (size_t i = 0; i < nm; i++) {
    if (strcmp(maps[i].file, "[vdso]") != 0) continue;
    pcset none = {0};
    check_module(sn, sr, maps[i].start + 0x800, &none, NULL, false, false);
    free(none.pc);
    ptt_pcs_add_range(&set, (const void *)(uintptr_t)maps[i].start, (size_t)(maps[i].limit - maps[i].start));
  }
  char **want = ptt_resolve_all(sr, &set), **got = ptt_resolve_all(sn, &set);
  size_t with_lines = 0;
  for (size_t i = 0; i < set.n; i++) {
    PT_ASSERT_MSG(!strcmp(want[i], got[i]), "pc %#llx differs:\n  libdwfl: %s\n  ours:    %s",
                  (unsigned long long)set.pc[i], want[i], got[i]);
    with_lines += strstr(got[i], ".c:") != NULL;
  }
  PT_ASSERT(set.n > 1000);
  PT_ASSERT(with_lines > 100);   /* lines were compared, not only names */
  fprintf(stderr, "# %zu PCs compared, %zu with a line in a .c file\n", set.n, with_lines);
  ptt_free_results(want, set.n);
  ptt_free_results(got, set.n);
  free(set.pc);
  ptp_symbolizer_del(sn);
  ptp_symbolizer_del(sr);
}
