/*
 * ptp_elfnote.c - the GNU build-id note reader (see ptp_elfnote.h).
 * Invariant of the walk: off <= len at each step's start; each size is
 * compared with what is left (len - off) before it is added, so no sum
 * can wrap.
 */
#include "prof/symbols/ptp_elfnote.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

int ptp_elfnote_build_id(const void *notes, size_t len, size_t align, const uint8_t **id,
                         size_t *idlen) {
  const uint8_t *p = notes;
  size_t a = align == 8 ? 8 : 4;
  size_t off = 0;
  /* Elf32_Nhdr and Elf64_Nhdr are the same three 32-bit words. The name
   * and the descriptor each start at the running offset rounded up to a
   * (as libelf's gelf_getnote reads them): with a = 8 the descriptor of
   * "GNU" sits right after the 16 bytes of header and name, not 4 later. */
  while (len - off >= sizeof(Elf64_Nhdr)) {
    Elf64_Nhdr nh;
    memcpy(&nh, p + off, sizeof nh);
    off += sizeof nh;
    if (nh.n_namesz > len - off) return -ENOENT;
    const uint8_t *name = p + off;
    off += nh.n_namesz;
    off = (off + a - 1) & ~(a - 1);   /* off <= len + 7: no wrap */
    if (off > len || nh.n_descsz > len - off) return -ENOENT;
    const uint8_t *desc = p + off;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
      if (nh.n_descsz == 0 || nh.n_descsz > PTP_ELFNOTE_BID_MAX) return -EINVAL;
      *id = desc;
      *idlen = nh.n_descsz;
      return 0;
    }
    off += nh.n_descsz;
    off = (off + a - 1) & ~(a - 1);
    if (off > len) return -ENOENT;   /* the last note's padding may be cut */
  }
  return -ENOENT;
}

/* Nonzero when [lo, lo + n) lies inside one readable PT_LOAD of info. */
static int note_readable(const struct dl_phdr_info *info, uintptr_t lo, size_t n) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R)) continue;
    uintptr_t slo = info->dlpi_addr + ph->p_vaddr, shi = slo + ph->p_memsz;
    if (shi < slo) continue;
    if (lo >= slo && lo <= shi && n <= shi - lo) return 1;
  }
  return 0;
}

int ptp_elfnote_build_id_hex(const struct dl_phdr_info *info, char hex[PTP_ELFNOTE_HEX_MAX]) {
  static const char digits[] = "0123456789abcdef";
  hex[0] = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (a + ph->p_memsz < a || !note_readable(info, a, ph->p_memsz)) continue;
    const uint8_t *id;
    size_t n;
    int r = ptp_elfnote_build_id((const void *)a, ph->p_memsz, ph->p_align, &id, &n);
    if (r == -EINVAL) return -ENOENT;   /* the object's id note is unusable: no other */
    if (r != 0) continue;
    for (size_t k = 0; k < n; k++) {
      hex[2 * k] = digits[id[k] >> 4];
      hex[2 * k + 1] = digits[id[k] & 15];
    }
    hex[2 * n] = 0;
    return 0;
  }
  return -ENOENT;
}
