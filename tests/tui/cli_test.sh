#!/usr/bin/env bash
# CLI: daemon start/status/stop, new, sessions (--json), send, --help for
# every subcommand, --version, and one-line failures with non-zero exit.
. "$(dirname "$0")/tui_lib.sh"

# one_line_failure CMD...: the command must fail, print nothing on stdout
# and exactly one line "polytoken: ..." on stderr.
one_line_failure() {
  local out err rc
  out=$("$@" 2>"$TMPDIR/err"); rc=$?
  err=$(cat "$TMPDIR/err")
  [ $rc -ne 0 ] || fail "expected failure: $*"
  [ -z "$out" ] || fail "stdout not empty for $*: $out"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "expected one stderr line for $*, got: $err"
  case $err in polytoken:\ ?*) ;; *) fail "stderr does not start with 'polytoken: ': $err" ;; esac
  note "$* -> rc $rc: $err"
}

# Not running: status/stop say so and do not start the daemon.
out=$("$PT" daemon status); rc=$?
[ $rc -eq 3 ] && [ "$out" = "not running" ] || fail "status when stopped: rc=$rc out=$out"
out=$("$PT" daemon stop) || fail "stop when stopped failed"
[ "$out" = "not running" ] || fail "stop when stopped: $out"
[ ! -S "$POLYTOKEN_HOME/daemon.sock" ] || fail "status/stop started the daemon"

"$PT" --version | grep -qE '^polytoken [0-9]+\.[0-9]+\.[0-9]+' || fail "--version"
"$PT" --help | grep -q 'send --session ID TEXT' || fail "--help"
for sub in "daemon" "sessions" "new" "send" "attach" "profile"; do
  "$PT" $sub --help | grep -q "usage: polytoken $sub" || fail "$sub --help"
done
# Every help fits an 80-column terminal.
for cmd in "" daemon sessions new send attach feedback profile "profile list" "profile dump" \
           "profile merge" "profile view"; do
  # shellcheck disable=SC2086
  long=$("$PT" $cmd --help 2>&1 | awk 'length($0) > 80')
  [ -z "$long" ] || fail "polytoken $cmd --help has lines over 80 columns: $long"
done

# `new` autostarts the daemon and prints a 12-hex id.
id=$("$PT" new --name "cli one") || fail "new failed"
[[ $id =~ ^[0-9a-f]{12}$ ]] || fail "new printed '$id'"
[ -S "$POLYTOKEN_HOME/daemon.sock" ] || fail "new did not start the daemon"
[ -s "$POLYTOKEN_HOME/logs/daemon.stderr" ] || [ -f "$POLYTOKEN_HOME/logs/daemon.stderr" ] ||
  fail "no daemon stderr log"
out=$("$PT" daemon status) || fail "status while running"
echo "$out" | grep -q '^running (pid [0-9]*)' || fail "status: $out"
out=$("$PT" daemon start) || fail "start while running"
echo "$out" | grep -q 'already running' || fail "start while running: $out"
id2=$("$PT" new) || fail "new without name"

# sessions --json lists both with their names; plain output has a header.
json=$("$PT" sessions --json) || fail "sessions --json"
python3 - "$id" "$id2" <<PY || fail "sessions --json content: $json"
import json, sys
d = json.loads('''$json''')
ids = {s["id"]: s for s in d["sessions"]}
assert sys.argv[1] in ids and sys.argv[2] in ids, ids
assert ids[sys.argv[1]]["name"] == "cli one"
assert isinstance(d["skipped"], list)
for s in d["sessions"]:
    for k in ("id", "name", "created", "last_activity", "turns"):
        assert k in s, (k, s)
PY
"$PT" sessions | grep -q "cli one" || fail "sessions plain output"

# send prints the streamed reply and exits 0; the turn is counted.
reply=$(timeout 120 "$PT" send --session "$id" hello from the cli) || fail "send failed"
[ -n "$(echo "$reply" | tr -d '[:space:]')" ] || fail "send printed no reply"
note "reply: $reply"
"$PT" sessions --json | python3 -c "
import json,sys; d=json.load(sys.stdin)
s=[s for s in d['sessions'] if s['id']=='$id'][0]
assert s['turns'] >= 1, s" || fail "turn not recorded"

