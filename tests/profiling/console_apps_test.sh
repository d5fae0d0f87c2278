#!/usr/bin/env bash
# The task console of the real profiling daemon and TUI, read by a real gRPC
# client (@grpc/grpc-js with our own .proto files): protocol invariants,
# the tasks a developer expects by name, task details, NOT_FOUND /
# INVALID_ARGUMENT, pause/resume per connection. Also: a taken port makes
# the daemon log one clear line and run on without a console.
export PT_TUI_BIN=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytoken
export POLYTOKEN_DAEMON=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytokend
. "$(dirname "$0")/../tui/tui_lib.sh"
. "$PT_SRC/tests/console/console_lib.sh"
console_npm
CLIENT="$PT_SRC/tests/console/console_client.js"

# --- daemon ---
dport=$(free_port)
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$dport
id=$("$PT" new --name "console") || fail "new"
timeout 120 "$PT" send --session "$id" "show me the tasks" >/dev/null || fail "send"
timeout 60 "$PT" profile dump >/dev/null || fail "profile dump"
node "$CLIENT" generic "127.0.0.1:$dport" \
  ipc.accept signals ipc.client turn responder.builtin timer.telemetry \
  timer.profile_snapshot profile.snapshot_writer || fail "daemon console"

# --- TUI ---
tport=$(free_port)
export POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:$tport
tui_start
run_in_pane "$PT attach $id; echo EXIT=\$?"
wait_screen "console ($id)"
T send-keys -l "hello console"
T send-keys Enter
wait_screen "you> hello console"
node "$CLIENT" generic "127.0.0.1:$tport" tui.input tui.render tui.daemon_conn || fail "TUI console"
T send-keys F10
wait_screen "EXIT=0"

# --- port taken: one clear line, the daemon runs on ---
"$PT" daemon stop >/dev/null || fail "daemon stop"
python3 -c 'import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); time.sleep(60)' "$dport" &
PT_PIDS+=($!)
wait_for 10 bash -c "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $dport)).close()'" ||
  fail "port holder did not start"
"$PT" daemon start >/dev/null || fail "daemon start with the console port taken"
"$PT" sessions >/dev/null || fail "daemon does not serve with the console port taken"
n=$(grep -c "task console disabled" "$POLYTOKEN_HOME/logs/daemon.log")
[ "$n" = 1 ] || { grep -i console "$POLYTOKEN_HOME/logs/daemon.log"; fail "expected one 'task console disabled' line, got $n"; }
grep "task console disabled" "$POLYTOKEN_HOME/logs/daemon.log" | grep -c "127.0.0.1:$dport" >/dev/null ||
  fail "the console line does not name the address"
echo ok
