#!/usr/bin/env bash
# sampler_preload_test.sh - preload mode on an unmodified program
# (tests/prof/sampler_prog, which links nothing of the profiler):
#   1. activation only with PTPROF_DIR: without it no SIGPROF handler is
#      installed and nothing is written; a bad PTPROF_HZ is reported and the
#      program still runs;
#   2. a 1 : 3 CPU split between two threads shows up in the final snapshot
#      read back by `go tool pprof -symbolize=none -nodefraction=0` (and the
#      dump side's validator), sampled CPU close to real CPU, thread_name
#      labels usable with -tagfocus;
#   3. periodic snapshots (PTPROF_INTERVAL) with retention (PTPROF_KEEP);
#   4. fork: a forked child (no exec) stops sampling: it writes no file, and
#      the parent's snapshot never contains the child's work.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require sampler_prog

prof_workdir sampler-preload

PP=(go tool pprof -symbolize=none -nodefraction=0 -sample_index=samples)

validate() { # FILE: go tool pprof and (when built) the dump side's validator
  "${PP[@]}" -top "$1" >"$WORK/top.txt" 2>&1 || { cat "$WORK/top.txt" >&2; fail "go tool pprof rejected $1"; }
  if [ -x "$VALIDATE" ]; then
    "$VALIDATE" "$1" >"$WORK/val.txt" 2>&1 || { cat "$WORK/val.txt" >&2; fail "ptprof-validate rejected $1"; }
  fi
}

flat_of() { # FUNC TOPFILE: flat sample count of FUNC (0 if absent)
  awk -v f="$1" '$NF == f {print $1; found=1; exit} END {if (!found) print 0}' "$2"
}

