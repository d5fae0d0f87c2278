#!/usr/bin/env bash
# tui_labels_test.sh - task labels in TUI snapshots: the profiling TUI in
# tmux at 999 Hz with 1 s snapshots, a session attached, long turns pasted
# and their replies shown until a snapshot holds labelled samples, then quit. Read all of its tui-profile-* snapshots together
# with `go tool pprof -tags`: samples carry task_kind labels, every value is
# a TUI unit's name (tui_unit_start in src/tui), with a task number, and
# every task_loc is the file:line where a unit is started (a
# tui_unit_start call in src/tui), never the seam's own tui_loop.c. Skips
# (77) only without go.
export PT_TUI_BIN=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytoken
export POLYTOKEN_DAEMON=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytokend
. "$(dirname "$0")/../tui/tui_lib.sh"
command -v go >/dev/null || skip "go (golang-go) not installed"
export POLYTOKEN_PROFILE_HZ=999 POLYTOKEN_PROFILE_INTERVAL=1 POLYTOKEN_RESPONDER_DELAY_MS=0
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port)
export POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:$(free_port)

id=$("$PT" new --name "labelled") || fail "new"
dir=$POLYTOKEN_HOME/sessions/$id/profiling
tui_start
run_in_pane "$PT; echo EXIT=\$?"
wait_screen "Polytoken - sessions"
T send-keys Enter
wait_screen "labelled ($id)"
# Work in the TUI's tasks (paste, render the streamed reply), round after
# round, until a periodic snapshot holds labelled samples (bounded: 20
# rounds; each waits for the next snapshot, not for a fixed time).
text=$(python3 -c 'import random; random.seed(3); print(" ".join("word%d" % random.randrange(300) for _ in range(400)))')
labelled=0
for i in $(seq 20); do
  before=$(ls "$dir" 2>/dev/null | grep -c '^tui-profile-' || true)
  T send-keys -l "$text $i"
  T send-keys Enter
  wait_for 20 bash -c "[ \$(ls '$dir' 2>/dev/null | grep -c '^tui-profile-') -gt $before ]" ||
    fail "no new TUI snapshot in $dir"
  if go tool pprof -sample_index=samples -tags "$dir"/tui-profile-*.pb.gz 2>/dev/null | grep -c '^ task_kind: Total' >/dev/null; then
    labelled=1
    break
  fi
done
[ "$labelled" = 1 ] || fail "20 rounds of TUI work and no labelled sample in the TUI snapshots"
T send-keys F10
wait_screen "EXIT=0"
ls "$dir" | grep -c '^tui-profile-' >/dev/null || fail "no TUI snapshot in $dir"
go tool pprof -sample_index=samples -tags "$dir"/tui-profile-*.pb.gz >"$TMPDIR/tags.txt" 2>&1 ||
  { cat "$TMPDIR/tags.txt" >&2; fail "pprof -tags"; }
names=$(grep -ho 'tui_unit_start([^,]*, *"[^"]*"' "$PT_SRC"/src/tui/*.c | sed 's/.*"\([^"]*\)"/\1/' | sort -u | tr '\n' ' ')
locs=$(cd "$PT_SRC" && grep -n 'tui_unit_start(' src/tui/*.c | grep -v '^src/tui/tui_loop\.' | cut -d: -f1,2 | tr '\n' ' ')
python3 - "$TMPDIR/tags.txt" "$names" "$locs" <<'PY' || fail "see above"
import os, re, sys
sys.path.insert(0, os.environ["PT_SRC"] + "/tests/prof")
import pprof_tags
names = set(sys.argv[2].split())
out = pprof_tags.tags(open(sys.argv[1]).read())
kinds = out.get("task_kind", {})
print("task_kind:", kinds, "task_loc:", out.get("task_loc"))
locs = set(sys.argv[3].split())
print("tui_unit_start call sites:", sorted(locs))
ok = bool(kinds) and set(kinds) <= names and sum(out.get("task", {}).values()) == sum(kinds.values()) \
     and bool(out.get("task_loc")) and set(out.get("task_loc", {})) <= locs
sys.exit(0 if ok else 1)
PY
