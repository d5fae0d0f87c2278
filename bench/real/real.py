#!/usr/bin/env python3
"""bench/real/real.py - driver and analysis of the real-program bench
(started by bench/real/run.sh; method and results: docs/performance.md,
"Real programs").

Programs: Debian's own binaries, built without frame pointers (xz, the
python3.11 interpreter, the sqlite3 shell, gcc with its exec'd cc1 and as),
Debian's node (V8: JIT code, named only by the perf map it writes with
--perf-basic-prof, and builtins without CFI) running jswork.js, and
split_work, our workload with a known split over three functions (short
threads, 16 threads). Profilers, each at 99 Hz:

  none         the program alone
  libptprof    LD_PRELOAD=libptprof.so PTPROF_DIR=... PTPROF_HZ=99
  gperftools   LD_PRELOAD=libprofiler.so.0 CPUPROFILE=... CPUPROFILE_FREQUENCY=99
  perf-fp      perf record -F 99 -g               (frame-pointer call chains)
  perf-dwarf   perf record -F 99 --call-graph dwarf,32768 (the reference
               unwinder; with the default 8 KiB stack copy it does not
               reach main through the sqlite3 shell's large frames)

Every program runs under bench/real/cpuwrap, which reports the CPU of the
program's own process tree; the driver's wait4 gives the CPU of everything
(perf's own CPU included). One "pair" = one run of every configuration in a
shuffled order, so drift and the neighbours' load hit all alike; a
profiler's CPU ratio in pair i is its total CPU / the unprofiled run's.

Per program and profiler:
  CPU ratio     mean of the per-pair ratios, 95 % CI (Student t)
  completeness  sampled CPU / CPU of the program's process tree (cpuwrap;
                split_work: / its worker threads' CPU, which it measures),
                pooled over the pairs (sums first); sampled CPU = sum of the
                samples' weights (count x period; perf: the periods)
  rooted        share of sampled CPU whose stack contains a thread entry
                (__libc_start_call_main, __libc_start_main, _start,
                start_thread, clone, clone3)
  named         share of sampled CPU whose every frame has a function
                name (a JIT frame: the runtime's perf map name; not a
                pseudo-frame, not an address alone)
  leaf TVD      total variation distance between the leaf-function
                distribution and perf-dwarf's (pooled; 0 = identical, 1 =
                disjoint); perf-fp vs perf-dwarf is the sampling-noise floor
  split error   split_work only: max over step_a/b/c of |sampled share -
                real share| in pp, shares among the CPU sampled under the
                three steps; "in steps" = share of all sampled CPU that lies
                under one of them (the rest: the thread's creation and exit,
                pseudo-frames, stacks cut short)

Profiles are read back with the real tools: `go tool pprof -raw` for
libptprof's and gperftools' files, `perf script` for perf.data; every
address in an object is then named by one symbolizer (elfsyms.py) so the
tools' naming differences do not count as disagreement; a JIT frame keeps
the name the tool read from the perf map (its first word: V8's "JS:*fib").
The perf maps a run leaves in /tmp (of its processes, gone by then) are
removed once its profiles are read.
"""
import argparse
import glob
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
import elfsyms  # noqa: E402
import pprof_raw  # noqa: E402

HZ = 99
GPERF = "/usr/lib/x86_64-linux-gnu/libprofiler.so.0"
ENTRY = {"__libc_start_call_main", "__libc_start_main", "__libc_start_main_impl",
         "_start", "start_thread", "clone", "clone3", "__clone", "__clone3"}
STEPS = ("step_a", "step_b", "step_c")
TOOLS = ("libptprof", "gperftools", "perf-fp", "perf-dwarf")
# 97.5 % quantiles of Student's t by degrees of freedom (1.96 beyond 30).
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


# ---- reading profiles ---------------------------------------------------------
# A sample is (weight_ns, [function, ...]) leaf first; a function is
# "object-basename:name", or the tool's own pseudo-frame name (e.g.
# libptprof's "[truncated]") for frames that have no object.


def _frame(path, va, leaf):
    """Names an address of an object: non-leaf addresses are return
    addresses, so look up va - 1 (the call), which also keeps a call at the
    very end of a function (a noreturn exit) inside its caller."""
    name = elfsyms.function(path, va if leaf else va - 1)
    # realpath: the tools name one object by different links (liblzma.so.5
    # or liblzma.so.5.4.1, /lib or /usr/lib).
    return "%s:%s" % (os.path.basename(os.path.realpath(path)), elfsyms.base_name(name) if name else "?")


