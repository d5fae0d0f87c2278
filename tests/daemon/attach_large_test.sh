#!/usr/bin/env bash
# sessions.attach on a transcript larger than the 1 MiB line limit: the reply
# still fits one line, leaves out the oldest entries and says how many; the
# transcript on disk keeps everything.
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_DELAY_MS=0
start_daemon
pycheck <<'PY'
import json, os
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
c = Client(home); c.hello()
s = c.ok("sessions.create", {})["session"]["id"]
for i in range(6):
    t = c.ok("turn.send", {"session": s, "text": ("turn %d " % i) + "x" * 250000})["turn_id"]
    assert c.wait_turn(s, t)[2]["status"] == "ok"
r = c.ok("sessions.attach", {"id": s})
on_disk = [json.loads(l) for l in open(f"{home}/sessions/{s}/transcript.jsonl")]
assert len(on_disk) == 12
tr = r["transcript"]
assert r["omitted"] >= 1 and r["omitted"] + len(tr) == 12, (r["omitted"], len(tr))
assert tr == on_disk[r["omitted"]:]             # the newest entries, unchanged
assert len(json.dumps(r)) < 1048576
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
echo PASS
