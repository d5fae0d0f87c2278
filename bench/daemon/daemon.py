#!/usr/bin/env python3
"""bench/daemon/daemon.py - what the profiling build costs the daemon over a
real session (started by bench/daemon/run.sh; method and results:
docs/performance.md, "Daemon overhead, 20-turn session").

One run: a fresh POLYTOKEN_HOME, `polytokend --home H` of one build started
as our child, a session created and 20 turns sent through the CLI
(`polytoken new`, `polytoken send`; the built-in responder with its default
15-40 ms between tokens, so the session takes the wall time a user's would),
then `polytoken daemon stop`. The daemon's CPU is read from the "close"
event of telemetry/telemetry.jsonl (getrusage user + sys, written after the
final profile dump, so that dump is included) and, as a cross-check, from
our wait4 of the daemon (everything up to its exit).

Configurations, run once each per round in a shuffled order (drift and the
neighbours' load hit all alike):
  normal        the normal build's daemon (build/dev or build/release)
  profiling     the profiling build's daemon, symbol cache warm (one cache
                directory kept across the rounds, filled by one untimed run
                first: what a developer's second and later sessions see)
  prof-cold     the profiling build's daemon, an empty symbol cache each run
                (the first session on a machine)
  prof-timer    as profiling, with POLYTOKEN_PROFILE_ENGINE=timer (what the
                engine's context switches cost; not part of the default set)
  prof-nocon    as profiling, with the task console's bind refused (a
                TEST-NET address): no server thread and no console events,
                so profiling - prof-nocon is what the console costs; not
                part of the default set
  gperftools    the normal daemon with gperftools' CPU profiler preloaded
                (LD_PRELOAD=libprofiler.so.0, CPUPROFILE=<home>/gperf.prof,
                CPUPROFILE_FREQUENCY=99): the anchor of issue 20's target
  perf          the normal daemon under `perf record -F 99 -g` (perf's
                default build-id pass at the end included); the daemon runs
                under bench/real/cpuwrap.c, so its CPU (wait4 of the daemon)
                and perf's own (perf's wait4 minus the daemon's tree) are
                told apart
The CLI is the normal build's in all of them, so the client is the same.
Per configuration: mean daemon CPU, the mean of the per-round ratios to the
normal run with a 95 % Student-t interval, and CPU by phase (the sum of the
daemon's threads' schedstat when its socket came up, after the last turn,
and the close event); and the paired difference profiling - gperftools
(ms and ratio points, 95 % interval): issue 20's test of "no more than
gperftools".
"""
import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "real"))
from real import mean_ci  # noqa: E402  (Student-t interval, shared with the real-program bench)

