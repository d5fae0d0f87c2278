#!/usr/bin/env bash
# Smoke run of the engine switch-cost benches (bench/daemon/switch.sh):
# switch_cost (3 rounds of 100 cycles) and switch_pingpong (3 rounds of 500
# round trips) build warning-free and print one line per variant, each but
# the first with a paired difference and interval. No timing assertions:
# the figures belong to docs/performance.md ("Where the profiling daemon's
# excess goes"). Skips (77) only when perf_event_open is refused here.
source "$(dirname "$0")/../lib.sh"

bin=$TMPDIR/switch_cost
cc -O2 -std=gnu11 -Wall -Wextra -Werror -o "$bin" "$PT_SRC/bench/daemon/switch_cost.c" -lm \
  || fail "bench/daemon/switch_cost.c does not build warning-free"
rc=0
out=$("$bin" 3 100 5 2>"$TMPDIR/err") || rc=$?
if [ $rc != 0 ]; then
  grep -q "perf_event_open" "$TMPDIR/err" && skip "perf_event_open refused: $(cat "$TMPDIR/err")"
  cat "$TMPDIR/err" >&2
  fail "switch_cost exited $rc"
fi
echo "$out"
echo "$out" | grep -qE '^switch_cost: 3 rounds of 100 cycles \(epoll_wait 1 ms, then 5 us of CPU\)$' \
  || fail "no header line"
echo "$out" | grep -qE '^  none +[0-9]+\.[0-9]{2} us CPU per cycle \(mean\)$' || fail "no 'none' line"
for m in perf timer count dummy; do
  echo "$out" | grep -qE "^  $m +[0-9]+\.[0-9]{2} us CPU per cycle \(mean\)   vs none: +[-+][0-9]+\.[0-9]{2} \+- [0-9]+\.[0-9]{2} us per cycle$" \
    || fail "no '$m' line with a paired difference"
done
# Bad arguments are refused with the usage line.
if "$bin" 1 >/dev/null 2>"$TMPDIR/usage"; then fail "1 round accepted"; fi
grep -q "^usage: switch_cost" "$TMPDIR/usage" || fail "no usage line for bad arguments"

pp=$TMPDIR/switch_pingpong
cc -O2 -std=gnu11 -Wall -Wextra -Werror -pthread -o "$pp" "$PT_SRC/bench/daemon/switch_pingpong.c" -lm \
  || fail "bench/daemon/switch_pingpong.c does not build warning-free"
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')   # as switch.sh
out=$(taskset -c "$cpu" "$pp" 3 500) || fail "switch_pingpong exited $?"
echo "$out"
echo "$out" | grep -qE '^switch_pingpong: 3 rounds of 500 round trips ' || fail "no ping-pong header line"
echo "$out" | grep -qE '^  none +[0-9]+\.[0-9]{2} us per round trip \(mean\)$' || fail "no ping-pong 'none' line"
for m in perf count dummy; do
  echo "$out" | grep -qE "^  $m +[0-9]+\.[0-9]{2} us per round trip \(mean\)   vs none: +[-+][0-9]+\.[0-9]{2} \+- [0-9]+\.[0-9]{2} us per round trip$" \
    || fail "no ping-pong '$m' line with a paired difference"
done
if "$pp" 1 >/dev/null 2>"$TMPDIR/usage2"; then fail "ping-pong: 1 round accepted"; fi
grep -q "^usage: switch_pingpong" "$TMPDIR/usage2" || fail "no ping-pong usage line"
echo ok
