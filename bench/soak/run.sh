#!/usr/bin/env bash
# bench/soak/run.sh - a long run of the profiling daemon and TUI as a
# developer uses them, watching memory, descriptors, threads and the
# snapshot files (on demand, `just soak`; never part of the test suite).
#
#   bench/soak/run.sh [--quick] [BUILD]   default build/profile; a build
#                                         without profiling (build/dev) runs
#                                         the same rounds as the memory baseline
# --quick: 3 minutes (a smoke run); default 30 (MINUTES overrides).
# Environment: MINUTES, PACE (seconds from one round's start to the next's,
# 8: the same work per hour for every build), INTERVAL (periodic snapshot
# seconds, 10), SESSIONS
# (CLI session pool, 4), TURNS (CLI turns a round, 3), CACHE (XDG_CACHE_HOME
# for the symbol and table caches; default the caller's, warm as a
# developer's), OUT (default $TMPDIR/ptprof-soak; kept: results.json, the
# state root and logs).
# Needs tmux and go (read-back); node with tests/console's @grpc/grpc-js
# for the console client (`npm ci` there; without it the client is left out
# and the run says so). Method and last results: docs/performance.md, "Soak".
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
minutes=${MINUTES:-30}
if [ "${1:-}" = --quick ]; then minutes=${MINUTES:-3}; shift; fi
BUILD=$(cd "${1:-$SRC/build/profile}" && pwd)
OUT=${OUT:-${TMPDIR:-/tmp}/ptprof-soak}
[ -x "$BUILD/polytokend" ] && [ -x "$BUILD/polytoken" ] \
  || { echo "run.sh: no polytokend/polytoken in $BUILD (bash scripts/build.sh profile)" >&2; exit 2; }
for c in tmux go; do
  command -v "$c" >/dev/null || { echo "run.sh: $c is not installed (bash scripts/setup.sh)" >&2; exit 2; }
done
client=""
if command -v node >/dev/null && [ -f "$SRC/tests/console/node_modules/@grpc/grpc-js/package.json" ]; then
  client=$SRC/tests/console/console_client.js
else
  echo "run.sh: no node or no tests/console/node_modules (cd tests/console && npm ci): the console client is left out" >&2
fi
plain=""
grep -q '^#define PT_PROFILING 1' "$BUILD/pt_config.h" 2>/dev/null || plain=--plain
rm -rf "$OUT"
mkdir -p -m 0700 "$OUT"
exec python3 "$SRC/bench/soak/soak.py" --build "$BUILD" --out "$OUT" --minutes "$minutes" \
  --round-seconds "${PACE:-8}" --interval "${INTERVAL:-10}" --sessions "${SESSIONS:-4}" --turns "${TURNS:-3}" \
  ${client:+--console-client "$client"} ${CACHE:+--cache "$CACHE"} $plain
