"""tests/pprof_raw.py - a profile read back through `go tool pprof -raw`
(the real reader), as plain Python data. Shared by test checkers
(tests/prof/jit_check.py) and benches (bench/real/real.py); not a test.

  raw = read(path)        # runs `go tool pprof -raw -symbolize=none PATH`
  raw = parse(text)       # the same from -raw's output

raw.samples:   [(value of the last sample type, [location id, ...]), ...]
               locations leaf first, as pprof prints them
raw.locations: {id: Location(addr, mapping id (0: none), [line text, ...])}
               one text a frame, leaf (innermost inlined) first; the
               physical function is the last; text is "FUNC FILE:LINE
               s=START" or "" for an unnamed location
raw.mappings:  {id: Mapping(start, limit, offset, file)}
"""
import collections
import re
import subprocess

Location = collections.namedtuple("Location", "addr mapping lines")
Mapping = collections.namedtuple("Mapping", "start limit offset file")
Raw = collections.namedtuple("Raw", "samples locations mappings")

_SAMPLE = re.compile(r"^\s+(\d+)\s+(\d+):((?:\s+\d+)*)\s*$")
_LOC = re.compile(r"^\s+(\d+): 0x([0-9a-f]+)(?: M=(\d+))?\s*(.*)$")
_MAP = re.compile(r"^(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+)\s*(\S*)")


def parse(text):
    section, last = None, None
    samples, locs, maps = [], {}, {}
    for line in text.splitlines():
        if line.startswith("Samples:"):
            section = "s"
        elif line.startswith("Locations"):
            section = "l"
        elif line.startswith("Mappings"):
            section = "m"
        elif section == "s":
            m = _SAMPLE.match(line)
            if m:
                samples.append((int(m.group(2)), [int(x) for x in m.group(3).split()]))
        elif section == "l":
            m = _LOC.match(line)
            if m:
                last = int(m.group(1))
                text1 = m.group(4).strip()
                locs[last] = Location(int(m.group(2), 16), int(m.group(3) or 0),
                                      [text1] if text1 else [])
            elif last is not None and line.strip():
                locs[last].lines.append(line.strip())   # the next frame out (inlined into)
        elif section == "m":
            m = _MAP.match(line)
            if m:
                maps[int(m.group(1))] = Mapping(int(m.group(2), 16), int(m.group(3), 16),
                                                int(m.group(4), 16), m.group(5))
    return Raw(samples, locs, maps)


def read(path):
    """Raises RuntimeError with pprof's message when it cannot read PATH."""
    r = subprocess.run(["go", "tool", "pprof", "-raw", "-symbolize=none", path],
                       capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise RuntimeError("go tool pprof -raw %s: %s" % (path, r.stderr[-500:]))
    return parse(r.stdout)
