#!/usr/bin/env python3
"""bench/prof/bench.py - driver and analysis of the CPU sampler benchmark
(started by bench/prof/run.sh; see there and docs/performance.md).

For every workload and profiler configuration it runs bench_work REPS times
(configurations interleaved, so drift hits all alike), reads back what each
profiler wrote with a decoder of its own format (pprof protobuf for ours,
gperftools' legacy binary profile, `perf script` text), and computes:

  overhead      (process CPU with the profiler - without) / without, process
                CPU = user + sys from wait4 (perf: perf's own CPU included)
  completeness  sampled CPU / real CPU of the worker threads (all sampled
                CPU, including what ours shows under "[lost: ...]")
  real stacks   share of the sampled CPU under a real stack (not under one
                of ours' "[lost: ...]" pseudo-frames)
  split error   |sampled share - real share| in percentage points, shares
                among the workload's functions (work_a, work_b and, in
                "short 3 functions", work_c), inclusive; the largest over
                the functions

Ours runs with each engine (PTPROF_ENGINE=perf and =timer; "ours-perf" is
left out where perf_event_open is refused). WORKLOADS (comma-separated
names) and HZ (comma-separated rates) in the environment restrict a run.
  malloc        of the CPU sampled with a libc leaf in the malloc workload,
                the share whose stack reaches malloc_caller (the caller)

Overhead is the median over the repetitions; the other three pool the
repetitions (sums first, then the ratio) so that the binomial noise of a
short run at 99 Hz does not swamp the split error. Printed as a Markdown
table and saved as JSON (results.json in --out).
"""
import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

# ---- pprof (ours) --------------------------------------------------------------


def _varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return v, i


def _fields(b):
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v = b[i:i + n]
            i += n
        elif wt == 1:
            v = struct.unpack_from("<Q", b, i)[0]
            i += 8
        elif wt == 5:
            v = struct.unpack_from("<I", b, i)[0]
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def _ints(wt, v):
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x)
    return out


def read_pprof(path):
    """-> list of (cpu_ns, frames); frame = (function name, mapping file),
    leaf first, inline chains expanded (callee first)."""
    data = gzip.open(path).read()
    strings, samples, maps, locs, funcs = [], [], {}, {}, {}
    for f, wt, v in _fields(data):
        if f == 6:
            strings.append(v.decode("utf-8", "replace"))
        elif f == 2:
            ids, vals = [], []
            for g, wt2, w in _fields(v):
                if g == 1:
                    ids += _ints(wt2, w)
                elif g == 2:
                    vals += _ints(wt2, w)
            samples.append((ids, vals))
        elif f == 3:
            m = dict((g, w) for g, _, w in _fields(v))
            maps[m.get(1)] = m.get(5, 0)
        elif f == 4:
            lid, mid, fns = None, 0, []
            for g, _, w in _fields(v):
                if g == 1:
                    lid = w
                elif g == 2:
                    mid = w
                elif g == 4:
                    ln = dict((h, x) for h, _, x in _fields(w))
                    fns.append(ln.get(1, 0))
            locs[lid] = (mid, fns)
        elif f == 5:
            fn = dict((g, w) for g, _, w in _fields(v))
            funcs[fn.get(1)] = fn.get(2, 0)
    out = []
    for ids, vals in samples:
        frames = []
        for lid in ids:
            mid, fns = locs.get(lid, (0, []))
            mfile = strings[maps.get(mid, 0)] if mid in maps else ""
            names = [strings[funcs.get(fid, 0)] for fid in fns] or [None]
            for n in names:
                frames.append((n, mfile))
        out.append((vals[1] if len(vals) > 1 else 0, frames))
    return out


# ---- gperftools legacy CPU profile --------------------------------------------


def _nm_symbols(binary):
    syms = []
    res = subprocess.run(["nm", "-n", "--defined-only", binary], capture_output=True, text=True)
    for line in res.stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tTwW":
            syms.append((int(p[0], 16), p[2]))
    return syms


