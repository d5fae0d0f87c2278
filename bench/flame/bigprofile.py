#!/usr/bin/env python3
"""bigprofile.py OUT.pb.gz [--stacks N] [--seed S] - a large synthetic CPU
profile for bench/flame/run.sh: N distinct stacks (default 100000), 6 to 40
frames deep, drawn from a call graph of 5000 functions whose upper levels
are shared (2 callees per frame for the first 4 levels, 4 below), so the
call tree has the shape of a real program's, only much larger; every 10th
location holds an inlined frame; each stack has 1 to ~20 samples and the
labels thread_name (8 values), task_kind (6, absent on 1 in 7), session (3)
and task (numeric). pprof wire format as in tests/mkprofile.py."""
import gzip
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from mkprofile import f_bytes, f_packed, f_varint  # noqa: E402  (the wire encoding)


def main(argv):
    out = argv[1]
    n_stacks, seed = 100000, 1
    if "--stacks" in argv:
        n_stacks = int(argv[argv.index("--stacks") + 1])
    if "--seed" in argv:
        seed = int(argv[argv.index("--seed") + 1])
    rnd = random.Random(seed)
    F = 5000
    strings = {"": 0}

    def s(x):
        if x not in strings:
            strings[x] = len(strings)
        return strings[x]

    stacks = set()
    while len(stacks) < n_stacks:
        depth = rnd.randint(6, 40)
        st, h = [], 0
        for i in range(depth):
            h = (h * 1000003 + rnd.randrange(2 if i < 4 else 4) + 1) & 0xFFFFFFFFFFFF
            st.append(h % F)
        stacks.add(tuple(st))
    body = bytearray()
    body += f_bytes(1, f_varint(1, s("samples")) + f_varint(2, s("count")))
    body += f_bytes(1, f_varint(1, s("cpu")) + f_varint(2, s("nanoseconds")))
    period = 1000000000 // 99
    threads = ["worker-%d" % i for i in range(7)] + ["polytokend"]
    kinds = ["turn", "ipc.client", "responder.builtin.model", "timer", "ipc.accept", "catalog.scan"]
    sessions = ["508255bb0d2c", "4811d47e47ce", "cc6c84756ed9"]
    for st in sorted(stacks):
        n = 1 + int(rnd.expovariate(0.2))
        locs = [f + 1 for f in reversed(st)]  # leaf first; location id = function + 1
        lab = f_bytes(3, f_varint(1, s("thread_name")) + f_varint(2, s(rnd.choice(threads))))
        if rnd.randrange(7):
            lab += f_bytes(3, f_varint(1, s("task_kind")) + f_varint(2, s(rnd.choice(kinds))))
            lab += f_bytes(3, f_varint(1, s("task")) + f_varint(3, rnd.randrange(1, 500)))
        lab += f_bytes(3, f_varint(1, s("session")) + f_varint(2, s(rnd.choice(sessions))))
        body += f_bytes(2, f_packed(1, locs) + f_packed(2, [n, n * period]) + lab)
    body += f_bytes(3, f_varint(1, 1) + f_varint(2, 0x400000) + f_varint(3, 0x9000000) +
                    f_varint(5, s("/usr/bin/polytokend")) + f_varint(7, 1) + f_varint(8, 1) +
                    f_varint(9, 1) + f_varint(10, 1))
    for f in range(F):
        lines = f_bytes(4, f_varint(1, f + 1) + f_varint(2, 10 + f % 300))
        if f % 10 == 0:  # an inlined callee (function F + f), callee first
            lines = f_bytes(4, f_varint(1, F + f + 1) + f_varint(2, 5)) + lines
        body += f_bytes(4, f_varint(1, f + 1) + f_varint(2, 1) + f_varint(3, 0x401000 + 16 * f) + lines)
    for f in range(2 * F):
        if f >= F and (f - F) % 10:
            continue
        name = ("pkg%d::func_%d" % (f % 97, f)) if f < F else "inlined_helper_%d" % (f - F)
        body += f_bytes(5, f_varint(1, f + 1) + f_varint(2, s(name)) + f_varint(3, s(name)) +
                        f_varint(4, s("src/pkg%d/file%d.c" % (f % 97, f % 13))))
    tail = f_varint(9, 1700000000 * 10**9) + f_varint(10, 60 * 10**9)
    tail += f_bytes(11, f_varint(1, s("cpu")) + f_varint(2, s("nanoseconds"))) + f_varint(12, period)
    st_bytes = b"".join(f_bytes(6, x.encode()) for x, _ in sorted(strings.items(), key=lambda kv: kv[1]))
    with open(out, "wb") as fh:
        fh.write(gzip.compress(bytes(body) + st_bytes + tail, mtime=0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
