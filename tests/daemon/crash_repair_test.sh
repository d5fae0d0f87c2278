#!/usr/bin/env bash
# crash_repair_test.sh - issue 21 item 6 (sessions) with a real daemon
# killed with SIGKILL inside sessions.create, at the exact step where the
# test build's fault injection stops it (POLYTOKEN_FAULT_SESSION_CREATE):
#  - after the empty transcript is written (the state of issue 21, now in a
#    temporary directory): the next start moves it to quarantine/sessions;
#  - after session.json is written, before the rename: the next start
#    finishes the creation (the session is listed and usable);
#  - with what an older daemon left in place (sessions/<id>/ with an empty
#    transcript and no session.json) and an unfinished deletion.
# Each start that repairs says so in one log line, sessions.list shows
# exactly the finished session and nothing skipped, and a start with
# nothing left to repair says nothing.
source "$(dirname "$0")/daemon_lib.sh"
grep -q '^#define PT_FAULT_INJECTION 1' "$(dirname "$PD_BIN")/pt_config.h" ||
  { echo "SKIP: built without -Dfault_injection"; exit 77; }
export POLYTOKEN_RESPONDER_DELAY_MS=1
S=$POLYTOKEN_HOME/sessions

# stopped_at STEP: starts the daemon with the fault at STEP, asks for a
# session named after the step, waits until the daemon stopped itself
# there, kills it with SIGKILL. Prints the new temporary's name.
stopped_at() {
  local step=$1 i
  POLYTOKEN_FAULT_SESSION_CREATE=$step start_daemon
  python3 - "$step" <<'PY' || fail "could not send sessions.create"
import os, sys
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
c.send({"id": 99, "method": "sessions.create", "params": {"name": "at " + sys.argv[1]}})
PY
  for i in $(seq 1 400); do
    [ "$(awk '{print $3}' "/proc/$PD_PID/stat" 2>/dev/null)" = T ] && break
    sleep 0.05
  done
  [ "$(awk '{print $3}' "/proc/$PD_PID/stat")" = T ] || fail "the daemon did not stop at $step"
  grep -q "WARN fault injection: sessions.create stops after step $step\$" "$POLYTOKEN_HOME/logs/daemon.log" ||
    fail "no fault injection line for $step"
  kill -KILL "$PD_PID"
  wait_gone "$PD_PID"
}

stopped_at transcript
# exactly what a crash there leaves: a temporary with an empty transcript
lost=$(cd "$S" && ls -A)
[[ "$lost" =~ ^\.create-[0-9a-f]{12}$ ]] || fail "sessions/ holds: $lost"
[ -f "$S/$lost/transcript.jsonl" ] && [ ! -s "$S/$lost/transcript.jsonl" ] || fail "no empty transcript in $lost"
[ ! -e "$S/$lost/session.json" ] || fail "$lost has a session.json"

# the next start (stopped again, at the next step) quarantined it
stopped_at json
home_real=$(cd "$POLYTOKEN_HOME" && pwd -P)
LOG=$POLYTOKEN_HOME/logs/daemon.log
repair_lines() { grep ' WARN start repair: ' "$LOG" | cut -d' ' -f2-; }
want="WARN start repair: 1 incomplete session moved to $home_real/quarantine/sessions"
[ "$(repair_lines)" = "$want" ] || { echo "want: $want"; echo "got:  $(repair_lines)"; fail "not the one repair line"; }
done_tmp=$(cd "$S" && ls -A)
[[ "$done_tmp" =~ ^\.create-[0-9a-f]{12}$ ]] || fail "second temporary: $done_tmp"
done_id=${done_tmp#.create-}

# an older daemon's unfinished creation, in place, and an unfinished deletion
mkdir -p "$S/0123456789ab/profiling" "$S/.deleted-ba9876543210/profiling"
: >"$S/0123456789ab/transcript.jsonl"
echo '{"turn_id":1,"role":"user","text":"gone","ts":"2026-01-01T00:00:00Z"}' >"$S/.deleted-ba9876543210/transcript.jsonl"

start_daemon
want="$want
WARN start repair: 1 interrupted session creation finished; 1 incomplete session moved to $home_real/quarantine/sessions; 1 interrupted session deletion finished"
[ "$(repair_lines)" = "$want" ] || { echo "want: $want"; echo "got:  $(repair_lines)"; fail "not the repair lines"; }
DONE=$done_id pycheck <<'PY'
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
lst = c.ok("sessions.list")
assert [(s["id"], s["name"], s["turns"]) for s in lst["sessions"]] == [(os.environ["DONE"], "at json", 0)], lst
assert lst["skipped"] == [], lst
# the finished session is a whole one
t = c.ok("turn.send", {"session": os.environ["DONE"], "text": "still there?"})["turn_id"]
assert c.wait_turn(os.environ["DONE"], t)[2]["status"] == "ok"
PY
[ "$(cd "$S" && ls -A)" = "$done_id" ] || fail "sessions/ holds: $(cd "$S" && ls -A)"
Q=$POLYTOKEN_HOME/quarantine/sessions
[ "$(cd "$Q" && ls -A | LC_ALL=C sort | tr '\n' ' ')" = "0123456789ab ${lost#.} " ] ||
  fail "quarantine holds: $(ls -A "$Q")"
[ -f "$Q/${lost#.}/transcript.jsonl" ] && [ -d "$Q/${lost#.}/profiling" ] || fail "quarantined session not whole"
[ "$(stat -c %a "$POLYTOKEN_HOME/quarantine")" = 700 ] || fail "quarantine is not 0700"

# said once: the next start has nothing to repair and says nothing
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
start_daemon
[ "$(repair_lines)" = "$want" ] || fail "repair logged again: $(repair_lines)"
[ "$(grep -c ' skipped: ' "$LOG")" = 0 ] || fail "a session was skipped: $(grep ' skipped: ' "$LOG")"
DONE=$done_id pycheck <<'PY'
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
lst = c.ok("sessions.list")
assert [s["id"] for s in lst["sessions"]] == [os.environ["DONE"]] and lst["skipped"] == [], lst
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
echo PASS