def read_gperf(path, binary):
    data = open(path, "rb").read()
    words = struct.unpack_from("<%dQ" % (len(data) // 8), data)
    hdr_words = words[1]
    period_us = words[3]
    i = 2 + hdr_words
    recs = []
    while i + 2 <= len(words):
        count, depth = words[i], words[i + 1]
        if count == 0 and depth == 1 and i + 2 < len(words) and words[i + 2] == 0:
            i += 3
            break
        recs.append((count, words[i + 2:i + 2 + depth]))
        i += 2 + depth
    maps_text = data[i * 8:].decode("utf-8", "replace")
    maps = []
    for line in maps_text.splitlines():
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+)\s+(\S+)\s+([0-9a-f]+)\s+\S+\s+\S+\s*(.*)$", line)
        if m:
            maps.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(4), 16), m.group(5)))
    base = None
    rbin = os.path.realpath(binary)
    for lo, hi, off, name in maps:
        if name and os.path.realpath(name) == rbin and off == 0:
            base = lo
            break
    syms = _nm_symbols(binary)
    addrs = [a for a, _ in syms]
    import bisect

    def sym(pc):
        for lo, hi, off, name in maps:
            if lo <= pc < hi:
                if base is not None and os.path.realpath(name or "-") == rbin:
                    k = bisect.bisect_right(addrs, pc - base) - 1
                    return (syms[k][1] if k >= 0 else None, name)
                return (None, name)
        return (None, "")

    out = []
    for count, pcs in recs:
        frames = [sym(pc if k == 0 else pc - 1) for k, pc in enumerate(pcs)]
        out.append((count * period_us * 1000, frames))
    return out


# ---- perf script ----------------------------------------------------------------


def read_perf(text):
    out, cur = [], None
    hdr = re.compile(r":\s+(\d+)\s+\S+:\s*$")
    frame = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
    for line in text.splitlines():
        if not line.strip():
            if cur:
                out.append(cur)
            cur = None
            continue
        if not line[0].isspace():
            m = hdr.search(line)
            cur = (int(m.group(1)) if m else 0, [])
            continue
        m = frame.match(line)
        if m and cur is not None:
            name = m.group(1).split("+0x")[0]
            cur[1].append((None if name == "[unknown]" else name, m.group(2)))
    if cur:
        out.append(cur)
    return out


# ---- metrics ---------------------------------------------------------------------


def metrics(samples, truth, workload):
    """Raw sums of one run (ns of sampled CPU, s of real CPU); ratios are
    formed after pooling the repetitions (see summarize)."""
    def base(n):
        # GCC clones: work_a.constprop.0, f.isra.0, f.part.0, f.cold
        return n.split(".")[0] if n else n

    def incl(name):
        return sum(w for w, fr in samples if any(base(f[0]) == name for f in fr))

    res = {"sampled": sum(w for w, _ in samples) / 1e9, "real": truth["total"],
           "lost": sum(w for w, fr in samples
                       if fr and (fr[0][0] or "").startswith("[lost:")) / 1e9}
    if workload != "malloc":
        res.update(a=incl("work_a") / 1e9, b=incl("work_b") / 1e9, real_a=truth["work_a"],
                   real_b=truth["work_b"], c=incl("work_c") / 1e9, real_c=truth.get("work_c", 0))
    else:
        libc = [(w, fr) for w, fr in samples if fr and "libc.so" in (fr[0][1] or "")]
        res["libc"] = sum(w for w, _ in libc) / 1e9
        res["libc_under"] = sum(w for w, fr in libc
                                if any(base(f[0]) == "malloc_caller" for f in fr)) / 1e9
    return res


