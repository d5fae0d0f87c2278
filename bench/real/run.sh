#!/usr/bin/env bash
# bench/real/run.sh - the real-program bench (on demand, `just bench`; not
# part of the test suite). Debian programs built without frame pointers (xz,
# python3.11, the sqlite3 shell, gcc with cc1 and as), Debian's node (V8:
# JIT code with --perf-basic-prof) and split_work (known splits: short
# threads, 16 threads), each unprofiled, with libptprof
# (preload), gperftools (preload), `perf record -g` and `perf record
# --call-graph dwarf`, all at 99 Hz, in paired interleaved runs; prints a
# Markdown table (CPU ratio with 95 % CI, completeness, rooted share, named
# share, leaf TVD vs perf-dwarf, split error) and writes results.json.
#
#   bench/real/run.sh [--quick] [BUILD_DIR]    default build/profile
# --quick: 2 pairs (a smoke run); default: 20 pairs (the overhead figures).
# Environment: PAIRS (overrides), PROGRAMS (comma-separated subset, e.g.
# "xz,short threads", "node"; "xz 2 s", xz -9 of 3.2 MB for the preloaded-2-s-program
# figure, runs only when named), TOOLS (subset of
# libptprof,gperftools,perf-fp,perf-dwarf), OUT (default $TMPDIR/ptprof-real),
# KEEP=1 keeps the last pair's profiles in $OUT/last.
# Method and last results: docs/performance.md, "Real programs".
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
pairs=20
if [ "${1:-}" = --quick ]; then pairs=2; shift; fi
pairs=${PAIRS:-$pairs}
BUILD=$(cd "${1:-$SRC/build/profile}" && pwd)
OUT=${OUT:-${TMPDIR:-/tmp}/ptprof-real}
[ -f "$BUILD/libptprof.so" ] \
  || { echo "run.sh: no libptprof.so in $BUILD (bash scripts/build.sh profile)" >&2; exit 2; }
rm -rf "$OUT"
mkdir -p -m 0700 "$OUT"
cc -O2 -Wall -Wextra -o "$OUT/cpuwrap" "$SRC/bench/real/cpuwrap.c"
# Frame pointers in split_work: its rows measure the timers, not unwinding.
cc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -pthread \
  -o "$OUT/split_work" "$SRC/bench/real/split_work.c"
keep=()
[ "${KEEP:-0}" = 1 ] && keep=(--keep)
exec python3 "$SRC/bench/real/real.py" --src "$SRC" --out "$OUT" --lib "$BUILD/libptprof.so" \
  --cpuwrap "$OUT/cpuwrap" --split-work "$OUT/split_work" --pairs "$pairs" \
  --programs "${PROGRAMS:-}" --tools "${TOOLS:-}" "${keep[@]}"
