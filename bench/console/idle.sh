#!/usr/bin/env bash
# bench/console/idle.sh - CPU an idle console costs (issue 9 item 12): starts
# the profiling TUI in tmux (it auto-starts the profiling daemon), leaves both
# idle with defaults (no console client), and measures over SECONDS the CPU
# time of the `ptcon-server` thread of each (ns from
# /proc/PID/task/TID/schedstat) and of the whole process (utime+stime).
# Consoles bind 127.0.0.1:0 so that runs do not clash with other programs.
#   usage: bench/console/idle.sh [BUILD_DIR] [SECONDS]   (default build/profile, 60)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build/profile}" && pwd)
SECS=${2:-60}
[ -x "$BUILD/polytoken" ] || { echo "no $BUILD/polytoken (bash scripts/build.sh profile)" >&2; exit 2; }
HOME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ptcon-idle.XXXXXX")
SOCK="ptcon-idle-$$"
cleanup() {
  tmux -L "$SOCK" kill-server 2>/dev/null || true
  if [ -n "${DPID:-}" ] && kill "$DPID" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done   # its final snapshot
  fi
  rm -rf "$HOME_DIR"
}
trap cleanup EXIT
export POLYTOKEN_HOME=$HOME_DIR POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:0 POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:0
tmux -L "$SOCK" new-session -d -x 120 -y 40 \
  "env POLYTOKEN_HOME=$HOME_DIR POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:0 POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:0 $BUILD/polytoken"
for _ in $(seq 200); do
  TPID=$(pgrep -n -f "^$BUILD/polytoken\$" || true)
  DPID=$(pgrep -n -f "polytokend --home $HOME_DIR" || true)
  [ -n "$TPID" ] && [ -n "$DPID" ] && break
  sleep 0.1
done
[ -n "$TPID" ] && [ -n "$DPID" ] || { echo "TUI or daemon did not start" >&2; exit 1; }
sleep 5   # start-up done
thread_ns() { # PID NAME -> ns on CPU of that thread (sum if several)
  local t s=0
  for t in /proc/"$1"/task/*; do
    [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ] && s=$((s + $(cut -d' ' -f1 "$t/schedstat")))
  done
  echo "$s"
}
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
t0=$(thread_ns "$TPID" ptcon-server); d0=$(thread_ns "$DPID" ptcon-server)
tp0=$(proc_ticks "$TPID"); dp0=$(proc_ticks "$DPID")
sleep "$SECS"
t1=$(thread_ns "$TPID" ptcon-server); d1=$(thread_ns "$DPID" ptcon-server)
tp1=$(proc_ticks "$TPID"); dp1=$(proc_ticks "$DPID")
hz=$(getconf CLK_TCK)
per_min() { awk -v v="$1" -v s="$SECS" 'BEGIN { printf "%.2f", v * 60 / s }'; }
echo "== idle ${SECS} s, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "daemon ptcon-server thread: $(per_min "$(( (d1 - d0) / 1000 ))") us CPU per minute; whole daemon: $(per_min "$(( (dp1 - dp0) * 1000 / hz ))") ms per minute"
echo "TUI    ptcon-server thread: $(per_min "$(( (t1 - t0) / 1000 ))") us CPU per minute; whole TUI: $(per_min "$(( (tp1 - tp0) * 1000 / hz ))") ms per minute"
