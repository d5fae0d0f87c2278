/*
 * ptp_elffile.h - the two questions every reader of an ELF file on disk
 * asks of it (the symbolizer, the debug-file copies, the .debug_frame
 * tables of src/prof/unwind): which section has this name, and is this
 * file the object we loaded (its GNU build id). One answer each, on top of
 * libelf and elfutils' build-id reader (dwelf_elf_gnu_build_id, which
 * looks in the note sections and, without section headers, the PT_NOTE
 * segments), so that no module reads ELF notes or section names by hand.
 *
 * Files are opened by the callers (ptp_file_open_regular) and read with
 * ELF_C_READ (pread, never a mapping: a file cut short under a mapping
 * would fault). Threads: any, on distinct Elf handles; no allocation of
 * its own. Not for signal handlers (libelf allocates).
 */
#ifndef PTP_ELFFILE_H
#define PTP_ELFFILE_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>

/* The section of e named name (shstrndx: e's section-name table, from
 * elf_getshdrstrndx), or NULL; its header in *sh (may be NULL). Sections
 * whose header or name cannot be read are skipped. */
Elf_Scn *ptp_elf_find_scn(Elf *e, size_t shstrndx, const char *name, GElf_Shdr *sh);

/* Whether e's GNU build id is exactly the idlen bytes at id. A file
 * without one, or whose note cannot be read, is not; nor is any file for
 * idlen 0 (or a negative length converted, which no id has). */
bool ptp_elf_build_id_is(Elf *e, const unsigned char *id, size_t idlen);

/* The same with the id in lowercase hex (as ptp_elfnote_build_id_hex
 * gives it for a loaded object); "" never matches. */
bool ptp_elf_build_id_is_hex(Elf *e, const char *hex);

#endif