TURNS = 20
HZ = 99
GPERF = "/usr/lib/x86_64-linux-gnu/libprofiler.so.0"
CONFIGS = ("normal", "profiling", "prof-cold", "gperftools", "perf", "prof-timer", "prof-nocon")
PROMPTS = [
    "hello, what can you do",
    "tell me about profiling a daemon",
    "what does a sampler do at 99 Hz",
    "why would a stack be truncated",
    "how are short threads sampled",
    "explain pprof in a few words",
    "what is a symbol cache for",
    "and what does the task console show",
    "how does the daemon shut down",
    "what is written at the final dump",
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cli(build, env, *args):
    r = subprocess.run([build + "/polytoken"] + list(args), env=env, capture_output=True,
                       text=True, errors="replace", timeout=120)
    if r.returncode != 0:
        raise RuntimeError("polytoken %s: %s" % (" ".join(args), r.stderr[-800:]))
    return r.stdout


def close_event(home):
    with open(os.path.join(home, "telemetry", "telemetry.jsonl")) as f:
        events = [json.loads(ln) for ln in f if ln.strip()]
    closes = [e for e in events if e.get("event") == "close"]
    if not closes:
        raise RuntimeError("no close event in %s/telemetry/telemetry.jsonl" % home)
    return closes[-1]


def final_snapshot_comments(home):
    """Comments of the profiling daemon's final snapshot (go tool pprof
    -comments), for the cost breakdown; None for a normal daemon."""
    log = open(os.path.join(home, "logs", "daemon.log"), errors="replace").read()
    key = "profiling: final snapshot "
    lines = [ln for ln in log.splitlines() if key in ln]
    if not lines:
        return None
    path = lines[-1].split(key, 1)[1].strip()
    r = subprocess.run(["go", "tool", "pprof", "-comments", path], capture_output=True, text=True)
    return r.stdout.strip().splitlines() if r.returncode == 0 else ["(unreadable: %s)" % r.stderr[-200:]]


def find_process(pids, comm):
    """The first process named comm among pids and their descendants
    (/proc/PID/task/*/children), or None."""
    todo = list(pids)
    while todo:
        p = todo.pop()
        try:
            if open("/proc/%d/comm" % p).read().strip() == comm:
                return p
            for t in os.listdir("/proc/%d/task" % p):
                todo += [int(c) for c in open("/proc/%d/task/%s/children" % (p, t)).read().split()]
        except OSError:
            continue   # gone meanwhile
    return None


def daemon_pid(pid, conf):
    """The daemon's pid: pid itself, or (perf) the polytokend below perf and
    cpuwrap."""
    if conf != "perf":
        return pid
    found = find_process([pid], "polytokend")
    if found is None:
        raise RuntimeError("perf: no polytokend below pid %d" % pid)
    return found


def thread_cpu_ms(pid):
    """CPU of each of the daemon's threads so far, summed by thread name
    (/proc/PID/task/*/schedstat: ns on the CPU), for the breakdown."""
    out = {}
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        try:
            name = open("%s/%s/comm" % (base, tid)).read().strip()
            ns = int(open("%s/%s/schedstat" % (base, tid)).read().split()[0])
        except (OSError, ValueError, IndexError):
            continue   # the thread ended meanwhile
        out[name] = out.get(name, 0) + ns / 1e6
    return out


def env_cli(env):
    """The CLI's environment: the daemon's, without the profilers'."""
    e = dict(env)
    for k in ("LD_PRELOAD", "CPUPROFILE", "CPUPROFILE_FREQUENCY"):
        e.pop(k, None)
    return e


def one_run(conf, args, cache_dir):
    home = tempfile.mkdtemp(dir=args.out, prefix="home-")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["POLYTOKEN_HOME"] = home
    env["XDG_CACHE_HOME"] = cache_dir
    env["POLYTOKEN_CONSOLE_DAEMON_BIND"] = "127.0.0.1:%d" % free_port()
    build = args.profiling if conf.startswith("prof") else args.normal
    cmd = [build + "/polytokend", "--home", home]
    if conf == "prof-timer":
        env["POLYTOKEN_PROFILE_ENGINE"] = "timer"
    if conf == "prof-nocon":
        env["POLYTOKEN_CONSOLE_DAEMON_BIND"] = "192.0.2.1:6669"   # TEST-NET-1: not ours, bind fails
    if conf == "gperftools":
        env["LD_PRELOAD"] = GPERF
        env["CPUPROFILE"] = os.path.join(home, "gperf.prof")
        env["CPUPROFILE_FREQUENCY"] = str(HZ)
    elif conf == "perf":
        cmd = ["perf", "record", "-q", "-F", str(HZ), "-g", "-o", os.path.join(home, "perf.data"),
               "--", args.cpuwrap, os.path.join(home, "cpuwrap.out"), "--"] + cmd
    out = open(os.path.join(home, "daemon.out"), "wb")
    p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 20
        while not os.path.exists(os.path.join(home, "daemon.sock")):
            if time.monotonic() > end or p.poll() is not None:
                raise RuntimeError("%s daemon did not start: %s" % (conf, open(out.name).read()[-800:]))
            time.sleep(0.005)
        dpid = daemon_pid(p.pid, conf)
        at_start = sum(thread_cpu_ms(dpid).values())
        t0 = time.monotonic()
        sid = cli(args.normal, env_cli(env), "new", "--name", "bench").strip()
        for i in range(args.turns):
            cli(args.normal, env_cli(env), "send", "--session", sid, PROMPTS[i % len(PROMPTS)])
        wall = time.monotonic() - t0
        threads = thread_cpu_ms(dpid)
        cli(args.normal, env_cli(env), "daemon", "stop")
        _, status, ru = os.wait4(p.pid, 0)
    except BaseException:
        p.kill()
        p.wait()
        raise
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s daemon exited %d: %s" % (conf, os.waitstatus_to_exitcode(status),
                                                        open(out.name).read()[-800:]))
    ev = close_event(home)
    if ev.get("turns_total") != args.turns:
        raise RuntimeError("%s: close event says %s turns" % (conf, ev.get("turns_total")))
    tele = ev["cpu_user_ms"] + ev["cpu_sys_ms"]
    before_stop = sum(threads.values())
    res = {"tele_ms": tele, "user_ms": ev["cpu_user_ms"],
           "sys_ms": ev["cpu_sys_ms"], "wait4_ms": (ru.ru_utime + ru.ru_stime) * 1000,
           "wall_s": wall, "uptime_ms": ev["uptime_ms"], "maxrss_kb": ev.get("maxrss_kb"),
           "threads_before_stop_ms": threads,
           "phase_ms": {"start": at_start, "session": before_stop - at_start,
                        "stop": tele - before_stop}}
    if conf == "perf":
        # The daemon's own CPU is cpuwrap's wait4 of it; perf's is the rest
        # of perf's tree (cpuwrap's own ~1 ms included).
        u, s_ = (float(x) for x in open(os.path.join(home, "cpuwrap.out")).read().split())
        res["wait4_ms"] = (u + s_) * 1000
        res["perf_own_ms"] = (ru.ru_utime + ru.ru_stime) * 1000 - res["wait4_ms"]
    if conf == "gperftools":
        prof = os.path.join(home, "gperf.prof")
        if not os.path.exists(prof) or os.path.getsize(prof) == 0:
            raise RuntimeError("gperftools wrote no profile (%s)" % prof)
        res["gperf_bytes"] = os.path.getsize(prof)
    if conf.startswith("prof"):
        res["comments"] = final_snapshot_comments(home)
    if args.keep_homes:
        res["home"] = home
    else:
        shutil.rmtree(home, ignore_errors=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--normal", required=True, help="build dir of the normal build")
    ap.add_argument("--profiling", required=True, help="build dir of the profiling build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--configs", default=",".join(CONFIGS[:5]))
    ap.add_argument("--cpuwrap", help="bench/real/cpuwrap.c built (for the perf configuration)")
    ap.add_argument("--keep-homes", action="store_true")
    ap.add_argument("--turns", type=int, default=TURNS, help="turns per session (the figure: 20)")
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    if "normal" not in configs:
        ap.error("--configs must include normal (the reference)")
    for c in configs:
        if c not in CONFIGS:
            ap.error("unknown configuration %s (%s)" % (c, ",".join(CONFIGS)))
    if "gperftools" in configs and not os.path.exists(GPERF):
        ap.error("gperftools: no %s (apt-get install libgoogle-perftools4)" % GPERF)
    if "perf" in configs and (not shutil.which("perf") or not args.cpuwrap):
        ap.error("perf: needs perf on PATH and --cpuwrap")
    warm = os.path.join(args.out, "cache-warm")
    os.makedirs(warm, mode=0o700, exist_ok=True)
    if {"profiling", "prof-timer", "prof-nocon"} & set(configs):
        one_run("profiling", args, warm)   # untimed: fills the warm cache
    rng = random.Random(20)
    runs = {c: [] for c in configs}
    loads = []
    for i in range(args.pairs):
        order = list(configs)
        rng.shuffle(order)
        loads.append(os.getloadavg()[0])
        for c in order:
            cache = warm   # every prof-* but prof-cold shares the warm cache
            if c == "prof-cold":
                cache = tempfile.mkdtemp(dir=args.out, prefix="cache-cold-")
            runs[c].append(one_run(c, args, cache))
            if c == "prof-cold":
                shutil.rmtree(cache, ignore_errors=True)
        sys.stderr.write("round %d/%d (load %.2f): %s\n" % (i + 1, args.pairs, loads[-1], ", ".join(
            "%s %d ms" % (c, runs[c][-1]["tele_ms"]) for c in configs)))
    loads.append(os.getloadavg()[0])
    json.dump({"pairs": args.pairs, "turns": args.turns, "loads": loads, "runs": runs},
              open(os.path.join(args.out, "results.json"), "w"), indent=1)

    print("| daemon | CPU, close event (mean) | ratio to normal (95 % CI) | CPU, wait4 (mean) | "
          "ratio, wait4 (95 % CI) | start / session / stop (medians, ms) | session wall time |")
    print("|---|---|---|---|---|---|---|")
    base = runs["normal"]

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2

    for c in configs:
        rs = runs[c]
        tele = sum(r["tele_ms"] for r in rs) / len(rs)
        w4 = sum(r["wait4_ms"] for r in rs) / len(rs)
        wall = sum(r["wall_s"] for r in rs) / len(rs)
        ph = " / ".join("%.1f" % med([r["phase_ms"][k] for r in rs]) for k in ("start", "session", "stop"))
        if c == "normal":
            print("| normal | %.1f ms | | %.1f ms | | %s | %.1f s |" % (tele, w4, ph, wall))
            continue
        m, ci = mean_ci([r["tele_ms"] / b["tele_ms"] for r, b in zip(rs, base)])
        m4, ci4 = mean_ci([r["wait4_ms"] / b["wait4_ms"] for r, b in zip(rs, base)])
        print("| %s | %.1f ms | %.3f ± %.3f | %.1f ms | %.3f ± %.3f | %s | %.1f s |"
              % (c, tele, m, ci or 0, w4, m4, ci4 or 0, ph, wall))
    print()
    print("%d rounds, %d turns per session, load %.2f-%.2f; ratios: mean of the per-round ratios,"
          " Student t." % (args.pairs, args.turns, min(loads), max(loads)))
    if "perf" in configs:
        own = [r["perf_own_ms"] for r in runs["perf"]]
        m, ci = mean_ci(own)
        print("perf's own CPU (perf's wait4 minus the daemon's): %.1f ± %.1f ms per session"
              " (daemon: the perf row's wait4)." % (m, ci or 0))
    if "gperftools" in configs:
        g = runs["gperftools"]
        for c in ("profiling", "prof-cold"):
            if c not in configs:
                continue
            for key, what in (("tele_ms", "close event"), ("wait4_ms", "wait4")):
                d, dci = mean_ci([r[key] - x[key] for r, x in zip(runs[c], g)])
                dr, drci = mean_ci([(r[key] - x[key]) / b[key] for r, x, b in zip(runs[c], g, base)])
                print("%s - gperftools, %s: %+.1f ± %.1f ms, %+.3f ± %.3f of normal (paired; met when"
                      " <= 0)" % (c, what, d, dci or 0, dr, drci or 0))
    for c, what in (("prof-timer", "the perf engine's switches"), ("prof-nocon", "the console")):
        if c in configs and "profiling" in configs:
            d, dci = mean_ci([r["tele_ms"] - x["tele_ms"] for r, x in zip(runs["profiling"], runs[c])])
            print("profiling - %s (%s), close event: %+.1f ± %.1f ms (paired)" % (c, what, d, dci or 0))
    print("\nCPU by thread name before the stop request (mean ms; the final dump and"
          " shutdown come after, on the loop thread):")
    for c in configs:
        tot = {}
        for r in runs[c]:
            for k, v in r["threads_before_stop_ms"].items():
                tot[k] = tot.get(k, 0) + v / len(runs[c])
        print("    %s: %s" % (c, ", ".join("%s %.1f" % kv for kv in sorted(tot.items(), key=lambda kv: -kv[1]))))
    last = runs.get("profiling") or runs.get("prof-cold")
    if last and last[-1].get("comments"):
        print("\nLast profiling run's final snapshot comments:")
        for ln in last[-1]["comments"]:
            print("    " + ln)
    return 0


if __name__ == "__main__":
    sys.exit(main())
