#!/usr/bin/env python3
"""bench/soak/soak.py - a long run of the profiling build as a developer
uses it (started by bench/soak/run.sh; on demand, never in the test suite;
method and last results: docs/performance.md, "Soak").

One profiling daemon and one profiling TUI (in a private tmux server,
attached to a session, so that session is the active one and both write
their snapshots below its profiling/ directory) run for --minutes. Rounds
repeat until then, each:
  - one message typed into the TUI, waited for in the session's transcript;
  - --turns turns sent with the CLI to a session of a fixed pool of
    --sessions (the daemon's working set stops growing once every pool
    session exists; only the transcripts grow);
  - every 4th round a manual `polytoken profile dump`, whose printed path
    must exist; every 3rd round the real gRPC console client
    (tests/console/console_client.js generic) against both consoles;
  - then, with no request in flight, one reading of both processes:
    resident memory, descriptors and threads (each the lowest of three
    looks 100 ms apart), CPU, and the snapshot files.
Periodic snapshots come every --interval seconds (POLYTOKEN_PROFILE_INTERVAL),
so a run rotates through many more than the 8 kept.

At the end the TUI quits (F10) and the daemon stops; both must exit 0 and
leave their final snapshots; every snapshot left is read back by
`go tool pprof -raw` and by `polytoken profile list --json`.

Verdicts (docs/performance.md states the targets):
  - descriptors and threads of each process: no growth after the warm-up
    (the first quarter of the readings, at least until every pool session
    has had a turn): the peak of the second half of
    the rest no higher than the first half's (helper threads and closing
    connections come and go; a leak only grows);
  - snapshots: at most --keep per prefix at every reading, none partial
    (no temp file seen twice in a row), all readable at the end;
  - no WARN or ERROR line in either log;
  - resident memory: the growth over the second half of the readings, as
    a least-squares slope (MB per hour), as last - first and per 100 turns,
    by mapping kind, with the transcripts' bytes beside it: printed, to be
    set against a run of the normal build (--plain) at the same pace
    (--round-seconds).
With --plain (a normal build) the same rounds run without dumps, console
clients or snapshot checks: the baseline the profiling build's memory is
compared with. Writes results.json and prints a Markdown table.
"""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
from daemon import PROMPTS, find_process, free_port  # noqa: E402  (shared with the daemon bench)

