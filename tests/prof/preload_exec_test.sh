#!/usr/bin/env bash
# preload_exec_test.sh - a preloaded process that execs never passes a
# SIGPROF on to the new program (where the disposition is SIG_DFL again and
# the signal would kill it: "Profiling timer expired"), and a failed exec
# leaves the caller sampled.
#   1. tests/prof/execchurn "chain 3 20 FN": three execs in a row through
#      each exec function (execve execv execvp execvpe execl execle execlp
#      fexecve execveat), a second thread burning CPU while each exec runs,
#      at 5000 Hz with each available engine: every chain exits 0 and its
#      last program writes its snapshot. Before the exec wrappers the perf
#      engine killed 5 of 5 such chains (its event counts the exec's kernel
#      time until close-on-exec; a pending signal survives exec).
#   2. "execfail 300": 300 ms in churn_burn, an exec that fails (ENOENT),
#      300 ms in churn_after: the exec returns -1/ENOENT, and churn_after
#      holds at least a quarter of the sampled CPU (expected half; at
#      1000 Hz ~300 samples, binomial sd ~3 pp): the thread was armed again.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require execchurn
prof_workdir preload-exec

paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 3)
engines=(timer)
if [ "$(id -u)" -eq 0 ] || [ "$paranoid" -le 2 ]; then engines+=(perf); fi

# ---- 1. exec chains ---------------------------------------------------------
fns=(execve execv execvp execvpe execl execle execlp fexecve execveat)
for e in "${engines[@]}"; do
  for fn in "${fns[@]}"; do
    D="$WORK/$e-$fn"
    rc=0
    PTPROF_DIR="$D" PTPROF_ENGINE=$e PTPROF_HZ=5000 LD_PRELOAD="$LIB" \
      "$PROG" chain 3 20 "$fn" >"$WORK/out.txt" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then
      cat "$WORK/out.txt" >&2
      [ $rc -gt 128 ] && fail "engine $e, $fn: the chain died of signal $((rc - 128))"
      fail "engine $e, $fn: the chain exited $rc"
    fi
    n=$(find "$D" -maxdepth 1 -name '*.pb.gz' | wc -l)
    [ "$n" -ge 1 ] || fail "engine $e, $fn: no snapshot written"
  done
done
note "exec chains through ${#fns[@]} exec functions, engines ${engines[*]} at 5000 Hz: all exited 0"

# ---- 2. a failed exec -----------------------------------------------------
for e in "${engines[@]}"; do
  D="$WORK/fail-$e"
  rc=0
  PTPROF_DIR="$D" PTPROF_ENGINE=$e PTPROF_HZ=1000 LD_PRELOAD="$LIB" \
    "$PROG" execfail 300 >"$WORK/out.txt" 2>&1 || rc=$?
  [ $rc -eq 3 ] && fail "engine $e: the exec of a missing file did not fail with ENOENT"
  [ $rc -eq 0 ] || { cat "$WORK/out.txt" >&2; fail "engine $e: execfail exited $rc"; }
  f=$(find "$D" -maxdepth 1 -name '*.pb.gz' | head -1)
  [ -n "$f" ] || fail "engine $e: no snapshot after the failed exec"
  after=$(go tool pprof -symbolize=none -top -nodecount=100 "$f" 2>/dev/null \
    | awk '$NF == "churn_after" { v = $2; sub(/%$/, "", v); print v; exit }')
  [ -n "$after" ] || fail "engine $e: churn_after not sampled after the failed exec"
  awk -v a="$after" 'BEGIN { exit !(a >= 25) }' \
    || fail "engine $e: churn_after has $after % of the samples, want >= 25 % (the thread was not armed again)"
  note "engine $e: after a failed exec churn_after holds $after % of the samples"
done
exit 0
