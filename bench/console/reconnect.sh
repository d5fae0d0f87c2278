#!/usr/bin/env bash
# bench/console/reconnect.sh - the console's CPU under the hostile reconnect
# loop of issue 21 (on demand, not CI). console_demo serves a console with
# TASKS retained (completed) tasks; tests/console/console_reconnect loops
# (connect, start a call, read the first bytes, close) as fast as it can
# with LOOPS parallel loops, for SECONDS, RUNS times per scenario; each run
# reports the CPU time of the demo's `ptcon-server` thread (ns on CPU from
# /proc/PID/task/TID/schedstat) over the run as a share of one core, and
# how many iterations the loop made and how they ended.
#
# Scenarios (WHO-MODE[:LOOPS], modes of console_reconnect.c): the
# console's own user (passes the user check: the rate limits and the shared
# initial state bound it) looping on WatchUpdates (the issue's loop),
# WatchTaskDetails, WatchState, bare connects, a fresh connection's 8 calls
# at once (burst), and, without reconnecting, 128 connections keeping 32
# unary calls each in flight (calls) or sending PING frames (ping); and (as
# root) another user (nobody) looping on WatchUpdates (refused at accept).
# Target: <= 10 % of a core in every run.
#
#   usage: bench/console/reconnect.sh [BUILD_DIR] [TASKS] [SECONDS] [RUNS] [LOOPS] [SCENARIOS]
#   (defaults: build/profile 3000 10 5 2 and every scenario above; LOOPS is
#   the default of scenarios without :LOOPS)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build/profile}" && pwd)
TASKS=${2:-3000} SECS=${3:-10} RUNS=${4:-5} LOOPS=${5:-2}
SCEN=${6:-own-watch own-details own-state own-connect own-burst:4 own-calls:128 own-ping:128 other-watch}
DEMO=$BUILD/tests/console/console_demo
LOOP=$BUILD/tests/console/console_reconnect
[ -x "$DEMO" ] && [ -x "$LOOP" ] || { echo "no $DEMO or $LOOP (bash scripts/build.sh profile)" >&2; exit 2; }
DIR=$(mktemp -d /tmp/ptcon-reconnect.XXXXXX)
chmod 755 "$DIR"
cleanup() { [ -n "${DP:-}" ] && kill "$DP" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
# A copy another user can run (the build directory may be private).
cp "$LOOP" "$DIR/console_reconnect"
chmod 755 "$DIR/console_reconnect"

PTCON_DEMO_BIND=127.0.0.1:0 PTCON_DEMO_PORTFILE="$DIR/port" PTCON_DEMO_PROGRESS="$DIR/progress" \
  PTCON_DEMO_ENDED="$TASKS" PTCON_DEMO_RETENTION_MS=86400000 "$DEMO" >"$DIR/demo.out" 2>&1 &
DP=$!
for _ in $(seq 200); do [ -s "$DIR/progress" ] && [ -s "$DIR/port" ] && break; sleep 0.05; done
ADDR=127.0.0.1:$(cat "$DIR/port")
tid=""
for t in /proc/"$DP"/task/*; do [ "$(cat "$t/comm")" = ptcon-server ] && tid=${t##*/}; done
[ -n "$tid" ] || { echo "no ptcon-server thread" >&2; exit 1; }
cpu_ns() { cut -d' ' -f1 "/proc/$DP/task/$tid/schedstat"; }
sleep 2

echo "== console_demo with $TASKS retained tasks on $ADDR; ${SECS} s x $RUNS runs per scenario"
echo "== $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?')"
idle0=$(cpu_ns); sleep "$SECS"; idle1=$(cpu_ns)
awk -v d=$((idle1 - idle0)) -v s="$SECS" 'BEGIN { printf "idle (no client): console thread %.3f %% of a core\n", d / (s * 1e7) }'
for sc in $SCEN; do
  loops=$LOOPS
  case $sc in *:*) loops=${sc#*:}; sc=${sc%%:*} ;; esac
  who=${sc%%-*} mode=${sc#*-}
  run_as=()
  if [ "$who" = other ]; then
    [ "$(id -u)" = 0 ] || { echo "$sc: skipped (needs root to run as nobody)"; continue; }
    run_as=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  fi
  shares=()
  for r in $(seq "$RUNS"); do
    c0=$(cpu_ns) w0=$(date +%s%N)
    res=$("${run_as[@]}" "$DIR/console_reconnect" "$ADDR" "$SECS" "$loops" "$mode")
    c1=$(cpu_ns) w1=$(date +%s%N)
    # over the wall time the loop really ran (its last calls may end late)
    share=$(awk -v d=$((c1 - c0)) -v w=$((w1 - w0)) 'BEGIN { printf "%.2f", d * 100 / w }')
    shares+=("$share")
    echo "$sc ($loops loops) run $r: console thread ${share} % of a core; $res"
    sleep 1
  done
  printf '%s\n' "${shares[@]}" | awk -v sc="$sc" '{ s += $1; if ($1 > m) m = $1; n++ }
    END { printf "%s: mean %.2f %%, max %.2f %% of a core over %d runs (target <= 10 %%: %s)\n", sc, s / n, m, n, m <= 10 ? "met" : "NOT met" }'
done
kill -0 "$DP" || { cat "$DIR/demo.out"; echo "console_demo died" >&2; exit 1; }
echo "== demo log (rate-limited):"
grep -E "task console" "$DIR/demo.out" | head -n 20 | sed 's/^/  /'
