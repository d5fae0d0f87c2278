#!/usr/bin/env bash
# The connection limit (docs/ipc.md): at most 1024 clients; the next one gets
# `busy` and is closed, and the first ones keep working. The daemon starts
# with the common soft limit of 1024 open files, so it must raise its own
# limit to reach 1024 clients at all (otherwise accept() fails with EMFILE
# and the extra client never hears anything).
source "$(dirname "$0")/daemon_lib.sh"
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 2048 ] || {
  echo "SKIP: hard open-file limit below 2048"; exit 77; }
# start_daemon with a soft limit of 1024 for the daemon only
PD_BIN_REAL=$PD_BIN
PD_BIN="$T/polytokend-1024"
printf '#!/bin/sh\nulimit -Sn 1024\nexec "%s" "$@"\n' "$PD_BIN_REAL" >"$PD_BIN"
chmod +x "$PD_BIN"
start_daemon
pycheck <<'PY'
import json, os, resource, socket
from ipc_client import Client
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = 1100 + 64
if soft != resource.RLIM_INFINITY and soft < want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
home = os.environ["POLYTOKEN_HOME"]
clients = []
# one at a time: the listen backlog is small, and each hello proves the
# connection was accepted and is served
for i in range(1024):
    c = Client(home, timeout=30)
    clients.append(c)
    r = c.call("hello", {"protocol": 1, "client": f"c{i}"})
    assert "result" in r, (i, r)
# one more: busy, then closed
extra = Client(home, timeout=30)
m = extra.read_msg(30)
assert m is not None and m.get("id") is None and m["error"]["code"] == "busy", m
assert extra.read_msg(30) is None, "busy client not closed"
extra.close()
# the others still work, and the daemon counts them
st = clients[0].call("daemon.status")["result"]
assert st["clients"] == 1024, st
clients[-1].close()
clients.pop()
# after one leaves, a new client is accepted again
import time
deadline = time.monotonic() + 30
while True:
    c = Client(home, timeout=30)
    c.request("hello", {"protocol": 1, "client": "again"})
    r = c.read_msg(30)  # the hello reply, or busy (id null) if the slot is not free yet
    assert r is not None, "closed without a reply"
    if "result" in r:
        break
    assert r["error"]["code"] == "busy", r
    c.close()
    assert time.monotonic() < deadline, "no slot freed"
    time.sleep(0.05)
for c in clients: c.close()
print("1024 clients served, the 1025th got busy")
PY
echo ok
