#!/usr/bin/env bash
# Where a profiling daemon and TUI tell the user what they do, with real
# clients (the CLI, the TUI in tmux):
#  - `daemon start` and `daemon status` of a profiling daemon print the
#    profiling directory (absolute), engine and rate, and the console's
#    address; a console whose port is taken is reported there with the
#    reason and the setting that would let it listen
#    (POLYTOKEN_CONSOLE_DAEMON_BIND), and daemon.status --json has it;
#  - the TUI's status bar says that its own console and the daemon's are
#    off (short form, naming the settings), the picker's message line says
#    why in full;
#  - after quitting, the final TUI snapshot's path is printed on the
#    terminal (after teardown) and is that snapshot.
export PT_TUI_BIN=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytoken
export POLYTOKEN_DAEMON=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytokend
. "$(dirname "$0")/../tui/tui_lib.sh"
[ -x "$POLYTOKEN_DAEMON" ] || skip "no profiling build"

# A port someone else holds: both consoles are pointed at it.
port=$(free_port)
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); print("ready",flush=True); time.sleep(600)' \
  "$port" >"$TMPDIR/holder.out" 2>&1 &
PT_PIDS+=($!)
wait_for 10 grep -q ready "$TMPDIR/holder.out" || fail "port holder did not start"
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$port POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:$port

out=$("$PT" daemon start) || fail "daemon start: $out"
note "$out"
printf '%s\n' "$out" | grep -qx "polytokend started (pid [0-9]*)" || fail "start line: $out"
printf '%s\n' "$out" | grep -qxF "profiling directory: $POLYTOKEN_HOME/profiling" || fail "no profiling directory in: $out"
printf '%s\n' "$out" | grep -qE '^sampler: (perf_event|CPU-time timer) engine, 99 Hz, a snapshot every 60 s with samples, keeping 8$' ||
  fail "no engine line in: $out"
want="console: not listening on 127.0.0.1:$port: address already in use (set POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:PORT (a free port) before it starts)"
printf '%s\n' "$out" | grep -qxF "$want" || fail "daemon start does not report the console: $out"
st=$("$PT" daemon status) || fail "daemon status"
printf '%s\n' "$st" | grep -qxF "$want" || fail "daemon status does not report the console: $st"
"$PT" daemon status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["profile"]
assert p["dir"].startswith("/") and p["hz"] == 99 and p["interval_ms"] == 60000 and p["keep"] == 8, p
c = p["console"]
assert c["listening"] is False and c["error"] == "address already in use", c
assert c["setting"] == "POLYTOKEN_CONSOLE_DAEMON_BIND" and "POLYTOKEN_CONSOLE_DAEMON_BIND" in c["hint"], c
' || fail "daemon status --json: profile section"

# The TUI: both consoles off, said on the status bar and the picker.
id=$("$PT" new --name "notice") || fail "new"
tui_start
run_in_pane "$PT; echo EXIT=\$?"
wait_screen "Polytoken - sessions"
wait_screen "[consoles off (POLYTOKEN_CONSOLE_*_BIND)] [connected]"
wait_screen "TUI console off: 127.0.0.1:$port: address already in use; set POLYTOKEN_CONSOLE_TUI_BIND"
T send-keys Enter
wait_screen "notice ($id)"
screen | head -1 | grep -qF "[consoles off (POLYTOKEN_CONSOLE_*_BIND)] [connected]" ||
  { dump_screen; fail "the conversation's status bar does not show the notice"; }
T send-keys -l "hello"
T send-keys Enter
wait_screen "bot>"

# Quit: the final snapshot's path on the terminal, after the teardown.
T send-keys F10
wait_screen "EXIT=0"
[ "$(alt_screen)" = 0 ] || fail "terminal not restored"
line=$(T capture-pane -p -J | grep '^TUI CPU profile: ' | tail -1)  # -J: the long line unwrapped
path=${line#TUI CPU profile: }
case $path in "$POLYTOKEN_HOME/sessions/$id/profiling/tui-profile-"*.pb.gz) ;;
  *) dump_screen; fail "no final profile path printed: '$line'" ;; esac
[ -s "$path" ] || fail "printed path does not exist: $path"
[ "$(ls "$POLYTOKEN_HOME/sessions/$id/profiling" | grep '^tui-profile-' | sort | tail -1)" = "$(basename "$path")" ] ||
  fail "the printed path is not the newest TUI snapshot"
grep -qF "profiling: final snapshot $path" "$POLYTOKEN_HOME/logs/tui.log" || fail "tui.log disagrees"
echo ok
