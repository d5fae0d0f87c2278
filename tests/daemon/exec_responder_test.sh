#!/usr/bin/env bash
# A turn with an external responder command: the conversation arrives as JSON
# on its stdin, its stdout streams back as deltas, UTF-8 is repaired, and a
# cancelled turn kills the command's whole process group.
source "$(dirname "$0")/daemon_lib.sh"
export RESP_DIR="$T/resp"
mkdir -p "$RESP_DIR"
export POLYTOKEN_RESPONDER_CMD="python3 '$PT_SRC/tests/daemon/responder.py'"
start_daemon
pycheck <<'PY'
import json, os, time
from ipc_client import Client
home, rd = os.environ["POLYTOKEN_HOME"], os.environ["RESP_DIR"]
c = Client(home); c.hello()
s = c.ok("sessions.create", {"name": "ext"})["session"]["id"]
t = c.ok("turn.send", {"session": s, "text": "hello there"})["turn_id"]
evs, text, done = c.wait_turn(s, t)
assert done["status"] == "ok", done
assert text == "you said: hello there ", repr(text)
assert [e["event"] for e in evs].count("turn.delta") >= 2   # streamed in chunks
inp = json.load(open(rd + "/last_input.json"))
assert inp["session"] == s and inp["messages"] == [{"role": "user", "text": "hello there"}], inp
# second turn: the responder sees the whole conversation
t = c.ok("turn.send", {"session": s, "text": "and again"})["turn_id"]
c.wait_turn(s, t)
inp = json.load(open(rd + "/last_input.json"))
assert [m["role"] for m in inp["messages"]] == ["user", "assistant", "user"], inp
assert inp["messages"][1]["text"] == "you said: hello there "
# bytes split across reads and invalid bytes become valid UTF-8
t = c.ok("turn.send", {"session": s, "text": "utf8"})["turn_id"]
_, text, done = c.wait_turn(s, t)
assert done["status"] == "ok" and text == "caf\u00e9 \ufffd ok", repr(text)
# cancel: the command and its child are killed
t = c.ok("turn.send", {"session": s, "text": "slow words"})["turn_id"]
while not os.path.exists(rd + "/child.pid"):
    time.sleep(0.05)
child = int(open(rd + "/child.pid").read())
e = c.next_event(); assert e["event"] == "turn.started"
e = c.next_event(); assert e["event"] == "turn.delta"
c.ok("turn.cancel", {"session": s})
_, text, done = c.wait_turn(s, t)
assert done["status"] == "cancelled", done
for _ in range(100):
    try:
        os.kill(child, 0)
    except ProcessLookupError:
        break
    # a zombie whose parent died is reaped by init; check its state
    try:
        st = open(f"/proc/{child}/stat").read().split()[2]
        if st == "Z":
            break
    except FileNotFoundError:
        break
    time.sleep(0.1)
else:
    raise AssertionError("child %d of the cancelled responder still alive" % child)
tr = [json.loads(l) for l in open(f"{home}/sessions/{s}/transcript.jsonl")]
assert tr[-1]["status"] == "cancelled" and tr[-1]["text"].startswith("word0"), tr[-1]
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"

# Started from another directory with a relative --home and a relative
# command: the daemon works in its state root, the command runs where the
# daemon was started.
mkdir -p "$T/start"
printf '#!/bin/sh\ncat >/dev/null; printf "relative ok from %%s" "$(basename "$PWD")"\n' >"$T/start/resp.sh"
chmod +x "$T/start/resp.sh"
export POLYTOKEN_RESPONDER_CMD=./resp.sh
(cd "$T/start" && exec "$PD_BIN" --home ../home >>"$T/daemon.out" 2>&1) &
PD_PID=$!
PD_PIDS+=("$PD_PID")
python3 "$PT_SRC/tests/daemon/ipc_client.py" wait "$POLYTOKEN_HOME" || fail "relative --home"
[ "$(readlink "/proc/$PD_PID/cwd")" = "$(cd "$POLYTOKEN_HOME" && pwd -P)" ] || fail "cwd is not the state root"
pycheck <<'PY'
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
s = c.ok("sessions.create", {})["session"]["id"]
t = c.ok("turn.send", {"session": s, "text": "where are you?"})["turn_id"]
_, text, done = c.wait_turn(s, t)
assert done["status"] == "ok" and text == "relative ok from start", (text, done)
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
echo PASS
