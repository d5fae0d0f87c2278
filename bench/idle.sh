#!/usr/bin/env bash
# bench/idle.sh - what an idle profiling build costs (issue 9 item 12): the
# profiling daemon and a profiling TUI sitting in a session's conversation
# screen (so both samplers run, both consoles listen), with default settings
# (99 Hz, a periodic snapshot every 60 s, console history 60 s), no console
# client and no typing. Measures, over SECONDS after a 5 s settle, the CPU of
# each whole process: utime+stime from /proc/PID/stat (counts threads that
# ended too, 10 ms ticks) and the sum of every live thread's schedstat (ns).
# Prints ms of CPU per minute. Run it for at least 120 s so periodic
# snapshots are inside the window in their real proportion.
#   usage: bench/idle.sh [BUILD_DIR] [SECONDS]   (default build/profile, 120)
# Consoles bind 127.0.0.1:0 so runs do not clash with anything else.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build/profile}" && pwd)
SECS=${2:-120}
[ -x "$BUILD/polytoken" ] || { echo "no $BUILD/polytoken (bash scripts/build.sh profile)" >&2; exit 2; }
HOME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/pt-idle.XXXXXX")
SOCK="pt-idle-$$"
export POLYTOKEN_HOME=$HOME_DIR POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:0 \
       POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:0
cleanup() {
  tmux -L "$SOCK" kill-server 2>/dev/null || true
  "$BUILD/polytoken" daemon stop >/dev/null 2>&1 || true
  rm -rf "$HOME_DIR"
}
trap cleanup EXIT
sid=$("$BUILD/polytoken" new --name idle)
tmux -L "$SOCK" new-session -d -x 120 -y 40 \
  "env POLYTOKEN_HOME=$HOME_DIR POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:0 POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:0 $BUILD/polytoken attach $sid"
TPID="" DPID=""
for _ in $(seq 200); do
  TPID=$(pgrep -n -f "^$BUILD/polytoken attach $sid\$" || true)
  DPID=$(pgrep -n -f "polytokend --home $HOME_DIR" || true)
  [ -n "$TPID" ] && [ -n "$DPID" ] && break
  sleep 0.1
done
[ -n "$TPID" ] && [ -n "$DPID" ] || { echo "TUI or daemon did not start" >&2; exit 1; }
sleep 5
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sched() { local t s=0; for t in /proc/"$1"/task/*; do s=$((s + $(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0))); done; echo "$s"; }
dt0=$(ticks "$DPID"); tt0=$(ticks "$TPID"); ds0=$(sched "$DPID"); ts0=$(sched "$TPID")
sleep "$SECS"
dt1=$(ticks "$DPID"); tt1=$(ticks "$TPID"); ds1=$(sched "$DPID"); ts1=$(sched "$TPID")
hz=$(getconf CLK_TCK)
per_min_ticks() { awk -v v="$1" -v hz="$hz" -v s="$SECS" 'BEGIN { printf "%.1f", v * 1000 / hz * 60 / s }'; }
per_min_ns() { awk -v v="$1" -v s="$SECS" 'BEGIN { printf "%.1f", v / 1e6 * 60 / s }'; }
snaps=$(find "$HOME_DIR" -name '*.pb.gz' | wc -l)
echo "== idle ${SECS} s, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), snapshots written so far: $snaps"
echo "daemon: $(per_min_ticks $((dt1 - dt0))) ms CPU per minute (stat ticks), $(per_min_ns $((ds1 - ds0))) ms (schedstat of live threads)"
echo "TUI:    $(per_min_ticks $((tt1 - tt0))) ms CPU per minute (stat ticks), $(per_min_ns $((ts1 - ts0))) ms (schedstat of live threads)"
