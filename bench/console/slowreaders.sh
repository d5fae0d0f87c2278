#!/usr/bin/env bash
# bench/console/slowreaders.sh - memory under clients that never read (issue
# 9 item 2): console_demo with TASKS extra tasks, NCONN connections x NSTREAMS
# WatchUpdates calls that never read (python3-h2, tests/console/h2_hostile.py)
# held HOLD_S seconds; prints the demo's RSS before, at peak (VmHWM) and once
# the clients are gone (after the server has closed them all).
#   usage: bench/console/slowreaders.sh [BUILD_DIR] [TASKS] [NCONN] [NSTREAMS] [HOLD_S]
#   (defaults: build/profile 3000 128 64 30)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build/profile}" && pwd)
TASKS=${2:-3000} NCONN=${3:-128} NSTREAMS=${4:-64} HOLD=${5:-30}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/ptcon-slow.XXXXXX")
cleanup() { [ -n "${DP:-}" ] && kill "$DP" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
PTCON_DEMO_BIND=127.0.0.1:0 PTCON_DEMO_PORTFILE="$DIR/port" PTCON_DEMO_PROGRESS="$DIR/progress" \
  PTCON_DEMO_MANY="$TASKS" "$BUILD/tests/console/console_demo" >"$DIR/demo.out" 2>&1 &
DP=$!
for _ in $(seq 100); do [ -s "$DIR/progress" ] && [ -s "$DIR/port" ] && break; sleep 0.1; done
ADDR=127.0.0.1:$(cat "$DIR/port")
kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$DP/status"; }
sleep 1
base=$(kb VmRSS)
t0=$(date +%s)
/usr/bin/python3 "$SRC/tests/console/h2_hostile.py" slow "$ADDR" "$NCONN" "$NSTREAMS" "$HOLD" >/dev/null
peak=$(kb VmHWM)
# Gone once the server holds no connection fd any more.
for _ in $(seq 1200); do
  n=$(find "/proc/$DP/fd" -lname 'socket:*' 2>/dev/null | wc -l)
  [ "$n" -le 1 ] && break   # the listener
  sleep 0.1
done
sleep 2   # the next timer gives memory back
after=$(kb VmRSS)
echo "== $NCONN connections x $NSTREAMS WatchUpdates never read, $TASKS tasks, held ${HOLD} s; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "RSS before ${base} kB, peak ${peak} kB (+$(( (peak - base) / 1024 )) MiB), after ${after} kB ($(( (after - base) / 1024 )) MiB), all closed $(( $(date +%s) - t0 )) s after the start"
grep -E "more connections|closing connection" "$DIR/demo.out" | sed 's/^/  log: /' | head -n 8
