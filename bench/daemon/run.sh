#!/usr/bin/env bash
# bench/daemon/run.sh - the daemon-overhead bench (on demand, `just bench`;
# not part of the test suite): a 20-turn session through the CLI against the
# normal daemon, the profiling daemon (warm and cold symbol cache), the
# normal daemon with gperftools preloaded and the normal daemon under
# `perf record -g`, fresh state roots, paired shuffled rounds; daemon CPU
# from its telemetry close event. Prints a Markdown table and writes
# results.json.
#
#   bench/daemon/run.sh [--quick] [NORMAL_BUILD [PROFILING_BUILD]]
#                       defaults build/dev and build/profile
# --quick: 2 rounds (a smoke run); default: 20 rounds.
# Environment: PAIRS (overrides), CONFIGS (subset of
# normal,profiling,prof-cold,gperftools,perf,prof-timer,prof-nocon; normal
# is required; default normal,profiling,prof-cold and gperftools and perf
# where installed), OUT (default
# $TMPDIR/ptprof-daemon), KEEP_HOMES=1 keeps every state root, TURNS (20;
# 0 measures start + shutdown alone).
# Method and last results: docs/performance.md, "Daemon overhead, 20-turn
# session".
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
pairs=20
if [ "${1:-}" = --quick ]; then pairs=2; shift; fi
pairs=${PAIRS:-$pairs}
NORMAL=$(cd "${1:-$SRC/build/dev}" && pwd)
PROF=$(cd "${2:-$SRC/build/profile}" && pwd)
OUT=${OUT:-${TMPDIR:-/tmp}/ptprof-daemon}
for b in "$NORMAL" "$PROF"; do
  [ -x "$b/polytokend" ] && [ -x "$b/polytoken" ] \
    || { echo "run.sh: no polytokend/polytoken in $b (bash scripts/build.sh dev|profile)" >&2; exit 2; }
done
rm -rf "$OUT"
mkdir -p -m 0700 "$OUT"
configs=${CONFIGS:-normal,profiling,prof-cold}
if [ -z "${CONFIGS:-}" ]; then
  [ -e /usr/lib/x86_64-linux-gnu/libprofiler.so.0 ] && configs+=,gperftools
  command -v perf >/dev/null && configs+=,perf
fi
cc -O2 -Wall -Wextra -o "$OUT/cpuwrap" "$SRC/bench/real/cpuwrap.c"
keep=()
[ "${KEEP_HOMES:-0}" = 1 ] && keep=(--keep-homes)
exec python3 "$SRC/bench/daemon/daemon.py" --normal "$NORMAL" --profiling "$PROF" \
  --out "$OUT" --pairs "$pairs" --configs "$configs" \
  --cpuwrap "$OUT/cpuwrap" --turns "${TURNS:-20}" "${keep[@]}"