class Soak:
    def __init__(self, a):
        self.a = a
        self.pt = os.path.join(a.build, "polytoken")
        self.home = os.path.join(a.out, "home")
        os.makedirs(self.home, mode=0o700)
        self.tmux = ["tmux", "-L", "soak-%d" % os.getpid()]
        self.env = dict(os.environ)
        self.env.pop("LD_PRELOAD", None)
        if a.cache:
            self.env["XDG_CACHE_HOME"] = a.cache
        self.daemon_port, self.tui_port = free_port(), free_port()
        self.env.update({
            "POLYTOKEN_HOME": self.home,
            "POLYTOKEN_PROFILE_INTERVAL": str(a.interval),
            "POLYTOKEN_PROFILE_KEEP": str(a.keep),
            "POLYTOKEN_CONSOLE_DAEMON_BIND": "127.0.0.1:%d" % self.daemon_port,
            "POLYTOKEN_CONSOLE_TUI_BIND": "127.0.0.1:%d" % self.tui_port,
        })
        self.readings = []
        self.problems = []
        self.dumps = self.console_runs = self.tui_turns = self.cli_turns = 0

    # ---- helpers ------------------------------------------------------------

    def cli(self, *args, timeout=120):
        r = subprocess.run([self.pt] + list(args), env=self.env, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("polytoken %s exited %d: %s" % (" ".join(args), r.returncode,
                                                               r.stderr[-800:]))
        return r.stdout

    def T(self, *args):
        return subprocess.run(self.tmux + list(args), capture_output=True, text=True,
                              errors="replace")

    def transcript_entries(self, sid):
        try:
            with open(os.path.join(self.home, "sessions", sid, "transcript.jsonl"), "rb") as f:
                return sum(1 for ln in f if ln.strip())
        except FileNotFoundError:
            return 0

    @staticmethod
    def proc(pid):
        """Resident kB, descriptors, threads and CPU ms of pid now."""
        st = {}
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                k, _, v = ln.partition(":")
                st[k] = v.strip()
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        fd_kinds, names = {}, {}
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            # socket:[123] -> socket, anon_inode:[perf_event] -> [perf_event]
            k = t.split(":", 1)[0] if t.startswith(("socket:", "pipe:")) else \
                t.split(":", 1)[1] if t.startswith("anon_inode:") else t
            fd_kinds[k] = fd_kinds.get(k, 0) + 1
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                n = open("/proc/%d/task/%s/comm" % (pid, tid)).read().strip()
            except OSError:
                continue
            names[n] = names.get(n, 0) + 1
        return {"rss_kb": int(st["VmRSS"].split()[0]), "hwm_kb": int(st["VmHWM"].split()[0]),
                "fds": sum(fd_kinds.values()), "threads": sum(names.values()),
                "cpu_ms": (int(fields[11]) + int(fields[12])) * 1000 // tck,
                "fd_kinds": fd_kinds, "thread_names": names}

    @staticmethod
    def rss_by_kind(pid):
        """Resident kB by mapping kind (/proc/PID/smaps): the brk heap,
        other anonymous memory (malloc arenas of other threads, stacks, the
        libraries' own maps), and file mappings (code, the caches' files
        read in place)."""
        out = {"heap": 0, "anon": 0, "file": 0}
        kind = "anon"
        with open("/proc/%d/smaps" % pid) as f:
            for ln in f:
                x = ln.split()
                if x and "-" in x[0] and len(x) >= 5 and ":" in x[3]:
                    name = x[5] if len(x) > 5 else ""
                    kind = "heap" if name == "[heap]" else \
                        "file" if name.startswith("/") else "anon"
                elif x and x[0] == "Rss:":
                    out[kind] += int(x[1])
        return out

    def snapshot_files(self):
        d = os.path.join(self.home, "sessions", self.tui_sid, "profiling")
        names = os.listdir(d) if os.path.isdir(d) else []
        per_prefix = {}
        for n in names:
            if n.endswith(".pb.gz"):
                p = n.split("profile-", 1)[0] + "profile-"
                per_prefix[p] = per_prefix.get(p, 0) + 1
        temps = sorted(n for n in names if n.startswith("."))
        return per_prefix, temps

    # ---- phases -------------------------------------------------------------

    def start(self):
        out = open(os.path.join(self.a.out, "daemon.out"), "wb")
        self.daemon = subprocess.Popen([os.path.join(self.a.build, "polytokend"), "--home",
                                        self.home], env=self.env, stdout=out,
                                       stderr=subprocess.STDOUT)
        end = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.home, "daemon.sock")):
            if time.monotonic() > end or self.daemon.poll() is not None:
                raise RuntimeError("the daemon did not start: %s" % open(out.name).read()[-800:])
            time.sleep(0.01)
        self.tui_sid = self.cli("new", "--name", "soak tui").strip()
        self.pool = [self.cli("new", "--name", "soak pool %d" % i).strip()
                     for i in range(self.a.sessions)]
        shell_env = " ".join("%s='%s'" % (k, self.env[k]) for k in sorted(self.env)
                             if k.startswith(("POLYTOKEN_", "XDG_")))
        r = self.T("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40",
                   "env %s TERM=screen-256color %s attach %s; echo TUI_EXIT=$?; sleep 600"
                   % (shell_env, self.pt, self.tui_sid))
        if r.returncode != 0:
            raise RuntimeError("tmux: %s" % r.stderr)
        self.tui_pid = self.find_tui()
        self.wait(lambda: "[connected]" in self.screen(), "the TUI's conversation screen")

    def find_tui(self):
        end = time.monotonic() + 30
        while time.monotonic() < end:
            pane = self.T("list-panes", "-F", "#{pane_pid}").stdout.split()
            found = find_process([int(p) for p in pane], "polytoken")
            if found is not None:
                return found
            time.sleep(0.05)
        raise RuntimeError("no TUI process in the tmux pane")

    def screen(self):
        return self.T("capture-pane", "-p").stdout

    def wait(self, cond, what, limit=120):
        end = time.monotonic() + limit
        while not cond():
            if time.monotonic() > end:
                raise RuntimeError("timed out waiting for %s; screen:\n%s" % (what, self.screen()))
            time.sleep(0.05)

    def round(self, k):
        # The TUI: one message, done when its turn is in the transcript
        # (the user's entry and the reply's).
        before = self.transcript_entries(self.tui_sid)
        self.T("send-keys", "-l", "%s (round %d)" % (PROMPTS[k % len(PROMPTS)], k))
        self.T("send-keys", "Enter")
        self.wait(lambda: self.transcript_entries(self.tui_sid) >= before + 2, "the TUI's turn")
        self.tui_turns += 1
        sid = self.pool[k % len(self.pool)]
        for i in range(self.a.turns):
            self.cli("send", "--session", sid, PROMPTS[(k + i) % len(PROMPTS)])
            self.cli_turns += 1
        if k % 4 == 3 and not self.a.plain:
            path = self.cli("profile", "dump").strip().splitlines()[-1].split()[-1]
            if not os.path.isfile(path):
                self.problems.append("round %d: profile dump printed %s, which is not a file"
                                     % (k, path))
            self.dumps += 1
        if k % 3 == 2 and self.a.console_client and not self.a.plain:
            for port in (self.daemon_port, self.tui_port):
                r = subprocess.run(["node", self.a.console_client, "generic",
                                    "127.0.0.1:%d" % port], capture_output=True, text=True,
                                   errors="replace", timeout=120)
                if r.returncode != 0:
                    self.problems.append("round %d: console client on port %d: %s"
                                         % (k, port, (r.stdout + r.stderr)[-400:]))
            self.console_runs += 1

    def quiet(self, pid):
        """proc(pid) three times 100 ms apart, each count at its lowest: a
        connection the loop is still closing or a helper thread ending is
        not counted, a leaked one is in all three."""
        xs = []
        for i in range(3):
            if i:
                time.sleep(0.1)
            xs.append(self.proc(pid))
        out = dict(xs[-1])
        for key, kinds in (("fds", "fd_kinds"), ("threads", "thread_names")):
            low = min(xs, key=lambda x: x[key])
            out[key], out[kinds] = low[key], low[kinds]
        return out

    def reading(self, t0):
        per_prefix, temps = self.snapshot_files()
        self.readings.append({
            "t_s": round(time.monotonic() - t0, 1), "daemon": self.quiet(self.daemon.pid),
            "tui": self.quiet(self.tui_pid), "snapshots": per_prefix, "temps": temps,
            "daemon_rss_by_kind": self.rss_by_kind(self.daemon.pid),
            "tui_rss_by_kind": self.rss_by_kind(self.tui_pid),
            "pool_transcript_bytes": sum(
                os.path.getsize(p) for p in glob.glob(os.path.join(
                    self.home, "sessions", "*", "transcript.jsonl"))),
        })
        over = {p: n for p, n in per_prefix.items() if n > self.a.keep}
        if over:
            self.problems.append("at %.0f s: more than %d snapshots kept: %s"
                                 % (self.readings[-1]["t_s"], self.a.keep, over))
        if len(self.readings) >= 2 and temps and set(temps) & set(self.readings[-2]["temps"]):
            self.problems.append("at %.0f s: temp files seen twice: %s"
                                 % (self.readings[-1]["t_s"], sorted(set(temps))))

    def stop(self):
        self.T("send-keys", "F10")
        self.wait(lambda: "TUI_EXIT=" in self.screen(), "the TUI to quit", 60)
        code = self.screen().split("TUI_EXIT=", 1)[1].split()[0]
        if code != "0":
            self.problems.append("the TUI exited %s" % code)
        self.T("kill-server")
        self.cli("daemon", "stop")
        rc = self.daemon.wait(60)
        if rc != 0:
            self.problems.append("the daemon exited %d" % rc)

    def check_files(self):
        d = os.path.join(self.home, "sessions", self.tui_sid, "profiling")
        files = sorted(glob.glob(os.path.join(d, "*.pb.gz")))
        self.final = {}
        for proc_name, prefix in (("daemon", "daemon-profile-"), ("TUI", "tui-profile-")):
            mine = [f for f in files if os.path.basename(f).startswith(prefix)]
            if not mine:
                self.problems.append("no %s snapshot at the end" % proc_name)
            self.final[proc_name] = len(mine)
        bad = 0
        for f in files:
            r = subprocess.run(["go", "tool", "pprof", "-raw", f], capture_output=True,
                               text=True, errors="replace")
            if r.returncode != 0 or "Samples:" not in r.stdout:
                bad += 1
                self.problems.append("go tool pprof cannot read %s: %s" % (f, r.stderr[-200:]))
        listed = json.loads(self.cli("profile", "list", "--session", self.tui_sid, "--json"))
        n_listed = sum(len(x.get("snapshots", [])) for x in listed.get("lists", []))
        if n_listed != len(files):
            self.problems.append("profile list shows %d snapshots, the directory holds %d"
                                 % (n_listed, len(files)))
        self.files_read = len(files) - bad
        for log in ("daemon.log", "tui.log"):
            for path in glob.glob(os.path.join(self.home, "logs", log)):
                for ln in open(path, errors="replace"):
                    if " WARN " in ln or " ERROR " in ln:
                        self.problems.append("%s: %s" % (log, ln.strip()[:300]))


