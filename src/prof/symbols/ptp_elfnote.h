/*
 * ptp_elfnote.h - the one reader of an object's GNU build-id note
 * (NT_GNU_BUILD_ID, name "GNU"), shared by the symbolizer (which keys its
 * symbol cache and checks the file on disk with it) and the unwind-table
 * module (which keys its table cache with it).
 *
 * ptp_elfnote_build_id is sans-I/O: it reads only the bytes it is given,
 * every read bounds-checked, so it can be fuzzed on arbitrary input.
 * ptp_elfnote_build_id_hex applies it to a loaded object's PT_NOTE
 * segments, each only when it lies wholly inside one readable PT_LOAD of
 * the same object (a header may lie; unreadable memory is never touched).
 * Threads: any; reentrant, no allocation, no locks. Not used in a signal
 * handler (it may be, it calls only memcpy/memcmp, but nobody does).
 */
#ifndef PTP_ELFNOTE_H
#define PTP_ELFNOTE_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

/* The longest build id accepted, in bytes: ld's sha1 is 20, md5/uuid 16,
 * --build-id=0xHEX may be longer; the caches' file names hold 64 digits. */
#define PTP_ELFNOTE_BID_MAX 32
/* Size of the hex form with its NUL. */
#define PTP_ELFNOTE_HEX_MAX (PTP_ELFNOTE_BID_MAX * 2 + 1)

/* Finds the first GNU build-id note among the notes in [notes, notes + len)
 * whose name and descriptor start at offsets rounded up to align (8 for
 * 8-aligned note segments, anything else means 4), as libelf reads them. On 0, *id points into the buffer (no copy) and
 * *idlen is 1..PTP_ELFNOTE_BID_MAX. Returns -ENOENT when there is none
 * or a note's name or descriptor runs past the end before one (the
 * walk stops there: what follows a truncated note cannot be framed);
 * -EINVAL when the first GNU build-id note is empty or longer than
 * PTP_ELFNOTE_BID_MAX (it is the object's identity: no later one is looked
 * for). notes may be unaligned; NULL with len 0 is fine. */
int ptp_elfnote_build_id(const void *notes, size_t len, size_t align, const uint8_t **id,
                         size_t *idlen);

/* The build id of a loaded object (from dl_iterate_phdr) in lowercase hex,
 * NUL-terminated, into hex[PTP_ELFNOTE_HEX_MAX]; hex is "" on error.
 * Only PT_NOTE segments inside one readable (PF_R) PT_LOAD are read; call
 * inside the dl_iterate_phdr callback (the loader's lock keeps the object
 * mapped). The first segment holding a build-id note decides. Returns 0
 * or -ENOENT (no usable build id). */
int ptp_elfnote_build_id_hex(const struct dl_phdr_info *info, char hex[PTP_ELFNOTE_HEX_MAX]);

#endif
