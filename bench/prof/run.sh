#!/usr/bin/env bash
# bench/prof/run.sh - the CPU sampler benchmark (on demand; not run by CI).
#
# Runs bench_work (a fixed amount of work with a known CPU split) side by
# side: unprofiled, ours (LD_PRELOAD=libptprof.so) with each engine
# (PTPROF_ENGINE=perf where perf_event_open works, and =timer), gperftools'
# libprofiler (LD_PRELOAD, CPUPROFILE) and `perf record -g` (when perf
# works), at 99 and 999 Hz, with 1, 4 and 16 threads, short-lived threads
# (two functions, two at a time; and "short 3 functions": three functions in
# a fixed order, four at a time), and half the time in malloc; repeats each
# run REPS times (interleaved) and reports medians as ratios measured in the
# same run: CPU overhead, completeness, share under real stacks (not under
# ours' "[lost: ...]" pseudo-frames), split error, malloc time under its
# caller. Then bench_sampler measures the handler cost
# per sample at depth 30 and the dump cost of 10k distinct stacks.
#
#   bench/prof/run.sh [BUILD_DIR]     default build/profile (just profile-build)
# Environment: REPS (default 3), SCALE (default 1 = about 2 CPU s per run),
# OUT (results directory, default $TMPDIR/ptprof-bench), WORKLOADS (comma-
# separated workload names, e.g. "short 3 functions,16 threads"), HZ
# (comma-separated rates, default 99,999).
# Idle cost: bench/prof/idle.sh LIB [LIB2...].
# Method and the numbers of the last run: docs/performance.md, "CPU sampler".
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# absolute: the runs below have other working directories
BUILD=$(cd "${1:-$SRC/build/profile}" 2>/dev/null && pwd) ||
  { echo "prof/run.sh: no build directory ${1:-$SRC/build/profile} (just profile-build)" >&2; exit 2; }
OUT=${OUT:-${TMPDIR:-/tmp}/ptprof-bench}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -f "$BUILD/libptprof.a" ] && [ -f "$BUILD/libptprof.so" ] \
  || { echo "run.sh: no libptprof in $BUILD (meson setup $BUILD -Dprofiling=true && ninja -C $BUILD)" >&2; exit 2; }

CFLAGS=(-O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -pthread)
cc "${CFLAGS[@]}" -o "$OUT/bench_work" "$SRC/bench/prof/bench_work.c"
# shellcheck disable=SC2046
cc "${CFLAGS[@]}" -D_GNU_SOURCE -I"$SRC" -I"$SRC/include" -I"$SRC/src" -I"$BUILD" \
  -o "$OUT/bench_sampler" "$SRC/bench/prof/bench_sampler.c" "$BUILD/libptprof.a" \
  $(pkg-config --libs libdw libelf zlib libnghttp2) -ldl -lrt -lm

exec python3 "$SRC/bench/prof/bench.py" --out "$OUT" --lib "$BUILD/libptprof.so" \
  --work "$OUT/bench_work" --micro "$OUT/bench_sampler" \
  --reps "${REPS:-3}" --scale "${SCALE:-1}"
