#!/usr/bin/env bash
# Concurrent clients: 12 clients at once, each with its own session and turns
# running in parallel, plus a watcher attached to one session; all get their
# complete, separate streams, and the daemon counts them.
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_DELAY_MS=5
start_daemon
pycheck <<'PY'
import json, os, threading
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
N = 12
errors, results = [], {}
ready = threading.Barrier(N + 1)

def worker(i):
    try:
        c = Client(home); c.hello()
        s = c.ok("sessions.create", {"name": f"c{i}"})["session"]["id"]
        c.ok("sessions.attach", {"id": s})
        ready.wait(30)
        texts = []
        for k in range(3):
            t = c.ok("turn.send", {"session": s, "text": f"client {i} question {k}"})["turn_id"]
            evs, text, done = c.wait_turn(s, t)
            assert done["status"] == "ok", done
            # only this session's events arrived here
            assert all(e["params"]["session"] == s for e in evs)
            texts.append(text)
        results[i] = (s, texts)
    except Exception as e:  # noqa
        errors.append(f"client {i}: {e!r}")
        try:
            ready.abort()
        except Exception:
            pass

threads = [threading.Thread(target=worker, args=(i,)) for i in range(N)]
for t in threads: t.start()
ready.wait(30)
st = Client(home); st.hello()
assert st.ok("daemon.status")["clients"] == N + 1
for t in threads: t.join(120)
assert not errors, errors
assert len(results) == N
for i, (s, texts) in results.items():
    tr = [json.loads(l) for l in open(f"{home}/sessions/{s}/transcript.jsonl")]
    assert [e["text"] for e in tr if e["role"] == "assistant"] == texts, i
    assert [e["turn_id"] for e in tr] == [1, 1, 2, 2, 3, 3]
lst = st.ok("sessions.list")
assert len(lst["sessions"]) == N and all(s["turns"] == 3 for s in lst["sessions"])
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
echo PASS
