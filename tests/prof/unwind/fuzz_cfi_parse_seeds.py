#!/usr/bin/env python3
"""Writes the seeds of tests/prof/cfi_parse_fuzz_test.sh into
tests/prof/fuzz_seeds/cfi_parse (run on demand; the seeds are committed).
Each seed is a control byte (bit 0: bias, bits 1-2: row limit; see
fuzz_cfi_parse.c) and a .debug_frame section: DWARF 2 CFI, version 1, 8-byte
addresses, one CIE at offset 0 (CFA = rsp + 8, return address at CFA - 8).
With a C compiler and objcopy at hand, also the .debug_frame gcc writes for
a small file (-fno-asynchronous-unwind-tables)."""
import os
import shutil
import struct
import subprocess
import tempfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz_seeds", "cfi_parse")


def uleb(v):
    b = bytearray()
    while True:
        x = v & 0x7f
        v >>= 7
        b.append(x | (0x80 if v else 0))
        if not v:
            return bytes(b)


def entry(body):
    body += b"\0" * (-(len(body) + 4) % 4)      # DW_CFA_nop padding
    return struct.pack("<I", len(body)) + body


def cie():
    return entry(struct.pack("<IBB", 0xffffffff, 1, 0) + uleb(1) + b"\x78\x10"
                 + b"\x0c\x07\x08" + b"\x90\x01")


def fde(pc, rng, insns=b""):
    return entry(struct.pack("<IQQ", 0, pc, rng) + insns)


def cfa(off):
    return b"\x0e" + uleb(off)


def write(name, ctl, sec):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([ctl]) + sec)


def main():
    os.makedirs(OUT, exist_ok=True)
    write("long-range", 3, cie() + fde(0x1000, 200000, cfa(24)))
    write("two-rules", 6, cie() + b"".join(fde(0x1000 + 32 * i, 16, cfa(16) if i % 2 else b"")
                                             for i in range(40)))
    write("many-rules", 5, cie() + b"".join(fde(0x1000 + 32 * i, 16, cfa(8 + 8 * i))
                                              for i in range(300)))
    write("past-4g", 1, cie() + fde(0x2000, 64, cfa(16)) + fde((1 << 32) + 0x1000, 64, cfa(24))
          + fde((1 << 32) - 32, 64, cfa(32)))
    # a prologue: push rbp at +1 (CFA rsp+16, rbp at CFA-16), mov rsp,rbp at
    # +4 (CFA rbp+16), and a remember/restore pair around an epilogue
    prologue = (b"\x41" + cfa(16) + b"\x86\x02" + b"\x43" + b"\x0d\x06"
                + b"\x0a" + b"\x48" + b"\x0c\x07\x08" + b"\x0b")
    write("prologue", 7, cie() + fde(0x4000, 0x80, prologue) + fde(0x3000, 0x40))
    write("overlap", 7, cie() + fde(0x1000, 0x100, cfa(16)) + fde(0x1080, 0x100, cfa(24)))
    cc, objcopy = shutil.which("cc"), shutil.which("objcopy")
    if cc and objcopy:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "a.c")
            with open(src, "w") as f:
                f.write("int g(int *p, int n) { int s = 0; for (int i = 0; i < n; i++) s += p[i];"
                        " return s; }\n"
                        "int h(int n) { int a[64]; for (int i = 0; i < 64; i++) a[i] = i * n;"
                        " return g(a, 64); }\n"
                        "int k(unsigned n) { volatile char big[70000]; big[n % 70000] = 1;"
                        " volatile char *p = __builtin_alloca(n + 1); p[0] = big[3];"
                        " return p[n / 2]; }\n")
            obj, sec = os.path.join(d, "a.o"), os.path.join(d, "df")
            subprocess.run([cc, "-O2", "-g", "-fno-asynchronous-unwind-tables", "-c", src, "-o", obj],
                           check=True)
            subprocess.run([objcopy, "--dump-section", ".debug_frame=" + sec, obj, os.path.join(d, "b.o")],
                           check=True)
            with open(sec, "rb") as f:
                write("gcc", 1, f.read())


if __name__ == "__main__":
    main()
