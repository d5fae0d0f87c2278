#!/usr/bin/env bash
# A streaming turn shows "streaming" in the status line and Esc cancels it;
# the session stays usable.
POLYTOKEN_RESPONDER_DELAY_MS=150
. "$(dirname "$0")/tui_lib.sh"

id=$("$PT" new --name "cancel test") || fail "new"
tui_start
run_in_pane "$PT attach $id; echo EXIT=\$?"
wait_screen "cancel test ($id)"
T send-keys -l "please write a long answer"
T send-keys Enter
wait_screen "[streaming]"
wait_screen "Esc/Ctrl-C cancel reply"
T send-keys Escape
wait_screen "(reply cancelled)"
wait_screen "[connected]"
# Ctrl-C while streaming cancels too (and does not quit).
T send-keys -l "second message"
T send-keys Enter
wait_screen "[streaming]"
T send-keys C-c
wait_screen "[connected]"
end=$((SECONDS + WAIT_S))
until [ "$(screen | grep -cF '(reply cancelled)')" -eq 2 ]; do
  [ $SECONDS -ge $end ] && { dump_screen; fail "second cancel not shown"; }
  sleep 0.05
done
[ "$(alt_screen)" = 1 ] || fail "Ctrl-C during a turn quit the TUI"
# Ctrl-C when idle quits.
T send-keys C-c
wait_screen "EXIT=0"
echo ok
