#!/usr/bin/env bash
# guest_nofile_test.sh - a program at a low RLIMIT_NOFILE keeps its
# descriptors (issue 21, item 1): under `ulimit -n 12`, tests/prof/guest_fds
# starts 8 threads that each open a file and hold it while all burn CPU
# (3 + 8 = 11 of the 12 numbers). Unprofiled all 8 open theirs; preloaded
# (the default engine choice, at 99 and at 999 Hz) the output, files and
# exit code must be the same, a snapshot must be written, and its comment
# must name the timer engine and why (perf takes one descriptor per
# thread). Before: 0 of 8 files at 99 Hz, 4 at 999 Hz and no snapshot
# ("too many open files").
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
prof_require guest_fds
prof_workdir guest-nofile

export GUEST_NOFILE=12
guest_run nf-u "$WORK/nf-u" -- "$PROG" nofile 8 150
grep -c '^8 of 8 threads' "$WORK/nf-u.out" >/dev/null ||
  { cat "$WORK/nf-u.out" "$WORK/nf-u.err" >&2; fail "unprofiled, not every thread opened its file"; }
for hz in 99 999; do
  guest_run "nf-$hz" "$WORK/nf-$hz" PTPROF_DIR="$WORK/prof-$hz" PTPROF_HZ=$hz LD_PRELOAD="$LIB" \
    -- "$PROG" nofile 8 150
  guest_same nf-u "nf-$hz" "$WORK/nf-u" "$WORK/nf-$hz"
  prof=$(guest_profile "$WORK/prof-$hz")
  go tool pprof -comments "$prof" >"$WORK/comments-$hz" 2>&1 || fail "$hz Hz: go tool pprof rejected $prof"
  grep -c "sampler engine: POSIX CPU-time timer per thread, $hz Hz (perf_event not used: it takes one descriptor per thread, and the soft RLIMIT_NOFILE 12 is below 256)" \
    "$WORK/comments-$hz" >/dev/null ||
    { grep 'sampler engine' "$WORK/comments-$hz" >&2; fail "$hz Hz: the comment does not name the timer engine and why"; }
  total=$(guest_total_ms "$prof")
  awk -v t="$total" 'BEGIN { exit !(t >= 600) }' || fail "$hz Hz: $total ms sampled of 8 x 150"
  note "$hz Hz: 8 of 8 files opened, as unprofiled; snapshot with $total ms, timer engine named with its reason"
done
echo ok
