#!/usr/bin/env bash
# bench/prof/idle.sh - idle cost of the sampler: CPU per minute of a
# profiling process that does nothing (`sleep`, preloaded with
# libptprof.so, default settings), from the sum of its threads'
# sum_exec_runtime (/proc/PID/task/*/schedstat, ns) between 5 s after start
# and 5 + SECONDS s (so start-up and the final dump are left out).
#   bench/prof/idle.sh LIB [LIB2 ...]     one process per library, run side
#                                         by side (same load); SECONDS=60
# Prints one line per library: ms of CPU per minute.
set -euo pipefail
secs=${SECONDS_IDLE:-60}
pids=() dirs=()
for lib in "$@"; do
  d=$(mktemp -d)
  dirs+=("$d")
  env LD_PRELOAD="$lib" PTPROF_DIR="$d" ${PTPROF_ENGINE:+PTPROF_ENGINE=$PTPROF_ENGINE} \
    sleep $((secs + 10)) &
  pids+=($!)
done
cpu() {   # PID -> ns of CPU of all its threads
  local t s=0
  for t in /proc/"$1"/task/*/schedstat; do
    read -r ns _ <"$t" && s=$((s + ns))
  done
  echo "$s"
}
sleep 5
declare -a a
for i in "${!pids[@]}"; do a[i]=$(cpu "${pids[i]}"); done
sleep "$secs"
for i in "${!pids[@]}"; do
  b=$(cpu "${pids[i]}")
  awk -v lib="${@:i+1:1}" -v d=$((b - a[i])) -v s="$secs" \
    'BEGIN { printf "%s: %.3f ms CPU per minute idle\n", lib, d / 1e6 * 60 / s }'
done
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
rm -rf "${dirs[@]}"
