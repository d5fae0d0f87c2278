#!/usr/bin/env bash
# `polytoken profile dump` in the profiling build: starts the daemon if
# needed, asks it for profile.dump and prints the path of a gzip'd pprof file.
# (The normal build's one-line refusal is checked in cli_test.sh.)
: "${PT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${PT_BUILD_PROF:=$PT_SRC/build/profile}"
[ -x "$PT_BUILD_PROF/polytoken" ] || { echo "no profiling build at $PT_BUILD_PROF"; exit 77; }
PT_TUI_BIN=$PT_BUILD_PROF/polytoken
. "$(dirname "$0")/tui_lib.sh"

"$PT" --version | grep -q "(profiling build)" || fail "not a profiling build: $("$PT" --version)"
"$PT" profile dump --help | grep -q "usage: polytoken profile dump" || fail "profile dump --help"
path=$("$PT" profile dump 2>"$TMPDIR/err") || fail "profile dump failed: $(cat "$TMPDIR/err")"
[ "$(printf '%s\n' "$path" | wc -l)" -eq 1 ] || fail "expected one line, got: $path"
case $path in /*.pb.gz) ;; *) fail "not an absolute .pb.gz path: $path" ;; esac
[ -s "$path" ] || fail "dump file missing or empty: $path"
[ "$(head -c 2 "$path" | od -An -tx1 | tr -d ' ')" = "1f8b" ] || fail "not gzip: $path"
gzip -t "$path" || fail "corrupt gzip: $path"
note "dump: $path"
echo ok
