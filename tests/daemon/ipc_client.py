"""Tiny client for polytokend's IPC (docs/ipc.md), for the integration tests.

Raw socket on purpose: tests also send malformed, oversize and half-closed
input. Usage from a test script:

    import sys; sys.path.insert(0, os.environ["PT_SRC"] + "/tests/daemon")
    from ipc_client import Client
    c = Client(home); c.hello()
    sid = c.call("sessions.create", {"name": "x"})["result"]["session"]["id"]
"""
import json
import os
import socket
import time


class Client:
    def __init__(self, home, timeout=30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(os.path.join(home, "daemon.sock"))
        self.buf = b""
        self.events = []     # events received while waiting for replies
        self.next_id = 1
        self.eof = False

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def read_msg(self, timeout=None):
        """Next message (dict), or None on EOF."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no message within %.1fs" % timeout)
                self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, method, params=None):
        i = self.next_id
        self.next_id += 1
        msg = {"id": i, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return i

    def reply_for(self, i, timeout=30.0):
        while True:
            m = self.read_msg(timeout)
            if m is None:
                raise EOFError("connection closed while waiting for reply %d" % i)
            if "event" in m:
                self.events.append(m)
                continue
            if m.get("id") == i:
                return m
            raise AssertionError("unexpected message %r (waiting for id %d)" % (m, i))

    def call(self, method, params=None, timeout=30.0):
        return self.reply_for(self.request(method, params), timeout)

    def ok(self, method, params=None):
        r = self.call(method, params)
        assert "result" in r, "%s failed: %r" % (method, r)
        return r["result"]

    def hello(self, protocol=1):
        return self.call("hello", {"protocol": protocol, "client": "ipc_client.py"})

    def next_event(self, timeout=30.0):
        if self.events:
            return self.events.pop(0)
        m = self.read_msg(timeout)
        if m is None:
            raise EOFError("connection closed while waiting for an event")
        assert "event" in m, "expected an event, got %r" % (m,)
        return m

    def wait_turn(self, session, turn_id, timeout=60.0):
        """Collects a turn's events until turn.done; returns (events, text, done)."""
        evs, text = [], ""
        while True:
            e = self.next_event(timeout)
            p = e["params"]
            if p.get("session") != session or p.get("turn_id") != turn_id:
                continue
            evs.append(e)
            if e["event"] == "turn.delta":
                text += p["text"]
            if e["event"] == "turn.done":
                return evs, text, p


def wait_socket(home, timeout=20.0):
    """Waits until the daemon accepts connections."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = Client(home, timeout=2)
            c.close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def transcript(home, sid):
    with open(os.path.join(home, "sessions", sid, "transcript.jsonl"), "rb") as f:
        return f.read()


if __name__ == "__main__":
    import sys
    # python3 ipc_client.py wait HOME | call HOME METHOD [JSON]
    if sys.argv[1] == "wait":
        sys.exit(0 if wait_socket(sys.argv[2]) else 1)
    if sys.argv[1] == "call":
        c = Client(sys.argv[2])
        c.hello()
        print(json.dumps(c.call(sys.argv[3], json.loads(sys.argv[4]) if len(sys.argv) > 4 else None)))
