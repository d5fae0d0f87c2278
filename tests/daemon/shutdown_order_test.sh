#!/usr/bin/env bash
# Orderly shutdown with a turn running (SIGTERM and daemon.stop): stop
# accepting, cancel the turn (its turn.done "cancelled" reaches the client and
# the transcript), close clients, then the registered steps in slot order,
# telemetry close, log close last - all visible in the log in that order.
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_DELAY_MS=300
LOG=$POLYTOKEN_HOME/logs/daemon.log

check_order() {
  # the lines of this run, in order
  awk -v pid="$1" '/starting \(pid /{on = index($0, "(pid " pid ",") > 0} on' "$LOG" >"$T/run.log"
  local prev=0 n pat
  for pat in "shutdown: requested ($2" "shutdown: step stop-accepting" "shutdown: step cancel-turns (1 running)" \
    "turn 1: cancelled" "shutdown: step close-clients" "shutdown: step state: close session store" \
    "shutdown: step telemetry: close telemetry" "shutdown: step log: close log"; do
    n=$(grep -n -F "$pat" "$T/run.log" | head -n1 | cut -d: -f1)
    [ -n "$n" ] || { cat "$T/run.log"; fail "missing in the log: $pat"; }
    [ "$n" -gt "$prev" ] || { cat "$T/run.log"; fail "out of order: $pat"; }
    prev=$n
  done
  [ "$(tail -n1 "$T/run.log" | grep -c 'shutdown: step log: close log')" = 1 ] ||
    fail "the log close is not the last line"
  tail -n1 "$POLYTOKEN_HOME/telemetry/telemetry.jsonl" | grep -q '"event":"close"' ||
    fail "telemetry does not end with a close line"
}

run_case() { # $1 = how to stop: sigterm | ipc
  start_daemon
  HOW=$1 DPID=$PD_PID pycheck <<'PY'
import json, os, signal
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
c = Client(home); c.hello()
s = c.ok("sessions.create", {})["session"]["id"]
t = c.ok("turn.send", {"session": s, "text": "a long answer please"})["turn_id"]
assert c.next_event()["event"] == "turn.started"
if os.environ["HOW"] == "sigterm":
    os.kill(int(os.environ["DPID"]), signal.SIGTERM)
else:
    other = Client(home); other.hello()
    assert other.ok("daemon.stop") == {}
_, _, done = c.wait_turn(s, t)
assert done["status"] == "cancelled", done
assert c.read_msg(10) is None          # then the daemon closes the connection
tr = [json.loads(l) for l in open(f"{home}/sessions/{s}/transcript.jsonl")]
assert tr[-1]["role"] == "assistant" and tr[-1]["status"] == "cancelled", tr
PY
  wait_gone "$PD_PID"
  [ "$PD_STATUS" = 0 ] || fail "exit status $PD_STATUS"
}

run_case sigterm
check_order "$PD_PID" "SIGTERM"
run_case ipc
check_order "$PD_PID" "daemon.stop"
echo PASS
