#!/usr/bin/env bash
# Stop, then start again at once: `daemon stop` returns only when the daemon
# process is gone (it holds the daemon lock until its very end), and a client
# that autostarts while an old daemon still holds the lock waits for it and
# then starts a new one, instead of failing with "exited during startup"
# (the TUI's Ctrl-R right after `polytoken daemon stop`).
. "$(dirname "$0")/tui_lib.sh"
command -v flock >/dev/null || skip "flock (util-linux) is not installed"

# running PID: the process exists and is not a zombie.
running() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

for i in 1 2 3; do
  "$PT" daemon start >/dev/null || fail "start $i"
  pid=$(daemon_pid)
  [ -n "$pid" ] || fail "start $i: no daemon pid"
  "$PT" daemon stop >/dev/null || fail "stop $i"
  ! running "$pid" || fail "stop $i returned while daemon $pid still runs: $(cat /proc/$pid/stat 2>&1; ls /proc/$pid/task 2>&1 | tr "\n" " ")"
  # and a new daemon can take over at once
  out=$("$PT" daemon start) || fail "start right after stop $i: $out"
  "$PT" daemon stop >/dev/null || fail "second stop $i"
done
note "daemon stop returned after the process ended, 3 times"

# An old daemon that still holds the lock (stand-in: flock holding
# daemon.lock with its pid inside, as a stopping daemon does) for 2 s.
mkdir -p "$POLYTOKEN_HOME"
bash -c 'echo $$ > "$1/daemon.lock"; exec flock "$1/daemon.lock" sleep 2' _ "$POLYTOKEN_HOME" &
holder=$!
PT_PIDS+=("$holder")
wait_for 10 bash -c "! flock -n '$POLYTOKEN_HOME/daemon.lock' true" || fail "lock holder did not start"
out=$(POLYTOKEN_START_TIMEOUT_MS=20000 "$PT" sessions --json 2>"$TMPDIR/err") ||
  fail "autostart while the lock was held: $(cat "$TMPDIR/err")"
echo "$out" | grep -q '"sessions"' || fail "sessions printed: $out"
! running "$holder" || fail "the client connected while the old lock holder still ran"
grep -q "already running (pid $holder)" "$POLYTOKEN_HOME/logs/daemon.stderr" ||
  fail "the first daemon did not meet the held lock: $(cat "$POLYTOKEN_HOME/logs/daemon.stderr")"
note "autostart waited for the old lock holder, then started a daemon"
echo ok
