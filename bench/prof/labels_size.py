#!/usr/bin/env python3
"""bench/prof/labels_size.py - what labels add to a snapshot's size.

    bench/prof/labels_size.py SNAPSHOT.pb.gz [KEY...]

Reads one of our snapshots and writes the same profile without the labels
KEY... (default: the task labels task, task_kind, task_loc and the daemon's
session label): those labels are removed from every sample, samples that
become identical (same locations, same remaining labels) are merged by
adding their values, strings nothing refers to any more are dropped from
the string table, and the result is gzip'ed at level 1 as the library does
(zlib level 1). Prints one JSON line: bytes with and without, raw and
gzip'ed, and sample counts. So "with" and "without" come from the very same
workload and the same encoder layout; only the labels differ. LABELS_SIZE_OUT=FILE also
writes the stripped profile (check it with go tool pprof / ptprof-validate).

The wire reader is bench.py's; the writer here is the small inverse, enough
for profile.proto as our encoder writes it (docs/pprof-format.md).
"""
import gzip
import json
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import _fields, _ints  # noqa: E402  (the wire reader bench.py already has)

# profile.proto fields that hold string-table indices, per message.
STR_FIELDS = {
    "Profile": {7, 8, 13, 14},        # drop_frames, keep_frames, comment, default_sample_type
    "ValueType": {1, 2},
    "Label": {1, 2, 4},               # key, str, num_unit
    "Mapping": {5, 6},
    "Function": {2, 3, 4},
}


def fields(b):
    """[(field, wiretype, value)] of a message (bench.py's reader)."""
    return list(_fields(b))


def put_varint(v):
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            out.append(c | 0x80)
        else:
            out.append(c)
            return bytes(out)


def enc(fs):
    out = bytearray()
    for f, wt, v in fs:
        out += put_varint(f << 3 | wt)
        if wt == 0:
            out += put_varint(v)
        elif wt == 2:
            out += put_varint(len(v)) + v
        else:
            out += struct.pack("<Q" if wt == 1 else "<I", v)
    return bytes(out)


def main():
    path, keys = sys.argv[1], set(sys.argv[2:] or ["task", "task_kind", "task_loc", "session"])
    gz = open(path, "rb").read()
    raw = gzip.decompress(gz)
    top = fields(raw)
    strings = [v.decode() for f, wt, v in top if f == 6]
    drop = {i for i, s in enumerate(strings) if s in keys}
    # samples without the dropped labels, merged
    merged, order = {}, []
    nsamples = 0
    for f, wt, v in top:
        if f != 2:
            continue
        nsamples += 1
        locs, vals, labels = [], [], []
        for sf, swt, sv in fields(v):
            if sf == 1:
                locs += _ints(swt, sv)
            elif sf == 2:
                vals += _ints(swt, sv)
            elif sf == 3:
                lf = fields(sv)
                if not any(x == 1 and y in drop for x, _, y in lf):
                    labels.append(sv)
        key = (tuple(locs), tuple(labels))
        if key not in merged:
            merged[key] = [0] * len(vals)
            order.append(key)
        merged[key] = [a + b for a, b in zip(merged[key], vals)]
    # which strings are still referenced
    used = {0}

    def note(msg, kind):
        for x, wt, y in fields(msg):
            if x in STR_FIELDS[kind] and wt == 0:
                used.add(y)
    for f, wt, v in top:
        if f in (1, 11):
            note(v, "ValueType")
        elif f == 3:
            note(v, "Mapping")
        elif f == 5:
            note(v, "Function")
        elif f in STR_FIELDS["Profile"] and wt == 0:
            used.add(v)
    for locs, labels in order:
        for lb in labels:
            note(lb, "Label")
    remap, newstrs = {}, []
    for i, s in enumerate(strings):
        if i in used:
            remap[i] = len(newstrs)
            newstrs.append(s)

    def rewrite(msg, kind):
        return enc([(x, wt, remap[y] if x in STR_FIELDS[kind] and wt == 0 else y) for x, wt, y in fields(msg)])
    out = []
    for locs, labels in order:
        sm = [(1, 2, b"".join(put_varint(x) for x in locs)),
              (2, 2, b"".join(put_varint(x) for x in merged[(locs, labels)]))]
        sm += [(3, 2, rewrite(lb, "Label")) for lb in labels]
        out.append((2, 2, enc(sm)))
    for f, wt, v in top:
        if f in (2, 6):
            continue
        if f in (1, 11):
            out.append((f, wt, rewrite(v, "ValueType")))
        elif f == 3:
            out.append((f, wt, rewrite(v, "Mapping")))
        elif f == 5:
            out.append((f, wt, rewrite(v, "Function")))
        elif f in STR_FIELDS["Profile"] and wt == 0:
            out.append((f, wt, remap[v]))
        else:
            out.append((f, wt, v))
    out += [(6, 2, s.encode()) for s in newstrs]
    raw2 = enc(out)
    co = zlib.compressobj(1, zlib.DEFLATED, 31)   # gzip container, level 1 like ptp_gzip
    gz2 = co.compress(raw2) + co.flush()
    if os.environ.get("LABELS_SIZE_OUT"):   # the stripped profile, to check it with a viewer
        with open(os.environ["LABELS_SIZE_OUT"], "wb") as fo:
            fo.write(gz2)
    print(json.dumps({"snapshot": path, "labels_removed": sorted(keys),
                      "gz_bytes_with": len(gz), "gz_bytes_without": len(gz2),
                      "raw_bytes_with": len(raw), "raw_bytes_without": len(raw2),
                      "samples_with": nsamples, "samples_without": len(order)}))


if __name__ == "__main__":
    main()
