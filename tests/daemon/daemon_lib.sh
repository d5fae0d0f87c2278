# daemon_lib.sh - shared setup for tests/daemon/*_test.sh (sourced).
# Gives: $T (private temp dir), $POLYTOKEN_HOME, $PD_BIN, start_daemon,
# stop_daemon_signal, wait_gone, pycheck (python3 with ipc_client on the
# path), fail. Every daemon started here is killed on exit (trap).
set -u
: "${PT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${PT_BUILD_DEV:=$PT_SRC/build/dev}"
: "${TMPDIR:=/tmp}"
PD_BIN="${PD_BIN:-$PT_BUILD_DEV/polytokend}"
if [ ! -x "$PD_BIN" ]; then
  echo "SKIP: no polytokend at $PD_BIN (build first)"
  exit 77
fi
# 1 when the daemon under test is a profiling build (tests adapt to it)
if "$PD_BIN" --version | grep -q profiling; then PD_PROFILING=1; else PD_PROFILING=0; fi
export PD_PROFILING
command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }
export PYTHONPATH="$PT_SRC/tests/daemon${PYTHONPATH:+:$PYTHONPATH}"

T=$(mktemp -d "$TMPDIR/pd-XXXXXX")
# Unix socket paths are limited to 107 bytes: fall back to /tmp if needed.
if [ ${#T} -gt 70 ]; then rm -rf "$T"; T=$(mktemp -d /tmp/pd-XXXXXX); fi
export POLYTOKEN_HOME="$T/home"
# Keep the environment of the daemon under test predictable.
unset POLYTOKEN_RESPONDER_CMD POLYTOKEN_FAULT_TRANSCRIPT_WRITE XDG_STATE_HOME
PD_PIDS=()
PD_MOUNTS=()
PD_PID=

pd_cleanup() {
  local rc=$? p m
  for p in "${PD_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${PD_PIDS[@]}"; do wait "$p" 2>/dev/null; done
  for m in "${PD_MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
  # a sanitizer build of the daemon reports on stderr: that fails the test
  if [ -f "$T/daemon.out" ] && grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/daemon.out"; then
    echo "FAIL: sanitizer report from the daemon:"
    grep -E -A30 "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/daemon.out" | head -n 60
    rc=1
  fi
  rm -rf "$T"
  exit $rc
}
trap pd_cleanup EXIT

fail() {
  echo "FAIL: $*"
  if [ -f "$T/daemon.out" ]; then echo "--- daemon output (tail)"; tail -n 40 "$T/daemon.out"; fi
  exit 1
}

# start_daemon [args...]: starts polytokend in the background (env as set),
# waits until its socket accepts. Sets PD_PID.
start_daemon() {
  "$PD_BIN" "$@" >>"$T/daemon.out" 2>&1 &
  PD_PID=$!
  PD_PIDS+=("$PD_PID")
  python3 "$PT_SRC/tests/daemon/ipc_client.py" wait "$POLYTOKEN_HOME" ||
    fail "daemon did not start accepting"
  kill -0 "$PD_PID" 2>/dev/null || fail "daemon exited right after start"
}

# wait_gone PID: waits for the process to exit (up to 30 s) and sets
# PD_STATUS to its exit status; fails if it does not exit.
wait_gone() {
  local pid=$1 i
  for i in $(seq 1 300); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null
      PD_STATUS=$?
      return 0
    fi
    sleep 0.1
  done
  fail "process $pid did not exit"
}

# pycheck: runs python3 reading the script on stdin; fails the test if it fails.
pycheck() {
  python3 - "$@" || fail "python check failed (see above)"
}
