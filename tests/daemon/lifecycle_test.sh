#!/usr/bin/env bash
# Daemon lifecycle: start, --version/--help, second start refused with a clear
# message, stop via daemon.stop, via SIGTERM and via SIGINT, restart, lock
# and socket handling, telemetry lines.
source "$(dirname "$0")/daemon_lib.sh"

"$PD_BIN" --version | grep -q '^polytokend 0\.1\.0' || fail "--version"
"$PD_BIN" --help | grep -q -- '--home DIR' || fail "--help"
"$PD_BIN" --bogus >/dev/null 2>&1 && fail "unknown argument accepted"

export POLYTOKEN_TELEMETRY_INTERVAL_MS=100
start_daemon
first=$PD_PID
[ "$(stat -c %a "$POLYTOKEN_HOME/daemon.sock")" = 600 ] || fail "socket mode is not 0600"
grep -qx "$first" "$POLYTOKEN_HOME/daemon.lock" || fail "lock file does not hold the pid"

# second start on the same home: refused, clear message, non-zero, first unharmed
out=$("$PD_BIN" 2>&1)
rc=$?
[ $rc -ne 0 ] || fail "second daemon exited 0"
echo "$out" | grep -q "polytokend: already running (pid $first) for $POLYTOKEN_HOME" ||
  fail "second start message: $out"
kill -0 "$first" || fail "first daemon died"
# --home selects the same root explicitly: refused too
"$PD_BIN" --home "$POLYTOKEN_HOME" >/dev/null 2>&1 && fail "second daemon via --home started"

sleep 0.5 # let a few telemetry ticks happen
pycheck <<'PY'
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"])
h = c.hello()["result"]
assert h["protocol"] == 1 and h["version"] == "0.1.0", h
assert h["profiling"] is (os.environ["PD_PROFILING"] == "1"), h
st = c.ok("daemon.status")
assert st["pid"] == h["pid"] and st["clients"] == 1 and st["active_session"] is None, st
assert c.ok("daemon.stop") == {}
# the daemon closes our connection as part of the shutdown
assert c.read_msg(10) is None
PY
wait_gone "$first"
[ "$PD_STATUS" = 0 ] || fail "daemon.stop: exit status $PD_STATUS"
[ -e "$POLYTOKEN_HOME/daemon.sock" ] && fail "socket left behind"
[ -s "$POLYTOKEN_HOME/daemon.lock" ] && fail "pid left in the lock file"

# telemetry: start, ticks, close, with the documented fields
pycheck <<'PY'
import json, os
lines = [json.loads(l) for l in open(os.environ["POLYTOKEN_HOME"] + "/telemetry/telemetry.jsonl")]
ev = [l["event"] for l in lines]
assert ev[0] == "start" and ev[-1] == "close" and ev.count("tick") >= 2, ev
for k in ("ts", "uptime_ms", "sessions", "turns_total", "clients", "cpu_user_ms", "cpu_sys_ms", "rss_kb"):
    assert k in lines[-1], k
assert lines[-1]["rss_kb"] > 0
PY

# restart, then SIGTERM
start_daemon
kill -TERM "$PD_PID"
wait_gone "$PD_PID"
[ "$PD_STATUS" = 0 ] || fail "SIGTERM: exit status $PD_STATUS"
grep -q "shutdown: requested (SIGTERM)" "$POLYTOKEN_HOME/logs/daemon.log" || fail "SIGTERM not logged"

# restart, then SIGINT
start_daemon
kill -INT "$PD_PID"
wait_gone "$PD_PID"
[ "$PD_STATUS" = 0 ] || fail "SIGINT: exit status $PD_STATUS"
grep -q "shutdown: requested (SIGINT)" "$POLYTOKEN_HOME/logs/daemon.log" || fail "SIGINT not logged"

# a stale socket file (daemon killed hard) does not prevent a restart
start_daemon
kill -KILL "$PD_PID"
wait_gone "$PD_PID"
[ -e "$POLYTOKEN_HOME/daemon.sock" ] || fail "expected a stale socket after SIGKILL"
start_daemon
pycheck <<'PY'
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
assert c.ok("daemon.status")["pid"] > 0
PY
kill -TERM "$PD_PID"
wait_gone "$PD_PID"
echo "PASS"
