#!/usr/bin/env bash
# A turn with the built-in responder: events in order to the sender and to
# another attached client, token-by-token deltas that add up to the saved
# reply, deterministic output, cancel.
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_DELAY_MS=2
start_daemon
pycheck <<'PY'
import json, os
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
c = Client(home); c.hello()
w = Client(home); w.hello()          # a watcher attached to the session
s1 = c.ok("sessions.create", {"name": "one"})["session"]["id"]
s2 = c.ok("sessions.create", {"name": "two"})["session"]["id"]
w.ok("sessions.attach", {"id": s1})
q = "How are the files kept safe on disk?"
t = c.ok("turn.send", {"session": s1, "text": q})["turn_id"]
evs, text, done = c.wait_turn(s1, t)
names = [e["event"] for e in evs]
assert names[0] == "turn.started" and names[-1] == "turn.done", names
deltas = names.count("turn.delta")
assert deltas >= 5, deltas                       # streamed token by token
assert done == {"session": s1, "turn_id": t, "status": "ok"}, done
wevs, wtext, wdone = w.wait_turn(s1, t)
assert wtext == text and [e["event"] for e in wevs] == names
tr = [json.loads(l) for l in open(f"{home}/sessions/{s1}/transcript.jsonl")]
assert tr[-1]["role"] == "assistant" and tr[-1]["text"] == text, (tr[-1], text)
assert tr[-2] == {**tr[-2], "role": "user", "text": q}
# determinism: the same conversation and question give the same reply
t2 = c.ok("turn.send", {"session": s2, "text": q})["turn_id"]
_, text2, done2 = c.wait_turn(s2, t2)
assert done2["status"] == "ok" and text2 == text, (text2, text)
# a different question gives a different reply
t3 = c.ok("turn.send", {"session": s2, "text": "Tell me about the event loop and callbacks."})["turn_id"]
_, text3, _ = c.wait_turn(s2, t3)
assert text3 != text2
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"

# cancel a slow built-in turn
export POLYTOKEN_RESPONDER_DELAY_MS=200
start_daemon
pycheck <<'PY'
import json, os
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
c = Client(home); c.hello()
s = c.ok("sessions.create", {})["session"]["id"]
t = c.ok("turn.send", {"session": s, "text": "a question to cancel"})["turn_id"]
e = c.next_event(); assert e["event"] == "turn.started", e
e = c.next_event(); assert e["event"] == "turn.delta", e   # at least one token arrived
assert c.ok("turn.cancel", {"session": s}) == {}
evs, text, done = c.wait_turn(s, t)
assert done["status"] == "cancelled", done
assert c.call("turn.cancel", {"session": s})["error"]["code"] == "not_found"
tr = [json.loads(l) for l in open(f"{home}/sessions/{s}/transcript.jsonl")]
assert tr[-1]["role"] == "assistant" and tr[-1]["status"] == "cancelled", tr[-1]
# the session is usable afterwards
t = c.ok("turn.send", {"session": s, "text": "again"})["turn_id"]
c.ok("turn.cancel", {"session": s})
assert c.wait_turn(s, t)[2]["status"] == "cancelled"
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
echo PASS
