#!/usr/bin/env bash
# feedback_tui_test.sh - the TUI feedback flow in tmux, from the feedback key
# (F3 on the conversation screen) to a delivered bundle: message, picker
# (the catalog with "CPU profile (pprof)"), review (sample count, top
# function, the raw-and-unsanitized notice), nothing written before `y`,
# then `y`: bundle written and uploaded to a loopback server.
# The TUI binary is $POLYTOKEN_CLI when set (default: the build's polytoken).
set -euo pipefail
. "$(dirname "$0")/../daemon/catalog_lib.sh"
FB_DIR=$PT_SRC/tests/feedback
B=$PT_BUILD_DEV
CLI=${POLYTOKEN_CLI:-$B/polytoken}
[ -x "$B/polytokend" ] || fail "no daemon in $B"
command -v tmux >/dev/null || skip "tmux not installed"
"$CLI" --help | grep -c 'feedback' >/dev/null || fail "this polytoken has no feedback command"
export POLYTOKEN_DAEMON=$B/polytokend
pt_home
start_daemon "$B"
new_active_session "$B"
PROF=$PDIR/daemon-profile-20261129T210000Z-1.pb.gz
mkprofile "$PROF" hot_spin=30 parse_line=12 main=1

SRV_OUT=$(mktemp -d "$TMPDIR/srv.XXXXXX")
python3 "$FB_DIR/feedback_server.py" ok "$SRV_OUT/port" "$SRV_OUT" 2>"$SRV_OUT/log" &
PT_PIDS+=("$!")
wait_for 20 test -s "$SRV_OUT/port" || fail "server did not start"
URL="http://127.0.0.1:$(cat "$SRV_OUT/port")/feedback"

PT_TMUX=catfb$$
tmux -L "$PT_TMUX" -f /dev/null new-session -d -x 120 -y 40 \
  "env POLYTOKEN_HOME='$POLYTOKEN_HOME' POLYTOKEN_DAEMON='$POLYTOKEN_DAEMON' POLYTOKEN_FEEDBACK_URL='$URL' TERM=xterm-256color '$CLI' attach $SID; sleep 600"
screen() { tmux -L "$PT_TMUX" capture-pane -p -t 0; }
has() { screen | grep -cF -- "$1" >/dev/null; }
expect() { wait_for 20 has "$1" || { screen >&2; fail "screen never showed: $1"; }; }
keys() { tmux -L "$PT_TMUX" send-keys -t 0 "$@"; }
outbox_count() { find "$POLYTOKEN_HOME/feedback" -mindepth 2 -maxdepth 2 -type d 2>/dev/null | grep -v /tmp/ | wc -l; }

expect "F3 feedback"
keys F3
expect "Feedback 1/3"
keys -l "profile attached from the tui"
keys Enter
expect "Feedback 2/3"
expect "CPU profile (pprof)"
expect "Daemon log"
# the first entry is the newest daemon snapshot; pick it
screen | grep -F "[ ] CPU profile (pprof)" >/dev/null || { screen >&2; fail "profile not first/unpicked"; }
keys Space
expect "[x] CPU profile (pprof)"
keys Enter
expect "Feedback 3/3"
expect "hot_spin"
expect "samples: 43"
expect "raw and unsanitized"
expect "build-machine paths"
# nothing is written or sent before the confirmation
[ "$(outbox_count)" = 0 ] || fail "a bundle exists before confirming"
[ ! -e "$SRV_OUT/requests" ] || fail "something was posted before confirming"
keys n
expect "Feedback 2/3"
keys Enter
expect "Feedback 3/3"
keys y
expect "Uploaded: sent (HTTP 200"
S=$(find "$POLYTOKEN_HOME/feedback/sent" -mindepth 1 -maxdepth 1 -type d | head -n 1)
[ -n "$S" ] || fail "no bundle in feedback/sent"
[ "$(cat "$S/message.txt")" = "profile attached from the tui" ] || fail "message: $(cat "$S/message.txt")"
cmp "$S/01-daemon-profile-20261129T210000Z-1.pb.gz" "$PROF" || fail "attachment differs"
cmp "$SRV_OUT/1/attachment-01-daemon-profile-20261129T210000Z-1.pb.gz" "$PROF" || fail "server got other bytes"
keys Space
expect "F3 feedback"
keys F10
wait_for 20 bash -c "! tmux -L '$PT_TMUX' list-panes -F '#{pane_current_command}' | grep -q polytoken" ||
  fail "the TUI did not quit"
echo ok
