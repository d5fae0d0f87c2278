#!/usr/bin/env bash
# bench/flame/run.sh - the flame graph page (src/common/pt_flame.h) on large
# profiles (on demand; not run by CI): for synthetic CPU profiles of 10k and
# 100k distinct stacks (bench/flame/bigprofile.py: a call tree of 5000
# functions, 6 to 40 frames deep, inlined frames, four labels), the page's
# size, the generator's time and peak memory (tests/common/flame_render:
# gunzip, read, build, write), and in headless chromium (tests/common/cdp.py)
# the time to the first drawing, to a search, a label filter and a zoom
# (bench/flame/browser_times.py), median of REPS runs.
#
#   bench/flame/run.sh [BUILD_DIR]    default build/dev (flame_render)
# Environment: REPS (default 3), STACKS (default "10000 100000"), OUT
# (default $TMPDIR/flame-bench).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# absolute: the runs below have other working directories
BUILD=$(cd "${1:-$SRC/build/dev}" 2>/dev/null && pwd) ||
  { echo "flame/run.sh: no build directory ${1:-$SRC/build/dev} (just build)" >&2; exit 2; }
RENDER="$BUILD/tests/common/flame_render"
OUT=${OUT:-${TMPDIR:-/tmp}/flame-bench}
REPS=${REPS:-3}
CHROMIUM=$(command -v chromium || true)
[ -x "$RENDER" ] || { echo "run.sh: no $RENDER (bash scripts/build.sh dev)" >&2; exit 2; }
[ -n "$CHROMIUM" ] || { echo "run.sh: no chromium (bash scripts/setup.sh)" >&2; exit 2; }
mkdir -p "$OUT"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
printf '%-8s %9s %10s %9s %9s %8s %8s %8s %8s %7s\n' stacks "pb.gz KB" "html MB" "gen s" "gen MB" \
  "ready ms" "search" "filter" "zoom" boxes
for n in ${STACKS:-10000 100000}; do
  prof="$OUT/big-$n.pb.gz" html="$OUT/big-$n.html"
  [ -f "$prof" ] || python3 "$SRC/bench/flame/bigprofile.py" "$prof" --stacks "$n"
  gens=() mems=()
  for _ in $(seq "$REPS"); do
    /usr/bin/time -f '%e %M' -o "$OUT/time" "$RENDER" "$prof" "$html" >/dev/null
    read -r t m <"$OUT/time"; gens+=("$t"); mems+=("$m")
  done
  : >"$OUT/browser-$n.jsonl"
  for _ in $(seq "$REPS"); do
    python3 "$SRC/bench/flame/browser_times.py" "$CHROMIUM" "$html" "$OUT" >>"$OUT/browser-$n.jsonl"
  done
  col() { python3 -c 'import json,sys; [print(json.loads(l)[sys.argv[1]]) for l in open(sys.argv[2])]' "$1" "$OUT/browser-$n.jsonl" | median; }
  printf '%-8s %9d %10.1f %9s %9d %8s %8s %8s %8s %7s\n' "$n" $(( $(stat -c %s "$prof") / 1024 )) \
    "$(awk -v b="$(stat -c %s "$html")" 'BEGIN {print b / 1048576}')" \
    "$(printf '%s\n' "${gens[@]}" | median)" $(( $(printf '%s\n' "${mems[@]}" | median) / 1024 )) \
    "$(col ready_ms)" "$(col search_ms)" "$(col filter_ms)" "$(col zoom_ms)" "$(col boxes)"
done
rm -rf "$OUT"/udd-*
