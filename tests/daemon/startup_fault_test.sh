#!/usr/bin/env bash
# A daemon whose libuv setup fails part way (the shutdown trigger and
# timer, the SIGTERM and SIGINT watchers; POLYTOKEN_FAULT_DAEMON_START=<step>,
# test builds only, as if libuv had run out of descriptors) says which on
# stderr and exits 1 without listening; the next daemon starts normally.
source "$(dirname "$0")/daemon_lib.sh"
grep -q '^#define PT_FAULT_INJECTION 1' "$(dirname "$PD_BIN")/pt_config.h" ||
  { echo "SKIP: built without -Dfault_injection"; exit 77; }

n=0
while read -r step what; do
  n=$((n + 1))
  rc=0
  out=$(POLYTOKEN_FAULT_DAEMON_START=$step timeout 20 "$PD_BIN" 2>&1) || rc=$?
  [ "$rc" = 1 ] || fail "$step: exit status $rc, not 1: $out"
  echo "$out" | grep -qF "polytokend: cannot set up $what: too many open files" ||
    fail "$step: no clear error naming $what: $out"
  [ -e "$POLYTOKEN_HOME/daemon.sock" ] && fail "$step: a socket was left behind"
done <<'STEPS'
async the shutdown trigger
timer the shutdown timer
sigterm the SIGTERM watcher
sigterm-start the SIGTERM watcher
sigint the SIGINT watcher
sigint-start the SIGINT watcher
STEPS

# without a fault the daemon starts and stops as usual
start_daemon
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
[ "$PD_STATUS" = 0 ] || fail "exit status $PD_STATUS"
echo "PASS: $n setup failures reported"
