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
The CLI is the normal build's in all three, so the client is the same.
Per configuration: mean daemon CPU, and the mean of the per-round ratios to
the normal run with a 95 % Student-t interval.
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


def one_run(conf, args, cache_dir):
    home = tempfile.mkdtemp(dir=args.out, prefix="home-")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["POLYTOKEN_HOME"] = home
    env["XDG_CACHE_HOME"] = cache_dir
    env["POLYTOKEN_CONSOLE_DAEMON_BIND"] = "127.0.0.1:%d" % free_port()
    build = args.normal if conf == "normal" else args.profiling
    out = open(os.path.join(home, "daemon.out"), "wb")
    p = subprocess.Popen([build + "/polytokend", "--home", home], env=env, stdout=out,
                         stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 20
        while not os.path.exists(os.path.join(home, "daemon.sock")):
            if time.monotonic() > end or p.poll() is not None:
                raise RuntimeError("%s daemon did not start: %s" % (conf, open(out.name).read()[-800:]))
            time.sleep(0.01)
        t0 = time.monotonic()
        sid = cli(args.normal, env, "new", "--name", "bench").strip()
        for i in range(args.turns):
            cli(args.normal, env, "send", "--session", sid, PROMPTS[i % len(PROMPTS)])
        wall = time.monotonic() - t0
        threads = thread_cpu_ms(p.pid)
        cli(args.normal, env, "daemon", "stop")
        _, status, ru = os.wait4(p.pid, 0)
    except BaseException:
        p.kill()
        p.wait()
        raise
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s daemon exited %d" % (conf, os.waitstatus_to_exitcode(status)))
    ev = close_event(home)
    if ev.get("turns_total") != args.turns:
        raise RuntimeError("%s: close event says %s turns" % (conf, ev.get("turns_total")))
    res = {"tele_ms": ev["cpu_user_ms"] + ev["cpu_sys_ms"], "user_ms": ev["cpu_user_ms"],
           "sys_ms": ev["cpu_sys_ms"], "wait4_ms": (ru.ru_utime + ru.ru_stime) * 1000,
           "wall_s": wall, "uptime_ms": ev["uptime_ms"], "maxrss_kb": ev.get("maxrss_kb"),
           "threads_before_stop_ms": threads}
    if conf != "normal":
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
    ap.add_argument("--configs", default="normal,profiling,prof-cold")
    ap.add_argument("--keep-homes", action="store_true")
    ap.add_argument("--turns", type=int, default=TURNS, help="turns per session (the figure: 20)")
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    if "normal" not in configs:
        ap.error("--configs must include normal (the reference)")
    warm = os.path.join(args.out, "cache-warm")
    os.makedirs(warm, mode=0o700, exist_ok=True)
    if "profiling" in configs:
        one_run("profiling", args, warm)   # untimed: fills the warm cache
    rng = random.Random(20)
    runs = {c: [] for c in configs}
    for i in range(args.pairs):
        order = list(configs)
        rng.shuffle(order)
        for c in order:
            cache = warm
            if c == "prof-cold":
                cache = tempfile.mkdtemp(dir=args.out, prefix="cache-cold-")
            runs[c].append(one_run(c, args, cache))
            if c == "prof-cold":
                shutil.rmtree(cache, ignore_errors=True)
        sys.stderr.write("round %d/%d: %s\n" % (i + 1, args.pairs, ", ".join(
            "%s %d ms" % (c, runs[c][-1]["tele_ms"]) for c in configs)))
    json.dump({"pairs": args.pairs, "turns": args.turns, "runs": runs},
              open(os.path.join(args.out, "results.json"), "w"), indent=1)

    print("| daemon | CPU, close event (mean) | ratio to normal (95 % CI) | CPU, wait4 (mean) | "
          "ratio, wait4 (95 % CI) | session wall time |")
    print("|---|---|---|---|---|---|")
    base = runs["normal"]
    for c in configs:
        rs = runs[c]
        tele = sum(r["tele_ms"] for r in rs) / len(rs)
        w4 = sum(r["wait4_ms"] for r in rs) / len(rs)
        wall = sum(r["wall_s"] for r in rs) / len(rs)
        if c == "normal":
            print("| normal | %.1f ms | | %.1f ms | | %.1f s |" % (tele, w4, wall))
            continue
        m, ci = mean_ci([r["tele_ms"] / b["tele_ms"] for r, b in zip(rs, base)])
        m4, ci4 = mean_ci([r["wait4_ms"] / b["wait4_ms"] for r, b in zip(rs, base)])
        print("| %s | %.1f ms | %.3f ± %.3f | %.1f ms | %.3f ± %.3f | %.1f s |"
              % (c, tele, m, ci or 0, w4, m4, ci4 or 0, wall))
    print()
    print("%d rounds, %d turns per session; ratios: mean of the per-round ratios, Student t."
          % (args.pairs, args.turns))
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
