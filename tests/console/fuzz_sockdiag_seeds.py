#!/usr/bin/python3
# tests/console/fuzz_sockdiag_seeds.py - regenerates
# tests/console/fuzz_sockdiag_seeds/ (the committed seeds of
# fuzz_sockdiag.c): /usr/bin/python3 fuzz_sockdiag_seeds.py DIR
# First byte: 0 = a NETLINK_SOCK_DIAG answer, 1 = a /proc/net/tcp{,6} line.
# The socket is 127.0.0.1:40000 -> 127.0.0.1:6669, sequence number 5, as the
# kernel of a little-endian machine writes it.
import os
import socket
import struct
import sys

out = sys.argv[1]
AF_INET, AF_INET6 = 2, 10


def hdr(length, typ, seq):
    return struct.pack("=IHHII", length, typ, 0, seq, 0)


def diag(family, src, sport, dst, dport, state, uid, seq=5):
    if family == AF_INET:
        s = socket.inet_pton(socket.AF_INET, src) + bytes(12)
        d = socket.inet_pton(socket.AF_INET, dst) + bytes(12)
    else:
        s = socket.inet_pton(socket.AF_INET6, src)
        d = socket.inet_pton(socket.AF_INET6, dst)
    sockid = struct.pack(">HH", sport, dport) + s + d + struct.pack("=IQ", 0, 0xFFFFFFFFFFFFFFFF)
    msg = struct.pack("=BBBB", family, state, 0, 0) + sockid + struct.pack("=IIIII", 0, 0, 0, uid, 4242)
    attr = struct.pack("=HH", 5, 8) + b"\x03\x00\x00\x00"  # INET_DIAG_SHUTDOWN-like attribute
    body = msg + attr
    return hdr(16 + len(body), 20, seq) + body


def error(err, seq=5):
    req = hdr(72, 20, seq)
    return hdr(16 + 4 + 16, 2, seq) + struct.pack("=i", err) + req


seeds = {
    "diag-match": b"\x00" + diag(AF_INET, "127.0.0.1", 40000, "127.0.0.1", 6669, 1, 1000),
    "diag-mapped": b"\x00" + diag(AF_INET6, "::ffff:127.0.0.1", 40000, "::ffff:127.0.0.1", 6669, 1, 1000),
    "diag-other": b"\x00" + diag(AF_INET, "127.0.0.1", 40001, "127.0.0.1", 6669, 1, 0),
    "diag-timewait": b"\x00" + diag(AF_INET, "127.0.0.1", 40000, "127.0.0.1", 6669, 6, 0),
    "diag-enoent": b"\x00" + error(-2),
    "diag-two": b"\x00" + error(0) + diag(AF_INET, "127.0.0.1", 40000, "127.0.0.1", 6669, 1, 7),
    "diag-done": b"\x00" + hdr(20, 3, 5) + b"\x00\x00\x00\x00",
    "proc-match": b"\x01   3: 0100007F:9C40 0100007F:1A0D 01 00000000:00000000 00:00000000 "
                  b"00000000  1000        0 123456 1 0000000000000000 20 4 30 10 -1\n",
    "proc-header": b"\x01  sl  local_address rem_address   st tx_queue rx_queue tr tm->when "
                   b"retrnsmt   uid  timeout inode\n",
    "proc-mapped": b"\x01   0: 0000000000000000FFFF00000100007F:9C40 "
                   b"0000000000000000FFFF00000100007F:1A0D 01 00000000:00000000 "
                   b"00:00000000 00000000  1002        0 99 1\n",
    "proc-timewait": b"\x01   5: 0100007F:9C40 0100007F:1A0D 06 00000000:00000000 03:00001770 "
                     b"00000000     0        0 0 3 0000000000000000\n",
}
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
