/*
 * self_text.c - test helper: the unit-test binary's executable segment
 * (self_text.h).
 */
#include "self_text.h"

#include <errno.h>
#include <link.h>

/* Not inlined and not folded into a caller, so that its address is code of
 * its own with its own symbol. */
__attribute__((noinline)) int pt_self_text_code(int x) {
  __asm__ volatile("" : "+r"(x));
  return x;
}

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  pt_self_text *t = arg;
  uintptr_t code = (uintptr_t)pt_self_text_code;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && code >= lo && code < lo + ph->p_memsz) {
      t->lo = lo;
      t->hi = lo + ph->p_memsz;
      t->fileoff = ph->p_offset;
      return 1;
    }
  }
  return 0;
}

int pt_self_text_find(pt_self_text *t) {
  *t = (pt_self_text){ 0 };
  return dl_iterate_phdr(find_cb, t) ? 0 : -ENOENT;
}
