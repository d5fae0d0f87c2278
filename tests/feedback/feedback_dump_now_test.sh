#!/usr/bin/env bash
# feedback_dump_now_test.sh - a CPU profile of what just happened, from the
# feedback picker (tmux, the profiling build). Right after a session is
# attached its profiling/ directory holds no snapshot until the first
# periodic one, so the picker had no "CPU profile (pprof)" to offer. Now it
# says so and `p` has the daemon write one (profile.dump) and the TUI its
# own: the new snapshots appear as "CPU profile (pprof)" and "TUI CPU
# profile (pprof)", picked; the review shows them; the bundle sent holds
# exactly the snapshots' bytes. Against a normal daemon (and TUI), `p`
# says the daemon is not a profiling build and nothing changes.
set -euo pipefail
. "$(dirname "$0")/../daemon/catalog_lib.sh"
command -v tmux >/dev/null || skip "tmux not installed"
B=$PT_BUILD_PROF
[ -x "$B/polytokend" ] || fail "no daemon in $B"
export POLYTOKEN_PROFILE_INTERVAL=3600     # no periodic snapshot during the test

PT_TMUX=fbdump$$
# pt_cleanup (tests/lib.sh) stops the tmux server (PT_TMUX) and the daemons
screen() { tmux -L "$PT_TMUX" capture-pane -p -t 0; }
has() { screen | grep -cF -- "$1" >/dev/null; }
expect() { wait_for 20 has "$1" || { screen >&2; fail "screen never showed: $1"; }; }
keys() { tmux -L "$PT_TMUX" send-keys -t 0 "$@"; }
# text the TUI wraps (pt_unwrap): a path cut at the edge / words
joined_has() { screen | pt_unwrap | grep -qF -- "$1"; }
words_has() { screen | pt_unwrap ' ' | grep -qF -- "$1"; }

# open_picker BUILD [COLUMNS]: a TUI of BUILD attached to SID, the feedback
# picker open, in a terminal COLUMNS wide (150).
open_picker() {
  tmux -L "$PT_TMUX" kill-server 2>/dev/null || true
  tmux -L "$PT_TMUX" -f /dev/null new-session -d -x "${2:-150}" -y 40 \
    "env POLYTOKEN_HOME='$POLYTOKEN_HOME' POLYTOKEN_DAEMON='$1/polytokend' TERM=xterm-256color '$1/polytoken' attach $SID; sleep 600"
  expect "F3 feedback"
  keys F3
  expect "Feedback 1/3"
  keys -l "slow reply"
  keys Enter
  expect "Feedback 2/3"
}

# ---- the profiling daemon ----------------------------------------------------
pt_home
export POLYTOKEN_DAEMON=$B/polytokend
start_daemon "$B"
SID=$("$B/polytoken" new --name dump-now)
"$B/polytoken" send --session "$SID" "a turn for the profile" >/dev/null
# An 80-column terminal first: the hint and its action fit whole.
open_picker "$B" 80
PDIR=$POLYTOKEN_HOME/sessions/$SID/profiling
ls "$PDIR"/*-profile-*.pb.gz >/dev/null 2>&1 && fail "a snapshot exists before p: $(ls "$PDIR")"
expect "No CPU profile of this session yet: p writes one now."
has "] CPU profile (pprof)" && { screen >&2; fail "a CPU profile listed before any snapshot"; }
has "] TUI CPU profile (pprof)" && { screen >&2; fail "a TUI CPU profile listed before any snapshot"; }
keys p
expect "[x] CPU profile (pprof)"
expect "[x] TUI CPU profile (pprof)"
expect "Wrote daemon-profile-"
has "No CPU profile of this session yet" && { screen >&2; fail "the hint stayed after the dump"; }
SNAP=$(ls "$PDIR"/daemon-profile-*.pb.gz)
TSNAP=$(ls "$PDIR"/tui-profile-*.pb.gz)
[ "$(echo "$SNAP" | wc -l)" = 1 ] || fail "expected one daemon snapshot, got: $SNAP"
[ "$(echo "$TSNAP" | wc -l)" = 1 ] || fail "expected one TUI snapshot, got: $TSNAP"
# the status naming both snapshots, wrapped over two rows at 80 columns
words_has "Wrote $(basename "$SNAP") and $(basename "$TSNAP")" ||
  { screen >&2; fail "the status does not name both snapshots"; }
# The review, still 80 columns: long lines wrap, none is cut, so the
# snapshot's whole path is on the screen (rows joined).
keys Enter
expect "Feedback 3/3"
expect "samples: "
wait_for 10 joined_has "$SNAP" ||
  { screen >&2; fail "the review does not show the whole path $SNAP"; }
keys y
expect "Not uploaded: POLYTOKEN_FEEDBACK_URL is not set"
BUNDLE=$(find "$POLYTOKEN_HOME/feedback/outbox" -mindepth 1 -maxdepth 1 -type d | head -n 1)
[ -n "$BUNDLE" ] || fail "no bundle"
python3 - "$BUNDLE" "$SNAP" "$TSNAP" <<'PY' || fail "the bundle does not hold the snapshots"
import hashlib, json, os, sys
bundle, snap, tsnap = sys.argv[1], sys.argv[2], sys.argv[3]
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
m = json.load(open(os.path.join(bundle, "manifest.json")))
got = {x["kind"]: x["sha256"] for x in m["attachments"]}
assert got == {"cpu-profile": sha(snap), "tui-cpu-profile": sha(tsnap)}, got
sent = sorted(sha(os.path.join(bundle, f)) for f in os.listdir(bundle) if f.endswith(".pb.gz"))
assert sent == sorted([sha(snap), sha(tsnap)]), sent
PY
if command -v go >/dev/null; then
  for f in "$SNAP" "$TSNAP"; do
    go tool pprof -comments "$f" 2>/dev/null | grep -q '^window: ' || fail "go tool pprof cannot read $f"
  done
fi
tmux -L "$PT_TMUX" kill-server 2>/dev/null || true
"$B/polytoken" daemon stop >/dev/null
wait "$DAEMON_PID" 2>/dev/null || true

# ---- a normal daemon: p explains, nothing is written --------------------------
D=$PT_BUILD_DEV
pt_home
export POLYTOKEN_DAEMON=$D/polytokend
start_daemon "$D"
SID=$("$D/polytoken" new --name dump-now-normal)
open_picker "$D"
keys p
expect "This daemon is not a profiling build"
has "[x]" && { screen >&2; fail "something was picked"; }
[ -z "$(ls "$POLYTOKEN_HOME/sessions/$SID/profiling" 2>/dev/null)" ] || fail "a normal daemon wrote a profile"
"$D/polytoken" daemon stop >/dev/null
echo ok
