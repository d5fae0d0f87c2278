/*
 * ptp_elffile.c - see ptp_elffile.h.
 */
#include "prof/symbols/ptp_elffile.h"

#include <elfutils/libdwelf.h>
#include <string.h>

Elf_Scn *ptp_elf_find_scn(Elf *e, size_t shstrndx, const char *name, GElf_Shdr *out) {
  Elf_Scn *scn = NULL;
  while ((scn = elf_nextscn(e, scn)) != NULL) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char *sn = elf_strptr(e, shstrndx, sh.sh_name);
    if (!sn || strcmp(sn, name) != 0) continue;
    if (out) *out = sh;
    return scn;
  }
  return NULL;
}

bool ptp_elf_build_id_is(Elf *e, const unsigned char *id, size_t idlen) {
  const void *bits = NULL;
  ssize_t n = dwelf_elf_gnu_build_id(e, &bits);
  return idlen > 0 && n > 0 && (size_t)n == idlen && bits && memcmp(bits, id, idlen) == 0;
}

bool ptp_elf_build_id_is_hex(Elf *e, const char *hex) {
  static const char digits[] = "0123456789abcdef";
  const void *bits = NULL;
  ssize_t n = dwelf_elf_gnu_build_id(e, &bits);
  if (n <= 0 || !bits || strlen(hex) != 2 * (size_t)n) return false;
  const unsigned char *p = bits;
  for (ssize_t i = 0; i < n; i++)
    if (hex[2 * i] != digits[p[i] >> 4] || hex[2 * i + 1] != digits[p[i] & 15]) return false;
  return true;
}
