/*
 * fuzz_elfnote.c - libFuzzer harness of the GNU build-id note reader
 * (src/prof/symbols/ptp_elfnote.c). The first input byte picks the alignment (odd:
 * 8, even: 4), the rest are the note bytes, copied into a buffer of
 * exactly their size so ASan sees any read past them. Checked: a found id
 * lies inside the buffer, is 1..PTP_ELFNOTE_BID_MAX bytes, is preceded by
 * a header naming it (type NT_GNU_BUILD_ID, namesz 4, "GNU"), and the
 * result is the same on a second call (no hidden state).
 */
#include "prof/symbols/ptp_elfnote.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t align = (data[0] & 1) ? 8 : 4;
  size_t n = size - 1;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return 0;
  memcpy(buf, data + 1, n);
  const uint8_t *id = NULL, *id2 = NULL;
  size_t len = 0, len2 = 0;
  int r = ptp_elfnote_build_id(buf, n, align, &id, &len);
  int r2 = ptp_elfnote_build_id(buf, n, align, &id2, &len2);
  if (r != r2) abort();
  if (r != 0 && r != -ENOENT && r != -EINVAL) abort();
  if (r == 0) {
    if (id != id2 || len != len2) abort();
    if (len < 1 || len > PTP_ELFNOTE_BID_MAX) abort();
    if (id < buf + sizeof(Elf64_Nhdr) + 4 || id + len > buf + n) abort();
    /* the descriptor of "GNU\0" follows its 12-byte header and 4-byte
     * name directly: 16 is a multiple of both alignments */
    const uint8_t *hdr = id - 4 - sizeof(Elf64_Nhdr);
    Elf64_Nhdr nh;
    memcpy(&nh, hdr, sizeof nh);
    if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 || nh.n_descsz != len) abort();
    if (memcmp(hdr + sizeof nh, "GNU", 4) != 0) abort();
  }
  free(buf);
  return 0;
}
