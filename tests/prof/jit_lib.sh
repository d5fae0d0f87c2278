# tests/prof/jit_lib.sh - shared steps of the JIT tests (source it after
# prof_lib.sh; not a test itself): run tests/prof/jitprog in one perf-map
# MODE under the preloaded sampler and check its snapshots with
# jit_check.py.

# jit_run MODE NAMES BNAMES STATE: runs `jitprog $JIT_SECONDS MODE` (0.5 s
# of CPU after the warm-up unless set) at 999 Hz with a
# snapshot every 0.3 s; checks every snapshot after the first (the first
# window holds the warm-up: see jitprog.c) with jit_check.py --names NAMES
# --bnames BNAMES, and that the second snapshot's "jit code:" comment says
# the perf map's state STATE (a grep -E pattern; the last one may find
# the map gone: jitprog removes it at exit). Leaves the snapshots in
# $WORK/$MODE. Sets JIT_FIRST (the first snapshot).
jit_run() {
  local mode=$1 names=$2 bnames=$3 state=$4 out="$WORK/$1" rc=0
  mkdir -p -m 0700 "$out"
  env PTPROF_DIR="$out" PTPROF_PREFIX=jit- PTPROF_HZ=999 PTPROF_INTERVAL=0.3 LD_PRELOAD="$LIB" \
    "$PROG" "${JIT_SECONDS:-0.5}" "$mode" >"$WORK/$mode.txt" 2>&1 || rc=$?
  [ "$rc" -ne 77 ] || { note "$mode: needs root, not run"; return 0; }
  [ "$rc" -eq 0 ] || { cat "$WORK/$mode.txt" >&2; fail "jitprog $mode failed ($rc)"; }
  local split pid
  split=$(grep '^{' "$WORK/$mode.txt") || { cat "$WORK/$mode.txt" >&2; fail "$mode: no split line"; }
  pid=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["pid"])' "$split")
  rm -f "/tmp/perf-$pid.map" "/tmp/jitprog-$pid-elsewhere.map"
  mapfile -t files < <(ls "$out"/jit-*.pb.gz | sort)
  [ "${#files[@]}" -ge 2 ] || fail "$mode: ${#files[@]} snapshots, want at least 2"
  JIT_FIRST=${files[0]}
  local v
  for v in "${files[@]}"; do "$VALIDATE" "$v" >/dev/null || fail "$mode: $v is not valid"; done
  note "$mode: ${#files[@]} snapshots"
  python3 "$PT_SRC/tests/prof/jit_check.py" --split "$split" --names "$names" --bnames "$bnames" \
    "${files[@]:1}" || fail "$mode: see above"
  go tool pprof -raw -symbolize=none "${files[1]}" 2>/dev/null | grep '^Comment: jit code:' >"$WORK/$mode.comment" ||
    fail "$mode: no 'jit code:' comment in the second snapshot"
  grep -E "perf map /tmp/perf-$pid.map: ($state) " "$WORK/$mode.comment" >/dev/null ||
    fail "$mode: the comment does not say '$state': $(cat "$WORK/$mode.comment")"
}

JIT_A="JIT:level2,JIT:level1,JIT:level0"
JIT_B="JIT:leafloop,JIT:entry"