def read_pprof_raw(path):
    """Any pprof-readable profile (libptprof's gzip protobuf, gperftools'
    legacy format) through `go tool pprof -raw`."""
    raw = pprof_raw.read(path)
    out = []
    for w, ids in raw.samples:
        frames = []
        for k, lid in enumerate(ids):
            addr, mid, lines = raw.locations[lid]
            text = lines[0] if lines else ""
            if mid in raw.mappings and raw.mappings[mid].file.startswith("/"):
                start, _, off, mpath = raw.mappings[mid]
                o = elfsyms.obj(mpath)
                va = o.vaddr(addr - start + off) if o else None
                if va is not None:
                    frames.append(_frame(mpath, va, k == 0))
                    continue
            # No object: a pseudo-frame of the tool (its name), a JIT frame
            # named from the perf map (libptprof's "[jit]" mapping: the
            # runtime's name, first word), or unknown.
            frames.append(text.split()[0] if text else "?")
        out.append((w, frames))
    return out


def read_perf(data):
    """perf.data through `perf script`; perf prints each frame's address as
    an offset into its object's file (for PIE objects that equals the ELF
    virtual address, for a non-PIE executable at 0x400000 it does not)."""
    r = subprocess.run(["perf", "script", "-F", "comm,tid,period,ip,sym,dso", "-i", data],
                       capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise RuntimeError("perf script %s: %s" % (data, r.stderr[-500:]))
    out, cur = [], None
    frame_re = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")
    head_re = re.compile(r"^(.*\S)\s+(\d+)\s+(\d+)\s*$")   # comm (may hold spaces) tid period
    for line in r.stdout.splitlines():
        if not line.strip():
            cur = None
            continue
        m = head_re.match(line)
        if m and not line.startswith("\t"):
            # cpuwrap's own samples (it only waits) are not the program's.
            cur = None if m.group(1).strip() == "cpuwrap" else (int(m.group(3)), [])
            if cur:
                out.append(cur)
            continue
        m = frame_re.match(line)
        if m and cur is not None:
            if m.group(3) == "inlined":
                continue   # same address as the next frame; count it once
            if m.group(3).startswith("[kernel"):
                # perf runs as root here and sees the kernel part of the
                # stack; the signal-based profilers see the user frames only
                # (the kernel time lands on the user PC that entered it).
                # Compare like with like: drop them, keep the weight.
                continue
            path = m.group(3)
            if re.match(r"^/tmp/perf-\d+\.map$", path):
                # JIT code named by the runtime's perf map: its name.
                sym = m.group(2).split()
                cur[1].append(sym[0] if sym and sym[0] != "[unknown]" else "?")
                continue
            o = elfsyms.obj(path) if path.startswith("/") else None
            va = o.vaddr(int(m.group(1), 16)) if o else None
            if va is not None:
                cur[1].append(_frame(path, va, not cur[1]))
            else:
                cur[1].append("%s:?" % os.path.basename(path))
    return out


# ---- running -----------------------------------------------------------------


def run(cmd, env, cwd, stdin_path):
    """Runs cmd; returns (its output, user+sys CPU of its whole tree)."""
    out = tempfile.TemporaryFile()
    fin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=fin, stdout=out, stderr=subprocess.STDOUT)
    _, status, ru = os.wait4(p.pid, 0)
    if stdin_path:
        fin.close()
    out.seek(0)
    text = out.read().decode("utf-8", "replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), text[-1500:]))
    return text, ru.ru_utime + ru.ru_stime


def one_run(prog, tool, args, d):
    """One run of prog under tool in the fresh directory d -> dict with cpu
    (tree), prog_cpu (cpuwrap), samples, files (profiles read), truth."""
    cpufile = os.path.join(d, "cpu.txt")
    envs = []
    if tool == "libptprof":
        envs = ["LD_PRELOAD=" + args.lib, "PTPROF_DIR=" + d + "/snap", "PTPROF_HZ=%d" % HZ,
                "PTPROF_PREFIX=real-"]
    elif tool == "gperftools":
        envs = ["LD_PRELOAD=" + GPERF, "CPUPROFILE=" + d + "/g.prof", "CPUPROFILE_FREQUENCY=%d" % HZ]
    cmd = [args.cpuwrap, cpufile] + envs + ["--"] + prog["cmd"]
    if tool == "perf-fp":
        cmd = ["perf", "record", "-q", "-F", str(HZ), "-g", "-o", d + "/perf.data", "--"] + cmd
    elif tool == "perf-dwarf":
        cmd = ["perf", "record", "-q", "-F", str(HZ), "--call-graph", "dwarf,32768",
               "-o", d + "/perf.data", "--"] + cmd
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    maps_before = set(glob.glob("/tmp/perf-*.map"))
    text, cpu = run(cmd, env, d, prog.get("stdin"))
    u, s = open(cpufile).read().split()
    res = {"cpu": cpu, "prog_cpu": float(u) + float(s), "samples": [], "files": 0}
    if prog.get("truth"):
        res["truth"] = json.loads([ln for ln in text.splitlines() if ln.startswith("{")][-1])
    if tool == "libptprof":
        for f in sorted(os.listdir(d + "/snap")):
            res["samples"] += read_pprof_raw(d + "/snap/" + f)
            res["files"] += 1
    elif tool == "gperftools":
        for f in sorted(os.listdir(d)):
            if f.startswith("g.prof"):
                res["samples"] += read_pprof_raw(d + "/" + f)
                res["files"] += 1
    elif tool.startswith("perf"):
        res["samples"] = read_perf(d + "/perf.data")
        res["files"] = 1
    # The perf maps the run's runtime wrote (read by now: ours at dump time,
    # perf's at `perf script`): new ones whose process is gone (a map of
    # some other process running meanwhile stays).
    for f in set(glob.glob("/tmp/perf-*.map")) - maps_before:
        pid = int(re.match(r"/tmp/perf-(\d+)\.map$", f).group(1))
        try:
            os.kill(pid, 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.unlink(f)
        except OSError:
            pass
    return res


# ---- statistics ----------------------------------------------------------------


def mean_ci(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, None
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    t = T975[n - 2] if n - 2 < len(T975) else 1.96
    return m, t * sd / math.sqrt(n)


def split_noise_p95(n, shares, draws=4000):
    """95th percentile of the split error (max over the steps of |sampled
    share - real share|, pp) of an ideal sampler: n samples, each landing in
    step k with probability shares[k], independently. A measured split error
    below it cannot be told from sampling noise. Sequential binomials
    (normal approximation, n is in the hundreds or more), fixed seed."""
    rng = random.Random(3)
    out = []
    for _ in range(draws):
        left, rest, worst = n, 1.0, 0.0
        for k, p in enumerate(shares):
            q = min(1.0, p / rest) if rest > 0 else 1.0
            c = left if k == len(shares) - 1 else min(left, max(0.0, rng.gauss(left * q, math.sqrt(left * q * (1 - q)))))
            worst = max(worst, abs(c / n - p))
            left, rest = left - c, rest - p
        out.append(worst * 100)
    out.sort()
    return out[int(0.95 * draws)]


def tvd(p, q):
    sp, sq = sum(p.values()), sum(q.values())
    if not sp or not sq:
        return None
    return 0.5 * sum(abs(p.get(k, 0) / sp - q.get(k, 0) / sq) for k in set(p) | set(q))


class Acc:
    """Pooled sums of one (program, profiler) over its runs."""

    def __init__(self):
        self.ratios, self.sampled, self.prog_cpu, self.rooted, self.named = [], 0, 0.0, 0, 0
        self.leaf, self.steps, self.real_steps, self.files, self.nsamples = {}, {}, {}, 0, 0
        self.worker_cpu = 0.0   # split_work: its threads' own CPU (its JSON "total")

    def add(self, r, base_cpu):
        self.ratios.append(r["cpu"] / base_cpu)
        self.prog_cpu += r["prog_cpu"]
        self.files += r["files"]
        for w, fr in r["samples"]:
            self.nsamples += 1
            self.sampled += w
            names = [f.split(":", 1)[-1] for f in fr]
            if any(n in ENTRY for n in names):
                self.rooted += w
            if fr and all(n not in ("?", "") and not n.startswith("[") and not n.startswith("fde@")
                          for n in names):
                self.named += w
            if fr:
                self.leaf[fr[0]] = self.leaf.get(fr[0], 0) + w
            for st in STEPS:
                if st in names:
                    self.steps[st] = self.steps.get(st, 0) + w
                    break
        if "truth" in r:
            self.worker_cpu += r["truth"]["total"]
            for st in STEPS:
                self.real_steps[st] = self.real_steps.get(st, 0) + r["truth"][st]

    def summary(self, perf_dwarf_leaf):
        m, ci = mean_ci(self.ratios)
        # Completeness: of the workers' own CPU where the workload measures
        # it (as bench/prof does; the profiler's start and final dump are
        # CPU no sampler sees), else of the program's whole process tree.
        denom = self.worker_cpu or self.prog_cpu
        s = {"pairs": len(self.ratios), "ratio": m, "ratio_ci": ci, "files": self.files,
             "samples": self.nsamples, "sampled_s": self.sampled / 1e9, "prog_cpu_s": self.prog_cpu,
             "worker_cpu_s": self.worker_cpu, "ratios": self.ratios,
             "completeness": self.sampled / 1e9 / denom if denom else None,
             "rooted": self.rooted / self.sampled if self.sampled else None,
             "named": self.named / self.sampled if self.sampled else None,
             "leaf_tvd": tvd(self.leaf, perf_dwarf_leaf) if perf_dwarf_leaf is not None else None,
             "split_err_pp": None, "in_steps": None,
             "top_leaves": sorted(self.leaf.items(), key=lambda kv: -kv[1])[:8]}
        insteps = sum(self.steps.values())
        if self.real_steps and insteps:
            real = sum(self.real_steps.values())
            s["split_err_pp"] = max(abs(self.steps.get(k, 0) / insteps - self.real_steps[k] / real)
                                    for k in STEPS) * 100
            s["in_steps"] = insteps / self.sampled
            # The bar a perfect sampler with as many samples would clear 95 %
            # of the time (samples = sampled CPU / period).
            s["split_noise_p95_pp"] = split_noise_p95(
                insteps / (1e9 / HZ), [self.real_steps[k] / real for k in STEPS])
        return s


# ---- main ------------------------------------------------------------------------


def make_inputs(work):
    """Deterministic inputs: 0.8 MB of text from a 5000-word vocabulary for
    xz, and a C file of 40 small functions for gcc (about 0.5 CPU s each)."""
    os.makedirs(work, exist_ok=True)
    r = random.Random(1)
    vocab = ["".join(r.choice("abcdefghijklmnop") for _ in range(r.randint(2, 9))) for _ in range(5000)]
    # input.txt: 0.8 MB; input-2s.txt: 3.2 MB more of the same stream (xz
    # -9 -T1 takes about 2 CPU s on it: the "preloaded 2 s program").
    for name, size in (("input.txt", 800000), ("input-2s.txt", 3200000)):
        with open(work + "/" + name, "w") as f:
            n = 0
            while n < size:
                line = " ".join(r.choice(vocab) for _ in range(8)) + "\n"
                f.write(line)
                n += len(line)
    with open(work + "/gen.c", "w") as f:
        f.write("#include <string.h>\n")
        for i in range(40):
            f.write("static int f%d(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) "
                    "{ s += a[i] * %d ^ (s >> 3); if (s %% 7 == %d) s += a[(i * %d) %% n]; } return s; }\n"
                    % (i, i + 3, i % 7, i + 1))
            f.write("struct s%d { int x; double y[%d]; char name[%d]; };\n" % (i, i % 5 + 1, i % 13 + 2))
            f.write("double g%d(struct s%d *p, int k) { double t = 0; for (int j = 0; j < k; j++) "
                    "t += p[j].y[j %% %d] * p[j].x + strlen(p[j].name); return t + f%d(&p->x, k); }\n"
                    % (i, i, i % 5 + 1, i))


def programs(args):
    w = args.work
    return {
        "xz": {"cmd": ["xz", "-6", "-T1", "-c", w + "/input.txt"], "what": "xz -6 of 0.8 MB text"},
        "xz 2 s": {"cmd": ["xz", "-9", "-T1", "-c", w + "/input-2s.txt"],
                   "what": "xz -9 of 3.2 MB text (~2 CPU s)", "default": False},
        "python3.11": {"cmd": ["/usr/bin/python3.11", "-S", "-E", args.src + "/bench/real/pywork.py",
                               "2"], "what": "pure-Python workload (pywork.py)"},
        "sqlite3": {"cmd": ["sqlite3", ":memory:"], "stdin": args.src + "/bench/real/query.sql",
                    "what": "sqlite3 shell, query.sql"},
        "gcc": {"cmd": ["gcc", "-O2", "-c", w + "/gen.c", "-o", w + "/gen.o"],
                "what": "gcc -O2 -c (gcc, cc1, as)"},
        # V8: the same command for every profiler (the perf map costs all
        # alike); SCALE 6: ~1.6 CPU s here.
        "node": {"cmd": ["node", "--perf-basic-prof", args.src + "/bench/real/jswork.js", "6"],
                 "what": "node --perf-basic-prof jswork.js (V8 JIT)"},
        # SCALE 3: ~1.9 CPU s each, ~180 samples per run at 99 Hz, so 20
        # pairs pool ~3,600: enough to resolve a 2 pp split error (with
        # SCALE 1, ~1,200 samples, an ideal sampler's max-over-three error
        # exceeds 2 pp in about a quarter of the runs).
        "short threads": {"cmd": [args.split_work, "short", "3"], "truth": True,
                          "what": "180 threads of ~10 ms, 4 alive at a time, 1:2:3"},
        "16 threads": {"cmd": [args.split_work, "many", "3"], "truth": True,
                       "what": "16 threads on %d cores, 1:2:3" % os.cpu_count()},
    }


def perf_works():
    if not shutil.which("perf"):
        return False
    d = tempfile.mkdtemp()
    try:
        return subprocess.run(["perf", "record", "-q", "-F", "99", "--call-graph", "dwarf", "-o",
                               d + "/p.data", "--", "true"], capture_output=True).returncode == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def fmt_pct(v):
    return "-" if v is None else "%.1f %%" % (v * 100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cpuwrap", required=True)
    ap.add_argument("--split-work", required=True)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--programs", default="", help="comma-separated subset")
    ap.add_argument("--keep", action="store_true", help="keep the last pair's profiles")
    ap.add_argument("--tools", default="", help="comma-separated subset of %s" % ",".join(TOOLS))
    args = ap.parse_args()
    tools = tuple(t for t in TOOLS if t in args.tools.split(",")) if args.tools else TOOLS

    if any(t.startswith("perf") for t in tools) and not perf_works():
        print("real.py: perf record is not permitted here", file=sys.stderr)
        return 77
    if not os.path.exists(GPERF):
        print("real.py: no %s (google-perftools)" % GPERF, file=sys.stderr)
        return 2
    args.work = os.path.join(args.out, "inputs")
    make_inputs(args.work)
    progs = programs(args)
    names = [p for p in args.programs.split(",") if p] or [p for p in progs
                                                             if progs[p].get("default", True)]
    configs = ("none",) + tools
    accs = {(p, t): Acc() for p in names for t in tools}
    rng = random.Random(8)
    keep_dir = os.path.join(args.out, "last")
    for i in range(args.pairs):
        for p in names:
            order = list(configs)
            rng.shuffle(order)
            runs = {}
            for t in order:
                d = tempfile.mkdtemp(dir=args.out)
                runs[t] = one_run(progs[p], t, args, d)
                if args.keep and i == args.pairs - 1:
                    os.makedirs(keep_dir, exist_ok=True)
                    shutil.move(d, os.path.join(keep_dir, "%s-%s" % (p.replace(" ", "_"), t)))
                else:
                    shutil.rmtree(d, ignore_errors=True)
            for t in tools:
                accs[(p, t)].add(runs[t], runs["none"]["cpu"])
            accs.setdefault((p, "none"), []).append(runs["none"]["cpu"])
        sys.stderr.write("pair %d/%d done\n" % (i + 1, args.pairs))

    summary = {}
    for p in names:
        pd = accs[(p, "perf-dwarf")].leaf if "perf-dwarf" in tools else None
        base = accs[(p, "none")]
        summary[p] = {"what": progs[p]["what"], "none_cpu_s": sum(base) / len(base)}
        for t in tools:
            summary[p][t] = accs[(p, t)].summary(pd if t != "perf-dwarf" else None)
    json.dump({"pairs": args.pairs, "hz": HZ, "summary": summary},
              open(os.path.join(args.out, "results.json"), "w"), indent=1)

    print("| program | profiler | CPU ratio (95 % CI) | completeness | rooted | named | "
          "leaf TVD vs perf-dwarf | split error | in steps |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in names:
        s = summary[p]
        print("| %s | none: %.2f s CPU, mean of %d runs | | | | | | | |" % (p, s["none_cpu_s"], args.pairs))
        for t in tools:
            x = s[t]
            ratio = "%.3f" % x["ratio"] + (" ± %.3f" % x["ratio_ci"] if x["ratio_ci"] is not None else "")
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                p, t, ratio, fmt_pct(x["completeness"]), fmt_pct(x["rooted"]), fmt_pct(x["named"]),
                "-" if x["leaf_tvd"] is None else "%.3f" % x["leaf_tvd"],
                "-" if x["split_err_pp"] is None else "%.2f pp (noise p95 %.2f)" % (
                    x["split_err_pp"], x["split_noise_p95_pp"]),
                fmt_pct(x["in_steps"])))
    print()
    print("%d pairs per program at %d Hz; CI: Student t over the per-pair ratios; completeness of"
          " the process tree's CPU (split_work rows: of its worker threads' CPU); split noise p95:"
          " what an ideal sampler with as many samples exceeds 5 %% of the time." % (args.pairs, HZ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
