#!/usr/bin/env bash
# daemon_engine_test.sh - the sampling engine of the profiling daemon
# (pd_profiling.c, POLYTOKEN_PROFILE_ENGINE; docs/profiling.md): with the
# default (auto) the daemon's log line and every snapshot's first comment
# name the same engine, and that is perf_event exactly when this machine
# lets a process open a task-clock event on itself (checked independently
# with `perf stat -e task-clock` when perf is installed); with
# POLYTOKEN_PROFILE_ENGINE=timer both say CPU-time timer; an unknown value is
# refused with a warning in the log and the default runs. The snapshots
# are read with go tool pprof -comments. Skips (77) only without go.
source "$(dirname "$0")/../lib.sh"
B=$PT_BUILD_PROF
[ -x "$B/polytokend" ] || fail "no profiling build at $B"
command -v go >/dev/null || skip "go (golang-go) not installed"

# run_one VALUE: a daemon with POLYTOKEN_PROFILE_ENGINE=VALUE (unset when
# empty), a manual dump; sets LOG (daemon log) and COMMENT (the
# snapshot's "sampler engine:" comment).
run_one() {
  pt_home
  export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port)
  if [ -n "$1" ]; then export POLYTOKEN_PROFILE_ENGINE=$1; else unset POLYTOKEN_PROFILE_ENGINE; fi
  start_daemon "$B"
  local dump
  dump=$("$B/polytoken" profile dump) || fail "polytoken profile dump ($1)"
  COMMENT=$(go tool pprof -comments "$dump" 2>&1 | grep '^sampler engine: ') ||
    fail "no engine comment in $dump ($1)"
  "$B/polytoken" daemon stop >/dev/null || fail "daemon stop ($1)"
  wait_for 30 bash -c "! kill -0 $DAEMON_PID" || fail "daemon did not exit ($1)"
  LOG=$(cat "$POLYTOKEN_HOME/logs/daemon.log")
}

run_one ""
if echo "$COMMENT" | grep -q '^sampler engine: perf_event task-clock'; then
  echo "$LOG" | grep -q 'profiling: sampling at 99 Hz (perf_event engine)' ||
    fail "snapshot says perf_event, the log does not: $(echo "$LOG" | grep 'sampling at')"
  auto=perf
else
  echo "$COMMENT" | grep -q '^sampler engine: POSIX CPU-time timer per thread, 99 Hz (perf_event unavailable: ' ||
    fail "auto chose the timer engine without saying why: $COMMENT"
  echo "$LOG" | grep -q 'profiling: sampling at 99 Hz (CPU-time timer engine)' ||
    fail "snapshot says timer, the log does not: $(echo "$LOG" | grep 'sampling at')"
  auto=timer
fi
if command -v perf >/dev/null; then
  if perf stat -e task-clock -- true >/dev/null 2>&1; then want=perf; else want=timer; fi
  [ "$auto" = "$want" ] || fail "auto chose $auto, but perf stat says task-clock events are $( [ $want = perf ] && echo allowed || echo refused)"
fi

run_one timer
echo "$COMMENT" | grep -q '^sampler engine: POSIX CPU-time timer per thread, 99 Hz;' ||
  fail "POLYTOKEN_PROFILE_ENGINE=timer: $COMMENT"
echo "$LOG" | grep -q 'profiling: sampling at 99 Hz (CPU-time timer engine)' ||
  fail "POLYTOKEN_PROFILE_ENGINE=timer: log says $(echo "$LOG" | grep 'sampling at')"

run_one bogus
echo "$LOG" | grep -q 'ignoring POLYTOKEN_PROFILE_ENGINE=bogus (expected auto, perf or timer)' ||
  fail "no warning for POLYTOKEN_PROFILE_ENGINE=bogus"
if [ "$auto" = perf ]; then
  echo "$COMMENT" | grep -q '^sampler engine: perf_event task-clock' || fail "bogus value did not run the default: $COMMENT"
else
  echo "$COMMENT" | grep -q '^sampler engine: POSIX CPU-time timer' || fail "bogus value did not run the default: $COMMENT"
fi
echo ok
