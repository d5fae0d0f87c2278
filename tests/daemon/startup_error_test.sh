#!/usr/bin/env bash
# startup_error_test.sh - issue 9 item 7: a daemon that dies at start tells
# the CLI why. (1) On a real full disk (a tmpfs filled to the last byte;
# root only), where logs/daemon.stderr cannot take a byte, `polytoken new`
# must print the daemon's own first error line, not just "exited during
# startup". (2) Anywhere: a state root path too long for the daemon's limit
# is refused with a clear error naming the limit, never cut short.
source "$(dirname "$0")/daemon_lib.sh"
CLI=$PT_BUILD_DEV/polytoken
[ -x "$CLI" ] || fail "no CLI at $CLI"
export POLYTOKEN_DAEMON=$PD_BIN POLYTOKEN_START_TIMEOUT_MS=15000

# (2) overlong state root: daemon and CLI both refuse it with the reason
long=$T/$(printf 'd%.0s' $(seq 1 250))
for i in $(seq 1 16); do long=$long/$(printf 'e%.0s' $(seq 1 250)); done
out=$("$PD_BIN" --home "$long" 2>&1) && fail "daemon accepted a ${#long}-byte state root"
echo "$out" | grep -q "over the limit of 3840" || fail "daemon: no clear overlong-root error: $out"
out=$(POLYTOKEN_HOME=$long "$CLI" sessions 2>&1) && fail "CLI accepted a ${#long}-byte state root"
echo "$out" | grep -q "over the limit of 3840" || fail "CLI: no clear overlong-root error: $out"
[ -e "${long%%/e*}" ] && fail "something was created for the overlong root"

# (1) full disk
H=$T/small
mkdir -p "$H"
if ! mount -t tmpfs -o size=128k tmpfs "$H" 2>/dev/null; then
  echo "note: cannot mount a tmpfs here; full-disk part skipped"
  echo PASS
  exit 0
fi
PD_MOUNTS+=("$H")
export POLYTOKEN_HOME=$H/home
mkdir -p "$POLYTOKEN_HOME/logs"
python3 - "$H/filler" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
for step in (65536, 4096, 512, 64, 1):
    while True:
        try:
            if os.write(fd, b"\0" * step) < step: break
        except OSError:
            break
os.close(fd)
PY
out=$("$CLI" new --name full 2>&1) && fail "the daemon started on a full disk?"
echo "$out" | grep -q "exited during startup: polytokend: " ||
  fail "CLI did not print the daemon's own error: $out"
echo "$out" | grep -q "No space left on device" || fail "the daemon's reason is not in: $out"
echo "CLI said: $out"
rm -f "$H/filler"
# space back: the same command now works
sid=$("$CLI" new --name full) || fail "polytoken new after freeing space"
pid=$("$CLI" daemon status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
PD_PIDS+=("$pid")
timeout 20 "$CLI" daemon stop >/dev/null || fail "daemon stop"
echo PASS