# Failures: one line on stderr, non-zero exit.
one_line_failure "$PT" send --session 000000000000 hi
one_line_failure "$PT" send --session "$id"
one_line_failure "$PT" send hi
one_line_failure "$PT" frobnicate
one_line_failure "$PT" --frobnicate
one_line_failure "$PT" daemon restart
one_line_failure "$PT" sessions --bogus
one_line_failure "$PT" attach 000000000000
one_line_failure "$PT" profile dump
"$PT" profile dump 2>&1 | grep -q '^polytoken: this daemon is not a profiling build' ||
  fail "profile dump on a normal daemon does not say it is not a profiling build"
# The commands that read files work in every build, with no profiler.
"$PT" profile list >/dev/null || fail "profile list in a normal build"
# Text that is not UTF-8 cannot travel in JSON: a usage error (exit 2) that
# says so, and no session created under the default name instead.
before=$("$PT" sessions --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')
one_line_failure "$PT" new --name "$(printf 'bad\xff')"
"$PT" new --name "$(printf 'bad\xff')" 2>&1 | grep -q 'not valid UTF-8' || fail "new: no UTF-8 message"
"$PT" new --name "$(printf 'bad\xff')" >/dev/null 2>&1; [ $? -eq 2 ] || fail "new with bad UTF-8: exit code"
after=$("$PT" sessions --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')
[ "$before" = "$after" ] || fail "new with a bad name created a session ($before -> $after)"
one_line_failure "$PT" send --session "$id" "$(printf 'caf\xe9')"
"$PT" send --session "$id" "$(printf 'caf\xe9')" 2>&1 | grep -q 'valid UTF-8' || fail "send: no UTF-8 message"
# A daemon that cannot start: the error names the log.
POLYTOKEN_HOME="$POLYTOKEN_HOME/other" POLYTOKEN_DAEMON=/bin/false POLYTOKEN_START_TIMEOUT_MS=2000 \
  one_line_failure "$PT" sessions
POLYTOKEN_HOME="$POLYTOKEN_HOME/other" POLYTOKEN_DAEMON=/bin/false "$PT" sessions 2>&1 |
  grep -q 'daemon.stderr' || fail "start failure does not name the log"

# A failed turn: the partial reply on stdout, one error line, non-zero exit.
# (A second daemon in its own home, whose external responder fails.)
fhome="$POLYTOKEN_HOME/failing"
fid=$(POLYTOKEN_HOME="$fhome" POLYTOKEN_RESPONDER_CMD='echo partial; echo broken >&2; exit 3' \
  "$PT" new) || fail "new (failing home)"
fpid=$(POLYTOKEN_HOME="$fhome" daemon_pid)
out=$(POLYTOKEN_HOME="$fhome" timeout 120 "$PT" send --session "$fid" hello 2>"$TMPDIR/err"); rc=$?
POLYTOKEN_HOME="$fhome" "$PT" daemon stop >/dev/null
[ -n "$fpid" ] && wait_for 20 bash -c "! kill -0 $fpid"
[ $rc -eq 1 ] || fail "failed turn exit code $rc"
[ "$(wc -l <"$TMPDIR/err")" -eq 1 ] || fail "failed turn stderr: $(cat "$TMPDIR/err")"
grep -q '^polytoken: the turn failed: .*broken' "$TMPDIR/err" || fail "failed turn message: $(cat "$TMPDIR/err")"
note "failed turn: stdout '$out', $(cat "$TMPDIR/err")"

# stop: waits until the daemon is gone.
pid=$(daemon_pid)
[ -n "$pid" ] || fail "no daemon pid"
out=$("$PT" daemon stop) || fail "stop failed"
[ "$out" = "stopped" ] || fail "stop printed: $out"
wait_for 20 bash -c "! kill -0 $pid" || fail "daemon $pid still alive after stop"
out=$("$PT" daemon status); [ $? -eq 3 ] || fail "status after stop: $out"
echo "ok"
