#!/usr/bin/env bash
# Sessions persist across a daemon restart: names, timestamps, turn counts,
# transcripts, the active session; rename and delete (busy while a turn runs).
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_DELAY_MS=1
start_daemon
pycheck <<'PY'
import json, os
from ipc_client import Client, transcript
home = os.environ["POLYTOKEN_HOME"]
c = Client(home); c.hello()
a = c.ok("sessions.create", {"name": "alpha"})["session"]
b = c.ok("sessions.create", {})["session"]
assert a["name"] == "alpha" and b["name"].startswith("Session "), b
assert len(a["id"]) == 12 and all(ch in "0123456789abcdef" for ch in a["id"])
assert c.call("sessions.create", {"name": ""})["error"]["code"] == "bad_request"
assert c.call("sessions.create", {"name": 5})["error"]["code"] == "bad_request"
r = c.ok("sessions.rename", {"id": b["id"], "name": "beta"})["session"]
assert r["name"] == "beta"
assert c.call("sessions.rename", {"id": "000000000000", "name": "x"})["error"]["code"] == "not_found"
c.ok("sessions.attach", {"id": a["id"]})
t = c.ok("turn.send", {"session": a["id"], "text": "first question"})["turn_id"]
assert t == 1
_, text, done = c.wait_turn(a["id"], t)
assert done["status"] == "ok", done
# attach b last: it is the active session
c.ok("sessions.attach", {"id": b["id"]})
lst = c.ok("sessions.list")
# newest activity first: a had a turn after b was created (rename and attach
# do not count as activity)
assert [s["id"] for s in lst["sessions"]] == [a["id"], b["id"]], lst
assert lst["sessions"][0]["turns"] == 1 and lst["sessions"][1]["turns"] == 0, lst
json.dump({"a": a["id"], "b": b["id"], "list": lst, "text": text,
           "tr": transcript(home, a["id"]).decode()}, open(home + "/../before.json", "w"))
assert c.ok("daemon.status")["active_session"] == b["id"]
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
grep -qx "$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["b"])' "$T/before.json")" \
  "$POLYTOKEN_HOME/active_session" || fail "active_session file"

start_daemon
pycheck <<'PY'
import json, os
from ipc_client import Client, transcript
home = os.environ["POLYTOKEN_HOME"]
before = json.load(open(home + "/../before.json"))
c = Client(home); c.hello()
lst = c.ok("sessions.list")
assert lst == before["list"], (lst, before["list"])
assert c.ok("daemon.status")["active_session"] == before["b"]
att = c.ok("sessions.attach", {"id": before["a"]})
tr = att["transcript"]
assert [(e["turn_id"], e["role"]) for e in tr] == [(1, "user"), (1, "assistant")], tr
assert tr[0]["text"] == "first question" and tr[1]["text"] == before["text"]
assert transcript(home, before["a"]).decode() == before["tr"]
assert att["session"]["turns"] == 1
# next turn continues the numbering
t = c.ok("turn.send", {"session": before["a"], "text": "second"})["turn_id"]
assert t == 2
c.wait_turn(before["a"], t)
PY

# busy delete needs a slow turn: restart with a slow responder
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
export POLYTOKEN_RESPONDER_DELAY_MS=300
start_daemon
pycheck <<'PY'
import json, os
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
before = json.load(open(home + "/../before.json"))
c = Client(home); c.hello()
a, b = before["a"], before["b"]
c.ok("sessions.attach", {"id": b})
t = c.ok("turn.send", {"session": b, "text": "slow one"})["turn_id"]
assert c.call("turn.send", {"session": b, "text": "again"})["error"]["code"] == "busy"
assert c.call("sessions.delete", {"id": b})["error"]["code"] == "busy"
c.ok("turn.cancel", {"session": b})
_, _, done = c.wait_turn(b, t)
assert done["status"] == "cancelled", done
assert c.ok("sessions.delete", {"id": b}) == {}
assert not os.path.exists(os.path.join(home, "sessions", b))
assert c.call("sessions.attach", {"id": b})["error"]["code"] == "not_found"
assert c.ok("daemon.status")["active_session"] is None   # b was the active one
ids = [s["id"] for s in c.ok("sessions.list")["sessions"]]
assert ids == [a], ids
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
[ -e "$POLYTOKEN_HOME/active_session" ] && fail "active_session kept for a deleted session"
echo PASS
