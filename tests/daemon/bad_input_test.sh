#!/usr/bin/env bash
# Bad IPC input: malformed JSON, requests before hello, protocol mismatch,
# unknown and reserved methods, bad params, oversize lines (and one exactly
# at the limit), half-closed connections, clients that vanish mid-line or
# mid-turn, a client that never reads its replies. Each gets an error reply
# or a closed connection, and another client keeps being served throughout.
source "$(dirname "$0")/daemon_lib.sh"
export POLYTOKEN_RESPONDER_DELAY_MS=20
export POLYTOKEN_IPC_OUTBUF_MAX=65536
start_daemon
pycheck <<'PY'
import json, os, socket, time
from ipc_client import Client
home = os.environ["POLYTOKEN_HOME"]
MAX = 1048576

good = Client(home); good.hello()          # stays connected the whole time
def still_serving():
    st = good.ok("daemon.status")
    assert st["pid"] > 0

# malformed JSON: bad_json with id null, connection stays open
c = Client(home)
c.send_raw(b'{"id":1,"method":\n')
r = c.read_msg(10)
assert r["id"] is None and r["error"]["code"] == "bad_json", r
c.send_raw(b'[1,2]\n')
assert c.read_msg(10)["error"]["code"] == "bad_json"
c.send_raw(b'\xff\xfe garbage\n')
assert c.read_msg(10)["error"]["code"] == "bad_json"
# any method before hello: bad_request
r = c.call("daemon.status")
assert r["error"]["code"] == "bad_request" and "hello" in r["error"]["message"], r
# id missing / not positive
c.send({"method": "hello", "params": {"protocol": 1}})
r = c.read_msg(10); assert r["id"] is None and r["error"]["code"] == "bad_request", r
c.send({"id": -4, "method": "hello", "params": {"protocol": 1}})
assert c.read_msg(10)["error"]["code"] == "bad_request"
# the same connection can still say hello and work
assert c.hello()["result"]["protocol"] == 1
assert c.call("hello", {"protocol": 1})["error"]["code"] == "bad_request"
r = c.call("no.such.method"); assert r["error"]["code"] == "unknown_method", r
if os.environ["PD_PROFILING"] == "0":
    r = c.call("profile.dump"); assert r["error"]["code"] == "not_profiling", r
r = c.call("profile.no_such_thing")
assert r["error"]["code"] == ("not_profiling" if os.environ["PD_PROFILING"] == "0" else r["error"]["code"]), r
r = c.call("sessions.attach", {}); assert r["error"]["code"] == "bad_request", r
r = c.call("sessions.attach", {"id": 7}); assert r["error"]["code"] == "bad_request", r
r = c.call("sessions.attach", {"id": "nope"}); assert r["error"]["code"] == "not_found", r
r = c.call("turn.send", {"session": "nope", "text": "x"}); assert r["error"]["code"] == "not_found", r
c.send({"id": 99, "method": "daemon.status", "params": [1]})
assert c.read_msg(10)["error"]["code"] == "bad_request"
still_serving()

# protocol mismatch: error, then the connection is closed
c = Client(home)
r = c.hello(protocol=2)
assert r["error"]["code"] == "protocol_mismatch", r
assert c.read_msg(10) is None
still_serving()

# a line exactly at the limit (MAX bytes with the newline) is accepted
c = Client(home); c.hello()
pad = MAX - 1 - len('{"id":5,"method":"daemon.status","params":{"pad":""}}')
line = ('{"id":5,"method":"daemon.status","params":{"pad":"%s"}}' % ("x" * pad)).encode()
assert len(line) + 1 == MAX
c.send_raw(line + b"\n")
r = c.read_msg(10); assert r["id"] == 5 and "result" in r, r
# one byte more: oversize, then closed
line = ('{"id":6,"method":"daemon.status","params":{"pad":"%s"}}' % ("x" * (pad + 1))).encode()
c.send_raw(line + b"\n")
r = c.read_msg(10)
assert r["error"]["code"] == "oversize" and r["id"] is None, r
assert c.read_msg(10) is None
still_serving()

# an endless line without newline: oversize + closed without buffering it all
c = Client(home); c.hello()
try:
    for _ in range(40):
        c.send_raw(b"y" * 65536)
except (BrokenPipeError, ConnectionResetError):
    pass
r = c.read_msg(10)
assert r is None or r["error"]["code"] == "oversize", r
still_serving()

# half-close: requests then SHUT_WR; the replies still arrive, then EOF
c = Client(home)
c.send({"id": 1, "method": "hello", "params": {"protocol": 1}})
c.send({"id": 2, "method": "daemon.status"})
c.sock.shutdown(socket.SHUT_WR)
assert c.read_msg(10)["id"] == 1
assert c.read_msg(10)["id"] == 2
assert c.read_msg(10) is None
# half-close after a turn.send: the turn's events still arrive, then EOF
sid = good.ok("sessions.create", {})["session"]["id"]
c = Client(home)
c.send({"id": 1, "method": "hello", "params": {"protocol": 1}})
c.send({"id": 2, "method": "turn.send", "params": {"session": sid, "text": "half closed"}})
c.sock.shutdown(socket.SHUT_WR)
assert c.read_msg(10)["id"] == 1
r = c.read_msg(10); assert r["id"] == 2 and r["result"]["turn_id"] == 1, r
_, _, done = c.wait_turn(sid, 1)
assert done["status"] == "ok"
assert c.read_msg(10) is None
still_serving()

# vanishing clients: mid-line, and mid-turn
c = Client(home); c.hello()
c.send_raw(b'{"id":2,"method":"daemon.st')
c.close()
c = Client(home); c.hello()
t = c.ok("turn.send", {"session": sid, "text": "nobody will read this"})["turn_id"]
c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
c.close()  # RST
good.ok("sessions.attach", {"id": sid})
deadline = time.time() + 30
while True:
    tr = [json.loads(l) for l in open(f"{home}/sessions/{sid}/transcript.jsonl")]
    if tr[-1]["turn_id"] == t and tr[-1]["role"] == "assistant":
        break
    assert time.time() < deadline, "turn of a vanished client never finished"
    time.sleep(0.1)
assert tr[-1].get("status") is None   # the turn completed normally
still_serving()

# a client that never reads: disconnected when its queue passes the cap
c = Client(home); c.hello()
c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
req = b"".join(b'{"id":%d,"method":"sessions.list"}\n' % i for i in range(2, 20002))
try:
    c.sock.sendall(req)
except (BrokenPipeError, ConnectionResetError):
    pass
time.sleep(0.5)
n = 0
try:
    while c.read_msg(10) is not None:
        n += 1
except ConnectionResetError:
    pass
assert n < 20000, n     # not everything was answered: it was cut off
still_serving()
assert good.ok("daemon.status")["clients"] == 1
PY
grep -q "disconnecting" "$POLYTOKEN_HOME/logs/daemon.log" || fail "slow reader disconnect not logged"
grep -q "oversize message" "$POLYTOKEN_HOME/logs/daemon.log" || fail "oversize not logged"
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
[ "$PD_STATUS" = 0 ] || fail "exit status $PD_STATUS"
echo PASS
