#!/usr/bin/env bash
# guest_signals_test.sh - the program's signals are the program's (issue
# 21, item 2): tests/prof/guest_sig run unprofiled and preloaded (each
# engine here) prints, exits and leaves files byte for byte the same
# (guest_lib.sh):
#   1. dfl: a daemon-like start resets every signal to SIG_DFL, works 300
#      ms, exits 6. Before: killed by our SIGPROF, exit 155 "Profiling timer
#      expired". The profile has its CPU.
#   2. own: its own SIGPROF handler and setitimer(ITIMER_PROF, 10 ms): it
#      counts 30 signals of its timer (SI_KERNEL) and none that are not
#      ("own=30 foreign=0"), and sigaction(SIGPROF) reports its handler.
#      Before: 40-700 foreign signals, and a profile without samples. The
#      profile has samples.
#   3. sigwait: SIGPROF blocked, its timer's signals taken with
#      sigtimedwait: never one of ours ("0 that were not its timer's").
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
prof_require guest_sig
prof_workdir guest-signals

check() {   # check CASE ENGINE ARGS...: runs both, compares; prints the profile's total ms
  local c=$1 e=$2; shift 2
  guest_run "$c-$e-u" "$WORK/$c-$e-u" -- "$PROG" "$@"
  guest_run "$c-$e-p" "$WORK/$c-$e-p" PTPROF_DIR="$WORK/prof-$c-$e" PTPROF_ENGINE=$e \
    LD_PRELOAD="$LIB" -- "$PROG" "$@"
  guest_same "$c-$e-u" "$c-$e-p" "$WORK/$c-$e-u" "$WORK/$c-$e-p"
}

for e in $(engines_here); do
  check dfl "$e" dfl 300
  [ "$(cat "$WORK/dfl-$e-u.rc")" = 6 ] || fail "dfl exited $(cat "$WORK/dfl-$e-u.rc") unprofiled, want 6"
  t=$(guest_total_ms "$(guest_profile "$WORK/prof-dfl-$e")")
  awk -v t="$t" 'BEGIN { exit !(t >= 150) }' || fail "dfl ($e): $t ms sampled of 300"
  note "dfl ($e): exit 6 and the same output as unprofiled; $t ms sampled"

  check own "$e" own 30
  grep -c '^own=30 foreign=0$' "$WORK/own-$e-p.out" >/dev/null || fail "own ($e): $(head -1 "$WORK/own-$e-p.out")"
  grep -c 'own handler yes, SA_SIGINFO yes, SA_RESTART yes' "$WORK/own-$e-p.out" >/dev/null ||
    fail "own ($e): sigaction does not report the program's handler"
  t=$(guest_total_ms "$(guest_profile "$WORK/prof-own-$e")")
  awk -v t="$t" 'BEGIN { exit !(t >= 100) }' || fail "own ($e): $t ms sampled (its own timer ran ~300 ms)"
  note "own ($e): own=30 foreign=0 as unprofiled; the profile has $t ms"

  check sigwait "$e" sigwait 300
  grep -c ', 0 that were not its timer.s$' "$WORK/sigwait-$e-p.out" >/dev/null ||
    fail "sigwait ($e): $(cat "$WORK/sigwait-$e-p.out")"
  note "sigwait ($e): only its timer's signals taken"
done
echo ok
