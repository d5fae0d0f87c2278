#!/usr/bin/env bash
# bench/tui/run.sh - TUI paste benchmark (on demand, not part of the tests).
# Times a one-line paste from `tmux paste-buffer` until the daemon has the
# message (bench/tui/paste_once.sh), for one or more polytoken binaries,
# interleaved run by run so a loaded machine affects them alike.
#   usage: bench/tui/run.sh [POLYTOKEN_BIN...]   (default build/dev/polytoken)
#   env: REPS (default 3), SIZES (bytes, default "100000 1000000")
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -gt 0 ] || set -- "$SRC/build/dev/polytoken"
REPS=${REPS:-3}
SIZES=${SIZES:-100000 1000000}
echo "== machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for size in $SIZES; do
  for r in $(seq 1 "$REPS"); do
    for bin in "$@"; do
      printf 'size=%s rep=%s bin=%s %s\n' "$size" "$r" "$bin" "$(bash "$SRC/bench/tui/paste_once.sh" "$bin" "$size" | tail -n 1)"
    done
  done
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
