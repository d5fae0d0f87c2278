#!/usr/bin/env bash
# feedback_merged_test.sh - attachments worth sending, in the TUI (tmux):
# the picker shows each profile's window and sample count and offers the
# session's kept snapshots merged as one profile; the review of a nearly
# empty snapshot says so; the merged profile is reviewed like every
# attachment (its samples, the sum of the snapshots) and sent raw: the
# bundle holds exactly the bytes the catalog listed (SHA-256), a profile
# whose samples are the snapshots' sum (go tool pprof, when installed).
set -euo pipefail
. "$(dirname "$0")/../daemon/catalog_lib.sh"
B=$PT_BUILD_DEV
CLI=$B/polytoken
[ -x "$B/polytokend" ] || fail "no daemon in $B"
command -v tmux >/dev/null || skip "tmux not installed"
export POLYTOKEN_DAEMON=$B/polytokend
pt_home
start_daemon "$B"
new_active_session "$B"
# an older full window, a newer nearly empty one
mkprofile "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz" --time-s 1796000000 hot_spin=30 parse_line=12 main=1
mkprofile "$PDIR/daemon-profile-20261129T210100Z-2.pb.gz" --time-s 1796000060 hot_spin=3

PT_TMUX=catmg$$
# 80 columns: the narrowest common terminal still shows each profile's
# window and samples beside its label (size and age give way first)
tmux -L "$PT_TMUX" -f /dev/null new-session -d -x 80 -y 40 \
  "env POLYTOKEN_HOME='$POLYTOKEN_HOME' POLYTOKEN_DAEMON='$POLYTOKEN_DAEMON' TERM=xterm-256color '$CLI' attach $SID; sleep 600"
screen() { tmux -L "$PT_TMUX" capture-pane -p -t 0; }
has() { screen | grep -cF -- "$1" >/dev/null; }
expect() { wait_for 20 has "$1" || { screen >&2; fail "screen never showed: $1"; }; }
keys() { tmux -L "$PT_TMUX" send-keys -t 0 "$@"; }
row() { screen | grep -F -- "$1" | head -1; }
# the review wraps long lines: its words, rows joined (pt_unwrap)
words_has() { screen | pt_unwrap ' ' | grep -qF -- "$1"; }
jexpect() { wait_for 20 words_has "$1" || { screen >&2; fail "screen never showed: $1"; }; }

expect "F3 feedback"
keys F3
expect "Feedback 1/3"
keys -l "merged profile"
keys Enter
expect "Feedback 2/3"
expect "CPU profile (pprof), 2 kept snapshots merged"
# each profile with its window and samples
row "[ ] CPU profile (pprof)  " | grep -q "10.0 s, 3 samples" || { screen >&2; fail "newest: no window"; }
row "CPU profile (pprof), 2026-11-29 21:00:00 UTC" | grep -q "10.0 s, 43 samples" || { screen >&2; fail "older: no window"; }
row "2 kept snapshots merged" | grep -q "70.0 s, 46 samples" || { screen >&2; fail "merged: no window"; }
# the newest snapshot: nearly empty, said on the review
keys Space
keys Enter
expect "Feedback 3/3"
expect "note: this snapshot is nearly empty (3 samples in 10.00 s)"
expect "\"CPU profile (pprof), N kept snapshots merged\"."
keys n
expect "Feedback 2/3"
# pick the merged one instead (third row)
keys Space
keys j
keys j
keys Space
expect "[x] CPU profile (pprof), 2 kept snapshots merged"
keys Enter
expect "Feedback 3/3"
expect "samples: 46 "
jexpect "built by the daemon from the kept snapshots"
has "nearly empty" && { screen >&2; fail "the merged profile reviewed as nearly empty"; }
keys y
expect "Not uploaded: POLYTOKEN_FEEDBACK_URL is not set"
BUNDLE=$(find "$POLYTOKEN_HOME/feedback/outbox" -mindepth 1 -maxdepth 1 -type d | head -n 1)
[ -n "$BUNDLE" ] || fail "no bundle"
F=$BUNDLE/01-daemon-profiles-merged.pb.gz
[ -s "$F" ] || fail "no merged profile in the bundle: $(ls "$BUNDLE")"
python3 - "$BUNDLE/manifest.json" "$F" <<'PY' || fail "manifest"
import hashlib, json, sys
m = json.load(open(sys.argv[1]))
a = m["attachments"]
assert len(a) == 1 and a[0]["kind"] == "cpu-profile-merged", a
assert a[0]["sha256"] == hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest(), a
PY
if command -v go >/dev/null; then
  go tool pprof -sample_index=samples -top -nodefraction=0 "$F" 2>/dev/null | grep -q "of 46 total" ||
    fail "the sent profile does not hold 46 samples"
fi
keys Space
expect "F3 feedback"
echo ok
