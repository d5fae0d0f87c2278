#!/usr/bin/python3
# tests/console/h2_hostile.py - hostile HTTP/2 clients for the console tests,
# built on python3-h2 (a real HTTP/2 implementation: the bytes are valid
# HTTP/2 unless a mode sends garbage on purpose). Debian's /usr/bin/python3.
#
#   idle ADDR N HOLD_S [garbage]
#       N connections send the preface and SETTINGS (then, with "garbage",
#       frames of an unknown type every 0.2 s), then nothing; prints
#       "ready" once all are open, and after HOLD_S "closed K of N" (how many
#       the server closed).
#   slow ADDR NCONN NSTREAMS HOLD_S
#       NCONN connections with NSTREAMS WatchUpdates calls each that never
#       read a byte; prints "ready", holds HOLD_S seconds, then closes all.
#   flood ADDR N
#       N connections, one after the other, each sending a garbage preface
#       and waiting for the server to close it; prints "sent N".
import socket
import sys
import time

import h2.config
import h2.connection

PATH = "/rs.tokio.console.instrument.Instrument/WatchUpdates"


def connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    return s


def preface():
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    return c


def is_closed(s):
    """True when the server closed the connection (EOF or reset)."""
    s.setblocking(False)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def idle(addr, n, hold, garbage):
    socks = []
    for _ in range(n):
        s = connect(addr)
        c = preface()
        s.sendall(c.data_to_send())
        socks.append(s)
    print("ready", flush=True)
    junk = bytes([0, 0, 4, 0xEE, 0, 0, 0, 0, 0]) + b"junk"   # unknown frame type 0xee
    end = time.time() + hold
    while time.time() < end:
        if garbage:
            for s in socks:
                try:
                    s.send(junk)
                except OSError:
                    pass
        time.sleep(0.2)
    closed = sum(1 for s in socks if is_closed(s))
    print(f"closed {closed} of {n}", flush=True)


def slow(addr, nconn, nstreams, hold):
    socks = []
    for _ in range(nconn):
        s = connect(addr)
        # A small receive buffer: the kernel holds little for us either.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c = preface()
        for _ in range(nstreams):
            sid = c.get_next_available_stream_id()
            c.send_headers(sid, [(":method", "POST"), (":scheme", "http"),
                                 (":authority", addr), (":path", PATH),
                                 ("content-type", "application/grpc"), ("te", "trailers")])
            c.send_data(sid, b"\x00\x00\x00\x00\x00", end_stream=True)
        s.sendall(c.data_to_send())
        socks.append(s)
    print("ready", flush=True)
    time.sleep(hold)
    for s in socks:
        s.close()
    print("closed", flush=True)


def flood(addr, n):
    for _ in range(n):
        try:
            s = connect(addr)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\xff" * 64)
            # Half-close and wait for the server to close: closing at once
            # with its SETTINGS unread would reset the connection, and the
            # server would never read (nor log) the garbage.
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
            s.close()
        except OSError:
            pass
    print(f"sent {n}", flush=True)


def main():
    mode, addr = sys.argv[1], sys.argv[2]
    if mode == "idle":
        idle(addr, int(sys.argv[3]), float(sys.argv[4]), len(sys.argv) > 5 and sys.argv[5] == "garbage")
    elif mode == "slow":
        slow(addr, int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif mode == "flood":
        flood(addr, int(sys.argv[3]))
    else:
        sys.exit("usage: h2_hostile.py idle|slow|flood ADDR ...")


if __name__ == "__main__":
    main()
