#!/usr/bin/env bash
# sampler_stress_test.sh - the preloaded sampler at 2000 Hz over a workload
# with heavy malloc on three threads, thread churn, fork+exec of /bin/true
# (which inherits LD_PRELOAD and profiles itself), dlopen/dlclose of
# libraries (libgcc_s among them, which makes the unwind tables rebuild) and
# periodic dumps every second, for 8 seconds. It must neither crash nor
# deadlock: the run is bounded (20 s) and must exit 0; every snapshot it
# leaves must be readable by `go tool pprof` (and the dump side's validator).
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require sampler_prog

prof_workdir sampler-stress

# setsid: a deadlocked run and every child it forked can be killed as a group.
setsid env PTPROF_DIR="$WORK/snap" PTPROF_PREFIX=stress- PTPROF_HZ=2000 PTPROF_INTERVAL=1 \
  PTPROF_KEEP=4 LD_PRELOAD="$LIB" "$PROG" stress 8 >"$WORK/out.txt" 2>&1 &
pid=$!
PIDS+=("$pid")
deadline=$((SECONDS + 20))
while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
if kill -0 "$pid" 2>/dev/null; then
  note "still running after 20 s; threads:"
  for t in /proc/"$pid"/task/*; do echo "  $(cat "$t/comm") $(cat "$t/wchan" 2>/dev/null)"; done
  kill -KILL -- -"$pid" 2>/dev/null || true
  fail "deadlock: the stress run did not finish within 20 s"
fi
rc=0
wait "$pid" || rc=$?
PIDS=()
cat "$WORK/out.txt"
[ "$rc" -eq 0 ] || fail "stress run exited with $rc (crash?)"
read -r _ threads _ forks _ dlopens _ allocs < <(grep '^threads ' "$WORK/out.txt")
note "threads=$threads forks=$forks dlopens=$dlopens allocs=$allocs"
# Under ThreadSanitizer (scripts/test.sh's tsan stage sets PT_SANITIZER=thread)
# fork, thread creation and malloc are several times slower: lower floors.
f=1; [ "${PT_SANITIZER:-}" = thread ] && f=4
[ "$threads" -gt $((100 / f)) ] && [ "$forks" -gt $((10 / f)) ] && [ "$dlopens" -gt $((50 / f)) ] &&
  [ "$allocs" -gt $((100000 / f)) ] \
  || fail "the workload did too little to count as stress"

shopt -s nullglob
root=("$WORK"/snap/stress-2*.pb.gz)
kids=("$WORK"/snap/stress-pid*.pb.gz)
if [ "${PT_SANITIZER:-}" = thread ]; then
  # Under TSan: dumps are slow (fewer than keep=4 may be written), and the
  # exec'd /bin/true cannot run TSan's runtime (it needs the program's own
  # preinit; the children die in it), so only the root process is checked.
  [ ${#root[@]} -ge 1 ] && [ ${#root[@]} -le 4 ] || fail "expected 1..4 root snapshots, got ${#root[@]}"
  kids=()
else
  [ ${#root[@]} -eq 4 ] || { ls "$WORK/snap" | head >&2; fail "expected 4 root snapshots (keep=4), got ${#root[@]}"; }
  [ ${#kids[@]} -ge 1 ] || fail "no snapshot from the exec'd children"
fi
note "root snapshots: ${#root[@]}, exec'd children's snapshots: ${#kids[@]}"
check=("${root[@]}" "${kids[@]:0:5}")
for f in "${check[@]}"; do
  go tool pprof -symbolize=none -nodefraction=0 -top "$f" >"$WORK/top.txt" 2>&1 \
    || { cat "$WORK/top.txt" >&2; fail "go tool pprof rejected $f"; }
  if [ -x "$VALIDATE" ]; then
    "$VALIDATE" "$f" >"$WORK/val.txt" 2>&1 || { cat "$WORK/val.txt" >&2; fail "ptprof-validate rejected $f"; }
  fi
done
# The final root snapshot has samples from the workload's threads. Not under
# TSan: it runs the handler late, inside its own runtime's frames, so stacks
# do not reach the workload's functions (see docs/architecture.md).
[ "${PT_SANITIZER:-}" = thread ] && { note "stress (tsan): ok"; exit 0; }
# Every kept root snapshot but the final one covers a whole 1 s interval of
# the workload; the final one covers only the time since the last periodic
# dump, which can be a few hundred microseconds when the run ends right after
# one. So: the workload's function must be in the newest snapshot that holds
# at least 50 samples (at 2000 Hz, 25 ms of CPU), and there must be one.
found=""
for ((i = ${#root[@]} - 1; i >= 0; i--)); do
  go tool pprof -symbolize=none -nodefraction=0 -sample_index=samples -top "${root[$i]}" >"$WORK/top.txt" 2>&1
  total=$(sed -nE 's/.* of ([0-9]+) total.*/\1/p' "$WORK/top.txt" | head -n 1)
  [ "${total:-0}" -ge 50 ] || { note "$(basename "${root[$i]}"): ${total:-0} samples (a short final window), looking at the one before"; continue; }
  grep -q "stress_alloc_round" "$WORK/top.txt" || { cat "$WORK/top.txt" >&2; fail "stress_alloc_round not in $(basename "${root[$i]}") ($total samples)"; }
  found=${root[$i]}
  break
done
[ -n "$found" ] || fail "no root snapshot with at least 50 samples"
[ -z "$(find "$WORK/snap" -name '.*tmp*')" ] || fail "temp files left behind"
note "stress: ok"
exit 0
