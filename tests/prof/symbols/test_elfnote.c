/*
 * test_elfnote.c - the GNU build-id note reader (ptp_elfnote) on crafted
 * note bytes and on real loaded objects:
 *   - a lone build-id note (4- and 8-aligned), found in place;
 *   - several notes where the second is the build id (the first, an ABI
 *     tag, is skipped by its padded sizes);
 *   - a note whose name is not "GNU" (or "GNU" without its NUL, or a
 *     longer name starting "GNU") with the build-id type is not one;
 *   - a truncated header, name or descriptor, and a descsz past the
 *     segment (also near 4 GiB, which must not wrap), are refused;
 *   - an empty build id and one over PTP_ELFNOTE_BID_MAX are refused and
 *     stop the walk (a later valid-looking note is not taken);
 *   - libc's id from its PT_NOTE in memory equals the one libelf reads
 *     from its file (dwelf_elf_gnu_build_id), and the unwind-table cache's
 *     identity of libc (ptp_cficache_ident) carries the same.
 */
#include "pt_test.h"
#include "prof/unwind/ptp_cfi_internal.h"
#include "prof/unwind/ptp_cficache.h"
#include "prof/symbols/ptp_elfnote.h"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct nbuf {
  uint8_t b[512];
  size_t n;
} nbuf;

/* Appends one note: header, name (namesz bytes of name, NUL included if
 * the caller counts it), desc, each starting at an offset rounded up to
 * align (the layout ld writes and libelf reads). */
static void add_note(nbuf *nb, size_t align, uint32_t type, const char *name, uint32_t namesz,
                     const uint8_t *desc, uint32_t descsz) {
  Elf64_Nhdr h = {namesz, descsz, type};
  memcpy(nb->b + nb->n, &h, sizeof h);
  nb->n += sizeof h;
  memset(nb->b + nb->n, 0, 256);
  memcpy(nb->b + nb->n, name, namesz);
  nb->n = (nb->n + namesz + align - 1) & ~(align - 1);
  if (desc) memcpy(nb->b + nb->n, desc, descsz);
  nb->n = (nb->n + descsz + align - 1) & ~(align - 1);
}

static const uint8_t ID20[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
                                 7, 8, 9, 10, 11, 12, 13, 14, 15, 0xff};
static const uint8_t ABI[16] = {0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};

PT_TEST(prof_elfnote_single_and_aligned) {
  for (size_t align = 4; align <= 8; align += 4) {
    nbuf nb = {.n = 0};
    add_note(&nb, align, NT_GNU_BUILD_ID, "GNU", 4, ID20, 20);
    const uint8_t *id = NULL;
    size_t n = 0;
    PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, align, &id, &n), 0);
    PT_ASSERT_UINT_EQ(n, 20);
    PT_ASSERT(id == nb.b + 16);   /* in place: 12-byte header + "GNU\0" is aligned */
    PT_ASSERT(memcmp(id, ID20, 20) == 0);
  }
  /* unaligned buffer start: the reader copies the header */
  uint8_t raw[64 + 1];
  nbuf nb = {.n = 0};
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 4, ID20, 20);
  memcpy(raw + 1, nb.b, nb.n);
  const uint8_t *id = NULL;
  size_t n = 0;
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(raw + 1, nb.n, 4, &id, &n), 0);
  PT_ASSERT(n == 20 && memcmp(id, ID20, 20) == 0);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(NULL, 0, 4, &id, &n), -ENOENT);
}

PT_TEST(prof_elfnote_second_note_is_the_id) {
  for (size_t align = 4; align <= 8; align += 4) {
    nbuf nb = {.n = 0};
    add_note(&nb, align, NT_GNU_ABI_TAG, "GNU", 4, ABI, 16);
    /* a name of 5 bytes: its padding differs between the alignments */
    add_note(&nb, align, 0x100, "Go\0\0", 5, ABI, 3);
    size_t at = nb.n;
    add_note(&nb, align, NT_GNU_BUILD_ID, "GNU", 4, ID20, 20);
    const uint8_t *id = NULL;
    size_t n = 0;
    PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, align, &id, &n), 0);
    PT_ASSERT_UINT_EQ(n, 20);
    PT_ASSERT(id == nb.b + at + 16);
  }
}

PT_TEST(prof_elfnote_name_not_gnu) {
  const uint8_t *id = NULL;
  size_t n = 0;
  nbuf nb = {.n = 0};
  add_note(&nb, 4, NT_GNU_BUILD_ID, "LNX", 4, ID20, 20);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n), -ENOENT);
  nb.n = 0;
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 3, ID20, 20);   /* no NUL */
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n), -ENOENT);
  nb.n = 0;
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNUX", 5, ID20, 20);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n), -ENOENT);
  /* the right name with another type is not the id either, but the walk
   * goes on past it to the real one */
  nb.n = 0;
  add_note(&nb, 4, NT_GNU_BUILD_ID, "LNX", 4, ABI, 16);
  add_note(&nb, 4, NT_GNU_ABI_TAG, "GNU", 4, ABI, 16);
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 4, ID20, 20);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n), 0);
  PT_ASSERT(n == 20 && memcmp(id, ID20, 20) == 0);
}

