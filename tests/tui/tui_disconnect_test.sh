#!/usr/bin/env bash
# The daemon going away: the TUI stays up, shows "disconnected" and a clear
# message; Ctrl-R reconnects (starting the daemon again) and turns work.
. "$(dirname "$0")/tui_lib.sh"

id=$("$PT" new --name "disconnect test") || fail "new"
tui_start
run_in_pane "$PT attach $id; echo EXIT=\$?"
wait_screen "disconnect test ($id)"
wait_screen "[connected]"
"$PT" daemon stop >/dev/null || fail "daemon stop"
wait_screen "[disconnected]"
wait_screen "Lost the connection to the daemon"
wait_screen "Ctrl-R reconnect"
[ "$(alt_screen)" = 1 ] || fail "the TUI exited when the daemon stopped"
# Typing while disconnected keeps the text.
T send-keys -l "kept text"
T send-keys Enter
wait_screen "Not connected to the daemon"
wait_input "kept text"
T send-keys C-r
wait_screen "Reconnected to the daemon."
wait_screen "[connected]"
[ -n "$(daemon_pid)" ] || fail "daemon not running after reconnect"
T send-keys Enter
wait_screen "you> kept text"
wait_screen "bot> "
wait_screen "Enter send"
T send-keys F10
wait_screen "EXIT=0"
echo ok
