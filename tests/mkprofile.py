#!/usr/bin/env python3
"""mkprofile.py - writes a small but valid gzip'd pprof CPU profile.

Used by the catalog, feedback and profile-reader tests to put real snapshot files into a
session's profiling/ directory without needing the profiling build. The
profile follows docs/pprof-format.md and proto/profile.proto: sample_type
[samples/count, cpu/nanoseconds], period_type cpu/nanoseconds at 99 Hz,
one mapping, one location + function per name, samples leaf first.

usage: mkprofile.py OUT.pb.gz [--duration-ms N] [--time-s T] [--raw]
                    [--label KEY=VALUE]... [--num-label KEY=N[:UNIT]]...
                    [--inline FUNC] [--sample-type TYPE/UNIT] FUNC=COUNT ...
  e.g. mkprofile.py x.pb.gz hot_spin=30 parse_line=12 main=1
  Each FUNC=COUNT makes one stack (FUNC, then main as caller unless FUNC is
  main) with COUNT samples.
  --label, --num-label  a string / numeric label (with a unit) on every sample
  --inline FUNC         each stack's leaf location also holds FUNC, inlined
                        into the leaf function (two Lines, FUNC first)
  --sample-type T/U     the second sample type instead of cpu/nanoseconds
  --raw                 write the encoded profile without gzip
Without the options the bytes are the same as always (tests depend on them).
"""
import gzip, sys, time

def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def key(field, wt):
    return varint((field << 3) | wt)

def f_varint(field, n):
    return key(field, 0) + varint(n)

def f_bytes(field, b):
    return key(field, 2) + varint(len(b)) + b

def f_packed(field, nums):
    return f_bytes(field, b"".join(varint(n) for n in nums))

def build(stacks, duration_ns, time_ns, labels=(), num_labels=(), inline=None,
          second=("cpu", "nanoseconds")):
    strings = [""]
    def s(x):
        if x not in strings:
            strings.append(x)
        return strings.index(x)
    period = 1000000000 // 99
    out = bytearray()
    out += f_bytes(1, f_varint(1, s("samples")) + f_varint(2, s("count")))
    out += f_bytes(1, f_varint(1, s(second[0])) + f_varint(2, s(second[1])))
    funcs = {}
    def fid(name):
        if name not in funcs:
            funcs[name] = len(funcs) + 1
        return funcs[name]
    lab = b""
    for k, v in labels:
        lab += f_bytes(3, f_varint(1, s(k)) + f_varint(2, s(v)))
    for k, n, unit in num_labels:
        lab += f_bytes(3, f_varint(1, s(k)) + f_varint(3, n) + (f_varint(4, s(unit)) if unit else b""))
    for leaf, count in stacks:
        frames = [leaf] + ([] if leaf == "main" else ["main"])
        ids = [fid(f) for f in frames]
        out += f_bytes(2, f_packed(1, ids) + f_packed(2, [count, count * period]) + lab)
    inl = fid(inline) if inline else None
    leaves = set(fid(leaf) for leaf, _ in stacks)
    out += f_bytes(3, f_varint(1, 1) + f_varint(2, 0x400000) + f_varint(3, 0x500000) +
                   f_varint(5, s("/usr/bin/polytokend")) + f_varint(7, 1) + f_varint(8, 1) +
                   f_varint(9, 1))
    for name, i in funcs.items():
        if i == inl:
            continue  # inlined only: a function without a location of its own
        line = f_varint(1, i) + f_varint(2, 10 * i)
        if inl and i in leaves:
            line = f_bytes(4, f_varint(1, inl) + f_varint(2, 10 * inl)) + f_bytes(4, line)
        else:
            line = f_bytes(4, line)
        out += f_bytes(4, f_varint(1, i) + f_varint(2, 1) + f_varint(3, 0x401000 + 16 * i) +
                       line)
    for name, i in funcs.items():
        out += f_bytes(5, f_varint(1, i) + f_varint(2, s(name)) + f_varint(3, s(name)) +
                       f_varint(4, s("/build/machine/src/daemon/%s.c" % name)))
    tail = bytearray()
    tail += f_varint(9, time_ns) + f_varint(10, duration_ns)
    tail += f_bytes(11, f_varint(1, s("cpu")) + f_varint(2, s("nanoseconds")))
    tail += f_varint(12, period)
    st = b"".join(f_bytes(6, x.encode()) for x in strings)
    return bytes(out) + st + bytes(tail)

def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    out = argv[1]
    duration_ms = 10000
    time_s = int(time.time())
    stacks = []
    labels, num_labels, inline, raw = [], [], None, False
    second = ("cpu", "nanoseconds")
    args = argv[2:]
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--duration-ms":
            duration_ms = int(args[i + 1]); i += 2; continue
        if a == "--time-s":
            time_s = int(args[i + 1]); i += 2; continue
        if a == "--label":
            k, v = args[i + 1].split("=", 1); labels.append((k, v)); i += 2; continue
        if a == "--num-label":
            k, v = args[i + 1].split("=", 1)
            n, _, unit = v.partition(":")
            num_labels.append((k, int(n), unit)); i += 2; continue
        if a == "--inline":
            inline = args[i + 1]; i += 2; continue
        if a == "--sample-type":
            second = tuple(args[i + 1].split("/", 1)); i += 2; continue
        if a == "--raw":
            raw = True; i += 1; continue
        name, count = a.split("=")
        stacks.append((name, int(count)))
        i += 1
    if not stacks:
        stacks = [("hot_spin", 30), ("main", 1)]
    data = build(stacks, duration_ms * 1000000, time_s * 1000000000, labels, num_labels, inline,
                 second)
    with open(out, "wb") as f:
        f.write(data if raw else gzip.compress(data, mtime=0))
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv))
