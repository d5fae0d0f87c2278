#!/usr/bin/env bash
# All benchmarks (on demand, `just bench`; never part of the test suite).
# Builds the normal and profiling builds, then runs the sampler, real-program,
# daemon-overhead and console benchmarks; their results and method are written up by hand in
# docs/performance.md. QUICK=1 makes the real-program, daemon and engine
# switch-cost benches smoke runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh dev
bash scripts/build.sh profile
echo "== CPU sampler (bench/prof/run.sh)"
REPS=${REPS:-5} SCALE=${SCALE:-2} bash bench/prof/run.sh build/profile
echo "== Real programs (bench/real/run.sh; QUICK=1 for a smoke run)"
if [ "${QUICK:-0}" = 1 ]; then bash bench/real/run.sh --quick build/profile
else bash bench/real/run.sh build/profile; fi
echo "== Daemon overhead, 20-turn session (bench/daemon/run.sh; QUICK=1 for a smoke run)"
if [ "${QUICK:-0}" = 1 ]; then bash bench/daemon/run.sh --quick build/dev build/profile
else bash bench/daemon/run.sh build/dev build/profile; fi
echo "== Perf engine cost per sleep/wake cycle (bench/daemon/switch.sh)"
if [ "${QUICK:-0}" = 1 ]; then bash bench/daemon/switch.sh 4 500 20
else bash bench/daemon/switch.sh 40 2000 20; fi
echo "== Task console (bench/console/run.sh)"
bash bench/console/run.sh build/profile
