#!/usr/bin/env bash
# Normal and release binaries contain no profiler: no profiling library or
# its dependencies linked, no profiler symbols, no SIGPROF handler, no
# console port. The profiling build, run the same way, has all of them (so
# this test can fail in both directions).
# zlib is not a profiling library: every build links it (src/common's
# gunzip of profile snapshots for the feedback review). libcurl is linked
# only into what uploads: polytoken, never polytokend.
source "$(dirname "$0")/../lib.sh"

needed() { readelf -d "$1" | grep NEEDED; }

check_static() { # BUILD_DIR
  local b=$1 bin
  for bin in "$b/polytokend" "$b/polytoken"; do
    [ -x "$bin" ] || fail "missing $bin"
    # Direct dependencies (DT_NEEDED): libcurl itself pulls in nghttp2,
    # which is libcurl's business; our binaries must not ask for it.
    if needed "$bin" | grep -E 'libdw|libelf|nghttp2|libptprof'; then
      fail "$bin links a profiling library"
    fi
    if ldd "$bin" | grep -E 'libdw|libelf|libptprof'; then
      fail "$bin loads libdw, libelf or libptprof"
    fi
    if nm "$bin" 2>/dev/null | grep -E ' (ptprof_|ptp_|ptcon_)'; then
      fail "$bin contains profiler symbols"
    fi
  done
}

check_static "$PT_BUILD_DEV"
check_static "$PT_BUILD_RELEASE"

# curl only where it uploads, in every build, the profiling one too: not on
# the daemon's link line at all (build.ninja; --as-needed would hide an
# unused -lcurl from DT_NEEDED), and polytoken needs it and zlib.
link_args() { # BUILD_DIR TARGET: the link line meson wrote for TARGET
  awk -v t="build $2:" 'index($0, t) == 1 { f = 1; next } f && /^ LINK_ARGS = / { print; exit }' \
    "$1/build.ninja"
}
for b in "$PT_BUILD_DEV" "$PT_BUILD_RELEASE" "$PT_BUILD_PROF"; do
  la=$(link_args "$b" polytokend)
  [ -n "$la" ] || fail "no link line for polytokend in $b/build.ninja"
  [[ "$la" == *libptcommon.a* ]] || fail "link line of polytokend not found right: $la"
  [[ "$la" == *curl* || "$la" == *feedbackupload* ]] && fail "polytokend's link line in $b has libcurl: $la"
  needed "$b/polytokend" | grep -c libcurl >/dev/null && fail "$b/polytokend links libcurl"
  [[ "$(link_args "$b" polytoken)" == *libcurl* ]] || fail "polytoken's link line in $b has no libcurl"
  needed "$b/polytoken" | grep -c libcurl >/dev/null || fail "$b/polytoken does not link libcurl (feedback upload)"
  needed "$b/polytoken" | grep -c 'libz[.]' >/dev/null || fail "$b/polytoken does not link zlib"
done

# The profiling binaries do link them (the check above is not vacuous).
readelf -d "$PT_BUILD_PROF/polytokend" | grep NEEDED | grep -q libdw || fail "profiling daemon does not link libdw"
nm "$PT_BUILD_PROF/polytokend" | grep -q ' T ptprof_new' || fail "profiling daemon lacks ptprof_new"

# Readiness, not sleeps: a daemon that answers `daemon status` runs its
# loop, so every start-up step (profiling and console included: main.c runs
# them before it listens) is done; a SIGPROF handler or port missing then is
# missing for good. The profiling daemon's are waited for (positive check).
run_daemon() { # BUILD_DIR WANT(0|1) -> prints "sigprof=<0|1> ports=<list>"
  pt_home
  local port; port=$(free_port)
  export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$port
  start_daemon "$1"
  "$1/polytoken" daemon status >/dev/null || fail "$1 daemon does not answer daemon status"
  [ "$2" = 1 ] && { wait_for 10 sig_caught "$DAEMON_PID" 27 || true; }
  local s=0; sig_caught "$DAEMON_PID" 27 && s=1
  echo "sigprof=$s ports=$(listening_ports "$DAEMON_PID" | tr '\n' ' ') want=$port"
  stop_pid "$DAEMON_PID"
}

for b in "$PT_BUILD_DEV" "$PT_BUILD_RELEASE"; do
  out=$(run_daemon "$b" 0)
  note "$b: $out"
  [[ "$out" == *"sigprof=0"* ]] || fail "$b daemon installed a SIGPROF handler"
  [[ "$out" =~ ports=\ *want ]] || fail "$b daemon listens on a TCP port: $out"
done

out=$(run_daemon "$PT_BUILD_PROF" 1)
note "profile: $out"
[[ "$out" == *"sigprof=1"* ]] || fail "profiling daemon has no SIGPROF handler"
want=${out##*want=}
[[ " ${out#*ports=} " == *" $want "* ]] || fail "profiling daemon does not serve its console on $want"

# The TUI likewise: in the session picker of a normal build no SIGPROF
# handler and no port; the profiling TUI serves its console from the start.
# The picker on screen is the readiness marker: main.c runs the profiling
# start-up before the loop that draws it.
command -v tmux >/dev/null || skip "tmux missing"
PT_TMUX=noprof-$$
run_tui() { # BUILD_DIR -> "sigprof=.. ports=.. want=.."
  pt_home
  local port; port=$(free_port)
  tmux -L "$PT_TMUX" -f /dev/null new-session -d -x 100 -y 30 \
    "env POLYTOKEN_HOME='$POLYTOKEN_HOME' POLYTOKEN_DAEMON='$1/polytokend' POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:$port POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port) '$1/polytoken'"
  wait_for 20 bash -c "tmux -L '$PT_TMUX' capture-pane -p | grep -q 'sessions'" || fail "TUI of $1 did not show the picker"
  local pid; pid=$(pgrep -f "^$1/polytoken\$" | head -1)
  [ -n "$pid" ] || fail "no TUI process for $1"
  local s=0; sig_caught "$pid" 27 && s=1
  echo "sigprof=$s ports=$(listening_ports "$pid" | tr '\n' ' ') want=$port"
  tmux -L "$PT_TMUX" kill-server
  "$1/polytoken" daemon stop >/dev/null 2>&1 || true
}
for b in "$PT_BUILD_DEV" "$PT_BUILD_RELEASE"; do
  out=$(run_tui "$b")
  note "TUI $b: $out"
  [[ "$out" == *"sigprof=0"* ]] || fail "$b TUI installed a SIGPROF handler"
  [[ "$out" =~ ports=\ *want ]] || fail "$b TUI listens on a TCP port: $out"
done
out=$(run_tui "$PT_BUILD_PROF")
note "TUI profile: $out"
want=${out##*want=}
[[ " ${out#*ports=} " == *" $want "* ]] || fail "profiling TUI does not serve its console on $want"
echo "ok"
