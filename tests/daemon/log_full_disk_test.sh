#!/usr/bin/env bash
# log_full_disk_test.sh - issue 9 item 6 on a real full file system (a
# 256 KiB tmpfs as the state root; root only, skipped otherwise): while the
# disk is full the daemon's log lines are dropped whole (never cut, never
# glued to the next one); once space is back exactly one summary line says
# how many were dropped, and logging goes on.
source "$(dirname "$0")/daemon_lib.sh"
H=$T/small
mkdir -p "$H"
mount -t tmpfs -o size=256k tmpfs "$H" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs (needs root)"; exit 77; }
PD_MOUNTS+=("$H")
export POLYTOKEN_HOME=$H/home
start_daemon
pycheck <<'PY'
import os, re, time
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
log = f"{home}/logs/daemon.log"
c = Client(home); c.hello()
filler = os.path.dirname(home) + "/filler"
fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
# Fill the disk to the last byte, in shrinking steps, so the next log line
# lands partly (a short write) and then fails: the case that used to leave
# a cut line with the next one written onto its end.
for step in (65536, 4096, 512, 64, 1):
    while True:
        try:
            if os.write(fd, b"\0" * step) < step:
                break
        except OSError:
            break
# Each hello logs one INFO line naming the client, ~150 bytes.
def hello(name):
    k = Client(home)
    r = k.call("hello", {"protocol": 1, "client": name})
    assert "result" in r, r
    k.close()
for i in range(40):
    hello("no.such.method.%03d.%s" % (i, "x" * 60))
# The daemon logs a hello just after it sends the reply, so the last hello's
# line (or its cut-and-undo) may still be under way when the reply is here.
# One round trip that logs nothing, on the loop that logs them, orders it.
r = c.call("daemon.status", {})
assert "result" in r, r
with open(log, "rb") as f:
    during = f.read()
assert during.endswith(b"\n"), during[-200:]
os.close(fd)
os.remove(filler)
# space is back: the next line brings the summary with it
hello("no.such.method.after")
deadline = time.time() + 10
while b"no.such.method.after" not in open(log, "rb").read():
    assert time.time() < deadline, "line after the disk freed up never arrived"
    time.sleep(0.05)
raw = open(log, "rb").read()
assert raw.endswith(b"\n")
stamp = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARN|ERROR) ")
for line in raw.split(b"\n")[:-1]:
    assert stamp.match(line), b"torn or glued log line: " + line[:300]
    # one timestamp per line: nothing written onto the end of another line
    assert len(re.findall(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line)) == 1 or b"dropped since" in line, line[:300]
summaries = [l for l in raw.split(b"\n") if b"line" in l and b"dropped since" in l]
assert len(summaries) == 1, summaries
m = re.search(rb"WARN log: (\d+) lines? dropped since \S+: No space left on device", summaries[0])
assert m, summaries[0]
written = len(re.findall(rb"no\.such\.method\.0\d\d", raw))
dropped = int(m.group(1))
assert dropped >= 1 and written + dropped >= 40, (written, dropped)
# the summary comes right before the first line written after the disk freed
lines = raw.split(b"\n")
i = lines.index(summaries[0])
assert b"no.such.method.after" in lines[i + 1], lines[i:i + 2]
print("written while full:", written, "dropped:", dropped)
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
[ "$PD_STATUS" = 0 ] || fail "daemon exit status $PD_STATUS"
echo PASS
