#!/usr/bin/env bash
# Every way out restores the terminal: q (picker), F10, /quit, Ctrl-C when
# idle, SIGTERM, and a crash signal (SIGSEGV, re-raised after endwin). After
# each: the pane left the alternate screen, `stty -g` equals the state before,
# and the shell prompt is back.
. "$(dirname "$0")/tui_lib.sh"

id=$("$PT" new --name "quit test") || fail "new"
tui_start
# The markers are split in the typed command (SAV""ED) so that the command
# line itself, echoed before it runs, never matches what we wait for.
run_in_pane "stty -g > '$TMPDIR/stty.before'; echo SAV\"\"ED"
wait_screen "SAVED"

# check_restored N CODE: the N-th run ended with exit code CODE, terminal ok.
check_restored() {
  wait_screen "EXIT$1=$2"
  [ "$(alt_screen)" = 0 ] || { dump_screen; fail "run $1: still on the alternate screen"; }
  run_in_pane "stty -g > '$TMPDIR/stty.after$1'; echo CHECK\"\"ED$1"
  wait_screen "CHECKED$1"
  cmp -s "$TMPDIR/stty.before" "$TMPDIR/stty.after$1" ||
    fail "run $1: terminal modes differ: $(cat "$TMPDIR/stty.before") vs $(cat "$TMPDIR/stty.after$1")"
  run_in_pane "clear"
  wait_screen_gone "CHECKED$1"
}

# tui_pid: the polytoken process running in the pane.
tui_pid() { pgrep -P "$(T display -p '#{pane_pid}')" -x polytoken; }

run_in_pane "$PT; echo EXIT1=\$?"
wait_screen "Polytoken - sessions"
[ "$(alt_screen)" = 1 ] || fail "TUI not on the alternate screen"
T send-keys q
check_restored 1 0

run_in_pane "$PT attach $id; echo EXIT2=\$?"
wait_screen "quit test ($id)"
T send-keys F10
check_restored 2 0

run_in_pane "$PT attach $id; echo EXIT3=\$?"
wait_screen "quit test ($id)"
T send-keys -l "/quit"
T send-keys Enter
check_restored 3 0

run_in_pane "$PT attach $id; echo EXIT4=\$?"
wait_screen "quit test ($id)"
T send-keys C-c
check_restored 4 0

run_in_pane "$PT; echo EXIT5=\$?"
wait_screen "Polytoken - sessions"
T send-keys C-c
check_restored 5 0

run_in_pane "$PT attach $id; echo EXIT6=\$?"
wait_screen "quit test ($id)"
pid=$(tui_pid); [ -n "$pid" ] || fail "no polytoken process in the pane"
kill -TERM "$pid"
check_restored 6 143

run_in_pane "ulimit -c 0; $PT attach $id; echo EXIT7=\$?"
wait_screen "quit test ($id)"
pid=$(tui_pid); [ -n "$pid" ] || fail "no polytoken process in the pane"
kill -SEGV "$pid"
check_restored 7 139

run_in_pane "$PT attach $id; echo EXIT8=\$?"
wait_screen "quit test ($id)"
pid=$(tui_pid); [ -n "$pid" ] || fail "no polytoken process in the pane"
kill -ABRT "$pid"
check_restored 8 134
echo ok
