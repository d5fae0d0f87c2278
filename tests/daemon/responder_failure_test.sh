#!/usr/bin/env bash
# A responder that crashes (non-zero exit, signal) or hangs (no output for
# POLYTOKEN_RESPONDER_TIMEOUT_MS) gives a clear error in the conversation
# (an "error" transcript entry, turn.done status "error") and the session
# stays usable.
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_CMD="python3 '$PT_SRC/tests/daemon/responder.py'"
export POLYTOKEN_RESPONDER_TIMEOUT_MS=700
start_daemon
pycheck <<'PY'
import json, os
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
c = Client(home); c.hello()
s = c.ok("sessions.create", {})["session"]["id"]
def turn(text):
    t = c.ok("turn.send", {"session": s, "text": text})["turn_id"]
    return c.wait_turn(s, t)[1:]
def last():
    return [json.loads(l) for l in open(f"{home}/sessions/{s}/transcript.jsonl")][-1]

text, done = turn("crash")
assert done["status"] == "error", done
assert "exit status 3" in done["error"] and "boom: simulated crash" in done["error"], done
assert last()["role"] == "error" and last()["text"] == done["error"], last()

text, done = turn("segv")
assert done["status"] == "error" and "signal 11" in done["error"] and "SIGSEGV" in done["error"], done
assert text == "partial ", repr(text)
assert last()["role"] == "error"

text, done = turn("hang")
assert done["status"] == "error" and "timed out" in done["error"] and "700 ms" in done["error"], done
assert last()["role"] == "error"

# still usable
text, done = turn("fine now")
assert done["status"] == "ok" and text == "you said: fine now ", (text, done)
assert last()["role"] == "assistant"
PY
# the hung responder was killed, not left behind
pgrep -f "$PT_SRC/tests/daemon/responder.py" && fail "a responder process survived"
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
echo PASS
