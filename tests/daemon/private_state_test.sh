#!/usr/bin/env bash
# private_state_test.sh - issue 9 item 5 (daemon/TUI/common side), under
# umask 022 with real processes: an existing state root of mode 0755 is
# tightened to 0700 (one log line says so); everything the CLI, the daemon
# and the TUI create below it (logs/, daemon.log, daemon.stderr, tui.log,
# sessions, transcripts, catalog.json, feedback bundles) is 0700 / 0600; an
# existing tui.log of mode 0644 is narrowed to 0600.
# The TUI is the profiling build (only it writes logs/tui.log), the daemon the
# dev build (the sampler library's own snapshot modes are src/prof's, tested
# there), so every file checked here is created by code this test covers.
set -u
PT_TUI_BIN=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytoken
. "$(dirname "$0")/../tui/tui_lib.sh"
export POLYTOKEN_DAEMON=$PT_BUILD_DEV/polytokend
[ -x "$POLYTOKEN_DAEMON" ] || fail "no dev daemon at $POLYTOKEN_DAEMON"
umask 022

chmod 0755 "$POLYTOKEN_HOME"
mkdir -m 0700 "$POLYTOKEN_HOME/logs"  # an older version left tui.log ...
: >"$POLYTOKEN_HOME/logs/tui.log"    # ... and 0644
chmod 0644 "$POLYTOKEN_HOME/logs/tui.log"

# CLI auto-start, a session, a turn, the catalog, a feedback bundle
sid=$("$PT" new --name private) || fail "polytoken new"
"$PT" send --session "$sid" "hello there" >/dev/null || fail "polytoken send"
"$PT" artifacts >/dev/null || fail "polytoken artifacts"
"$PT" feedback send --message "modes" --attach daemon-log >"$TMPDIR/fb.out" || fail "feedback send"

[ "$(stat -c %a "$POLYTOKEN_HOME")" = 700 ] || fail "state root is $(stat -c %a "$POLYTOKEN_HOME"), not 700"
grep -q "state root $(cd "$POLYTOKEN_HOME" && pwd -P) was mode 0755, readable by others; changed it to 0700" \
  "$POLYTOKEN_HOME/logs/daemon.log" || fail "no log line about tightening the state root"
[ "$(grep -c 'changed it to 0700' "$POLYTOKEN_HOME/logs/daemon.log")" = 1 ] || fail "tightening logged more than once"

# The TUI (picker only: no sampler, so no snapshot files) writes tui.log.
port=$(free_port)
tui_start
run_in_pane "umask 022; POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:$port $PT; echo EXIT=\$?"
wait_screen "Polytoken - sessions"
wait_for 20 test -s "$POLYTOKEN_HOME/logs/tui.log" || fail "the TUI wrote nothing to tui.log"
T send-keys q
wait_screen "EXIT=0"

# Everything below the state root is private (the socket is 0600 too).
bad=$(find "$POLYTOKEN_HOME" -mindepth 1 \( -type d -perm /077 -o ! -type d ! -type l -perm /077 \) \
  -printf '%m %p\n')
[ -z "$bad" ] || fail "readable by others under umask 022:
$bad"
for f in logs/daemon.log logs/daemon.stderr logs/tui.log "sessions/$sid/transcript.jsonl" catalog.json; do
  [ -f "$POLYTOKEN_HOME/$f" ] || fail "expected $f to exist"
done
ls -d "$POLYTOKEN_HOME"/feedback/outbox/*/ >/dev/null 2>&1 || fail "no feedback bundle written"

# A fresh state root under umask 022 is created 0700 by the CLI itself.
H2=$TMPDIR/fresh/deeper/home
POLYTOKEN_HOME=$H2 "$PT" daemon start >/dev/null 2>&1 || fail "daemon start in a fresh root"
[ "$(stat -c %a "$H2")" = 700 ] || fail "fresh root is $(stat -c %a "$H2")"
[ "$(stat -c %a "$TMPDIR/fresh/deeper")" = 700 ] || fail "created parent is $(stat -c %a "$TMPDIR/fresh/deeper")"
POLYTOKEN_HOME=$H2 timeout 20 "$PT" daemon stop >/dev/null 2>&1 || fail "daemon stop in the fresh root"
echo PASS
