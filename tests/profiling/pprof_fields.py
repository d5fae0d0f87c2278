"""Reads top-level scalar fields of a gzip'd pprof profile (our own tiny
protobuf reader, for tests): time_nanos (9), duration_nanos (10),
period (12), and the number of samples (2)."""
import gzip
import sys


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if c < 0x80:
            return v, i


def fields(path):
    b = gzip.open(path).read()
    out = {"samples": 0}
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
            if f == 9: out["time_nanos"] = v
            elif f == 10: out["duration_nanos"] = v
            elif f == 12: out["period"] = v
        elif wt == 2:
            n, i = varint(b, i)
            if f == 2: out["samples"] += 1
            i += n
        elif wt == 1: i += 8
        elif wt == 5: i += 4
        else:
            raise ValueError("bad wire type %d" % wt)
    return out


if __name__ == "__main__":
    for p in sys.argv[1:]:
        f = fields(p)
        print(p, f.get("time_nanos", 0), f.get("duration_nanos", 0), f.get("samples", 0))
