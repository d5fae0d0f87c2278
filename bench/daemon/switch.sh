#!/usr/bin/env bash
# bench/daemon/switch.sh [PAIRS [CYCLES [WORK_US [SLEEP_MS]]]] - what each sampling
# engine costs a thread at its context switches, without any Polytoken
# code: the daemon's sleep/wake pattern on one thread
# (bench/daemon/switch_cost.c, thread CPU time), then a two-thread
# ping-pong on one CPU that splits a perf event's cost into its hrtimer and
# its context (bench/daemon/switch_pingpong.c, wall clock). Method and
# results: docs/performance.md, "Where the profiling daemon's excess goes".
# On demand only; builds the programs into build/bench/.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/bench
cc -O2 -std=gnu11 -Wall -Wextra -o build/bench/switch_cost bench/daemon/switch_cost.c -lm
cc -O2 -std=gnu11 -Wall -Wextra -pthread -o build/bench/switch_pingpong bench/daemon/switch_pingpong.c -lm
build/bench/switch_cost "${1:-20}" "${2:-2000}" "${3:-20}" "${4:-1}"
# both threads on the last CPU the process may use
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
taskset -c "$cpu" build/bench/switch_pingpong "${1:-20}" 20000
