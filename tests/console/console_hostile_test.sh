#!/usr/bin/env bash
# The console under the hostile clients of issue 9 (items 1-3), each driven
# by a real HTTP/2 implementation (python3-h2: tests/console/h2_hostile.py;
# the real client that must get in is grpc-js, console_client.js):
#  1. 128 connections that send the preface and SETTINGS and then nothing
#     (then the same with garbage frames after the preface) must not lock a
#     real client out, and must all be closed by the idle time-out;
#  2. 128 connections x 64 WatchUpdates calls that never read, with 2000
#     tasks: the console's RSS grows by <= 256 MiB at peak and is back
#     within 64 MiB of where it started once they are gone;
#  3. 1000 bad connections write a handful of log lines, not 1000, and a
#     summary line with the count.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/console_lib.sh"
PY=/usr/bin/python3
$PY -c 'import h2' 2>/dev/null || skip "python3-h2 is not installed (scripts/setup.sh installs it)"
console_npm
H="$CONSOLE_DIR/h2_hostile.py"

# ---- 1. idle connections ---------------------------------------------------
for kind in plain garbage; do
  console_demo_start PTCON_DEMO_IDLE_MS=6000
  "$PY" "$H" idle "$DEMO_ADDR" 128 9 "$kind" >"$TMPDIR/idle.out" 2>&1 &
  hp=$!
  PT_PIDS+=("$hp")
  wait_for 30 grep -q ready "$TMPDIR/idle.out" || { cat "$TMPDIR/idle.out" >&2; fail "idle clients did not connect"; }
  # The table is full of idle connections: a real client still gets in.
  node "$CONSOLE_DIR/console_client.js" names "$DEMO_ADDR" demo.ticker
  wait "$hp" || fail "h2_hostile.py idle failed"
  cat "$TMPDIR/idle.out"
  grep -q "closed 128 of 128" "$TMPDIR/idle.out" || fail "$kind: idle connections kept their slots"
  console_demo_stop
  grep -q "closing the one idle longest" "$DEMO_OUT" || fail "$kind: no eviction logged"
  grep -q "closing connection: idle (no open call)" "$DEMO_OUT" || fail "$kind: no idle time-out logged"
done

# ---- 2. slow readers ---------------------------------------------------------
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$DEMO_PID/status"; }
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$DEMO_PID/status"; }
console_demo_start PTCON_DEMO_MANY=2000
wait_for 20 test -s "$DEMO_PROGRESS" || fail "demo loop did not start"
node "$CONSOLE_DIR/console_client.js" names "$DEMO_ADDR" demo.ticker   # warm: one full state
base=$(rss_kb)
base_hwm=$(hwm_kb)
"$PY" "$H" slow "$DEMO_ADDR" 128 64 25 >"$TMPDIR/slow.out" 2>&1 &
sp=$!
PT_PIDS+=("$sp")
wait "$sp" || { cat "$TMPDIR/slow.out" >&2; fail "h2_hostile.py slow failed"; }
peak=$(hwm_kb)
# Gone: the server closes them as it reads their EOFs and gives memory back.
after=$(rss_kb)
for _ in $(seq 600); do
  after=$(rss_kb)
  [ "$after" -le $((base + 65536)) ] && break
  sleep 0.1
done
note "RSS: base ${base} kB (peak before ${base_hwm} kB), peak ${peak} kB (+$(( (peak - base) / 1024 )) MiB), after ${after} kB (+$(( (after - base) / 1024 )) MiB)"
[ $((peak - base)) -le $((256 * 1024)) ] || fail "peak RSS grew by more than 256 MiB"
[ $((after - base)) -le $((64 * 1024)) ] || fail "RSS stayed more than 64 MiB above the start"
node "$CONSOLE_DIR/console_client.js" names "$DEMO_ADDR" demo.ticker
console_demo_stop
grep -qE "client is not reading|memory budget" "$DEMO_OUT" || true

# ---- 3. log flood -------------------------------------------------------------
console_demo_start
"$PY" "$H" flood "$DEMO_ADDR" 1000
# Everything of the flood arrives within the first 10 s window; its summary
# is written when the window ends.
wait_for 30 grep -q "more connections closed" "$DEMO_OUT" || { cat "$DEMO_OUT" >&2; fail "no summary line"; }
node "$CONSOLE_DIR/console_client.js" names "$DEMO_ADDR" demo.ticker
console_demo_stop
lines=$(grep -c "closing connection" "$DEMO_OUT" || true)
note "$(grep "more connections closed" "$DEMO_OUT" | head -n 3)"
[ "$lines" -le 5 ] || fail "$lines log lines for 1000 bad connections"
total=$(grep -o "task console: [0-9]* more connections closed" "$DEMO_OUT" | awk '{s += $3} END {print s + 0}')
[ $((total + lines)) -ge 990 ] || fail "the summary counts $total + $lines lines, not ~1000"
