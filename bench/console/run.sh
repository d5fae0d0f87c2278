#!/usr/bin/env bash
# bench/console/run.sh - the task console benchmarks (on demand, not CI).
# Builds bench_console against the profiling build's static libptprof, runs
# the poll-cost, server-CPU and memory benchmarks, with a real gRPC client
# (tests/console's grpc-js) subscribed during the server runs.
#   usage: bench/console/run.sh [BUILD_DIR]   (default build/profile, made by just profile-build)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# absolute: the runs below have other working directories
BUILD=$(cd "${1:-$SRC/build/profile}" 2>/dev/null && pwd) ||
  { echo "console/run.sh: no build directory ${1:-$SRC/build/profile} (just profile-build)" >&2; exit 2; }
[ -f "$BUILD/libptprof.a" ] || { echo "no $BUILD/libptprof.a: meson setup $BUILD -Dprofiling=true && ninja -C $BUILD" >&2; exit 2; }
OUT=$(mktemp -d "${TMPDIR:-/tmp}/ptcon-bench.XXXXXX")
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$OUT"; }
trap cleanup EXIT

cc -O2 -g -std=c11 -D_GNU_SOURCE -fno-omit-frame-pointer -I"$SRC/src" -I"$SRC/include" -I"$BUILD" \
  "$SRC/bench/console/bench_console.c" "$BUILD/libptprof.a" \
  -lnghttp2 -ldw -lelf -lz -lpthread -ldl -lrt -lm -o "$OUT/bench_console"

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
# The tick source: the library's choice, then each path forced (issue 9
# item 13: TSC whenever the CPU guarantees an invariant one, CLOCK_MONOTONIC
# otherwise), interleaved so that machine load hits both alike.
"$OUT/bench_console" poll 20000000
for rep in 1 2 3; do
  "$OUT/bench_console" poll 20000000 tsc
  "$OUT/bench_console" poll 20000000 mono
done
"$OUT/bench_console" memory 10000
"$OUT/bench_console" memory 2000 1000000

# The server runs: a real client watches the whole time (WatchUpdates +
# WatchState), so encoding and sending are part of the measured CPU.
(cd "$SRC/tests/console" && [ -d node_modules/@grpc/grpc-js ] || npm ci --no-audit --no-fund >/dev/null)
watch_js="$OUT/watch.js"
cat >"$watch_js" <<JS
const grpc = require('$SRC/tests/console/node_modules/@grpc/grpc-js');
const pl = require('$SRC/tests/console/node_modules/@grpc/proto-loader');
const def = pl.loadSync('instrument.proto', { includeDirs: ['$SRC/proto/console'], keepCase: true, longs: String });
const I = grpc.loadPackageDefinition(def).rs.tokio.console.instrument.Instrument;
const c = new I(process.argv[2], grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 4 << 20 });
let n = 0, bytes = 0;
c.WatchUpdates({}).on('data', (u) => { n++; }).on('error', (e) => { console.log('client: ' + n + ' Updates, then ' + e.message); process.exit(0); });
c.WatchState({}).on('data', () => {}).on('error', () => {});
process.on('SIGTERM', () => { console.log('client: ' + n + ' Updates'); process.exit(0); });
JS
run_server() {
  local tasks=$1 eps=$2 secs=$3
  rm -f "$OUT/port"
  "$OUT/bench_console" server "$tasks" "$eps" "$secs" "$OUT/port" &
  local bp=$!
  PIDS+=("$bp")
  for _ in $(seq 100); do [ -s "$OUT/port" ] && break; sleep 0.05; done
  node "$watch_js" "127.0.0.1:$(cat "$OUT/port")" &
  local np=$!
  PIDS+=("$np")
  wait "$bp"
  kill -TERM "$np" 2>/dev/null || true
  wait "$np" 2>/dev/null || true
}
run_server 10000 0 10
run_server 10000 20000 10
run_server 100 100000 10
run_server 10000 100000 10
