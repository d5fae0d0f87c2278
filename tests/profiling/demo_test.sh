#!/usr/bin/env bash
# `just demo` (scripts/demo.sh), the README's tour of the profiling build,
# as a new user runs it: it ends with a profile that has something to
# show (samples, the functions and the thread names they ran on) and a
# flame graph page that exists. Once its profile held no sample at all.
source "$(dirname "$0")/../lib.sh"
command -v go >/dev/null || skip "go (golang-go) not installed"
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port)
export XDG_CACHE_HOME="$TMPDIR/cache"
out=$TMPDIR/demo.out
bash "$PT_SRC/scripts/demo.sh" >"$out" 2>&1 || { tail -30 "$out" >&2; fail "scripts/demo.sh failed"; }
home=$(sed -n 's/^state root: //p' "$out")
[ -n "$home" ] && [ -d "$home" ] || fail "no state root printed"
trap 'rm -rf "$home"; pt_cleanup' EXIT   # keep lib.sh's cleanup too
grep -Eq '^Duration: .*Total samples = [1-9]' "$out" ||
  { grep -A3 '^Duration' "$out" >&2; fail "the demo's profile has no sample"; }
prof=$(sed -n 's/^profile: //p' "$out")
[ -s "$prof" ] || fail "no profile printed: '$prof'"
# every sample of the loop thread passes through pd_daemon_run (cum column)
go tool pprof -symbolize=none -nodefraction=0 -top "$prof" 2>/dev/null | grep -q ' pd_daemon_run$' ||
  fail "no daemon function in the demo's profile $prof"
sed -n '/^ thread_name:/,/^$/p' "$out" | grep -q ': polytokend$' ||
  { cat "$out" >&2; fail "no thread_name breakdown with the loop thread"; }
page=$(grep -A1 '^an interactive flame graph' "$out" | tail -1)
[[ "$page" == "$home"/profiling/*.html ]] && [ -s "$page" ] || fail "no flame graph page: '$page'"
grep -qi '<html' "$page" || fail "$page is not a page"
echo ok
