#!/usr/bin/env bash
# Normal and release binaries contain no profiler: no profiling library or
# its dependencies linked, no profiler symbols, no SIGPROF handler, no
# console port. The profiling build, run the same way, has all of them (so
# this test can fail in both directions).
source "$(dirname "$0")/../lib.sh"

check_static() { # BUILD_DIR
  local b=$1 bin
  for bin in "$b/polytokend" "$b/polytoken"; do
    [ -x "$bin" ] || fail "missing $bin"
    if ldd "$bin" | grep -E 'libdw|libelf|nghttp2|libz\.|libptprof'; then
      fail "$bin links a profiling library"
    fi
    if nm "$bin" 2>/dev/null | grep -E ' (ptprof_|ptp_|ptcon_)'; then
      fail "$bin contains profiler symbols"
    fi
  done
}

check_static "$PT_BUILD_DEV"
check_static "$PT_BUILD_RELEASE"

# The profiling binaries do link them (the check above is not vacuous).
ldd "$PT_BUILD_PROF/polytokend" | grep -q libdw || fail "profiling daemon does not link libdw"
nm "$PT_BUILD_PROF/polytokend" | grep -q ' T ptprof_new' || fail "profiling daemon lacks ptprof_new"

run_daemon() { # BUILD_DIR -> prints "sigprof=<0|1> ports=<list>"
  pt_home
  local port; port=$(free_port)
  export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$port
  start_daemon "$1"
  sleep 0.5  # let a profiling daemon finish starting its threads
  local s=0; sig_caught "$DAEMON_PID" 27 && s=1
  echo "sigprof=$s ports=$(listening_ports "$DAEMON_PID" | tr '\n' ' ') want=$port"
  stop_pid "$DAEMON_PID"
}

for b in "$PT_BUILD_DEV" "$PT_BUILD_RELEASE"; do
  out=$(run_daemon "$b")
  note "$b: $out"
  [[ "$out" == *"sigprof=0"* ]] || fail "$b daemon installed a SIGPROF handler"
  [[ "$out" =~ ports=\ *want ]] || fail "$b daemon listens on a TCP port: $out"
done

out=$(run_daemon "$PT_BUILD_PROF")
note "profile: $out"
[[ "$out" == *"sigprof=1"* ]] || fail "profiling daemon has no SIGPROF handler"
want=${out##*want=}
[[ " ${out#*ports=} " == *" $want "* ]] || fail "profiling daemon does not serve its console on $want"
echo "ok"