def summarize(ms):
    """Pools the repetitions: sums first, then ratios (the sampling noise of
    one short run would otherwise dominate the split error at 99 Hz)."""
    tot = lambda k: sum(m.get(k, 0) or 0 for m in ms)
    s = {"completeness": tot("sampled") / tot("real") if tot("real") else None,
         "real_stack_share": (1 - tot("lost") / tot("sampled")) if tot("sampled") else None,
         "split_err_pp": None, "malloc_under_caller": None}
    fns = ["a", "b"] + (["c"] if tot("real_c") > 0 else [])
    if sum(tot(f) for f in fns) > 0:
        samp = sum(tot(f) for f in fns)
        real = sum(tot("real_" + f) for f in fns)
        s["split_err_pp"] = max(abs(tot(f) / samp - tot("real_" + f) / real) * 100 for f in fns)
    if tot("libc") > 0:
        s["malloc_under_caller"] = tot("libc_under") / tot("libc")
    return s


def run_one(cmd, env, cwd):
    t = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=t, stderr=subprocess.STDOUT)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    t.seek(0)
    out = t.read().decode("utf-8", "replace")
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, out[-2000:]))
    return out, ru.ru_utime + ru.ru_stime


def perf_works(work):
    if not shutil.which("perf"):
        return False
    d = tempfile.mkdtemp()
    try:
        r = subprocess.run(["perf", "record", "-q", "-F", "99", "-g", "-o", d + "/p.data", "--", "true"],
                           capture_output=True)
        return r.returncode == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def engine_works(lib, out):
    """Whether ours can use the perf engine here (PTPROF_ENGINE=perf refuses
    to start otherwise, and says so on stderr)."""
    d = tempfile.mkdtemp(dir=out)
    try:
        env = dict(os.environ, LD_PRELOAD=lib, PTPROF_DIR=d, PTPROF_ENGINE="perf")
        r = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True)
        return "ptprof:" not in r.stderr and any(f.endswith(".pb.gz") for f in os.listdir(d))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--micro", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--scale", type=int, default=1)
    args = ap.parse_args()
    gperf = "/usr/lib/x86_64-linux-gnu/libprofiler.so.0"
    have_gperf = os.path.exists(gperf)
    have_perf = perf_works(args.work)
    have_perf_engine = engine_works(args.lib, args.out)
    workloads = [("1 thread", ["threads", "1"]), ("4 threads", ["threads", "4"]),
                 ("16 threads", ["threads", "16"]), ("short threads", ["short"]),
                 ("short 3 functions", ["short3"]), ("malloc half", ["malloc"])]
    if os.environ.get("WORKLOADS"):
        keep = os.environ["WORKLOADS"].split(",")
        workloads = [w for w in workloads if w[0] in keep]
    hzs = [int(h) for h in os.environ.get("HZ", "99,999").split(",")]
    tools = ((["ours-perf"] if have_perf_engine else []) + ["ours-timer"] +
             (["gperftools"] if have_gperf else []) + (["perf"] if have_perf else []))
    configs = [("none", 0)] + [(t, hz) for hz in hzs for t in tools]
    results = {}
    for wname, wargs in workloads:
        cmd_work = [args.work] + wargs + [str(args.scale)]
        for rep in range(args.reps):
            for tool, hz in configs:
                d = tempfile.mkdtemp(dir=args.out)
                env = dict(os.environ)
                cmd = list(cmd_work)
                if tool.startswith("ours"):
                    env.update(LD_PRELOAD=args.lib, PTPROF_DIR=d + "/snap", PTPROF_HZ=str(hz),
                               PTPROF_PREFIX="bench-", PTPROF_ENGINE=tool.split("-")[1])
                elif tool == "gperftools":
                    env.update(LD_PRELOAD=gperf, CPUPROFILE=d + "/g.prof", CPUPROFILE_FREQUENCY=str(hz))
                elif tool == "perf":
                    cmd = ["perf", "record", "-q", "-F", str(hz), "-g", "-o", d + "/perf.data", "--"] + cmd
                out, cpu = run_one(cmd, env, d)
                truth = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
                m = {"cpu": cpu}
                if tool.startswith("ours"):
                    files = sorted(os.listdir(d + "/snap"))
                    samples = []
                    for f in files:
                        samples += read_pprof(d + "/snap/" + f)
                    m.update(metrics(samples, truth, wargs[0]))
                elif tool == "gperftools":
                    m.update(metrics(read_gperf(d + "/g.prof", args.work), truth, wargs[0]))
                elif tool == "perf":
                    txt = subprocess.run(["perf", "script", "-i", d + "/perf.data"], capture_output=True,
                                         text=True).stdout
                    m.update(metrics(read_perf(txt), truth, wargs[0]))
                results.setdefault(wname, {}).setdefault("%s@%d" % (tool, hz), []).append(m)
                shutil.rmtree(d, ignore_errors=True)
            sys.stderr.write("%s: repetition %d done\n" % (wname, rep + 1))

    def med(vals):
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    summary = {}
    for wname, per in results.items():
        base = med([m["cpu"] for m in per["none@0"]])
        for key, ms in per.items():
            if key == "none@0":
                continue
            s = {"overhead_pct": (med([m["cpu"] for m in ms]) - base) / base * 100}
            s.update(summarize(ms))
            summary.setdefault(wname, {})[key] = s
        spread = [m["cpu"] for m in per["none@0"]]
        summary[wname]["baseline"] = {"cpu_s": base, "spread_pct": (max(spread) - min(spread)) / base * 100}

    # Fixed cost per process (start: unwind tables, symbolizer; exit: final
    # dump), measured on a program that does nothing: /bin/true.
    fixed = {}
    for rep in range(7):
        for tool in ("none", "ours"):
            d = tempfile.mkdtemp(dir=args.out)
            env = dict(os.environ)
            if tool == "ours":
                env.update(LD_PRELOAD=args.lib, PTPROF_DIR=d + "/snap", PTPROF_HZ="99",
                           PTPROF_ENGINE="perf" if have_perf_engine else "timer")
            fixed.setdefault(tool, []).append(run_one(["/bin/true"], env, d)[1])
            shutil.rmtree(d, ignore_errors=True)
    fixed_ms = (statistics.median(fixed["ours"]) - statistics.median(fixed["none"])) * 1e3

    micro = json.loads(subprocess.run([args.micro, args.out + "/microdump"], capture_output=True, text=True,
                                      check=True).stdout)
    micro["fixed_cost_ms"] = fixed_ms
    json.dump({"summary": summary, "micro": micro, "raw": results, "perf": have_perf,
               "gperftools": have_gperf}, open(args.out + "/results.json", "w"), indent=1)

    def fmt(v, pct=False, digits=1):
        if v is None:
            return "-"
        return ("%.*f %%" % (digits, v * 100)) if pct else ("%.*f" % (digits, v))

    print("| workload | profiler | CPU overhead | completeness | real stacks | split error (pp) "
          "| malloc under caller |")
    print("|---|---|---|---|---|---|---|")
    for wname, per in summary.items():
        b = per["baseline"]
        print("| %s | none | %.2f s CPU (spread %.1f %%) | | | | |" % (wname, b["cpu_s"], b["spread_pct"]))
        for key, s in per.items():
            if key == "baseline":
                continue
            tool, hz = key.split("@")
            print("| %s | %s %s Hz | %+.1f %% | %s | %s | %s | %s |" % (
                wname, tool, hz, s["overhead_pct"], fmt(s["completeness"], True),
                fmt(s["real_stack_share"], True) if tool.startswith("ours") else "-",
                fmt(s["split_err_pp"], False, 2), fmt(s["malloc_under_caller"], True)))
    print()
    print("micro:", json.dumps(micro))
    if not have_perf:
        print("perf: not usable here (perf record failed)")


if __name__ == "__main__":
    main()