PT_TEST(prof_elfnote_truncated) {
  const uint8_t *id = NULL;
  size_t n = 0;
  nbuf nb = {.n = 0};
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 4, ID20, 20);
  /* every cut short of the whole note: header, name or descriptor */
  for (size_t len = 0; len < nb.n; len++)
    PT_ASSERT_MSG(ptp_elfnote_build_id(nb.b, len, 4, &id, &n) == -ENOENT, "len %zu", len);
  /* the id after a truncated first note is not found: it cannot be framed */
  nbuf two = {.n = 0};
  add_note(&two, 4, NT_GNU_ABI_TAG, "GNU", 4, ABI, 16);
  add_note(&two, 4, NT_GNU_BUILD_ID, "GNU", 4, ID20, 20);
  Elf64_Nhdr h;
  memcpy(&h, two.b, sizeof h);
  h.n_descsz = 200;   /* past the segment */
  memcpy(two.b, &h, sizeof h);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(two.b, two.n, 4, &id, &n), -ENOENT);
}

PT_TEST(prof_elfnote_descsz_past_segment) {
  const uint8_t *id = NULL;
  size_t n = 0;
  uint32_t sizes[] = {21, 24, 25, 0x7fffffffu, 0xfffffff0u, 0xfffffffdu, 0xffffffffu};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    nbuf nb = {.n = 0};
    add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 4, ID20, 20);
    Elf64_Nhdr h;
    memcpy(&h, nb.b, sizeof h);
    h.n_descsz = sizes[k];
    memcpy(nb.b, &h, sizeof h);
    PT_ASSERT_MSG(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n) == -ENOENT, "descsz %u", sizes[k]);
    /* a huge namesz must not wrap either */
    h.n_descsz = 20;
    h.n_namesz = sizes[k];
    memcpy(nb.b, &h, sizeof h);
    PT_ASSERT_MSG(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n) == -ENOENT, "namesz %u", sizes[k]);
  }
}

PT_TEST(prof_elfnote_empty_and_oversized_id) {
  const uint8_t *id = NULL;
  size_t n = 0;
  uint8_t big[PTP_ELFNOTE_BID_MAX + 1];
  memset(big, 0xab, sizeof big);
  nbuf nb = {.n = 0};
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 4, NULL, 0);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n), -EINVAL);
  /* a valid-looking id after the empty one is not taken */
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 4, ID20, 20);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n), -EINVAL);
  nb.n = 0;
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 4, big, PTP_ELFNOTE_BID_MAX + 1);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n), -EINVAL);
  nb.n = 0;
  add_note(&nb, 4, NT_GNU_BUILD_ID, "GNU", 4, big, PTP_ELFNOTE_BID_MAX);
  PT_ASSERT_INT_EQ(ptp_elfnote_build_id(nb.b, nb.n, 4, &id, &n), 0);
  PT_ASSERT_UINT_EQ(n, PTP_ELFNOTE_BID_MAX);
}

typedef struct libc_find {
  char hex[PTP_ELFNOTE_HEX_MAX];
  char cfi[PTP_CFI_BID_MAX];
  char path[512];
  int r, rc;
} libc_find;

static int find_libc(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  libc_find *f = data;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "/libc.so")) return 0;
  snprintf(f->path, sizeof f->path, "%s", info->dlpi_name);
  f->r = ptp_elfnote_build_id_hex(info, f->hex);
  ptp_cfi_objinfo o;
  ptp_cfi_obj_scan(info, &o);
  uint64_t key;
  f->rc = ptp_cficache_ident(info, &o, f->cfi, &key);
  return 1;
}

PT_TEST(prof_elfnote_libc_matches_libelf) {
  libc_find f = {.r = 1, .rc = 1};
  PT_ASSERT(dl_iterate_phdr(find_libc, &f) == 1);
  PT_ASSERT_INT_EQ(f.r, 0);
  PT_ASSERT_INT_EQ(f.rc, 0);
  PT_ASSERT(strcmp(f.hex, f.cfi) == 0);
  elf_version(EV_CURRENT);
  int fd = open(f.path, O_RDONLY | O_CLOEXEC);
  PT_ASSERT(fd >= 0);
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  PT_ASSERT(e != NULL);
  const void *bits = NULL;
  ssize_t n = dwelf_elf_gnu_build_id(e, &bits);
  PT_ASSERT(n > 0 && n <= PTP_ELFNOTE_BID_MAX);
  char want[PTP_ELFNOTE_HEX_MAX];
  for (ssize_t i = 0; i < n; i++) snprintf(want + 2 * i, 3, "%02x", ((const uint8_t *)bits)[i]);
  elf_end(e);
  close(fd);
  PT_ASSERT_MSG(strcmp(f.hex, want) == 0, "memory %s file %s", f.hex, want);
}
