# tests/lib.sh - helpers for integration tests (source it).
# Every test gets PT_SRC, PT_BUILD_DEV, PT_BUILD_PROF, PT_BUILD_RELEASE from
# scripts/test.sh; these defaults serve manual runs from the source tree.
: "${PT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${PT_BUILD_DEV:=$PT_SRC/build/dev}"
: "${PT_BUILD_PROF:=$PT_SRC/build/profile}"
: "${PT_BUILD_RELEASE:=$PT_SRC/build/release}"
: "${TMPDIR:=/tmp}"
export PT_SRC PT_BUILD_DEV PT_BUILD_PROF PT_BUILD_RELEASE TMPDIR

PT_PIDS=()

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "$*"; exit 77; }
note() { echo "# $*"; }

# wait_for TIMEOUT_S CMD...: polls CMD every 50 ms until it succeeds.
wait_for() {
  local limit=$1; shift
  local end=$((SECONDS + limit))
  while ! "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $end ] && return 1
    sleep 0.05
  done
}

# pt_unwrap [SEP]: stdin's rows (a captured screen whose text the TUI
# wrapped) with their leading and trailing blanks dropped, joined by SEP
# (none by default: a word or path cut at the edge; ' ' for text broken
# between words, where the wrap dropped the space). One line out.
pt_unwrap() { sed 's/^ *//; s/ *$//' | awk -v sep="${1:-}" '{ printf "%s%s", (NR > 1 ? sep : ""), $0 } END { print "" }'; }

# pt_home: a fresh POLYTOKEN_HOME below $TMPDIR, exported.
pt_home() {
  POLYTOKEN_HOME=$(mktemp -d "$TMPDIR/home.XXXXXX")
  export POLYTOKEN_HOME
}

# free_port: a TCP port on 127.0.0.1 nobody listens on right now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_daemon BUILD_DIR [args]: starts polytokend in the background for
# $POLYTOKEN_HOME and waits until its socket exists. Sets DAEMON_PID.
start_daemon() {
  local build=$1; shift
  "$build/polytokend" --home "$POLYTOKEN_HOME" "$@" >"$POLYTOKEN_HOME/daemon.out" 2>&1 &
  DAEMON_PID=$!
  PT_PIDS+=("$DAEMON_PID")
  wait_for 20 test -S "$POLYTOKEN_HOME/daemon.sock" ||
    { cat "$POLYTOKEN_HOME/daemon.out" >&2; fail "daemon did not create its socket"; }
}

# stop_pid PID: SIGTERM, wait up to 20 s, then SIGKILL.
stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  local end=$((SECONDS + 20))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -ge $end ] && { kill -KILL "$pid" 2>/dev/null; break; }
    sleep 0.05
  done
  wait "$pid" 2>/dev/null || true
}

pt_cleanup() {
  local p
  for p in "${PT_PIDS[@]}"; do stop_pid "$p"; done
  [ -n "${PT_TMUX:-}" ] && tmux -L "$PT_TMUX" kill-server 2>/dev/null
  return 0
}
trap pt_cleanup EXIT

# sig_caught PID SIGNUM: true if the process has a handler for SIGNUM.
sig_caught() {
  local mask
  mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status")
  [ -n "$mask" ] && (( (16#$mask >> ($2 - 1)) & 1 ))
}

# listening_ports PID: TCP ports (decimal) the process listens on.
listening_ports() {
  local pid=$1 inodes line
  inodes=" $(ls -l "/proc/$pid/fd" 2>/dev/null | sed -nE 's/.*socket:\[([0-9]+)\].*/\1/p' | tr '\n' ' ') "
  [ "$inodes" = "  " ] && return 0
  # /proc/net/tcp: "sl local_address rem_address st ... inode"; st 0A = LISTEN
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _ local _ st _ _ _ _ _ inode _; do
    [ "$st" = 0A ] || continue
    [[ "$inodes" == *" $inode "* ]] || continue
    echo $((16#${local##*:}))
  done
}
