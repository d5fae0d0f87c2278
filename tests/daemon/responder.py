#!/usr/bin/env python3
"""External responder used by the daemon tests (POLYTOKEN_RESPONDER_CMD).

Reads the conversation JSON from stdin; behaviour depends on the last user
message: "crash" exits 3 after a stderr line, "segv" kills itself with
SIGSEGV, "hang" prints nothing and sleeps, "slow ..." starts a child in its
process group (pid written to $RESP_DIR/child.pid) and prints a word every
0.2 s, "utf8" prints a multi-byte character split across writes plus an
invalid byte; anything else gets "you said: <text>" in word chunks.
If $RESP_DIR is set, the stdin document is saved to $RESP_DIR/last_input.json.
"""
import json
import os
import signal
import subprocess
import sys
import time

doc = json.loads(sys.stdin.read())
d = os.environ.get("RESP_DIR")
if d:
    with open(os.path.join(d, "last_input.json"), "w") as f:
        json.dump(doc, f)
text = [m for m in doc["messages"] if m["role"] == "user"][-1]["text"]
out = sys.stdout.buffer


def say(b):
    out.write(b)
    out.flush()


if text == "crash":
    sys.stderr.write("boom: simulated crash\n")
    sys.exit(3)
elif text == "segv":
    say(b"partial ")
    os.kill(os.getpid(), signal.SIGSEGV)
elif text == "hang":
    time.sleep(1000)
elif text.startswith("slow"):
    child = subprocess.Popen(["sleep", "1000"])
    if d:
        with open(os.path.join(d, "child.pid"), "w") as f:
            f.write(str(child.pid))
    for i in range(1000):
        say(b"word%d " % i)
        time.sleep(0.2)
elif text == "utf8":
    e = "é".encode()          # 2 bytes
    say(b"caf" + e[:1])
    time.sleep(0.05)
    say(e[1:] + b" \xff ok")
else:
    for w in ("you said: " + text).split(" "):
        say(w.encode() + b" ")
        time.sleep(0.01)
