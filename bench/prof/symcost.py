#!/usr/bin/env python3
"""symcost.py - fixed CPU cost of the preload sampler (start + final dump,
i.e. mostly symbolization) on a short real program, in paired interleaved
runs.

Each round runs, in a random order, the program unprofiled and once per
variant under LD_PRELOAD; the CPU of each run (user + sys of the child from
wait4, every thread) is recorded. Reported per variant: mean of the paired
differences to the unprofiled run of the same round, with a 95 % confidence
interval (Student t), in ms, and the ratio of the means.

A variant is NAME=LIB[:CACHE], CACHE being "off" (PTPROF_SYMCACHE=off),
"cold" (a fresh empty symbol cache directory for every run), "warm" (one
directory kept across the rounds, filled by one untimed run first) or
"miss" (one directory kept, but its *.sym files removed before every run:
every PC misses the symbol cache, while what else the directory holds,
the uncompressed debug-file copies in debug/, stays warm).

  symcost.py [--pairs N] [--hz HZ] VARIANT... -- PROGRAM ARGS... < stdin-file
  (stdin of the program: --stdin FILE)
"""
import argparse, glob, os, random, re, shutil, statistics, subprocess, sys, tempfile

T95 = {5: 2.571, 10: 2.228, 15: 2.131, 19: 2.093, 20: 2.086, 24: 2.064, 29: 2.045, 30: 2.042,
       39: 2.023, 40: 2.021}

def t95(df):
    keys = sorted(T95)
    for k in keys:
        if df <= k:
            return T95[k]
    return 1.96

def run(argv, env, stdin):
    pid = os.fork()
    if pid == 0:
        fd = os.open(stdin, os.O_RDONLY)
        os.dup2(fd, 0)
        nul = os.open("/dev/null", os.O_WRONLY)
        os.dup2(nul, 1)
        os.dup2(nul, 2)
        os.execve(argv[0], argv, env)
    _, st, ru = os.wait4(pid, 0)
    if st != 0:
        sys.exit(f"{argv[0]} failed with status {st:#x}")
    return (ru.ru_utime + ru.ru_stime) * 1e3

def symbol_ms(d):
    """CPU ms the snapshots in d spent symbolizing (their "symbols:" comment;
    libraries older than that comment: None)."""
    total, seen = 0.0, False
    for f in glob.glob(os.path.join(d, "*.pb.gz")):
        out = subprocess.run(["go", "tool", "pprof", "-comments", f], capture_output=True, text=True).stdout
        for m in re.finditer(r"^symbols: .* ([0-9.]+) ms CPU$", out, re.M):
            total += float(m.group(1))
            seen = True
    return total if seen else None

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=24)
    ap.add_argument("--hz", default="99")
    ap.add_argument("--stdin", default="/dev/null")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if "--" not in a.rest:
        sys.exit("usage: symcost.py [--pairs N] VARIANT... -- PROGRAM ARGS...")
    i = a.rest.index("--")
    variants, prog = a.rest[:i], a.rest[i + 1:]
    work = tempfile.mkdtemp(prefix="symcost.")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("PTPROF_") and k != "LD_PRELOAD"}
    vs = []
    for v in variants:
        name, spec = v.split("=", 1)
        lib, _, cache = spec.partition(":")
        vs.append((name, os.path.abspath(lib), cache or "default"))
    def env_for(name, lib, cache, k):
        e = dict(base_env)
        e["LD_PRELOAD"] = lib
        e["PTPROF_HZ"] = a.hz
        d = os.path.join(work, f"out-{name}-{k}")
        e["PTPROF_DIR"] = d
        if cache == "off":
            e["PTPROF_SYMCACHE"] = "off"
        elif cache == "cold":
            e["PTPROF_SYMCACHE"] = os.path.join(work, f"cold-{name}-{k}")
        elif cache in ("warm", "miss"):
            e["PTPROF_SYMCACHE"] = os.path.join(work, f"warm-{name}")
            if cache == "miss":
                for f in glob.glob(os.path.join(e["PTPROF_SYMCACHE"], "*.sym")):
                    os.unlink(f)
        return e
    for name, lib, cache in vs:     # warm-up: fill warm caches, page cache
        run(prog, env_for(name, lib, cache, "w"), a.stdin)
    run(prog, base_env, a.stdin)
    diffs = {v[0]: [] for v in vs}
    cpu = {v[0]: [] for v in vs}
    symms = {v[0]: [] for v in vs}
    base = []
    for k in range(a.pairs):
        order = [None] + list(range(len(vs)))
        random.shuffle(order)
        got = {}
        for o in order:
            if o is None:
                got[None] = run(prog, base_env, a.stdin)
            else:
                name, lib, cache = vs[o]
                got[name] = run(prog, env_for(name, lib, cache, k), a.stdin)
                ms = symbol_ms(os.path.join(work, f"out-{name}-{k}"))
                if ms is not None:
                    symms[name].append(ms)
                shutil.rmtree(os.path.join(work, f"out-{name}-{k}"), ignore_errors=True)
                shutil.rmtree(os.path.join(work, f"cold-{name}-{k}"), ignore_errors=True)
        base.append(got[None])
        for name, _, _ in vs:
            cpu[name].append(got[name])
            diffs[name].append(got[name] - got[None])
    n = a.pairs
    mb = statistics.mean(base)
    print(f"program: {' '.join(prog)}  pairs: {n}  hz: {a.hz}")
    print(f"unprofiled: mean CPU {mb:.1f} ms (sd {statistics.stdev(base):.1f})")
    for name, lib, cache in vs:
        d = diffs[name]
        m, sd = statistics.mean(d), statistics.stdev(d)
        h = t95(n - 1) * sd / n ** 0.5
        print(f"{name:>12} ({cache:>7} cache): +{m:6.1f} ms [95% CI {m - h:6.1f} .. {m + h:6.1f}]"
              f"  ratio {statistics.mean(cpu[name]) / mb:.3f}")
        sm = symms[name]
        if len(sm) > 1:
            h2 = t95(len(sm) - 1) * statistics.stdev(sm) / len(sm) ** 0.5
            print(f"{'':>12}  symbolizing (from the snapshots' comments): {statistics.mean(sm):.1f} ms"
                  f" [95% CI {statistics.mean(sm) - h2:.1f} .. {statistics.mean(sm) + h2:.1f}],"
                  f" median {statistics.median(sm):.1f}, max {max(sm):.1f}")
    shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
