# tests/tui/tui_lib.sh - helpers for the TUI/CLI integration tests (source it
# from a tests/tui/*_test.sh). Builds on tests/lib.sh.
#
# Provides: $PT (the polytoken binary under test), a private POLYTOKEN_HOME,
# a private tmux server (tui_start / screen / wait_screen / wait_screen_gone),
# and a cleanup trap that stops the tmux server and every daemon this test
# started (autostarted daemons are found through `daemon status --json`).
: "${PT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${PT_BUILD_DEV:=$PT_SRC/build/dev}"
# shellcheck source=../lib.sh
. "$PT_SRC/tests/lib.sh"

command -v tmux >/dev/null || skip "tmux is not installed"
PT=${PT_TUI_BIN:-$PT_BUILD_DEV/polytoken}
[ -x "$PT" ] || fail "no polytoken binary at $PT (build first)"
pt_home
# Fast, deterministic replies from the built-in responder.
: "${POLYTOKEN_RESPONDER_DELAY_MS:=1}"
export POLYTOKEN_RESPONDER_DELAY_MS
PT_TMUX="tui-$$-$RANDOM"
WAIT_S=${PT_TUI_WAIT_S:-30}

# daemon_pid: pid of the running daemon of this POLYTOKEN_HOME, or empty.
daemon_pid() {
  "$PT" daemon status --json 2>/dev/null | sed -n 's/^ *"pid": *\([0-9][0-9]*\).*/\1/p'
}

tui_cleanup() {
  local pid
  tmux -L "$PT_TMUX" kill-server 2>/dev/null
  pid=$(daemon_pid)
  if [ -n "$pid" ]; then
    timeout 20 "$PT" daemon stop >/dev/null 2>&1
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  pt_cleanup
  rm -rf "$POLYTOKEN_HOME"
  return 0
}
trap tui_cleanup EXIT
# A driver timeout (SIGTERM) or Ctrl-C still runs the cleanup.
trap 'exit 143' TERM
trap 'exit 130' INT

T() { tmux -L "$PT_TMUX" "$@"; }

# tui_start: a 100x30 tmux pane running a plain bash whose prompt is
# "PTSHELL$ ", with this test's environment. Waits for the prompt.
tui_start() {
  T -f /dev/null new-session -d -x 100 -y 30 \
    "env PS1='PTSHELL\$ ' POLYTOKEN_HOME='$POLYTOKEN_HOME' \
     POLYTOKEN_RESPONDER_DELAY_MS='$POLYTOKEN_RESPONDER_DELAY_MS' \
     ${POLYTOKEN_DAEMON:+POLYTOKEN_DAEMON='$POLYTOKEN_DAEMON'} \
     TERM=screen-256color bash --norc --noprofile -i" || fail "tmux did not start"
  wait_screen 'PTSHELL$'
}

# run_in_pane CMD: types CMD and Enter into the pane.
run_in_pane() { T send-keys -l "$1"; T send-keys Enter; }

screen() { T capture-pane -p; }

dump_screen() {
  echo "---- screen ----" >&2
  screen >&2
  echo "----------------" >&2
}

# wait_screen TEXT [SECONDS]: polls the pane until it contains TEXT (fixed
# string). On timeout prints the screen and fails.
wait_screen() {
  local text=$1 limit=${2:-$WAIT_S}
  local end=$((SECONDS + limit))
  until screen | grep -qF -- "$text"; do
    if [ $SECONDS -ge $end ]; then dump_screen; fail "timed out waiting for: $text"; fi
    sleep 0.05
  done
}

# wait_screen_re REGEX [SECONDS]: as wait_screen with an extended regex.
wait_screen_re() {
  local re=$1 limit=${2:-$WAIT_S}
  local end=$((SECONDS + limit))
  until screen | grep -qE -- "$re"; do
    if [ $SECONDS -ge $end ]; then dump_screen; fail "timed out waiting for /$re/"; fi
    sleep 0.05
  done
}

# wait_screen_gone TEXT [SECONDS]: polls until TEXT is no longer shown.
wait_screen_gone() {
  local text=$1 limit=${2:-$WAIT_S}
  local end=$((SECONDS + limit))
  while screen | grep -qF -- "$text"; do
    if [ $SECONDS -ge $end ]; then dump_screen; fail "still showing: $text"; fi
    sleep 0.05
  done
}

# alt_screen: 1 while the pane shows the alternate screen (curses running).
alt_screen() { T display -p '#{alternate_on}'; }

# input_line: the conversation screen's input row (second to last), trimmed.
input_line() { screen | tail -n 2 | head -n 1 | sed 's/ *$//'; }

# wait_input TEXT: polls until the input row is exactly "> TEXT" (or ">" when
# TEXT is empty).
wait_input() {
  local want="> $1" end=$((SECONDS + WAIT_S))
  [ -z "$1" ] && want=">"
  until [ "$(input_line)" = "$want" ]; do
    if [ $SECONDS -ge $end ]; then dump_screen; fail "input line is not: $want"; fi
    sleep 0.05
  done
}
