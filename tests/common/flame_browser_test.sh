#!/usr/bin/env bash
# flame_browser_test.sh - the flame graph page (src/common/pt_flame.h) in a
# real browser: Debian's chromium, headless, driven over the DevTools
# protocol (tests/common/cdp.py, standard-library Python), on the page of a
# real snapshot of this project's sampler (tests/prof/labels_work: two
# labelled tasks, a user label, a thread name), written by
# `polytoken profile view`. Every number is checked against
# `go tool pprof` on the same file (tests/common/flame_browser_check.py):
#   - each box's width is its value * graph width / total within a pixel,
#     the root 'all' spans the graph and holds pprof's total, each box lies
#     inside its caller's, boxes are treeitems whose aria-label starts with
#     the function's name;
#   - each function's outermost boxes sum to pprof -top's cum (every
#     function, inlined ones as "name (inline)"), and no other name is drawn;
#   - search: a regex and a case-insensitive substring mark exactly the
#     matching boxes and report pprof -focus's total and its share;
#   - label filter: task_kind = labels.A, its exclusion and "no such label"
#     give pprof -tagfocus / -tagignore totals, and Clear restores the total;
#   - zoom into a box and back; the details panel names it;
#   - differential page (two tests/mkprofile.py profiles): the change of a
#     frame equals pprof -diff_base's flat, a frame only in the profile is
#     marked new, one only in the base is drawn (widths: both) and marked gone;
#   - the pages made no request but their own file, and logged no error.
# Skips (77) without chromium (scripts/setup.sh installs it) or go.
set -euo pipefail
: "${PT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
# shellcheck source=../lib.sh
source "$PT_SRC/tests/lib.sh"

CHROMIUM=$(command -v chromium || true)
[ -n "$CHROMIUM" ] || skip "chromium not installed (scripts/setup.sh installs Debian's chromium)"
command -v go >/dev/null || skip "go (golang-go) not installed"
PROG="$PT_BUILD_PROF/tests/prof/labels_work"
PT_VIEW="$PT_BUILD_DEV/polytoken"
[ -x "$PROG" ] || fail "no $PROG (the profiling build)"
[ -x "$PT_VIEW" ] || fail "no $PT_VIEW"

WORK=$(mktemp -d "$TMPDIR/flame.XXXXXX")
LW_PID=
cleanup() {
  [ -n "$LW_PID" ] && kill "$LW_PID" 2>/dev/null && wait "$LW_PID" 2>/dev/null
  rm -rf "$WORK"
  pt_cleanup
}
trap cleanup EXIT

# A real snapshot: ~0.7 s of CPU at 499 Hz, then labels_work waits for SIGTERM.
env LW_DIR="$WORK/snap" LW_PORTFILE="$WORK/port" LW_DONE="$WORK/done.json" LW_ROUNDS=100 \
  LW_HZ=499 "$PROG" >"$WORK/lw.out" 2>&1 &
LW_PID=$!
wait_for 120 test -s "$WORK/port" || { cat "$WORK/lw.out" >&2; fail "labels_work did not write its snapshot"; }
kill "$LW_PID"; wait "$LW_PID" 2>/dev/null || true; LW_PID=
SNAP=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot"])' "$WORK/done.json")
[ -s "$SNAP" ] || fail "no snapshot at $SNAP"

# Two small profiles for the differential page.
python3 "$PT_SRC/tests/mkprofile.py" "$WORK/cur.pb.gz" hot_spin=10 parse_line=12 main=1
python3 "$PT_SRC/tests/mkprofile.py" "$WORK/base.pb.gz" hot_spin=30 old_fn=5 main=1

mkdir "$WORK/pp"
pp() { # pp NAME FILE ARGS...: go tool pprof -sample_index=samples ARGS FILE > pp/NAME.txt
  local name=$1 file=$2; shift 2
  go tool pprof -sample_index=samples -top -nodefraction=0 -edgefraction=0 -nodecount=1000000 "$@" "$file" \
    >"$WORK/pp/$name.txt" 2>&1 || { cat "$WORK/pp/$name.txt" >&2; fail "go tool pprof $* failed"; }
}
pp top "$SNAP"
pp focus_re "$SNAP" -focus='^burn_a$'
pp focus_sub "$SNAP" -focus='burn_a'
pp focus_nested "$SNAP" -focus='^(main|spin)$'
pp tagfocus_a "$SNAP" -tagfocus='task_kind=^labels\.A$'
pp tagignore_a "$SNAP" -tagignore='task_kind=^labels\.A$'
pp tagignore_any "$SNAP" -tagignore='task_kind=.'
pp diff_top "$WORK/cur.pb.gz" -diff_base="$WORK/base.pb.gz"

# The pages are written by the command a user runs.
PT="$PT_VIEW"
"$PT" profile view "$SNAP" -o "$WORK/real.html" >/dev/null || fail "polytoken profile view failed on $SNAP"
"$PT" profile view "$WORK/cur.pb.gz" --base "$WORK/base.pb.gz" -o "$WORK/diff.html" >/dev/null ||
  fail "polytoken profile view --base failed"

python3 "$PT_SRC/tests/common/flame_browser_check.py" "$WORK" "$CHROMIUM" ||
  { grep -v -e dbus -e 'Fontconfig' "$WORK/chromium.log" | tail -20 >&2; fail "see above"; }
