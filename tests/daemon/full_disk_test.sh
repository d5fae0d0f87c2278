#!/usr/bin/env bash
# Full disk on transcript append. (1) injected: POLYTOKEN_FAULT_TRANSCRIPT_WRITE
# makes the append write half a line and fail with ENOSPC; (2) real: a small
# tmpfs as the state root, filled up (root only; skipped otherwise). In every
# case the error reaches the client (io_error reply or turn.done "error") and
# the transcript stays intact: same bytes as before, or before + whole lines.
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_DELAY_MS=1
start_daemon
sid=$(pycheck <<'PY'
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
s = c.ok("sessions.create", {"name": "disk"})["session"]["id"]
t = c.ok("turn.send", {"session": s, "text": "before the disk filled"})["turn_id"]
assert c.wait_turn(s, t)[2]["status"] == "ok"
print(s)
PY
)
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
TR=$POLYTOKEN_HOME/sessions/$sid/transcript.jsonl
cp "$TR" "$T/tr.before"

# (1a) every append fails: turn.send answers io_error, nothing is started
POLYTOKEN_FAULT_TRANSCRIPT_WRITE=ENOSPC start_daemon
SID=$sid pycheck <<'PY'
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"]); c.hello()
r = c.call("turn.send", {"session": os.environ["SID"], "text": "this will not fit"})
assert r["error"]["code"] == "io_error", r
assert "No space left on device" in r["error"]["message"], r
# nothing was started: no events, and the session is not busy
assert c.call("turn.cancel", {"session": os.environ["SID"]})["error"]["code"] == "not_found"
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
cmp -s "$TR" "$T/tr.before" || fail "transcript changed after a failed append"

# (1b) the user line fits, the reply does not: turn.done carries the error
export T
POLYTOKEN_FAULT_TRANSCRIPT_WRITE=ENOSPC:1 start_daemon
SID=$sid pycheck <<'PY'
import json, os
from ipc_client import Client
home, s = os.environ["POLYTOKEN_HOME"], os.environ["SID"]
c = Client(home); c.hello()
t = c.ok("turn.send", {"session": s, "text": "the reply will not fit"})["turn_id"]
_, text, done = c.wait_turn(s, t)
assert done["status"] == "error", done
assert "could not save the reply" in done["error"] and "No space left on device" in done["error"], done
assert text, "the reply still streamed"
raw = open(f"{home}/sessions/{s}/transcript.jsonl", "rb").read()
before = open(os.environ["T"] + "/tr.before", "rb").read()
assert raw.startswith(before) and raw.endswith(b"\n"), raw[-200:]
added = [json.loads(l) for l in raw[len(before):].splitlines()]
assert [(e["role"], e["text"]) for e in added] == [("user", "the reply will not fit")], added
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
grep -q "fault injection: transcript appends fail with ENOSPC" "$POLYTOKEN_HOME/logs/daemon.log" ||
  fail "fault injection not logged"

# (2) a real full disk: a 512 KiB tmpfs as the state root
H2=$T/small
mkdir -p "$H2"
if mount -t tmpfs -o size=512k tmpfs "$H2" 2>/dev/null; then
  PD_MOUNTS+=("$H2")
  export POLYTOKEN_HOME=$H2/home
  start_daemon
  pycheck <<'PY'
import json, os
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
c = Client(home); c.hello()
s = c.ok("sessions.create", {"name": "tmpfs"})["session"]["id"]
t = c.ok("turn.send", {"session": s, "text": "fits"})["turn_id"]
assert c.wait_turn(s, t)[2]["status"] == "ok"
before = open(f"{home}/sessions/{s}/transcript.jsonl", "rb").read()
# fill the file system
fd = os.open(os.path.dirname(home) + "/filler", os.O_WRONLY | os.O_CREAT, 0o600)
try:
    while True:
        os.write(fd, b"\0" * 4096)
except OSError:
    pass
os.close(fd)
r = c.call("turn.send", {"session": s, "text": "x" * 20000})
if "error" in r:
    assert r["error"]["code"] == "io_error" and "No space left" in r["error"]["message"], r
else:
    _, _, done = c.wait_turn(s, r["result"]["turn_id"])
    assert done["status"] == "error" and "No space left" in done["error"], done
after = open(f"{home}/sessions/{s}/transcript.jsonl", "rb").read()
assert after.startswith(before) and after.endswith(b"\n")
for line in after.splitlines():
    json.loads(line)   # every line whole
os.remove(os.path.dirname(home) + "/filler")
# space is back: the session works again
t = c.ok("turn.send", {"session": s, "text": "room again"})["turn_id"]
assert c.wait_turn(s, t)[2]["status"] == "ok"
PY
  kill -TERM "$PD_PID"; wait_gone "$PD_PID"
else
  echo "note: cannot mount a tmpfs here; real-ENOSPC part skipped (injected part ran)"
fi
echo PASS
