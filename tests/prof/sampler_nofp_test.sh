#!/usr/bin/env bash
# sampler_nofp_test.sh - the real daemon (libuv event loop; libuv and jansson
# are Debian builds without frame pointers) profiled at 999 Hz: after a
# warm-up window (the first samples through each such library ask for its
# unwind table and stay truncated), the measured window's samples must
# almost all be complete: under 10 % below the "[truncated]" root, and the
# event loop (uv_run) and the daemon's callbacks (pd_*) appear as callers,
# and the profile's comment says libuv's and jansson's tables were built.
# Before lazy unwind tables about half of this workload's samples were cut
# right above a [libuv.so.1] frame.
set -euo pipefail
: "${PT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${PT_BUILD_PROF:=$PT_SRC/build/profile}"
export PT_BUILD_PROF
# shellcheck source=../lib.sh
source "$PT_SRC/tests/lib.sh"
B=$PT_BUILD_PROF
[ -x "$B/polytokend" ] && [ -x "$B/polytoken" ] || fail "no profiling build in $B"
command -v go >/dev/null || skip "go (golang-go) not installed"

pt_home
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port)
export POLYTOKEN_PROFILE_HZ=999 POLYTOKEN_RESPONDER_DELAY_MS=1
start_daemon "$B"
sid=$("$B/polytoken" new) || fail "polytoken new failed"
msg=$(head -c 3000 "$PT_SRC/docs/daemon.md")
send_n() {
  local i
  for i in $(seq 1 "$1"); do
    "$B/polytoken" send --session "$sid" "$msg $i" >/dev/null || fail "send $i failed"
  done
}

send_n 15
warm=$("$B/polytoken" profile dump) || fail "profile dump (warm-up) failed"
send_n 40
prof=$("$B/polytoken" profile dump) || fail "profile dump failed"
[ -s "$prof" ] || fail "no profile at '$prof'"
stop_pid "$DAEMON_PID"

top() { go tool pprof -symbolize=none -nodefraction=0 -top "$1" 2>/dev/null; }
# "Total samples = 113.11ms" and the cum column of the [truncated] node
total_ms() { top "$1" | sed -nE 's/.*Total samples = ([0-9.]+)(m?s).*/\1 \2/p' |
             awk '{print ($2 == "s") ? $1 * 1000 : $1}'; }
trunc_ms() { top "$1" | awk '$NF == "[truncated]" {v = $4; u = v; sub(/[0-9.]+/, "", u);
             sub(/[a-z]+$/, "", v); print (u == "s") ? v * 1000 : v; f = 1} END {if (!f) print 0}'; }
wt=$(total_ms "$warm"); wx=$(trunc_ms "$warm")
t=$(total_ms "$prof"); x=$(trunc_ms "$prof")
note "warm-up window: $wx of $wt ms under [truncated]"
note "measured window: $x of $t ms under [truncated]"
awk -v t="$t" 'BEGIN {exit !(t >= 20)}' || fail "too few samples ($t ms) to judge"
awk -v t="$t" -v x="$x" 'BEGIN {exit !(x * 10 < t)}' ||
  fail "$x of $t ms truncated (>= 10 %)"

# The profile's comment on the unwind tables: at least libuv's was built on
# demand (the daemon's loop runs in it; which other libraries get sampled,
# jansson for one, depends on the workload), none refused.
line=$(top "$prof" | grep -m1 '^unwind tables:' || true)
note "$line"
built=$(sed -nE 's/.* ([0-9]+) tables built for non-system objects.*/\1/p' <<<"$line")
[ -n "$built" ] || fail "no 'unwind tables' comment in the profile"
[ "$built" -ge 1 ] || fail "no table built on demand (want at least libuv's)"
grep -q ' 0 failed' <<<"$line" || fail "a table failed: $line"

traces=$(go tool pprof -symbolize=none -traces "$prof" 2>/dev/null)
grep -q ' uv_run$' <<<"$traces" || fail "uv_run is not a caller in any stack"
# a daemon callback called from libuv: "pd_..." or a static callback of
# src/daemon, directly above a libuv frame
# (grep -q ends early: no pipe into it under pipefail)
above=$(grep -A1 -E '^ +[a-z_]*(_cb|pd_[a-z_]*)( \(inline\))?$' <<<"$traces" || true)
grep -q 'libuv' <<<"$above" || fail "no daemon callback directly above a libuv frame"
grep -qE '^ +pd_[a-z_]+' <<<"$traces" || fail "no pd_* function in the stacks"
echo "ok"
