"""bench/real/elfsyms.py - one symbolizer for every profiler's addresses in
the real-program bench, so that differences between profiles come from
where they sampled and how they unwound, never from how each tool names
functions (perf, go tool pprof and our own symbolizer pick different alias
names, and none of them names the static functions of a stripped object).

A frame is (object path, address as an ELF virtual address of that object).
Its function is, in this order: the sized symbol covering it from the
object's separate debug file (/usr/lib/debug/.build-id/, libc6-dbg), from
its own .symtab, from .dynsym; else the FDE of .eh_frame covering it,
named "fde@<start>" ("_start" at an executable's entry point; every function compiled with unwind tables has one,
so this still tells functions apart in stripped code); else "?".
Reads objects with binutils (readelf, nm); results are cached per path.
"""
import bisect
import os
import re
import subprocess

_cache = {}


def _run(args):
    r = subprocess.run(args, capture_output=True, text=True, errors="replace")
    return r.stdout if r.returncode == 0 else ""


class ElfObject:
    """Symbols, FDE ranges and PT_LOAD segments of one ELF file."""

    def __init__(self, path):
        self.path = path
        self.loads = []   # (p_offset, p_vaddr, p_filesz)
        m = re.search(r"Entry point address:\s+0x([0-9a-f]+)", _run(["readelf", "-hW", path]))
        self.entry = int(m.group(1), 16) if m and path.find(".so") < 0 else None
        for line in _run(["readelf", "-lW", path]).splitlines():
            p = line.split()
            if p and p[0] == "LOAD" and len(p) >= 5:
                self.loads.append((int(p[1], 16), int(p[2], 16), int(p[4], 16)))
        syms = {}
        sources = [path]
        m = re.search(r"Build ID: ([0-9a-f]+)", _run(["readelf", "-nW", path]))
        if m:
            dbg = "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1)[:2], m.group(1)[2:])
            if os.path.exists(dbg):
                sources.insert(0, dbg)
        # Earlier sources win: debug file, then .symtab, then .dynsym.
        for src, extra in [(s, []) for s in sources] + [(path, ["-D"])]:
            for line in _run(["nm", "-S", "--defined-only"] + extra + [src]).splitlines():
                p = line.split()
                if len(p) == 4 and p[2] in "tTwWiI":
                    start, size = int(p[0], 16), int(p[1], 16)
                    if size and start not in syms:
                        syms[start] = (start + size, p[3].split("@", 1)[0])  # no version
        self.syms = sorted((s, e, n) for s, (e, n) in syms.items())
        self.sym_starts = [s for s, _, _ in self.syms]
        fdes = []
        fde = re.compile(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)")
        for line in _run(["readelf", "--debug-dump=frames", path]).splitlines():
            m = fde.search(line)
            if m:
                fdes.append((int(m.group(1), 16), int(m.group(2), 16)))
        fdes.sort()
        self.fdes = fdes
        self.fde_starts = [s for s, _ in fdes]

    def vaddr(self, file_off):
        """File offset -> ELF virtual address (None outside every PT_LOAD)."""
        for off, va, size in self.loads:
            if off <= file_off < off + size:
                return file_off - off + va
        return None

    def function(self, va):
        k = bisect.bisect_right(self.sym_starts, va) - 1
        if k >= 0 and va < self.syms[k][1]:
            return self.syms[k][2]
        k = bisect.bisect_right(self.fde_starts, va) - 1
        if k >= 0 and va < self.fdes[k][1]:
            # A stripped executable's entry point is _start (crt1.o).
            return "_start" if self.fdes[k][0] == self.entry else "fde@%x" % self.fdes[k][0]
        return "?"


def obj(path):
    o = _cache.get(path)
    if o is None:
        o = _cache[path] = ElfObject(path) if os.path.isfile(path) else None
    return o


def function(path, va):
    """Function name of virtual address va in the object at path, "?" when
    nothing covers it, None when path is not a readable file."""
    o = obj(path)
    return o.function(va) if o else None


_SUFFIX = re.compile(r"\.(constprop|isra|part|cold|lto_priv)(\.\d+)?")


def base_name(name):
    """A function name without GCC's clone suffixes (f.constprop.0 -> f)."""
    return _SUFFIX.split(name, 1)[0] if name else name
