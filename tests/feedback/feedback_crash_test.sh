#!/usr/bin/env bash
# feedback_crash_test.sh - issue 21 item 6 (feedback): `polytoken feedback
# send` killed with SIGKILL while it writes its bundle, at the exact step
# where the test build's fault injection stops it
# (POLYTOKEN_FAULT_FEEDBACK_WRITE):
#  - after the manifest (complete, not yet renamed): the next daemon start
#    moves it on to feedback/outbox/<id>, byte for byte;
#  - after message.txt (incomplete): moved whole to quarantine/feedback-tmp;
#  - a writer that is stopped but alive holds its bundle: left alone until
#    it is gone, then quarantined by the start after.
# Each start that repairs says so in one log line; one with nothing to
# repair says nothing; nothing is deleted.
set -u
. "$(dirname "$0")/../lib.sh"
PT=$PT_BUILD_DEV/polytoken
export POLYTOKEN_DAEMON=$PT_BUILD_DEV/polytokend
[ -x "$PT" ] && [ -x "$POLYTOKEN_DAEMON" ] || fail "no dev build in $PT_BUILD_DEV"
grep -q '^#define PT_FAULT_INJECTION 1' "$PT_BUILD_DEV/pt_config.h" || skip "built without -Dfault_injection"
unset POLYTOKEN_FEEDBACK_URL
pt_home
cleanup() {
  timeout 20 "$PT" daemon stop >/dev/null 2>&1
  pt_cleanup
  rm -rf "$POLYTOKEN_HOME"
}
trap cleanup EXIT
H=$(cd "$POLYTOKEN_HOME" && pwd -P)
TMP=$H/feedback/tmp
LOG=$H/logs/daemon.log
"$PT" daemon start >/dev/null || fail "daemon start"

# stop_cli STEP MESSAGE: runs feedback send with the fault at STEP and
# waits until the CLI stopped itself there. Sets CLI_PID.
stop_cli() {
  POLYTOKEN_FAULT_FEEDBACK_WRITE=$1 "$PT" feedback send --message "$2" --attach daemon-log \
    >"$TMPDIR/$1.out" 2>&1 &
  CLI_PID=$!
  PT_PIDS+=("$CLI_PID")
  local i
  for i in $(seq 1 400); do
    [ "$(awk '{print $3}' "/proc/$CLI_PID/stat" 2>/dev/null)" = T ] && return 0
    sleep 0.05
  done
  fail "the CLI did not stop at $1: $(cat "$TMPDIR/$1.out")"
}
# newest entry of feedback/tmp
newest_tmp() { ls -t "$TMP" | head -n 1; }
restart() {
  timeout 30 "$PT" daemon stop >/dev/null || fail "daemon stop"
  "$PT" daemon start >/dev/null || fail "daemon start"
}
repair_lines() { grep ' WARN start repair: ' "$LOG" | cut -d' ' -f2-; }

stop_cli manifest "the complete one"
complete=$(newest_tmp)
kill -KILL "$CLI_PID"; wait "$CLI_PID" 2>/dev/null
stop_cli message "the half one"
half=$(newest_tmp)
kill -KILL "$CLI_PID"; wait "$CLI_PID" 2>/dev/null
stop_cli dir "the live one"
live=$(newest_tmp)
LIVE_PID=$CLI_PID
[ "$(ls "$TMP" | wc -l)" = 3 ] || fail "feedback/tmp holds: $(ls "$TMP")"
[ -f "$TMP/$complete/manifest.json" ] && [ ! -f "$TMP/$half/manifest.json" ] || fail "not the states wanted"
[ -z "$(cat "$TMPDIR"/*.out)" ] || fail "the CLI printed: $(cat "$TMPDIR"/*.out)"

restart
want="WARN start repair: 1 complete feedback bundle moved from feedback/tmp to feedback/outbox; 1 incomplete feedback bundle moved to $H/quarantine/feedback-tmp"
[ "$(repair_lines)" = "$want" ] || { echo "want: $want"; echo "got:  $(repair_lines)"; fail "not the repair line"; }
# the complete bundle, under its id, whole
id=${complete%.*}
D=$H/feedback/outbox/$id
[ "$(ls "$H/feedback/outbox")" = "$id" ] || fail "outbox holds: $(ls "$H/feedback/outbox")"
[ "$(cat "$D/message.txt")" = "the complete one" ] || fail "message.txt: $(cat "$D/message.txt")"
python3 - "$D" "$id" <<'PY' || fail "the repaired bundle does not match its manifest"
import hashlib, json, os, sys
d, bid = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(d, "manifest.json")))
assert m["id"] == bid, m["id"]
assert [a["kind"] for a in m["attachments"]] == ["daemon-log"], m
for a in m["attachments"] + [m["message"]]:
    data = open(os.path.join(d, a["file"]), "rb").read()
    assert len(data) == a["size"] and hashlib.sha256(data).hexdigest() == a["sha256"], a["file"]
PY
# the half one, whole, in quarantine; the live one untouched
Q=$H/quarantine/feedback-tmp
[ "$(ls "$Q")" = "$half" ] || fail "quarantine holds: $(ls "$Q")"
[ "$(cat "$Q/$half/message.txt")" = "the half one" ] || fail "quarantined message.txt"
[ "$(ls "$TMP")" = "$live" ] || fail "feedback/tmp holds: $(ls "$TMP")"

# the live writer dies: the start after quarantines its empty bundle
kill -KILL "$LIVE_PID"; wait "$LIVE_PID" 2>/dev/null
restart
want="$want
WARN start repair: 1 incomplete feedback bundle moved to $H/quarantine/feedback-tmp"
[ "$(repair_lines)" = "$want" ] || { echo "want: $want"; echo "got:  $(repair_lines)"; fail "not the repair lines"; }
[ -z "$(ls "$TMP")" ] || fail "feedback/tmp holds: $(ls "$TMP")"
[ "$(ls "$Q" | LC_ALL=C sort | tr '\n' ' ')" = "$(printf '%s\n' "$half" "$live" | LC_ALL=C sort | tr '\n' ' ')" ] ||
  fail "quarantine holds: $(ls "$Q")"
# nothing left: the next start says nothing
restart
[ "$(repair_lines)" = "$want" ] || fail "repair logged again: $(repair_lines)"
echo PASS
