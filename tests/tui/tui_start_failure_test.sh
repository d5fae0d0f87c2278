#!/usr/bin/env bash
# A TUI whose setup fails part way gives a clear error and a clean
# terminal: each loop handle tui_app_run sets up (stdin watch, timers,
# signal watchers, the daemon connection's watch) is made to fail in turn
# (POLYTOKEN_FAULT_TUI_START=<step>, test builds only, as if libuv had run
# out of descriptors). Each run must print "cannot start the TUI: <what>:
# too many open files", exit 1, leave the alternate screen and restore the
# terminal modes (stty -g equal to before), and close every handle set up
# before the failure (tui_app.c's fail_* ladder): a handle left open makes
# uv_loop_close fail, which the TUI reports on stderr ("the event loop
# still had handles at exit").
. "$(dirname "$0")/tui_lib.sh"

grep -q '^#define PT_FAULT_INJECTION 1' "$PT_BUILD_DEV/pt_config.h" ||
  skip "built without -Dfault_injection"

tui_start
run_in_pane "stty -g > '$TMPDIR/stty.before'; echo SAV\"\"ED"
wait_screen "SAVED"
run_in_pane "$PT daemon start >/dev/null; echo STAR\"\"TED"
wait_screen "STARTED"
run_in_pane "clear"
wait_screen_gone "STARTED"

n=0
while read -r step what; do
  n=$((n + 1))
  # the marker is split in the typed command (EX""IT) so the command line
  # itself never matches what we wait for
  run_in_pane "POLYTOKEN_FAULT_TUI_START=$step $PT; echo EX\"\"IT$n=\$?"
  wait_screen "EXIT$n="
  screen | grep -qF "EXIT$n=1" || { dump_screen; fail "$step: exit status is not 1"; }
  # the message may wrap at the pane's 100 columns: join the lines
  screen | tr -d '\n' | grep -qF "polytoken: cannot start the TUI: $what: too many open files" ||
    { dump_screen; fail "$step: no clear error naming $what"; }
  [ "$(alt_screen)" = 0 ] || { dump_screen; fail "$step: still on the alternate screen"; }
  ! screen | grep -qF "still had handles" || { dump_screen; fail "$step: a handle was left open"; }
  run_in_pane "stty -g > '$TMPDIR/stty.after$n'; clear"
  wait_screen_gone "EXIT$n="
  cmp -s "$TMPDIR/stty.before" "$TMPDIR/stty.after$n" ||
    fail "$step: terminal modes differ: $(cat "$TMPDIR/stty.before") vs $(cat "$TMPDIR/stty.after$n")"
done <<'STEPS'
stdin watching the terminal's input
stdin-start watching the terminal's input
render the render timer
refresh the refresh timer
refresh-start the refresh timer
sigwinch the SIGWINCH watcher
sigwinch-start the SIGWINCH watcher
sigint the SIGINT watcher
sigint-start the SIGINT watcher
sigterm the SIGTERM watcher
sigterm-start the SIGTERM watcher
sighup the SIGHUP watcher
sighup-start the SIGHUP watcher
conn watching the daemon connection
STEPS

# and without a fault the same command still runs the TUI
run_in_pane "$PT; echo EX\"\"IT0=\$?"
wait_screen "Polytoken - sessions"
T send-keys q
wait_screen "EXIT0=0"
! screen | grep -qF "still had handles" || { dump_screen; fail "a handle was left open after a normal run"; }
note "$n setup failures, each reported and torn down"
echo ok