sigprof_caught() { # PID: 0 if SIGPROF (27) is in SigCgt
  local mask
  mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status")
  (( (16#$mask >> 26) & 1 ))
}

# ---- 1. activation -------------------------------------------------------
# Readiness markers, not sleeps: sampler_prog creates PTT_READY_FILE in
# main, after the preload constructor ran.
PTT_READY_FILE="$WORK/ready.noenv" LD_PRELOAD="$LIB" "$PROG" split 1.5 >"$WORK/noenv.txt" 2>&1 &
PIDS+=($!)
wait_for 20 test -e "$WORK/ready.noenv" || fail "sampler_prog did not reach main"
if sigprof_caught "${PIDS[-1]}"; then fail "SIGPROF handler installed without PTPROF_DIR"; fi
wait "${PIDS[-1]}" || fail "program failed under LD_PRELOAD without PTPROF_DIR"
unset 'PIDS[-1]'

PTT_READY_FILE="$WORK/ready.act" PTPROF_DIR="$WORK/act" LD_PRELOAD="$LIB" "$PROG" split 1.5 \
  >"$WORK/act.txt" 2>&1 &
PIDS+=($!)
wait_for 20 test -e "$WORK/ready.act" || fail "sampler_prog did not reach main"
sigprof_caught "${PIDS[-1]}" || fail "no SIGPROF handler with PTPROF_DIR set"
wait "${PIDS[-1]}" || fail "program failed under the sampler"
unset 'PIDS[-1]'

PTPROF_DIR="$WORK/bad" PTPROF_HZ=abc LD_PRELOAD="$LIB" "$PROG" split 0.2 >"$WORK/bad.txt" 2>&1 \
  || fail "a bad PTPROF_HZ broke the program"
grep -q "ptprof: PTPROF_HZ=abc" "$WORK/bad.txt" || { cat "$WORK/bad.txt" >&2; fail "bad PTPROF_HZ not reported"; }
[ ! -e "$WORK/bad" ] || fail "a snapshot directory was made despite the bad PTPROF_HZ"
note "activation: ok"

# ---- 2. CPU split -------------------------------------------------------
env PTPROF_DIR="$WORK/split" PTPROF_PREFIX=split- PTPROF_HZ=199 LD_PRELOAD="$LIB" \
  "$PROG" split 4 >"$WORK/split.txt" 2>&1 || { cat "$WORK/split.txt" >&2; fail "split run failed"; }
shopt -s nullglob
files=("$WORK"/split/split-*.pb.gz)
[ ${#files[@]} -eq 1 ] || fail "expected one final snapshot, got ${#files[@]}"
F=${files[0]}
validate "$F"
cp "$WORK/top.txt" "$WORK/split-top.txt"
cat "$WORK/split-top.txt"
a=$(flat_of split_a "$WORK/split-top.txt")
b=$(flat_of split_b "$WORK/split-top.txt")
ms_a=$(awk '/^split-a/ {print $2}' "$WORK/split.txt")
ms_b=$(awk '/^split-b/ {print $2}' "$WORK/split.txt")
python3 - "$a" "$b" "$ms_a" "$ms_b" <<'EOF' || fail "CPU split not reflected"
import sys
a, b, ms_a, ms_b = map(float, sys.argv[1:])
period_ms = 1000.0 / 199
share_b = b / (a + b)
real_b = ms_b / (ms_a + ms_b)
compl = (a + b) * period_ms / (ms_a + ms_b)
print(f"# split: samples a={a:.0f} b={b:.0f}; share of b {share_b:.3f} (real {real_b:.3f}); "
      f"sampled/real CPU {compl:.3f}")
if abs(share_b - real_b) > 0.06: sys.exit("share of split_b off by more than 6 points")
if not 0.85 < compl < 1.15: sys.exit("sampled CPU not within 15 % of real CPU")
EOF
"${PP[@]}" -top -tagfocus=thread_name=split-a "$F" >"$WORK/tag.txt" 2>&1 || fail "tagfocus failed"
grep -q " split_a$" "$WORK/tag.txt" || { cat "$WORK/tag.txt" >&2; fail "thread_name=split-a does not select split_a"; }
if grep -q " split_b$" "$WORK/tag.txt"; then fail "thread_name=split-a selected split_b too"; fi
note "split: ok"

# ---- 3. periodic snapshots and retention -------------------------------
env PTPROF_DIR="$WORK/per" PTPROF_PREFIX=per- PTPROF_INTERVAL=0.25 PTPROF_KEEP=3 \
  LD_PRELOAD="$LIB" "$PROG" split 2 >"$WORK/per.txt" 2>&1 || fail "periodic run failed"
files=("$WORK"/per/per-*.pb.gz)
[ ${#files[@]} -eq 3 ] || { ls -la "$WORK/per" >&2; fail "retention: expected 3 files, got ${#files[@]}"; }
for f in "${files[@]}"; do validate "$f"; done
[ -z "$(find "$WORK/per" -name '.*tmp*')" ] || fail "temp files left behind"
note "periodic + retention: ok"

# ---- 4. fork ------------------------------------------------------------
env PTPROF_DIR="$WORK/fork" PTPROF_PREFIX=fork- PTPROF_HZ=499 LD_PRELOAD="$LIB" \
  "$PROG" fork 1.5 >"$WORK/fork.txt" 2>&1 || { cat "$WORK/fork.txt" >&2; fail "fork run failed"; }
child=$(awk '/^child [0-9]+$/ {print $2}' "$WORK/fork.txt")
[ -n "$child" ] || { cat "$WORK/fork.txt" >&2; fail "no child pid printed"; }
parent_files=("$WORK"/fork/fork-2*.pb.gz)
all_files=("$WORK"/fork/*)
[ ${#parent_files[@]} -eq 1 ] || { ls -la "$WORK/fork" >&2; fail "parent: expected 1 snapshot"; }
[ ${#all_files[@]} -eq 1 ] || { ls -la "$WORK/fork" >&2; fail "the forked child wrote a file"; }
grep -q "^child $child done$" "$WORK/fork.txt" || fail "the child did not finish its work"
validate "${parent_files[0]}"
cp "$WORK/top.txt" "$WORK/parent-top.txt"
[ "$(flat_of parent_work "$WORK/parent-top.txt")" -gt 0 ] || fail "parent_work missing from the parent's snapshot"
[ "$(flat_of child_work "$WORK/parent-top.txt")" -eq 0 ] || { cat "$WORK/parent-top.txt" >&2; fail "the child's work is in the parent's window"; }
note "fork: ok"
exit 0