def slope_mb_per_h(ts, kbs):
    n = len(ts)
    if n < 2:
        return 0.0
    mt, mk = sum(ts) / n, sum(kbs) / n
    den = sum((t - mt) ** 2 for t in ts)
    return 0.0 if den == 0 else sum((t - mt) * (k - mk) for t, k in zip(ts, kbs)) / den \
        * 3600 / 1024


def verdicts(s):
    rows = []
    r = s.readings
    # The warm-up: a quarter of the readings, and at least until every pool
    # session has had a turn (the daemon keeps each transcript open).
    warm = min(len(r) - 1, max(len(r) // 4, s.a.sessions + 1))
    for who in ("daemon", "tui"):
        for key in ("fds", "threads"):
            # Transient ones (a helper thread between jobs, a connection the
            # loop has not closed yet) come and go; a leak grows: the second
            # half after the warm-up must never exceed the first half's peak.
            after = r[warm:]
            mid = max(1, len(after) // 2)
            first, second = after[:mid], after[mid:] or after[-1:]
            p1 = max(x[who][key] for x in first)
            p2 = max(x[who][key] for x in second)
            ok = p2 <= p1
            rows.append(("%s %s after warm-up, peak of the first / second half (min %d)"
                         % (who, key, min(x[who][key] for x in after)),
                         "%d / %d" % (p1, p2), "no growth", "met" if ok else "NOT MET"))
            if not ok:
                kinds = "fd_kinds" if key == "fds" else "thread_names"
                lo = max(first, key=lambda x: x[who][key])[who][kinds]
                hi = max(second, key=lambda x: x[who][key])[who][kinds]
                diff = {k: hi.get(k, 0) - lo.get(k, 0) for k in set(lo) | set(hi)
                        if hi.get(k, 0) != lo.get(k, 0)}
                s.problems.append("%s %s grew after warm-up: %s; second peak - first: %s"
                                  % (who, key, [x[who][key] for x in after], diff))
        half = r[len(r) // 2:]
        ts = [x["t_s"] for x in half]
        kbs = [x[who]["rss_kb"] for x in half]
        turns = (len(half) - 1) * (1 + s.a.turns)
        rows.append(("%s resident memory, second half: first -> last, slope, per 100 turns" % who,
                     "%.1f -> %.1f MB, %+.2f MB/h, %+.0f kB" % (
                         kbs[0] / 1024, kbs[-1] / 1024, slope_mb_per_h(ts, kbs),
                         (kbs[-1] - kbs[0]) * 100 / turns if turns else 0),
                     "no growth beyond the normal build's", "see notes"))
        k0, k1 = half[0][who + "_rss_by_kind"], half[-1][who + "_rss_by_kind"]
        rows.append(("%s resident growth over the second half by kind: brk heap / other "
                     "anonymous / files" % who,
                     " / ".join("%+.2f MB" % ((k1[k] - k0[k]) / 1024) for k in ("heap", "anon", "file")),
                     "-", "-"))
    tb = [x["pool_transcript_bytes"] for x in r[len(r) // 2:]]
    rows.append(("transcripts on disk, second half", "%.2f -> %.2f MB" % (tb[0] / 1048576,
                                                                     tb[-1] / 1048576),
                 "-", "-"))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--keep", type=int, default=8)
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--console-client", default="")
    ap.add_argument("--cache", default="", help="XDG_CACHE_HOME (default: the caller's)")
    ap.add_argument("--round-seconds", type=float, default=8,
                    help="each round starts this long after the last one began (or at once "
                         "when it took longer)")
    ap.add_argument("--plain", action="store_true",
                    help="a build without profiling: the same rounds, no dumps, consoles or "
                         "snapshot checks (the baseline for memory)")
    a = ap.parse_args()
    s = Soak(a)
    # A TERM (a timeout, kill) unwinds like Ctrl-C: the tmux server and the
    # daemon are stopped below, not left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    try:
        s.start()
        k = 0
        while time.monotonic() - t0 < a.minutes * 60:
            begun = time.monotonic()
            s.round(k)
            s.reading(t0)
            k += 1
            # A fixed pace, so that builds of different speed do the same
            # work per hour and their slopes compare.
            time.sleep(max(0.0, begun + a.round_seconds - time.monotonic()))
            if k % 10 == 0:
                last = s.readings[-1]
                print("round %d, %.0f s: daemon %.1f MB %d fds %d threads; TUI %.1f MB %d fds"
                      % (k, last["t_s"], last["daemon"]["rss_kb"] / 1024, last["daemon"]["fds"],
                         last["daemon"]["threads"], last["tui"]["rss_kb"] / 1024,
                         last["tui"]["fds"]), flush=True)
        s.stop()
        if not a.plain:
            s.check_files()
        else:
            s.files_read, s.final = 0, {}
    except BaseException:
        s.T("kill-server")
        if getattr(s, "daemon", None) and s.daemon.poll() is None:
            s.daemon.kill()
        raise
    rows = verdicts(s)
    last = s.readings[-1]
    res = {"minutes": a.minutes, "rounds": len(s.readings), "tui_turns": s.tui_turns,
           "cli_turns": s.cli_turns, "manual_dumps": s.dumps, "console_client_runs": s.console_runs,
           "daemon_cpu_ms": last["daemon"]["cpu_ms"], "tui_cpu_ms": last["tui"]["cpu_ms"],
           "snapshots_read_back": s.files_read, "final_files": s.final,
           "problems": s.problems, "rows": rows, "readings": s.readings}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print()
    print("%.0f min, %d rounds: %d TUI turns, %d CLI turns, %d manual dumps, %d console client "
          "runs (x2); snapshots every %d s, %d kept; %d snapshot files read back at the end"
          % (a.minutes, len(s.readings), s.tui_turns, s.cli_turns, s.dumps, s.console_runs,
             a.interval, a.keep, s.files_read))
    print()
    print("| measure | figure | target | status |")
    print("|---|---|---|---|")
    for row in rows:
        print("| %s |" % " | ".join(row))
    print()
    if s.problems:
        print("problems (%d):" % len(s.problems))
        for p in s.problems[:40]:
            print("  - " + p)
        sys.exit(1)
    print("no problems")


if __name__ == "__main__":
    main()
