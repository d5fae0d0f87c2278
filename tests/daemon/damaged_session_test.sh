#!/usr/bin/env bash
# A damaged session file is reported (sessions.list "skipped", the log) and
# skipped; its files stay byte for byte as they were, across a restart, and
# the good sessions keep working.
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_DELAY_MS=1
start_daemon
ids=$(pycheck <<'PY'
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
ids = [c.ok("sessions.create", {"name": n})["session"]["id"] for n in ("good", "badjson", "badtr")]
for i in ids:
    t = c.ok("turn.send", {"session": i, "text": "hi"})["turn_id"]
    c.wait_turn(i, t)
c.ok("sessions.attach", {"id": ids[1]})   # the one we damage is the active one
print(" ".join(ids))
PY
)
read -r good badjson badtr <<<"$ids"
kill -TERM "$PD_PID"; wait_gone "$PD_PID"

S=$POLYTOKEN_HOME/sessions
printf '{"name": "badjson", "created": "2026-' >"$S/$badjson/session.json"
printf '{"turn_id":1,"role":"user","text":"hi","ts":"x"}\nnot json at all\n' >>"$S/$badtr/transcript.jsonl"
mkdir "$S/NOT-AN-ID"
snap() { (cd "$S" && find "$badjson" "$badtr" -type f -print0 | sort -z | xargs -0 sha256sum; ls -la "$badjson" "$badtr" | grep -v '^total' | awk '{print $1, $5, $NF}'); }
snap >"$T/before.sum"

start_daemon
GOOD=$good BADJSON=$badjson BADTR=$badtr pycheck <<'PY'
import os
from ipc_client import Client
e = os.environ
c = Client(e["POLYTOKEN_HOME"]); c.hello()
lst = c.ok("sessions.list")
assert [s["id"] for s in lst["sessions"]] == [e["GOOD"]], lst
sk = {s["id"]: s["error"] for s in lst["skipped"]}
assert set(sk) == {e["BADJSON"], e["BADTR"], "NOT-AN-ID"}, sk
assert "session.json" in sk[e["BADJSON"]] and "invalid JSON" in sk[e["BADJSON"]], sk
assert "transcript.jsonl" in sk[e["BADTR"]] and "line 4" in sk[e["BADTR"]], sk
# a skipped session is not reachable, not deletable, not re-created
for m, p in (("sessions.attach", {"id": e["BADJSON"]}), ("sessions.delete", {"id": e["BADTR"]}),
             ("turn.send", {"session": e["BADTR"], "text": "x"})):
    assert c.call(m, p)["error"]["code"] == "not_found", m
# the active session was the damaged one: none is active now
assert c.ok("daemon.status")["active_session"] is None
# good sessions keep working
t = c.ok("turn.send", {"session": e["GOOD"], "text": "still fine?"})["turn_id"]
assert c.wait_turn(e["GOOD"], t)[2]["status"] == "ok"
assert c.ok("sessions.create", {"name": "new"})["session"]["id"] not in sk
PY
grep -q "session $badjson skipped: session.json" "$POLYTOKEN_HOME/logs/daemon.log" || fail "skip not logged"
grep -q "session $badtr skipped: transcript.jsonl" "$POLYTOKEN_HOME/logs/daemon.log" || fail "skip not logged"
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
snap >"$T/after.sum"
cmp -s "$T/before.sum" "$T/after.sum" || { diff "$T/before.sum" "$T/after.sum"; fail "damaged session files changed"; }
grep -qx "$badjson" "$POLYTOKEN_HOME/active_session" || fail "active_session rewritten for a damaged session"
echo PASS
