#!/usr/bin/env bash
# Test-only fault injection (POLYTOKEN_FAULT_*, pd_transcript.c) is compiled only
# with -Dfault_injection=true, which scripts/build.sh sets for the test
# variants and never for release: the release daemon holds no
# POLYTOKEN_FAULT string, the dev daemon does (so the check is not vacuous),
# and the release daemon ignores the variable (a write still succeeds).
source "$(dirname "$0")/../lib.sh"
rel="$PT_BUILD_RELEASE/polytokend" dev="$PT_BUILD_DEV/polytokend"
[ -x "$rel" ] && [ -x "$dev" ] || fail "build dev and release first"
if strings "$rel" | grep POLYTOKEN_FAULT; then fail "release polytokend contains fault injection"; fi
strings "$dev" | grep -q POLYTOKEN_FAULT_TRANSCRIPT_WRITE || fail "dev polytokend lacks fault injection"
strings "$dev" | grep -q POLYTOKEN_FAULT_SESSION_CREATE || fail "dev polytokend lacks the sessions.create stop"
# The CLI's too (the TUI's start steps, the feedback writer's stops).
if strings "$PT_BUILD_RELEASE/polytoken" | grep POLYTOKEN_FAULT; then fail "release polytoken contains fault injection"; fi
strings "$PT_BUILD_DEV/polytoken" | grep -q POLYTOKEN_FAULT_FEEDBACK_WRITE || fail "dev polytoken lacks the feedback writer's stop"
grep -q 'PT_FAULT_INJECTION 0' "$PT_BUILD_RELEASE/pt_config.h" || fail "release pt_config.h enables fault injection"
# Likewise the allocation countdown of src/common's parsers (pt_alloc.h).
nm "$PT_BUILD_RELEASE/polytoken" | grep -c ' T pt_alloc_fail_at' >/dev/null && fail "release polytoken has the allocation countdown"
nm "$PT_BUILD_DEV/polytoken" | grep -c ' T pt_alloc_fail_at' >/dev/null || fail "dev polytoken lacks the allocation countdown"

# Behaviour: with the variable set, the release daemon's first append works.
pt_home
POLYTOKEN_FAULT_TRANSCRIPT_WRITE=ENOSPC start_daemon "$PT_BUILD_RELEASE"
PYTHONPATH="$PT_SRC/tests/daemon" python3 - <<'PY' || fail "release daemon honoured POLYTOKEN_FAULT_TRANSCRIPT_WRITE"
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
sid = c.call("sessions.create", {"name": "nofault"})["result"]["session"]["id"]
r = c.call("turn.send", {"session": sid, "text": "this must be written"})
assert "error" not in r, r
PY
grep -q "fault injection" "$POLYTOKEN_HOME/logs/daemon.log" && fail "release daemon logged fault injection"
stop_pid "$DAEMON_PID"
echo ok
