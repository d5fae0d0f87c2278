#!/usr/bin/env python3
"""tests/prof/jit_check.py - reads jitprog's snapshots back with
`go tool pprof -raw` and checks them (used by jit_test.sh; not a test
itself). Prints one line of figures; exits 1 with the reason on a failed
check.

  jit_check.py --split JSON --names A|none [--bnames B] FILE...

JSON: jitprog's own line (CPU of paths a, b, c in the part the FILEs
cover). Checks, over all FILEs pooled:
  - path A (burn_c called back from generated code): >= 95 % of the CPU
    sampled in burn_c has the stack burn_c, three frames in a "[jit]"
    mapping, run_a, ..., main; path B (generated leaf loop): >= 95 % of the
    CPU sampled with its leaf in "[jit]" code under run_b has two "[jit]"
    frames, then run_b, ..., main;
  - the CPU split: each path's share of all sampled CPU within 4 binomial
    standard deviations + 3 pp of jitprog's own measure (a stack cut at a
    JIT frame belongs to no path and makes A and B fall short);
  - less than 5 % of the sampled CPU [truncated];
  - names: with --names A (comma-separated, leaf side first: the three
    frames of path A) every "[jit]" frame of a complete path-A stack has
    exactly these names (and --bnames B those of path B); with --names
    none no "[jit]" frame has a name at all, and no function anywhere is
    named HOSTILE or stale.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pprof_raw  # noqa: E402


def read_raw(path):
    """[(value, [(mapping file, physical function or None), ...]), ...]"""
    try:
        raw = pprof_raw.read(path)
    except RuntimeError as e:
        sys.exit(str(e))
    out = []
    for w, ids in raw.samples:
        frames = []
        for i in ids:
            loc = raw.locations[i]
            m = raw.mappings.get(loc.mapping)
            frames.append((m.file if m else "", loc.lines[-1].split()[0] if loc.lines else None))
        out.append((w, frames))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", required=True)
    ap.add_argument("--names", required=True)
    ap.add_argument("--bnames", default="")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    split = json.loads(a.split)
    samples = []
    for f in a.files:
        samples += read_raw(f)
    total = sum(w for w, _ in samples)
    if total == 0:
        sys.exit("no samples")
    period = 1e9 / 999
    n = total / period
    path = {"a": 0, "b": 0, "c": 0}
    trunc = 0
    a_hot = a_ok = b_hot = b_ok = 0
    bad_names = []
    names_a = [] if a.names == "none" else a.names.split(",")
    names_b = [] if not a.bnames else a.bnames.split(",")
    for w, fr in samples:
        fns = [fn for _, fn in fr]
        jit = [i for i, (mp, _) in enumerate(fr) if mp == "[jit]"]
        if "[truncated]" in fns:
            trunc += w
        for fn in fns:
            if fn and ("HOSTILE" in fn or "stale" in fn):
                bad_names.append(fn)
        if a.names == "none":
            bad_names += [fr[i][1] for i in jit if fr[i][1]]
        if "run_a" in fns:
            path["a"] += w
        elif "run_b" in fns:
            path["b"] += w
        elif "burn_plain" in fns:
            path["c"] += w
        if fns and fns[0] == "burn_c":
            a_hot += w
            if len(fr) > 5 and [mp for mp, _ in fr[1:4]] == ["[jit]"] * 3 and fns[4] == "run_a" \
                    and "main" in fns[5:]:
                a_ok += w
                if names_a and fns[1:4] != names_a:
                    bad_names.append("path A: %s" % fns[1:4])
        if fr and fr[0][0] == "[jit]" and "run_b" in fns:
            b_hot += w
            if len(fr) > 3 and [mp for mp, _ in fr[0:2]] == ["[jit]"] * 2 and fns[2] == "run_b" \
                    and "main" in fns[3:]:
                b_ok += w
                if names_b and fns[0:2] != names_b:
                    bad_names.append("path B: %s" % fns[0:2])
    real = split["a"] + split["b"] + split["c"]
    line = ["sampled %.0f ms (%d samples)" % (total / 1e6, n)]
    line.append("path A: %.1f of %.1f ms in burn_c complete through 3 JIT frames" % (a_ok / 1e6, a_hot / 1e6))
    line.append("path B: %.1f of %.1f ms in the JIT leaf complete" % (b_ok / 1e6, b_hot / 1e6))
    line.append("truncated %.1f %%" % (100.0 * trunc / total))
    errs = []
    for k in ("a", "b", "c"):
        p = split[k] / real
        got = path[k] / total
        tol = 4 * math.sqrt(p * (1 - p) / n) + 0.03
        line.append("%s: %.1f %% sampled, %.1f %% measured" % (k, 100 * got, 100 * p))
        if abs(got - p) > tol:
            errs.append("path %s: %.1f %% of the sampled CPU, jitprog measured %.1f %% (tolerance %.1f pp)"
                        % (k, 100 * got, 100 * p, 100 * tol))
    print("# " + "; ".join(line))
    if a_hot < 20 * period or b_hot < 20 * period:
        errs.append("too few samples to judge (%.1f ms in burn_c, %.1f ms in the JIT leaf)"
                    % (a_hot / 1e6, b_hot / 1e6))
    if a_ok < 0.95 * a_hot:
        errs.append("path A: only %.1f of %.1f ms in burn_c reach main through 3 JIT frames"
                    % (a_ok / 1e6, a_hot / 1e6))
    if b_ok < 0.95 * b_hot:
        errs.append("path B: only %.1f of %.1f ms in the JIT leaf reach main" % (b_ok / 1e6, b_hot / 1e6))
    if trunc >= 0.05 * total:
        errs.append("%.1f %% of the sampled CPU is [truncated]" % (100.0 * trunc / total))
    if bad_names:
        errs.append("names not expected (%s): %s" % (a.names, sorted(set(map(str, bad_names)))[:6]))
    if errs:
        sys.exit("\n".join(errs))


if __name__ == "__main__":
    main()
