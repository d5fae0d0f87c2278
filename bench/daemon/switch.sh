#!/usr/bin/env bash
# bench/daemon/switch.sh [PAIRS [CYCLES [WORK_US]]] - the per-sleep/wake cost
# of each sampling engine on one thread (bench/daemon/switch_cost.c; method
# and results: docs/performance.md, "Why the perf engine costs the daemon").
# On demand only; builds the program into build/bench/.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/bench
cc -O2 -std=gnu11 -Wall -Wextra -o build/bench/switch_cost bench/daemon/switch_cost.c -lm
exec build/bench/switch_cost "${1:-20}" "${2:-2000}" "${3:-20}"
