#!/usr/bin/env bash
# jit_perfmap_hostile_test.sh - a corrupt, hostile or vanishing perf map
# changes nothing but names: tests/prof/jitprog (see jit_frames_test.sh)
# with /tmp/perf-PID.map made
#   garbage  garbage, binary, bad numbers, an overlong line around the lines
#   huge     entries of huge or wrapping sizes first       -> names kept
#   fifo     a FIFO (a reader blocking on it would hang the run)
#   symlink  a symlink to a map of hostile names
#   other    owned by another user (root only)
#   sparse   the good lines, then extended to 1 GiB         -> no names
#   deleted  deleted after the first snapshot               -> names kept
#   grow     half written until the first snapshot, then completed: the
#            first snapshot names only what was complete, the later ones all
# In every mode the stacks pass the same checks as with a good map (>= 95 %
# through the generated frames to main, the CPU split, < 5 % truncated),
# and the last snapshot's comment says what the map was.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/jit_lib.sh"
prof_require jitprog
prof_workdir jit-hostile
JIT_SECONDS=0.3   # ~300 samples a mode: enough for the checks, eight modes

jit_run garbage "$JIT_A" "$JIT_B" "read"
jit_run huge "$JIT_A" "$JIT_B" "read"
jit_run fifo none "" "refused: not a regular file"
jit_run symlink none "" "refused: a symlink"
jit_run other none "" "refused: owned by another user"
jit_run sparse none "" "refused: larger than 256 MiB"
jit_run deleted "$JIT_A" "$JIT_B" "not found"
jit_run grow "$JIT_A" "$JIT_B" "read"
# The first snapshot of grow was dumped while level1's line was half
# written: no generated frame in it carries another name than level0's.
go tool pprof -raw -symbolize=none "$JIT_FIRST" 2>/dev/null | grep -oE 'JIT:[a-z0-9-]+' | sort -u >"$WORK/grow-first.txt"
grep -vx 'JIT:level0' "$WORK/grow-first.txt" && fail "grow: the first snapshot names more than level0"
grep -x 'JIT:level0' "$WORK/grow-first.txt" >/dev/null || note "grow: level0 not sampled in the first window"
echo "ok"
